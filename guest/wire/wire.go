// Package wire holds every type of the host⇄guest protocol, spoken between the
// env server (or any host tool) and guestd inside a sandbox.
//
// Transport: a stream (unix socket by default, TCP as an option) carrying
// frames. A frame is a 4-byte big-endian length followed by that many bytes of
// one msgpack-encoded Message. Calls carry an id; several may be in flight and
// replies come back in any order. A streamed call (exec with Stream) answers
// with zero or more "chunk" messages and then exactly one "reply".
//
// This package is a leaf: it imports aci, msgpack and S2 only, never X11,
// HTTP or Docker code.
//
// Protocol history:
//
//	1 (2026-12): hello/welcome, act, screenshot, list_windows, exec (+stream),
//	             put_file, health.
//	  (2026-12): score (additive): freeze the agent's processes, run the
//	             verifier as the scoring identity.
//	1 (2026-12, later): observe.settle {first_ms, quiet_ms, max_ms} replaces
//	             settle_ms (settling on X DAMAGE); shots carry settle info;
//	             observe after_input; act list_windows; windows as aci.Window
//	             (title, focused, geometry); welcome damage.
//	  (2026-12, a11y, additive): observe.a11y none|tree|diff and
//	             a11y_reset (a new episode's ids); shots carry the tree
//	             (aci.A11yTree); act targets element_ref; verbs
//	             invoke_action, set_value; welcome a11y.
//	  (2026-12, additive): format raws2, a raw frame S2-compressed,
//	             listed in welcome formats.
package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/internal/mpcheck"
	"github.com/shinken-rl/shinken/internal/rgbs2"
	"github.com/vmihailenco/msgpack/v5"
)

// Protocol is the version this package speaks.
const Protocol = 1

// MaxFrame bounds one frame's body. A declared length above it is rejected
// before any allocation.
const MaxFrame = 64 << 20

// Message types.
const (
	TypeCall  = "call"
	TypeReply = "reply"
	TypeChunk = "chunk"
)

// Methods.
const (
	MethodHello       = "hello"
	MethodAct         = "act"
	MethodScreenshot  = "screenshot"
	MethodListWindows = "list_windows"
	MethodExec        = "exec"
	MethodPutFile     = "put_file"
	MethodGetFile     = "get_file"
	MethodHealth      = "health"
	MethodScore       = "score"
	MethodReset       = "reset"
	MethodWeb         = "web"
	MethodBrowser     = "browser"
)

// Message is one frame's content.
type Message struct {
	ID        uint64             `msgpack:"id"`
	Type      string             `msgpack:"t"`
	Method    string             `msgpack:"m,omitempty"`
	TimeoutMS int64              `msgpack:"timeout_ms,omitempty"` // call: the caller's remaining deadline
	Body      msgpack.RawMessage `msgpack:"body,omitempty"`
	Error     *aci.Error         `msgpack:"error,omitempty"`
}

// HashLen is the length of every content hash a guest sends (a frame's,
// an accessibility tree's): 128 bits in lowercase hex.
const HashLen = 32

// ValidHash reports whether h has the shape of a guest's content hash. The
// host checks every hash a guest sends before it keys a shared cache or a
// file name with it (docs/architecture.md, "guestd cannot be taken over").
func ValidHash(h string) bool {
	if len(h) != HashLen {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// FormatRawS2 is a raw (RGB24) frame in S2's block format: a format of this
// wire and of stored frames, never of the public API. The host asks for it
// where a trainer asked for raw, keeps it as is in its frame cache and
// recorder, and decodes it only to deliver it (docs/architecture.md, "Cost
// of a step").
const FormatRawS2 = "raws2"

// CheckShot checks the hashes of a capture a guest sent and, for a raws2
// frame, that it declares exactly the size of its dimensions.
func CheckShot(s *Shot) error {
	if s == nil {
		return nil
	}
	if !ValidHash(s.Hash) {
		return fmt.Errorf("wire: frame hash %.40q is not %d lowercase hex digits", s.Hash, HashLen)
	}
	if s.A11y != nil && s.A11y.Hash != "" && !ValidHash(s.A11y.Hash) {
		return fmt.Errorf("wire: tree hash %.40q is not %d lowercase hex digits", s.A11y.Hash, HashLen)
	}
	if s.Format == FormatRawS2 && s.Data != nil {
		n, err := s2.DecodedLen(s.Data)
		if err != nil || s.W <= 0 || s.H <= 0 || s.W > MaxFrame || s.H > MaxFrame || n > MaxFrame || n != s.W*s.H*3 {
			return fmt.Errorf("wire: raws2 frame declares %d bytes for %dx%d (err %v)", n, s.W, s.H, err)
		}
		if s.Bands != nil || s.BandRows != 0 {
			if s.BandRows != rgbs2.BandRows || len(s.Bands) != rgbs2.Bands(s.H) {
				return fmt.Errorf("wire: raws2 frame of %d rows in %d bands of %d rows", s.H, len(s.Bands), s.BandRows)
			}
			if _, err := rgbs2.Split(s.Data, s.Bands, nil); err != nil {
				return fmt.Errorf("wire: raws2 frame: %w", err)
			}
		}
	}
	return nil
}

// ErrFrameTooLarge is returned for a frame whose declared length exceeds MaxFrame.
var ErrFrameTooLarge = errors.New("wire: frame too large")

// WriteFrame writes one length-prefixed frame holding body.
func WriteFrame(w io.Writer, body []byte) error {
	if len(body) > MaxFrame {
		return ErrFrameTooLarge
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(body)
	return err
}

// ReadFrame reads one frame body into buf (grown as needed) and returns it.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrame {
		return nil, ErrFrameTooLarge
	}
	if cap(buf) >= int(n) {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	// Grow with the bytes that actually arrive, not with the declared
	// length: a peer that announces MaxFrame and sends nothing costs a
	// chunk, not MaxFrame.
	buf = buf[:0]
	for len(buf) < int(n) {
		want := min(int(n)-len(buf), max(readChunk, len(buf)))
		if cap(buf)-len(buf) < want {
			buf = append(buf[:len(buf):len(buf)], make([]byte, want)...)[:len(buf)]
		}
		k, err := io.ReadFull(r, buf[len(buf):len(buf)+want])
		buf = buf[:len(buf)+k]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// readChunk is the first allocation for a frame larger than the caller's
// buffer; it doubles as bytes arrive.
const readChunk = 64 << 10

// Encode marshals a message.
func Encode(m *Message) ([]byte, error) { return msgpack.Marshal(m) }

// Decode unmarshals a message body, rejecting anything that is not a
// well-formed Message.
//
// The envelope is read field by field and the body is copied out of b once
// (b may be reused for the next frame); a large body goes into a buffer kept
// between frames (see Release). Decoding Body as a msgpack.RawMessage
// copied a frame's image about five times, growing the copy a megabyte at a
// time.
func Decode(b []byte) (*Message, error) {
	m, err := decodeMessage(b)
	if err != nil {
		return nil, fmt.Errorf("wire: decode: %w", err)
	}
	switch m.Type {
	case TypeCall, TypeReply, TypeChunk:
	default:
		return nil, fmt.Errorf("wire: unknown message type %q", m.Type)
	}
	return m, nil
}

// Bodies from poolFrom bytes up (a frame's image) are copied into buffers
// kept between frames: a fresh multi-megabyte allocation per step costs a
// page fault per 4 KiB page on first touch, which measured several
// milliseconds per raw 1280x800 frame (docs/architecture.md, "Cost of a
// step").
const poolFrom = 256 << 10

var bodies sync.Pool // *[]byte

func cloneBody(b []byte) []byte {
	if len(b) < poolFrom {
		return bytes.Clone(b)
	}
	if p, _ := bodies.Get().(*[]byte); p != nil && cap(*p) >= len(b) {
		return append((*p)[:0], b...)
	}
	return append(make([]byte, 0, len(b)+len(b)/8), b...)
}

// Release hands m's body back for reuse by a later Decode; call it once
// nothing refers to the body any more (it has been decoded into values of
// their own). Forgetting it costs only the reuse.
func (m *Message) Release() {
	if cap(m.Body) >= poolFrom {
		b := []byte(m.Body[:0])
		bodies.Put(&b)
	}
	m.Body = nil
}

func decodeMessage(b []byte) (*Message, error) {
	var m Message
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r) // reads r directly: r's offset is the decoder's
	n, err := dec.DecodeMapLen()
	if err != nil {
		return nil, err
	}
	for range n {
		key, err := dec.DecodeString()
		if err != nil {
			return nil, err
		}
		switch key {
		case "id":
			m.ID, err = dec.DecodeUint64()
		case "t":
			m.Type, err = dec.DecodeString()
		case "m":
			m.Method, err = dec.DecodeString()
		case "timeout_ms":
			m.TimeoutMS, err = dec.DecodeInt64()
		case "body":
			off := len(b) - r.Len()
			var k int
			if k, err = mpcheck.Len(b[off:]); err == nil {
				m.Body = cloneBody(b[off : off+k])
				_, err = r.Seek(int64(k), io.SeekCurrent)
			}
		case "error":
			err = dec.Decode(&m.Error)
		default:
			err = dec.Skip()
		}
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
	}
	if r.Len() != 0 {
		return nil, fmt.Errorf("%d trailing bytes", r.Len())
	}
	return &m, nil
}

// HelloArgs opens a session.
type HelloArgs struct {
	Protocol int    `msgpack:"protocol"`
	Client   string `msgpack:"client,omitempty"`
}

// Size is a screen size in pixels.
type Size struct {
	W int `msgpack:"w"`
	H int `msgpack:"h"`
}

// Welcome answers hello with the guest's capabilities.
type Welcome struct {
	Protocol        int      `msgpack:"protocol"`
	Version         string   `msgpack:"version"`
	Verbs           []string `msgpack:"verbs"`   // act verbs the guest executes
	Methods         []string `msgpack:"methods"` // protocol methods it serves
	Formats         []string `msgpack:"formats"`
	FrameDedup      bool     `msgpack:"frame_dedup"`
	ObserveAfterAct bool     `msgpack:"observe_after_act"`
	Screen          Size     `msgpack:"screen"`
	SHM             bool     `msgpack:"shm"`    // MIT-SHM capture in use (else GetImage)
	Damage          bool     `msgpack:"damage"` // X DAMAGE available: observations settle on it
	A11y            bool     `msgpack:"a11y"`   // an accessibility bus: observe.a11y, element_ref, element verbs
}

// ObserveArgs asks for a capture. IfNoneMatch lists frame hashes the caller
// already holds: a match answers NotModified with no encode. Settle (nil: no
// settling) bounds the wait for the screen to settle first; AfterInput makes
// a plain capture settle as an action's does (waiting up to first_ms for the
// screen to start changing), for a desktop that was just set up or restored.
type ObserveArgs struct {
	aci.Observe `msgpack:",inline"`
	IfNoneMatch []string `msgpack:"if_none_match,omitempty"`
	AfterInput  bool     `msgpack:"after_input,omitempty"`
	// A11yReset starts a new episode of element ids before the tree is
	// taken (ids start again at e1; the next diff has no base).
	A11yReset bool `msgpack:"a11y_reset,omitempty"`
}

// Shot is one capture.
type Shot struct {
	Hash        string      `msgpack:"hash"`
	W           int         `msgpack:"w"`
	H           int         `msgpack:"h"`
	Format      string      `msgpack:"format"`
	Pointer     [2]int      `msgpack:"pointer"`
	Display     aci.Display `msgpack:"display"`
	NotModified bool        `msgpack:"not_modified,omitempty"`
	Data        []byte      `msgpack:"data,omitempty"` // encoded image; nil when NotModified
	// BandRows and Bands describe a raws2 frame's bands: Data is one S2
	// block whose elements are those of independently compressed bands
	// of BandRows rows, Bands[i] bytes each (internal/rgbs2). Absent: one
	// block, no bands.
	BandRows int   `msgpack:"band_rows,omitempty"`
	Bands    []int `msgpack:"bands,omitempty"`
	// Settle says how the capture was settled; nil when it was not.
	Settle *aci.SettleInfo `msgpack:"settle,omitempty"`
	// A11y is the structured observation (observe.a11y tree|diff).
	A11y *aci.A11yTree `msgpack:"a11y,omitempty"`
	// Timings is where the guest spent the capture, in microseconds:
	// settle_us, capture_us (read, convert, hash), encode_us.
	Timings map[string]int64 `msgpack:"timings,omitempty"`
}

// ActArgs runs one action and, when Observe is set, captures afterwards in the
// same round trip.
type ActArgs struct {
	Action  aci.Action   `msgpack:"action"`
	Observe *ObserveArgs `msgpack:"observe,omitempty"`
}

// ActResult acknowledges an action.
type ActResult struct {
	Pointer   [2]int   `msgpack:"pointer"`
	Clipboard string   `msgpack:"clipboard,omitempty"` // clipboard_get
	WindowID  uint32   `msgpack:"window_id,omitempty"` // launch_app (once its window is mapped) / activate_window
	PID       int      `msgpack:"pid,omitempty"`       // launch_app
	Windows   []Window `msgpack:"windows,omitempty"`   // list_windows
	Obs       *Shot    `msgpack:"obs,omitempty"`
}

// Window is one top-level window.
type Window = aci.Window

// Windows answers list_windows.
type Windows struct {
	Windows []Window `msgpack:"windows"`
	EWMH    bool     `msgpack:"ewmh"` // false: fell back to mapped root children
}

// ExecArgs runs a command inside the sandbox. Argv runs directly; Shell (a
// script for /bin/sh -c) is an explicit opt-in and excludes Argv.
type ExecArgs struct {
	Argv      []string `msgpack:"argv,omitempty"`
	Shell     string   `msgpack:"shell,omitempty"`
	Cwd       string   `msgpack:"cwd,omitempty"`
	Env       []string `msgpack:"env,omitempty"` // KEY=VALUE, added to the session env
	Stdin     []byte   `msgpack:"stdin,omitempty"`
	TimeoutMS int      `msgpack:"timeout_ms,omitempty"` // default 60 s, capped
	Stream    bool     `msgpack:"stream,omitempty"`
}

// ExecOutputCap bounds the collected output of each channel of a
// non-streamed exec; the rest is drained and flagged as truncated.
const ExecOutputCap = 256 << 10

// ExecResult is a finished command. ExitCode is nil when the command was
// killed (timeout) or died by a signal.
type ExecResult struct {
	ExitCode        *int   `msgpack:"exit_code"`
	Signal          string `msgpack:"signal,omitempty"`
	TimedOut        bool   `msgpack:"timed_out,omitempty"`
	Stdout          []byte `msgpack:"stdout,omitempty"`
	Stderr          []byte `msgpack:"stderr,omitempty"`
	StdoutTruncated bool   `msgpack:"stdout_truncated,omitempty"`
	StderrTruncated bool   `msgpack:"stderr_truncated,omitempty"`
	DurationMS      int64  `msgpack:"duration_ms"`
}

// ExecChunk is one piece of streamed output, in order (Seq counts from 0).
type ExecChunk struct {
	Seq    int    `msgpack:"seq"`
	Stream string `msgpack:"stream"` // stdout|stderr
	Data   []byte `msgpack:"data"`
}

// PutFileArgs writes a file inside the sandbox (parents created).
// With Agent set it is written with the agent's filesystem identity (its
// file, made with its permissions, no process started) and Path may begin
// with "~/", the agent's home: a task instance's files.
//
// With Kind FileKindTar (Agent only), Data is a tar archive unpacked below
// Path, a directory: its entries are directories and regular files only,
// each name relative and inside it, at most MaxTreeEntries of them. With
// Offset > 0 (Agent only), Data is a chunk written at Offset of a file
// that holds exactly Offset bytes already: a file larger than one request
// travels in order, chunk by chunk, up to MaxPutFile in all.
type PutFileArgs struct {
	Path   string `msgpack:"path"`
	Data   []byte `msgpack:"data"`
	Mode   uint32 `msgpack:"mode,omitempty"` // default 0644
	Agent  bool   `msgpack:"agent,omitempty"`
	Kind   string `msgpack:"kind,omitempty"`   // "" (a file) or FileKindTar
	Offset int64  `msgpack:"offset,omitempty"` // a chunk's place in the file
}

// FileKindTar marks a directory travelling as a tar archive.
const FileKindTar = "tar"

// MaxTreeEntries bounds the entries of a directory put or got as a tar.
const MaxTreeEntries = 4096

// GetFileArgs reads one of the agent's regular files with the agent's
// rights, through the verifier library's safe reader (no link below the
// home followed, no FIFO opened, at most MaxGetFile bytes); "~/" is the
// agent's home.
//
// With Length > 0 it reads at most Length (≤ MaxGetFile) bytes from Offset
// of a regular file of any size: a larger file travels chunk by chunk.
// With Kind FileKindTar, Path is a directory and Data a tar of it: its
// directories and regular files, its links as links (never followed);
// FIFOs, sockets and devices are left out and named in Skipped; more than
// MaxTreeEntries entries or MaxGetFile bytes of archive is too_large.
type GetFileArgs struct {
	Path   string `msgpack:"path"`
	Kind   string `msgpack:"kind,omitempty"`
	Offset int64  `msgpack:"offset,omitempty"`
	Length int    `msgpack:"length,omitempty"`
}

// GetFileResult is the file's bytes (a chunk of them with Length: Total is
// then the file's size), or a directory's tar.
type GetFileResult struct {
	Data    []byte   `msgpack:"data"`
	Total   int64    `msgpack:"total,omitempty"`
	Skipped []string `msgpack:"skipped,omitempty"`
}

// MaxGetFile bounds what get_file reads (the safe reader's bound), and
// MaxPutFile what put_file writes.
const (
	MaxGetFile = 1 << 20
	MaxPutFile = 32 << 20
)

// WebArgs serves one of the sandbox's offline web apps (package
// guest/webapp) built from Data (JSON, the task instance's), replacing a
// running app of the same name.
type WebArgs struct {
	App  string `msgpack:"app"`
	Data []byte `msgpack:"data,omitempty"`
}

// WebResult is where the app answers: URL as the sandbox's browser
// reaches it, Addr the loopback listener's host:port.
type WebResult struct {
	URL  string `msgpack:"url"`
	Addr string `msgpack:"addr"`
}

// BrowserArgs drives the sandbox's Chromium over guestd's DevTools pipe:
// Open loads each URL (the first in the current tab, the rest in new
// tabs) and returns once each has loaded; Close closes the browser
// gracefully, so that what it writes lazily reaches the disk.
type BrowserArgs struct {
	Open      []string `msgpack:"open,omitempty"`
	Close     bool     `msgpack:"close,omitempty"`
	TimeoutMS int      `msgpack:"timeout_ms,omitempty"`
}

// BrowserResult says what a browser call did.
type BrowserResult struct {
	Opened int  `msgpack:"opened,omitempty"`
	Closed bool `msgpack:"closed,omitempty"`
}

// Health reports liveness of the desktop's parts.
type Health struct {
	X     bool   `msgpack:"x"`  // X server answers
	WM    bool   `msgpack:"wm"` // a window manager holds the root (EWMH check window)
	Error string `msgpack:"error,omitempty"`
}

// ScoreArgs runs a task's verifier out of the agent's reach: guestd first
// stops every process the agent could have started, then runs the verifier
// as the scoring identity with its own HOME and working directory. A Shell
// script travels on the verifier's stdin (/bin/sh -s), so no process
// listing shows it. Argv and Shell are exclusive.
type ScoreArgs struct {
	Argv      []string `msgpack:"argv,omitempty"`
	Shell     string   `msgpack:"shell,omitempty"`
	Env       []string `msgpack:"env,omitempty"` // KEY=VALUE, added to the scoring env
	TimeoutMS int      `msgpack:"timeout_ms,omitempty"`
}

// Reset phases (docs/architecture.md, "Sandbox lifecycle and reset in
// place"): quiesce ends every process of the episode and resets the X
// server's state; the host then restores the sandbox's files; relaunch
// starts the recorded apps again; settle waits until the screen is still.
const (
	ResetQuiesce  = "quiesce"
	ResetRelaunch = "relaunch"
	ResetSettle   = "settle"
)

// ResetArgs is one phase of an in-place reset.
type ResetArgs struct {
	Phase  string      `msgpack:"phase"`
	Settle *aci.Settle `msgpack:"settle,omitempty"` // settle: the bounds (damage within the last quiet_ms counts)
}

// ResetResult reports what a reset phase did.
type ResetResult struct {
	Killed    int             `msgpack:"killed,omitempty"` // quiesce: processes of the episode ended
	Apps      int             `msgpack:"apps,omitempty"`   // relaunch: apps started again
	Settle    *aci.SettleInfo `msgpack:"settle,omitempty"` // settle: how the screen settled
	ElapsedUS int64           `msgpack:"elapsed_us"`
}

// ScoreResult is the verifier's run and what the freeze did.
type ScoreResult struct {
	ExecResult `msgpack:",inline"`
	Frozen     int   `msgpack:"frozen"`    // agent processes stopped before the run
	FreezeUS   int64 `msgpack:"freeze_us"` // time the freeze took
	Isolated   bool  `msgpack:"isolated"`  // ran as an identity other than the agent's
}

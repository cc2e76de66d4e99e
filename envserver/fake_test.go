package envserver_test

// The unit tier's sandboxes: a provider ("fake", registered in the stack's
// provider registry like the real ones, from test code only) whose
// sandboxes are in-memory guests speaking the real host⇄guest protocol
// (guest/wire) over a unix socket. The server, its pool and its guest
// client are the real ones; only the desktop is made up, so envserver's
// reset, step, fork, verdict and limits logic runs in milliseconds and
// without Xvfb (docs/architecture.md, "The step path").
//
// The fake desktop: a screen whose frame changes with every action that
// changes it (a key, typed text, a click), a clipboard, and a verifier
// language of a few words (fakeScore).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/envserver/stack"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/vmihailenco/msgpack/v5"
)

func init() {
	stack.Register("fake", func(ctx context.Context, cfg *configs.Server, opts stack.Options, logf func(string, ...any)) (pool.Provider, error) {
		dir, err := os.MkdirTemp("", "shinken-fake-")
		if err != nil {
			return nil, err
		}
		return &fakeProvider{dir: dir, boxes: map[string]*fakeBox{}, snaps: map[string]fakeState{}}, nil
	})
}

// fakeState is what a fake desktop holds: what the agent typed (and
// clicked, as "@x,y"), the clipboard, and a version that changes the frame.
type fakeState struct {
	Typed, Clip string
	Version     int
}

// fakeBox is one fake sandbox: its guest's listener and state.
type fakeBox struct {
	id   string
	ln   net.Listener
	dead chan struct{}
	once sync.Once

	mu    sync.Mutex
	st    fakeState
	limit string // a limit the sandbox reached ("oom"), "" for none
}

func (b *fakeBox) kill() {
	b.once.Do(func() {
		close(b.dead)
		b.ln.Close()
	})
}

// fakeProvider is a pool.Provider, Snapshotter and Forker of fake boxes.
type fakeProvider struct {
	dir string
	n   atomic.Int64

	mu    sync.Mutex
	boxes map[string]*fakeBox
	snaps map[string]fakeState
}

func (p *fakeProvider) Capabilities() pool.Capabilities {
	return pool.Capabilities{Provider: "fake", SnapshotKind: pool.SnapshotProcess, Snapshot: true, Restore: true, Fork: true,
		Isolation: "none: an in-memory test desktop"}
}

func (p *fakeProvider) Create(ctx context.Context, spec pool.Spec) (*pool.Sandbox, error) {
	return p.start(spec, fakeState{})
}

func (p *fakeProvider) start(spec pool.Spec, st fakeState) (*pool.Sandbox, error) {
	id := fmt.Sprintf("fake-%d", p.n.Add(1))
	addr := filepath.Join(p.dir, id+".sock")
	ln, err := net.Listen("unix", addr)
	if err != nil {
		return nil, err
	}
	w, h := spec.Width, spec.Height
	if w == 0 || h == 0 {
		w, h = 64, 64
	}
	b := &fakeBox{id: id, ln: ln, dead: make(chan struct{}), st: st}
	p.mu.Lock()
	p.boxes[id] = b
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveFake(b, c, w, h)
		}
	}()
	return &pool.Sandbox{ID: id, GuestNetwork: "unix", GuestAddr: addr, Dead: b.dead, LimitHit: func() string {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.limit
	}}, nil
}

func (p *fakeProvider) box(id string) *fakeBox {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.boxes[id]
}

func (p *fakeProvider) Destroy(ctx context.Context, id string) error {
	if b := p.box(id); b != nil {
		b.kill()
	}
	return nil
}

func (p *fakeProvider) Alive(ctx context.Context, id string) error {
	b := p.box(id)
	if b == nil {
		return pool.ErrNotFound
	}
	select {
	case <-b.dead:
		return pool.Errorf(pool.ErrSandboxDied, aci.CodeSandboxDied, "fake sandbox %s died", id)
	default:
		return nil
	}
}

func (p *fakeProvider) Close(ctx context.Context) error {
	p.mu.Lock()
	for _, b := range p.boxes {
		b.kill()
	}
	p.mu.Unlock()
	return os.RemoveAll(p.dir)
}

func (p *fakeProvider) Snapshot(ctx context.Context, id string) (string, error) {
	b := p.box(id)
	if b == nil {
		return "", pool.ErrNotFound
	}
	b.mu.Lock()
	st := b.st
	b.mu.Unlock()
	snap := fmt.Sprintf("snap-%d", p.n.Add(1))
	p.mu.Lock()
	p.snaps[snap] = st
	p.mu.Unlock()
	return snap, nil
}

func (p *fakeProvider) Restore(ctx context.Context, snap string, spec pool.Spec) (*pool.Sandbox, error) {
	p.mu.Lock()
	st, ok := p.snaps[snap]
	p.mu.Unlock()
	if !ok {
		return nil, pool.ErrNotFound
	}
	return p.start(spec, st)
}

func (p *fakeProvider) DeleteSnapshot(ctx context.Context, snap string) error {
	p.mu.Lock()
	delete(p.snaps, snap)
	p.mu.Unlock()
	return nil
}

func (p *fakeProvider) Fork(ctx context.Context, snap string, n int, spec pool.Spec) ([]*pool.Sandbox, error) {
	var out []*pool.Sandbox
	for range n {
		sb, err := p.Restore(ctx, snap, spec)
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, nil
}

// serveFake answers the host⇄guest protocol on c for box b, whose screen
// is w×h.
func serveFake(b *fakeBox, c net.Conn, w, h int) {
	defer c.Close()
	go func() {
		<-b.dead
		c.Close()
	}()
	var wmu sync.Mutex
	for {
		body, err := wire.ReadFrame(c, nil)
		if err != nil {
			return
		}
		m, err := wire.Decode(body)
		if err != nil {
			return
		}
		go func(m *wire.Message) {
			out, err := fakeCall(b, m, w, h)
			reply := wire.Message{ID: m.ID, Type: wire.TypeReply}
			if err != nil {
				reply.Error = aci.AsError(err)
			} else if reply.Body, err = msgpack.Marshal(out); err != nil {
				reply.Error = aci.AsError(err)
			}
			enc, err := wire.Encode(&reply)
			if err != nil {
				return
			}
			wmu.Lock()
			wire.WriteFrame(c, enc)
			wmu.Unlock()
		}(m)
	}
}

// fakeCall runs one method of the protocol on b.
func fakeCall(b *fakeBox, m *wire.Message, w, h int) (any, error) {
	select {
	case <-b.dead:
		return nil, aci.Errorf(aci.CodeSandboxDied, "fake sandbox %s is gone", b.id)
	default:
	}
	switch m.Method {
	case wire.MethodHello:
		return wire.Welcome{Protocol: wire.Protocol, Version: "fake", Formats: []string{"png"}, ObserveAfterAct: true,
			FrameDedup: true, Screen: wire.Size{W: w, H: h}}, nil
	case wire.MethodHealth:
		return wire.Health{X: true, WM: true}, nil
	case wire.MethodScreenshot:
		var args wire.ObserveArgs
		if err := msgpack.Unmarshal(m.Body, &args); err != nil {
			return nil, aci.Errorf(aci.CodeBadRequest, "screenshot: %v", err)
		}
		return b.shot(args, w, h), nil
	case wire.MethodAct:
		var args wire.ActArgs
		if err := msgpack.Unmarshal(m.Body, &args); err != nil {
			return nil, aci.Errorf(aci.CodeBadRequest, "act: %v", err)
		}
		return b.act(args, w, h)
	case wire.MethodScore:
		var args wire.ScoreArgs
		if err := msgpack.Unmarshal(m.Body, &args); err != nil {
			return nil, aci.Errorf(aci.CodeBadRequest, "score: %v", err)
		}
		b.mu.Lock()
		st := b.st
		b.mu.Unlock()
		return fakeScore(args.Shell, st), nil
	case wire.MethodExec:
		return wire.ExecResult{ExitCode: new(int)}, nil
	case wire.MethodListWindows:
		return wire.Windows{Windows: []wire.Window{}, EWMH: true}, nil
	}
	return nil, aci.Errorf(aci.CodeUnsupported, "the fake guest has no method %q", m.Method)
}

// act runs one action on the fake desktop. A click without a target is
// the agent's invalid_action, as the real guest's; typing "die" kills the
// sandbox midway (the infrastructure's failure), "oom" kills it at its
// memory limit (the agent's).
func (b *fakeBox) act(args wire.ActArgs, w, h int) (*wire.ActResult, error) {
	a := args.Action
	b.mu.Lock()
	switch a.Verb {
	case aci.TypeText:
		switch a.Text {
		case "die", "oom":
			if a.Text == "oom" {
				b.limit = "oom"
			}
			b.mu.Unlock()
			b.kill()
			return nil, aci.Errorf(aci.CodeSandboxDied, "fake sandbox %s died", b.id)
		}
		b.st.Typed += a.Text
		b.st.Version++
	case aci.Key:
		b.st.Typed += "<" + a.Keys + ">"
		b.st.Version++
	case aci.Click:
		p, ok := a.Point()
		if !ok {
			b.mu.Unlock()
			return nil, aci.Errorf(aci.CodeInvalidAction, "click needs a target")
		}
		b.st.Typed += fmt.Sprintf("@%g,%g", p.X, p.Y)
		b.st.Version++
	case aci.ClipboardSet:
		b.st.Clip = a.Text
	}
	clip := b.st.Clip
	b.mu.Unlock()
	res := &wire.ActResult{}
	if a.Verb == aci.ClipboardGet {
		res.Clipboard = clip
	}
	if args.Observe != nil {
		res.Obs = b.shot(*args.Observe, w, h)
	}
	return res, nil
}

// shot captures the fake screen: a w×h PNG whose colour is the desktop's
// version, hashed like the real guest's frames (32 hex digits).
func (b *fakeBox) shot(args wire.ObserveArgs, w, h int) *wire.Shot {
	b.mu.Lock()
	v := b.st.Version
	b.mu.Unlock()
	sum := sha256.Sum256([]byte(fmt.Sprintf("%dx%d:%d", w, h, v)))
	hash := hex.EncodeToString(sum[:16])
	s := &wire.Shot{Hash: hash, W: w, H: h, Format: "png",
		Display: aci.Display{W: w, H: h, SourceRect: aci.Rect{W: w, H: h}, Delivered: aci.Rect{W: w, H: h}}}
	for _, have := range args.IfNoneMatch {
		if have == hash {
			s.NotModified = true
			return s
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	c := color.RGBA{uint8(v * 37), uint8(v * 91), uint8(v * 13), 255}
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	s.Data = buf.Bytes()
	if args.Settle != nil {
		s.Settle = &aci.SettleInfo{}
	}
	return s
}

// fakeScore is the fake verifier language, one command:
//
//	echo X          prints X
//	fail N          exits N, printing nothing
//	typed S         prints 1 when the agent typed S, else 0
//	broken-if S     prints 1, but exits 1 when the agent typed S (a
//	                verifier the agent's state breaks)
func fakeScore(shell string, st fakeState) wire.ScoreResult {
	verb, arg, _ := strings.Cut(strings.TrimSpace(shell), " ")
	zero := 0
	r := wire.ScoreResult{Isolated: true}
	r.ExitCode = &zero
	switch verb {
	case "echo":
		r.Stdout = []byte(arg + "\n")
	case "fail":
		n, _ := strconv.Atoi(arg)
		r.ExitCode = &n
	case "typed":
		r.Stdout = []byte("0\n")
		if strings.Contains(st.Typed, arg) {
			r.Stdout = []byte("1\n")
		}
	case "broken-if":
		r.Stdout = []byte("1\n")
		if strings.Contains(st.Typed, arg) {
			one := 1
			r.ExitCode, r.Stdout = &one, nil
		}
	default:
		n := 127
		r.ExitCode = &n
	}
	return r
}

// fakeServer starts a server on the fake provider serving tasks (id →
// task JSON); edit, when set, changes its config first. It never skips: it
// needs no desktop.
func fakeServer(t *testing.T, tasks map[string]string, edit func(*configs.Server)) (*servertest.Server, *fakeProvider) {
	t.Helper()
	dir := t.TempDir()
	for id, js := range tasks {
		if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := configs.LoadServer("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Provider, cfg.Tasks, cfg.AllowUnchecked = "fake", dir, true
	cfg.Pool, cfg.ReplicasPerGolden, cfg.ResetMode = 2, 1, pool.ResetModeReboot
	cfg.Screen, cfg.State, cfg.Listen = "64x64x24", t.TempDir(), "127.0.0.1:0"
	cfg.LeaseTimeout = configs.Duration(10 * time.Second)
	if edit != nil {
		edit(cfg)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := stack.Open(ctx, cfg, stack.Options{GuestdPath: "/nonexistent/guestd", Logf: t.Logf})
	if err == nil {
		err = st.Serve(cfg.Listen, cfg.Token)
	}
	if err != nil {
		if st != nil {
			st.Close(context.Background())
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := st.Close(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("closing the fake server: %v", err)
		}
	})
	return &servertest.Server{Stack: st, Token: cfg.Token, State: cfg.State}, st.Provider.(*fakeProvider)
}

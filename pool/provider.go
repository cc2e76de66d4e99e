package pool

import (
	"context"
	"errors"
	"fmt"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
)

// Snapshot kinds a provider may advertise (docs/architecture.md, "Sandboxes, snapshots, forks").
const (
	SnapshotNone            = "none"
	SnapshotDisk            = "disk"             // writable filesystem state only
	SnapshotMemory          = "memory"           // + process memory (VM snapshot)
	SnapshotProcess         = "process"          // + process trees (CRIU)
	SnapshotProviderManaged = "provider_managed" // opaque, the provider's own
)

// Capabilities is a provider's honest descriptor, advertised in /v1/spec. A
// provider claims only what its code and its conformance run prove.
type Capabilities struct {
	Provider     string `msgpack:"provider" json:"provider"`
	SnapshotKind string `msgpack:"snapshot_kind" json:"snapshot_kind"`
	Snapshot     bool   `msgpack:"snapshot" json:"snapshot"`
	Restore      bool   `msgpack:"restore" json:"restore"`
	Fork         bool   `msgpack:"fork" json:"fork"`
	Resume       bool   `msgpack:"resume" json:"resume"`
	// Confined says whether sandboxes are isolated as docs/architecture.md describes; a
	// provider that runs unconfined (operator's explicit choice) says false.
	Confined bool `msgpack:"confined" json:"confined"`
	// Isolation says, in words, what keeps the reward out of the agent's
	// reach: what a sandbox sees of the host, and who the agent, guestd and
	// the verifier run as.
	Isolation string `msgpack:"isolation,omitempty" json:"isolation,omitempty"`
	// Confinement is the same as structured fields, from what the provider
	// probed at start; nil where it does not say.
	Confinement *Confinement `msgpack:"confinement,omitempty" json:"confinement,omitempty"`
	Notes       string       `msgpack:"notes,omitempty" json:"notes,omitempty"`
	// A11y says the sandboxes run an accessibility bus: observations may
	// carry the accessibility tree and actions may target its elements.
	A11y bool `msgpack:"a11y" json:"a11y"`
}

// Confinement is what a provider's sandboxes are confined by (the wire
// type lives in aci, so the API package needs nothing of the pool).
type Confinement = aci.Confinement

// Limit reasons: a sandbox its provider ended because it reached a limit
// reports one of these as detail.reason of its sandbox_died (docs/api.md).
var LimitReasons = []string{"oom"}

// Spec describes the sandbox to create.
type Spec struct {
	Width, Height int    // screen size; 0 means 1280x800
	Depth         int    // 0 means 24
	WM            string // window manager binary; "" means openbox, "none" for none
	GLX           bool   // the X server offers OpenGL (Mesa's software renderer)
	MemoryBytes   int64  // 0: provider default
	Pids          int    // 0: provider default
}

// SessionArgs is the session part of guestd's command line that every
// provider starts a sandbox with: the display, the screen and window
// manager (the defaults filled in), GLX, where guestd listens and keeps its
// state, and --relaunch when the sandbox comes from a snapshot.
func (s Spec) SessionArgs(display, listen, state string, relaunch bool) []string {
	w, h, d := s.Width, s.Height, s.Depth
	if w == 0 || h == 0 {
		w, h = 1280, 800
	}
	if d == 0 {
		d = 24
	}
	wm := s.WM
	if wm == "" {
		wm = "openbox"
	}
	args := []string{"--session",
		"--display", display,
		"--screen", fmt.Sprintf("%dx%dx%d", w, h, d),
		"--wm", wm,
		"--listen", listen,
		"--state", state,
	}
	if relaunch {
		args = append(args, "--relaunch")
	}
	if s.GLX {
		args = append(args, "--glx")
	}
	return args
}

// Sandbox is one live desktop. Its guest answers on GuestNetwork/GuestAddr.
type Sandbox struct {
	ID           string
	GuestNetwork string // "unix" or "tcp"
	GuestAddr    string
	Display      int // X display number, where meaningful
	// Dead is closed when the provider observes the sandbox end (its init
	// exited, its container stopped). Never nil for a created sandbox.
	Dead <-chan struct{}
	// LimitHit names the limit the sandbox reached (one of LimitReasons),
	// "" for none; nil where the provider does not tell. A sandbox that
	// died with a limit hit died of it.
	LimitHit func() string
}

// Provider owns sandbox lifecycles. Implementations are safe for concurrent use.
//
// Lifecycle: Create returns a sandbox whose guest has answered hello (readiness
// is probed, never slept on). Destroy ends every process of the sandbox and
// removes its state; it is idempotent. Close destroys every sandbox the
// provider created and releases its resources.
type Provider interface {
	Capabilities() Capabilities
	Create(ctx context.Context, spec Spec) (*Sandbox, error)
	Destroy(ctx context.Context, id string) error
	// Alive returns nil while the sandbox runs, an error wrapping
	// ErrSandboxDied once it has died, and ErrNotFound for an unknown id.
	Alive(ctx context.Context, id string) error
	Close(ctx context.Context) error
}

// Snapshotter is implemented by providers that can freeze a sandbox's state
// and start new sandboxes from it.
type Snapshotter interface {
	// Snapshot freezes the sandbox's state (of Capabilities().SnapshotKind)
	// and returns a snapshot id. The sandbox keeps running.
	Snapshot(ctx context.Context, id string) (snap string, err error)
	// Restore starts one new sandbox from a snapshot.
	Restore(ctx context.Context, snap string, spec Spec) (*Sandbox, error)
	// DeleteSnapshot removes a snapshot; idempotent.
	DeleteSnapshot(ctx context.Context, snap string) error
}

// Forker is implemented by providers that start n sandboxes from one
// snapshot more cheaply than n Restores.
type Forker interface {
	Fork(ctx context.Context, snap string, n int, spec Spec) ([]*Sandbox, error)
}

// Resetter is implemented by providers that can return a live sandbox to a
// snapshot's state in place, faster than a boot (docs/architecture.md,
// "Reset in place"): its X server, window manager and guestd keep running;
// every process the episode started ends; its writable state becomes the
// snapshot's; the X server's state is reset; the apps recorded in the
// snapshot relaunch. guest is the pool's connection to the sandbox's guestd.
// On any error the sandbox is in an unknown state and the caller retires it.
type Resetter interface {
	ResetInPlace(ctx context.Context, id, snap string, guest *client.Client) error
}

// Reset modes (Config.ResetMode, the server's --reset-mode).
const (
	// ResetModeInPlace resets a released golden lease in place and keeps it
	// as a warm replica; fork resets idle sandboxes before booting.
	ResetModeInPlace = "inplace"
	// ResetModeReboot retires every released sandbox and boots replicas.
	ResetModeReboot = "reboot"
)

// Errors, wrapped with %w by providers and the pool; KindCode maps them to
// wire codes, whose fault the one error table (aci.Codes) says.
var (
	ErrExhausted   = errors.New("pool exhausted")
	ErrSandboxDied = errors.New("sandbox died")
	ErrUnsupported = errors.New("unsupported by provider")
	ErrNotFound    = errors.New("sandbox not found")
	ErrClosed      = errors.New("pool closed")
)

// kinds maps the pool's errors and the context's to wire codes, first
// match first.
var kinds = []struct {
	err  error
	code aci.Code
}{
	{ErrExhausted, aci.CodePoolExhausted},
	{ErrSandboxDied, aci.CodeSandboxDied},
	{ErrUnsupported, aci.CodeUnsupported},
	{ErrNotFound, aci.CodeNotFound},
	{context.DeadlineExceeded, aci.CodeTimeout},
	{ErrClosed, aci.CodeUnsupported},
	{context.Canceled, aci.CodeUnsupported},
}

// KindCode is the wire code of err's kind (one of the errors above, or the
// context's end), "" where err is of none of them.
func KindCode(err error) aci.Code {
	if err == nil {
		return ""
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) {
			return k.code
		}
	}
	return ""
}

// Errorf returns an error that matches kind (one of the errors above) under
// errors.Is and carries the wire code under aci.CodeOf, so callers can test
// either. Its message is the formatted text.
func Errorf(kind error, code aci.Code, format string, args ...any) error {
	return &typedError{kind: kind, e: aci.Errorf(code, format, args...)}
}

// WithDetail returns err (a typed error of Errorf) with detail set on its
// aci.Error, so it travels to the wire (docs/api.md, errors).
func WithDetail(err error, detail any) error {
	if t, ok := err.(*typedError); ok {
		e := *t.e
		e.Detail = detail
		return &typedError{kind: t.kind, e: &e}
	}
	return err
}

type typedError struct {
	kind error
	e    *aci.Error
}

func (t *typedError) Error() string   { return t.e.Message }
func (t *typedError) Unwrap() []error { return []error{t.kind, t.e} }

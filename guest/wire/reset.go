package wire

// MethodReset returns a sandbox to the state of a fresh boot without
// stopping its X server, window manager or guestd (additive, 2026-12).
// It runs in two phases around the host's restore of the writable state:
//
//	clear: every process but guestd, the X server and the window manager
//	       ends (SIGKILL sweep, waited for), shared memory the episode left
//	       is removed, and the X server's state returns to the baseline
//	       guestd recorded at start: buttons and keys released, keyboard and
//	       modifier mappings, clipboard, root background, cursor and
//	       properties, screen saver, pointer position and input focus.
//	start: once the killed clients' windows are gone and the window
//	       manager reloaded its configuration, the apps recorded in the state
//	       directory are launched again (as on a restored boot with
//	       --relaunch).
const MethodReset = "reset"

// Reset phases.
const (
	ResetClear = "clear"
	ResetStart = "start"
)

// ResetArgs selects the phase.
type ResetArgs struct {
	Phase string `msgpack:"phase"`
}

// ResetResult reports what a phase did.
type ResetResult struct {
	Killed   int   `msgpack:"killed,omitempty"`   // processes ended (clear)
	Launched int   `msgpack:"launched,omitempty"` // apps relaunched (start)
	TookUS   int64 `msgpack:"took_us"`
	// PhasesUS splits TookUS: kill, ipc, x (state restored) in clear;
	// windows (waiting for the killed clients' windows to go) and relaunch
	// in start.
	PhasesUS map[string]int64 `msgpack:"phases_us,omitempty"`
}

package guest

import (
	"context"
	"os"
)

// Config configures a Server.
type Config struct {
	// Display is the X display (":N"); empty means $DISPLAY.
	Display string
	// StateDir is where launch_app records launched apps (apps.json); empty
	// disables recording.
	StateDir string
	// Env is the session environment given to processes the server starts
	// (apps, exec). Nil means the server's own environment. DISPLAY and
	// LANG=C.UTF-8 are added when missing.
	Env []string
	// MaxExec bounds concurrent exec calls (default 16); past it exec
	// answers busy.
	MaxExec int
	// Agent is the identity of everything the agent can drive: launched
	// apps and the commands the host runs (setup). Nil: guestd's own.
	Agent *Identity
	// Scorer is the identity verifiers run as (score). Nil: guestd's own.
	Scorer *Identity
	// AgentCgroups are the cgroups the agent's processes are born in, and
	// whose freezer scoring freezes; nil: none.
	AgentCgroups *AgentCgroups
	// AgentIdle starts the agent's processes under SCHED_IDLE, for a
	// sandbox whose desktop and agent share one cgroup (a container): the
	// agent's forks inherit it and cannot undo it, so a fork bomb or a
	// spinner only ever gets the CPU the X server, the window manager and
	// guestd leave, and the desktop keeps answering. Where AgentCgroups
	// split the CPU between "guest" and "agent", it is not needed.
	AgentIdle bool
	// Exempt lists processes the scoring freeze leaves running besides
	// guestd itself (the X server, which the verifier may query).
	Exempt func() []int
	// Keep lists the session processes a reset in place keeps besides
	// guestd and the Exempt ones: the window manager where it runs as the
	// desktop's own identity; every other process ends
	// (docs/architecture.md, "Reset in place").
	Keep func() []int
	// Restart starts the session's helpers afresh at the start of a
	// reset's relaunch phase: the buses, and the window manager where it
	// was not kept or dirty says the episode changed its state. Nil:
	// nothing to restart.
	// It reports whether the window manager started afresh.
	Restart func(ctx context.Context, dirty bool) (bool, error)
	// A11yBus is the session's AT-SPI bus address; empty: no
	// accessibility tree (observe.a11y and element verbs are unsupported).
	A11yBus string
	// SettleIdle lets a settle end as soon as every process that can draw
	// on the display is idle (quiesce.go). Set it only where guestd sees all
	// of them: as its pid namespace's PID 1, or when it started the X server
	// and everything that connects to it.
	SettleIdle bool
	// Logf logs; nil is silent.
	Logf func(format string, args ...any)
}

// withDefault sets key in env to val unless env sets it already.
func withDefault(env []string, key, val string) []string {
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			return env
		}
	}
	return append(env[:len(env):len(env)], key+"="+val)
}

// exempt is the set of processes the freeze leaves running.
func (c *Config) exempt() map[int]bool {
	ex := map[int]bool{os.Getpid(): true}
	if c.Exempt != nil {
		for _, p := range c.Exempt() {
			ex[p] = true
		}
	}
	return ex
}

package configs

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
)

//go:embed envserver.json
var defaultServer []byte

// Server is envserver's configuration file (configs/envserver.json is the
// documented default; command-line flags override it).
type Server struct {
	Listen             string      `json:"listen"`               // host:port; loopback unless a token is set
	Token              string      `json:"token,omitempty"`      // bearer token; required beyond loopback
	Provider           string      `json:"provider"`             // process | docker
	Pool               int         `json:"pool"`                 // warm sandboxes kept ahead
	ReplicasPerGolden  int         `json:"replicas_per_golden"`  // warm pre-forked replicas per task checkpoint
	ReplicaIdleTTL     Duration    `json:"replica_idle_ttl"`     // a replica beyond replicas_per_golden (a burst's) unused this long is retired; 0 = 5m, negative = never
	ResetMode          string      `json:"reset_mode,omitempty"` // inplace (default) | reboot: how a finished episode's sandbox is reused (docs/architecture.md, "Reset in place")
	MaxSandboxes       int         `json:"max_sandboxes"`        // cap on all live sandboxes (warm, leased, replicas); 0 = what the host's memory holds (pool.DesktopBytes each), at least 2*pool+8
	MaxConcurrentBoots int         `json:"max_concurrent_boots"` // sandboxes booting at once
	LeaseTimeout       Duration    `json:"lease_timeout"`        // longest a reset queues for a sandbox before pool_exhausted; 0 = its whole reset_timeout
	State              string      `json:"state"`                // trajectories, frames and sandbox state live here
	RecordFrames       bool        `json:"record_frames"`        // store observed frames beside trajectories
	MaxEpisodes        int         `json:"max_episodes"`         // trajectories kept on disk (oldest dropped)
	MaxBatch           int         `json:"max_batch"`            // envs per request
	MaxBodyBytes       int         `json:"max_body_bytes"`       // request body cap
	FrameCacheBytes    int64       `json:"frame_cache_bytes"`    // shared frame cache bound
	Concurrency        int         `json:"concurrency"`          // envs worked on at once
	IdleTTL            Duration    `json:"idle_ttl"`             // close envs idle this long
	StepTimeout        Duration    `json:"step_timeout"`         // one env's step
	ResetTimeout       Duration    `json:"reset_timeout"`        // one env's reset (lease + setup)
	Screen             string      `json:"screen"`               // WxHxDepth of the sandboxes a reset gets by default
	Screens            []string    `json:"screens,omitempty"`    // more sizes (WxH) a reset may ask for (reset screen {w, h}), each with its own pool (docs/api.md, "Per-env screens")
	ScreenWarm         int         `json:"screen_warm"`          // warm sandboxes kept for each size of screens
	GLX                bool        `json:"glx"`                  // sandboxes' X servers offer OpenGL (Mesa's software renderer); off: cheaper boots (docs/architecture.md, "Bursts")
	Observe            aci.Observe `json:"observe"`              // default observation (settle: DefaultSettle when absent)
	MaxSteps           int         `json:"max_steps,omitempty"`  // cap on any episode's step budget; 0: the task's alone
	MaxCheckpoints     int         `json:"max_checkpoints"`      // named checkpoints held at once
	MaxCheckpointBytes int64       `json:"max_checkpoint_bytes"` // bytes their snapshots hold in all
	CheckpointTTL      Duration    `json:"checkpoint_ttl"`       // a checkpoint unused this long is deleted
	Tasks              string      `json:"tasks,omitempty"`      // task dir; empty = the shipped suite
	AllowUnchecked     bool        `json:"allow_unchecked"`      // serve families that lack a passing check record (docs/tasks.md, "The task checker")
	TrainerExec        bool        `json:"trainer_exec"`         // serve POST /v1/exec: the trainer runs commands in its envs (docs/api.md, "Trainer exec")
	TokenFile          string      `json:"token_file,omitempty"` // file holding the bearer token (instead of token)
	MaxConns           int         `json:"max_conns"`            // open connections
	MaxConnsPerIP      int         `json:"max_conns_per_ip"`     // open connections from one address
	ReadTimeout        Duration    `json:"read_timeout"`         // reading one request, headers and body
	WriteTimeout       Duration    `json:"write_timeout"`        // writing one reply
	ConnIdleTimeout    Duration    `json:"conn_idle_timeout"`    // a keep-alive connection's wait for its next request
	SnapshotBytes      int64       `json:"snapshot_bytes"`       // cap on what one snapshot or fork copies (too_large beyond); 0 = 4 GiB, -1 = none
	SandboxCPUs        float64     `json:"sandbox_cpus"`         // docker: CPUs one container may use; 0 = 1
	Ffmpeg             string      `json:"ffmpeg"`               // ffmpeg for episode videos (GET /v1/episodes/{id}/video.mp4): "" = ffmpeg on PATH, "off" = no videos
	VideoCacheBytes    int64       `json:"video_cache_bytes"`    // encoded episode videos kept under <state>/videos; 0 = 1 GiB
}

// ReadToken fills Token from TokenFile when it is set (the file's content,
// trimmed): a token on the command line is visible to every local user.
func (c *Server) ReadToken() error {
	if c.TokenFile == "" {
		return nil
	}
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return fmt.Errorf("token file %s is empty", c.TokenFile)
	}
	c.Token = t
	return nil
}

// DefaultSettle is how long an observation waits for the screen to settle
// when the request names no settle (configs/envserver.json carries the same).
//
// Measured on the shipped apps (xterm, mousepad, galculator, pcmanfm under
// openbox, 1280x800 Xvfb, a shared 2-core host; 5 runs of click, type, key,
// scroll and menu open each; guest TestMeasureAppDrawing): the first damage
// came 0.1-37 ms after the input, with outliers of 47 ms and 123 ms (mousepad
// opening its File menu). Within one action's drawing most gaps between
// damage events stayed under 31 ms, but two apps draw again on a timer:
// galculator releases a pressed button 95-112 ms after a typed key, and
// pcmanfm's type-ahead redraws 200-210 ms after the key (once, a galculator
// scroll showed a 514 ms gap: something unrelated redrawing). So: wait up to
// 200 ms for the first damage (1.6x the worst seen; it is also what an action
// that draws nothing costs), settle after 300 ms of quiet (1.4x pcmanfm's
// timer), and give up at 2 s (an animation, a blinking cursor) with
// timed_out set.
var DefaultSettle = aci.Settle{FirstMS: 200, QuietMS: 300, MaxMS: 2000}

// ScriptSettle is how a task's fixed script (a solution, a wrong solution)
// is played, by the task checker and by rollout's scripted policy: a
// script cannot look at the screen, so each step may wait up to 8 s for
// what it started (a page load, a form's post) to finish. The settle ends
// on the same events as DefaultSettle's, so a quick step costs no more;
// only a loaded host's slow load is waited for, where 2 s would hand the
// script's next keys to a page not yet there.
var ScriptSettle = aci.Settle{FirstMS: 200, QuietMS: 300, MaxMS: 8000}

// Duration is a time.Duration written as "30s" in JSON.
type Duration time.Duration

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// LoadServer reads a server config: the shipped default, overlaid by the file
// at path when path is not empty.
func LoadServer(path string) (*Server, error) {
	var c Server
	if err := json.Unmarshal(defaultServer, &c); err != nil {
		return nil, fmt.Errorf("default config: %w", err)
	}
	if path == "" {
		return &c, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if c.Observe.Settle == nil {
		st := DefaultSettle
		c.Observe.Settle = &st
	}
	return &c, nil
}

// ParseScreen splits "1280x800x24" into width, height and depth.
func ParseScreen(s string) (w, h, d int, err error) {
	d = 24
	n, _ := fmt.Sscanf(s, "%dx%dx%d", &w, &h, &d)
	if n < 2 || w < 64 || h < 64 || w > 8192 || h > 8192 {
		return 0, 0, 0, fmt.Errorf("screen %q: want WIDTHxHEIGHT[xDEPTH]", s)
	}
	return w, h, d, nil
}

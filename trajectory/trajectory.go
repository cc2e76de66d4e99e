// Package trajectory holds the typed records of episodes: every step's
// actions, raw model text, token ids and logprobs exactly as the trainer sent
// them, the observation's frame hash, reward, error and timing, and the
// episode's typed exit reason.
package trajectory

import (
	"time"

	"github.com/shinken-rl/shinken/aci"
)

// ExitReason says why an episode ended.
type ExitReason string

// Exit reasons, from highest precedence to lowest (docs/architecture.md, "Trajectories").
const (
	SandboxDied  ExitReason = "sandbox_died"
	SetupError   ExitReason = "setup_error"
	AgentError   ExitReason = "agent_error"
	ScorerError  ExitReason = "scorer_error"
	MaxSteps     ExitReason = "max_steps"
	TaskComplete ExitReason = "task_complete"
)

// precedence lists exit reasons from highest to lowest.
var precedence = []ExitReason{SandboxDied, SetupError, AgentError, ScorerError, MaxSteps, TaskComplete}

// Resolve returns the exit reason that wins among coinciding causes; "" when
// none is given. Unknown reasons rank below every known one.
func Resolve(causes ...ExitReason) ExitReason {
	best, bestRank := ExitReason(""), len(precedence)+1
	for _, c := range causes {
		if c == "" {
			continue
		}
		r := len(precedence)
		for i, p := range precedence {
			if p == c {
				r = i
				break
			}
		}
		if r < bestRank {
			best, bestRank = c, r
		}
	}
	return best
}

// Step is one turn of an episode.
type Step struct {
	Index            int          `msgpack:"index" json:"index"`
	Actions          []aci.Action `msgpack:"actions" json:"actions"`
	Text             string       `msgpack:"text,omitempty" json:"text,omitempty"`
	Dialect          string       `msgpack:"dialect,omitempty" json:"dialect,omitempty"`
	Answer           string       `msgpack:"answer,omitempty" json:"answer,omitempty"` // a model's final answer, when its text gave one
	PromptIDs        []int        `msgpack:"prompt_ids" json:"prompt_ids"`
	ResponseIDs      []int        `msgpack:"response_ids" json:"response_ids"`
	ResponseMask     []int        `msgpack:"response_mask" json:"response_mask"` // 1 per response id: model tokens
	ResponseLogprobs []float64    `msgpack:"response_logprobs,omitempty" json:"response_logprobs,omitempty"`
	FinishReason     string       `msgpack:"finish_reason,omitempty" json:"finish_reason,omitempty"`
	ObsFrame         string       `msgpack:"obs_frame" json:"obs_frame"`
	ObsTree          string       `msgpack:"obs_tree,omitempty" json:"obs_tree,omitempty"` // the a11y tree revision shown (its text is stored like a frame, format "a11y")
	Reward           float64      `msgpack:"reward" json:"reward"`
	Error            *aci.Error   `msgpack:"error,omitempty" json:"error,omitempty"`
	// Ran is set when the step failed: how many of Actions ran (the failed
	// one included); the rest never did.
	Ran *int  `msgpack:"ran,omitempty" json:"ran,omitempty"`
	TMS int64 `msgpack:"t_ms" json:"t_ms"` // milliseconds since the episode started
}

// Trajectory is one whole episode.
type Trajectory struct {
	EpisodeID string `msgpack:"episode_id" json:"episode_id"`
	EnvID     string `msgpack:"env_id" json:"env_id"`
	Task      string `msgpack:"task" json:"task"`
	Seed      *int64 `msgpack:"seed,omitempty" json:"seed,omitempty"`
	// Instance is the task instance the episode ran: what the seed drew.
	// The trainer reads it; the agent never sees it.
	Instance   *Instance  `msgpack:"instance,omitempty" json:"instance,omitempty"`
	ForkOf     string     `msgpack:"fork_of,omitempty" json:"fork_of,omitempty"`
	Checkpoint string     `msgpack:"checkpoint,omitempty" json:"checkpoint,omitempty"` // the named checkpoint it started from (fork_of: the episode that checkpoint was taken in)
	Steps      []Step     `msgpack:"steps" json:"steps"`
	Reward     float64    `msgpack:"reward" json:"reward"`
	ExitReason ExitReason `msgpack:"exit_reason,omitempty" json:"exit_reason,omitempty"`
	// ExitDetail qualifies ExitReason where one word is not enough
	// ("server_restart": the server stopped while the episode ran).
	ExitDetail string     `msgpack:"exit_detail,omitempty" json:"exit_detail,omitempty"`
	NumTurns   int        `msgpack:"num_turns" json:"num_turns"`
	StartedAt  time.Time  `msgpack:"started_at" json:"started_at"`
	EndedAt    *time.Time `msgpack:"ended_at,omitempty" json:"ended_at,omitempty"`
	InitFrame  string     `msgpack:"init_frame,omitempty" json:"init_frame,omitempty"` // the reset observation
	InitTree   string     `msgpack:"init_tree,omitempty" json:"init_tree,omitempty"`   // its a11y tree revision, if observed
	// Labels are free-form tags a client adds to its own copy (the rollout
	// runner records its job key here); the server leaves them empty.
	Labels map[string]string `msgpack:"labels,omitempty" json:"labels,omitempty"`
	// Events are what the trainer did to the episode's sandbox between
	// the agent's steps (docs/api.md, "Trainer exec"): never agent actions.
	Events []Event `msgpack:"events,omitempty" json:"events,omitempty"`
	// EventsDropped counts the events past the server's bound per episode
	// (4096), not kept.
	EventsDropped int `msgpack:"events_dropped,omitempty" json:"events_dropped,omitempty"`
	// Envelope is what the episode was allowed to do, fixed at its start.
	Envelope *Envelope `msgpack:"envelope,omitempty" json:"envelope,omitempty"`
	// Audit is every use of the envelope's powers (Audit(t)): the server
	// fills it when it serves a trajectory; the stored file holds the
	// steps and events it is derived from.
	Audit []Use `msgpack:"audit,omitempty" json:"audit,omitempty"`
}

// Event is one thing the trainer did in an episode, after AfterStep agent
// steps, TMS milliseconds into the episode: Kind "exec" with the command
// and how it ended (its output is the trainer's, not kept), "observe"
// with the frame it saw, "put_file" or "get_file" with the path and the
// file's sha256 and size.
type Event struct {
	Kind        string   `msgpack:"kind" json:"kind"`
	Frame       string   `msgpack:"frame,omitempty" json:"frame,omitempty"`
	Path        string   `msgpack:"path,omitempty" json:"path,omitempty"`
	FileKind    string   `msgpack:"file_kind,omitempty" json:"file_kind,omitempty"` // "tar": a directory's archive
	Offset      int64    `msgpack:"offset,omitempty" json:"offset,omitempty"`       // a file chunk's place
	SHA256      string   `msgpack:"sha256,omitempty" json:"sha256,omitempty"`
	Size        int      `msgpack:"size,omitempty" json:"size,omitempty"`
	AfterStep   int      `msgpack:"after_step" json:"after_step"`
	TMS         int64    `msgpack:"t_ms" json:"t_ms"`
	Argv        []string `msgpack:"argv,omitempty" json:"argv,omitempty"`
	Shell       string   `msgpack:"shell,omitempty" json:"shell,omitempty"`
	Exit        *int     `msgpack:"exit,omitempty" json:"exit,omitempty"`
	TimedOut    bool     `msgpack:"timed_out,omitempty" json:"timed_out,omitempty"`
	StdoutBytes int      `msgpack:"stdout_bytes" json:"stdout_bytes"`
	StderrBytes int      `msgpack:"stderr_bytes" json:"stderr_bytes"`
	DurationMS  int64    `msgpack:"duration_ms" json:"duration_ms"`
	Error       string   `msgpack:"error,omitempty" json:"error,omitempty"`
}

// Event kinds: POST /v1/exec, /v1/observe, /v1/files/put, /v1/files/get.
const (
	EventExec    = "exec"
	EventObserve = "observe"
	EventPutFile = "put_file"
	EventGetFile = "get_file"
)

// Instance is the drawn instance of a task family an episode ran
// (docs/tasks.md): its family version, its parameters as drawn, its
// identity and its split.
type Instance struct {
	Version     int            `msgpack:"version" json:"version"`
	Hash        string         `msgpack:"hash" json:"hash"`
	Split       string         `msgpack:"split" json:"split"`
	Instruction string         `msgpack:"instruction" json:"instruction"`
	Params      map[string]any `msgpack:"params,omitempty" json:"params,omitempty"`
}

// reasonCodes is the error code each exit reason that ends an episode on
// a failure stands for in the one error table (aci.Codes): a setup that
// failed is the sandbox's, as sandbox_died is.
var reasonCodes = map[ExitReason]aci.Code{
	SandboxDied: aci.CodeSandboxDied,
	SetupError:  aci.CodeSandboxDied,
	AgentError:  aci.CodeAgentError,
	ScorerError: aci.CodeScorerError,
}

// Fault is whose failure an exit reason is, as the one error table
// (aci.Codes) says of its code: sandbox_died and setup_error are the
// infrastructure's, agent_error the agent's, scorer_error the task's; an
// episode that ended normally (max_steps, task_complete) or was abandoned
// ("") is nobody's.
func (r ExitReason) Fault() aci.Fault {
	if c, ok := reasonCodes[r]; ok {
		return c.Fault()
	}
	return ""
}

// Retryable reports whether an episode that ended this way may be run
// again on a fresh env: only when the infrastructure failed.
func (r ExitReason) Retryable() bool { return r.Fault() == aci.FaultInfra }

// ReasonFor is the exit reason of an episode ended by an error with code c,
// by the code's fault: the agent's is agent_error, the task's scorer_error,
// anything else sandbox_died.
func ReasonFor(c aci.Code) ExitReason {
	switch c.Fault() {
	case aci.FaultAgent:
		return AgentError
	case aci.FaultTask:
		return ScorerError
	}
	return SandboxDied
}

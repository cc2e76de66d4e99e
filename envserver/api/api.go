// Package api holds every type of the trainer⇄server protocol (docs/api.md).
// Bodies are msgpack or JSON; binary fields are raw
// bytes in msgpack and base64 in JSON. It is a leaf: aci and the standard
// library only, so the server, the rollout runner and golden-file tests share
// it without pulling in HTTP or X11 code.
//
// Protocol history:
//
//	1 (2026-12): healthz, metrics, spec, reset, step, fork, close, episodes.
//	1 (2026-12, later): observe.settle replaces settle_ms; info.settle and
//	             info.results; step and reset coords; reset max_steps;
//	             list_windows verb.
//	1 (2026-12, later): step request_id (a resent step replays its reply).
//	1 (2026-12, later): named checkpoints (POST/GET/DELETE /v1/checkpoint,
//	             reset and fork checkpoint, info.checkpoint, pool.checkpoint,
//	             limits max_checkpoints, max_checkpoint_bytes, checkpoint_ttl_s).
package api

import (
	"github.com/shinken-rl/shinken/aci"
)

// Protocol is the version this package speaks.
const Protocol = 1

// Observe is the trainer's observation request (aci.Observe on the wire).
type Observe = aci.Observe

// ResetEnv asks for one env: a new lease (EnvID empty) or a restart of EnvID.
// With Checkpoint the episode starts from that named checkpoint (its task;
// Task may be empty or must name the same task).
type ResetEnv struct {
	EnvID      string `msgpack:"env_id,omitempty" json:"env_id,omitempty"`
	Task       string `msgpack:"task" json:"task"`
	Checkpoint string `msgpack:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	// Seed picks the task family's instance (docs/tasks.md); absent, the
	// server draws one from Split and reports it in info.seed.
	Seed *int64 `msgpack:"seed,omitempty" json:"seed,omitempty"`
	// Split is "train" (the default) or "test": a drawn seed comes from
	// it, and a given seed of the other split is refused.
	Split string `msgpack:"split,omitempty" json:"split,omitempty"`
	// Coords is the env's default coordinate space for its steps: a string
	// (screen, frame, norm, norm1000) or {w, h}; see aci.ParseCoords.
	Coords any `msgpack:"coords,omitempty" json:"coords,omitempty"`
	// MaxSteps lowers the episode's step budget (capped by the task's and
	// the server's); 0 keeps the task's.
	MaxSteps int `msgpack:"max_steps,omitempty" json:"max_steps,omitempty"`
	// Screen is the sandbox's screen: one of spec.observation.screens;
	// absent, the server's default (docs/api.md, "Per-env screens").
	Screen *Size `msgpack:"screen,omitempty" json:"screen,omitempty"`
}

// ResetRequest is POST /v1/reset.
type ResetRequest struct {
	Envs    []ResetEnv `msgpack:"envs" json:"envs"`
	Observe *Observe   `msgpack:"observe,omitempty" json:"observe,omitempty"`
	Have    []string   `msgpack:"have,omitempty" json:"have,omitempty"`
}

// Tokens is what the trainer's model saw and produced on one turn, recorded
// into the trajectory as sent.
type Tokens struct {
	PromptIDs        []int     `msgpack:"prompt_ids" json:"prompt_ids"`
	ResponseIDs      []int     `msgpack:"response_ids" json:"response_ids"`
	ResponseLogprobs []float64 `msgpack:"response_logprobs,omitempty" json:"response_logprobs,omitempty"`
	FinishReason     string    `msgpack:"finish_reason,omitempty" json:"finish_reason,omitempty"`
}

// StepEnv is one env's step: exactly one of Action, Actions or Text.
type StepEnv struct {
	EnvID   string       `msgpack:"env_id" json:"env_id"`
	Action  *aci.Action  `msgpack:"action,omitempty" json:"action,omitempty"`
	Actions []aci.Action `msgpack:"actions,omitempty" json:"actions,omitempty"`
	Text    *string      `msgpack:"text,omitempty" json:"text,omitempty"`
	Dialect string       `msgpack:"dialect,omitempty" json:"dialect,omitempty"`
	// Coords is how the step's coordinates are read: a space name or
	// {w, h} (aci.ParseCoords); absent, the env's or the dialect's default.
	Coords any     `msgpack:"coords,omitempty" json:"coords,omitempty"`
	Tokens *Tokens `msgpack:"tokens,omitempty" json:"tokens,omitempty"`
	// RequestID names this step (client-chosen, unique per step, at most
	// 128 bytes): a step resent with the id of the env's last step gets that
	// step's stored reply and does not run again (docs/api.md, "Retrying a
	// step").
	RequestID string `msgpack:"request_id,omitempty" json:"request_id,omitempty"`
}

// StepRequest is POST /v1/step.
type StepRequest struct {
	Steps   []StepEnv `msgpack:"steps" json:"steps"`
	Observe *Observe  `msgpack:"observe,omitempty" json:"observe,omitempty"`
	Have    []string  `msgpack:"have,omitempty" json:"have,omitempty"`
}

// ForkRequest is POST /v1/fork: n new envs carrying EnvID's state now, or
// the state of the named Checkpoint (exactly one of the two).
type ForkRequest struct {
	EnvID      string   `msgpack:"env_id,omitempty" json:"env_id,omitempty"`
	Checkpoint string   `msgpack:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	N          int      `msgpack:"n" json:"n"`
	Observe    *Observe `msgpack:"observe,omitempty" json:"observe,omitempty"`
	Have       []string `msgpack:"have,omitempty" json:"have,omitempty"`
}

// CheckpointRequest is POST /v1/checkpoint: snapshot EnvID's live episode.
type CheckpointRequest struct {
	EnvID string `msgpack:"env_id" json:"env_id"`
}

// Checkpoint describes a named checkpoint: POST /v1/checkpoint's reply and
// GET /v1/checkpoint/{id}.
type Checkpoint struct {
	CheckpointID string `msgpack:"checkpoint_id" json:"checkpoint_id"`
	EnvID        string `msgpack:"env_id" json:"env_id"`         // the env it was taken from
	EpisodeID    string `msgpack:"episode_id" json:"episode_id"` // the episode it was taken from
	Task         string `msgpack:"task" json:"task"`
	Step         int    `msgpack:"step" json:"step"`   // the episode's step count at the checkpoint
	Frame        string `msgpack:"frame" json:"frame"` // the hash of the env's last delivered frame then
	Bytes        int64  `msgpack:"bytes" json:"bytes"` // what its snapshot holds on the host
	// ExpiresInMS is how long it lives unused (every reset or fork from it
	// restarts its idle TTL).
	ExpiresInMS int64 `msgpack:"expires_in_ms" json:"expires_in_ms"`
}

// CheckpointDeleteReply answers DELETE /v1/checkpoint/{id}; deleting an
// unknown or expired checkpoint is not an error (Deleted false).
type CheckpointDeleteReply struct {
	CheckpointID string `msgpack:"checkpoint_id" json:"checkpoint_id"`
	Deleted      bool   `msgpack:"deleted" json:"deleted"`
}

// CloseRequest is POST /v1/close.
type CloseRequest struct {
	EnvIDs []string `msgpack:"env_ids" json:"env_ids"`
}

// CloseReply answers close with the ids actually closed.
type CloseReply struct {
	Closed []string `msgpack:"closed" json:"closed"`
}

// Info is per-env metadata on reset/step/fork results.
type Info struct {
	Step       int        `msgpack:"step" json:"step"`
	ExitReason string     `msgpack:"exit_reason,omitempty" json:"exit_reason,omitempty"`
	Error      *aci.Error `msgpack:"error,omitempty" json:"error,omitempty"`
	SaveError  *aci.Error `msgpack:"save_error,omitempty" json:"save_error,omitempty"` // the episode could not be written to disk (the step itself happened)
	Task       string     `msgpack:"task,omitempty" json:"task,omitempty"`
	// Version, Seed, Split and Instruction name the task instance the
	// episode runs (reset and fork): the family's version, the seed that
	// drew it, its split, and the instruction rendered for it.
	Version     int    `msgpack:"version,omitempty" json:"version,omitempty"`
	Seed        *int64 `msgpack:"seed,omitempty" json:"seed,omitempty"`
	Split       string `msgpack:"split,omitempty" json:"split,omitempty"`
	Instruction string `msgpack:"instruction,omitempty" json:"instruction,omitempty"`
	ForkOf      string `msgpack:"fork_of,omitempty" json:"fork_of,omitempty"`
	// Checkpoint is the named checkpoint a reset or fork started from.
	Checkpoint string           `msgpack:"checkpoint,omitempty" json:"checkpoint,omitempty"`
	Timings    map[string]int64 `msgpack:"timings,omitempty" json:"timings,omitempty"` // microseconds
	Extra      map[string]any   `msgpack:"extra,omitempty" json:"extra,omitempty"`
	// Settle says how the observation was settled (nil: it was not).
	Settle *aci.SettleInfo `msgpack:"settle,omitempty" json:"settle,omitempty"`
	// Results has one entry per action of the step, in order.
	Results []aci.ActionResult `msgpack:"results,omitempty" json:"results,omitempty"`
	// Windows is the window list an observe asked for (POST /v1/observe).
	Windows []aci.Window `msgpack:"windows,omitempty" json:"windows,omitempty"`
	// MaxSteps is the episode's step budget (reset and fork).
	MaxSteps int `msgpack:"max_steps,omitempty" json:"max_steps,omitempty"`
	// Coords is the coordinate space the step's actions were read in.
	Coords any `msgpack:"coords,omitempty" json:"coords,omitempty"`
	// Actions, Dialect and Answer are set on a step given as model text: the
	// actions it was parsed into (as they ran, in screen pixels), the dialect
	// that read it, and the answer it ended with (call_user, answer,
	// finished(content=...)), if any.
	Actions []aci.Action `msgpack:"actions,omitempty" json:"actions,omitempty"`
	Dialect string       `msgpack:"dialect,omitempty" json:"dialect,omitempty"`
	Answer  string       `msgpack:"answer,omitempty" json:"answer,omitempty"`
	// Verdict is the verifier's, on the step that ended the episode with a
	// score: the reward, and why the verifier gave no number where the
	// state the agent left broke it (then the reward is the range's
	// minimum and the exit reason stays a scored one).
	Verdict *Verdict `msgpack:"verdict,omitempty" json:"verdict,omitempty"`
}

// Verdict is how the episode was scored (Info.Verdict).
type Verdict struct {
	Reward float64    `msgpack:"reward" json:"reward"`
	Error  *aci.Error `msgpack:"error,omitempty" json:"error,omitempty"`
}

// Result is one env's slot in a reset/step/fork reply. When Error is set the
// env failed this call and the other fields may be empty.
//
// Reward is a step's reward: 0 until the step that ends the episode, which
// carries the verifier's score; nil (null on the wire) when that end is not
// a score (scorer_error, sandbox_died: docs/api.md, "Rewards") and on reset
// and fork results, so that no reader averages a fake 0.
type Result struct {
	EnvID      string           `msgpack:"env_id" json:"env_id"`
	EpisodeID  string           `msgpack:"episode_id,omitempty" json:"episode_id,omitempty"`
	Obs        *aci.Observation `msgpack:"obs,omitempty" json:"obs,omitempty"`
	Reward     *float64         `msgpack:"reward" json:"reward"`
	Terminated bool             `msgpack:"terminated" json:"terminated"`
	Truncated  bool             `msgpack:"truncated" json:"truncated"`
	Info       *Info            `msgpack:"info,omitempty" json:"info,omitempty"`
	Error      *aci.Error       `msgpack:"error,omitempty" json:"error,omitempty"`
}

// BatchReply answers reset, step and fork. Frames holds each encoded image
// once, keyed by hash, minus those the request listed in Have.
type BatchReply struct {
	Results []Result          `msgpack:"results" json:"results"`
	Frames  map[string][]byte `msgpack:"frames" json:"frames"`
}

// ErrorReply is the body of a whole-request failure.
type ErrorReply struct {
	Error *aci.Error `msgpack:"error" json:"error"`
}

// TaskInfo is one task family as /v1/spec lists it (docs/tasks.md).
// Instruction is the family's template; a reset's info carries the
// instance's own.
type TaskInfo struct {
	ID          string   `msgpack:"id" json:"id"`
	Instruction string   `msgpack:"instruction" json:"instruction"`
	MaxSteps    int      `msgpack:"max_steps" json:"max_steps"`
	Version     int      `msgpack:"version,omitempty" json:"version,omitempty"`
	Apps        []string `msgpack:"apps,omitempty" json:"apps,omitempty"`
	// Params is the parameter schema: what each seed draws.
	Params []ParamInfo `msgpack:"params,omitempty" json:"params,omitempty"`
	// Splits is each split's share of the instances, in percent (a task
	// without parameters has one instance, in train).
	Splits map[string]int `msgpack:"splits,omitempty" json:"splits,omitempty"`
}

// ParamInfo is one parameter of a family: its name, its kind (int,
// number, choice, word, sample, ints, person, date, text, table, value)
// and the kind's bounds as the family file gives them.
type ParamInfo struct {
	Name string `msgpack:"name" json:"name"`
	Kind string `msgpack:"kind" json:"kind"`
	Spec any    `msgpack:"spec,omitempty" json:"spec,omitempty"`
}

// Size is a width and height in pixels.
type Size struct {
	W int `msgpack:"w" json:"w"`
	H int `msgpack:"h" json:"h"`
}

// ObservationSpec lists the formats the server produces and the sandboxes'
// screen size, from which a client sizes its observation space before any
// reset (a full-screen frame is Screen scaled to the observe max_long_edge).
type ObservationSpec struct {
	Formats []string `msgpack:"formats" json:"formats"`
	Default Observe  `msgpack:"default" json:"default"`
	Screen  *Size    `msgpack:"screen,omitempty" json:"screen,omitempty"`
	// Screens are the sizes a reset may ask for (reset screen), the
	// default (Screen) first; absent where the server offers one size.
	Screens []Size `msgpack:"screens,omitempty" json:"screens,omitempty"`
	// A11y lists the observe.a11y modes; absent where the sandboxes have
	// no accessibility tree.
	A11y []string `msgpack:"a11y,omitempty" json:"a11y,omitempty"`
	// SoM: observe.som draws Set-of-Mark frames (where the tree is).
	SoM bool `msgpack:"som,omitempty" json:"som,omitempty"`
}

// PoolSpec describes the sandbox pool honestly.
type PoolSpec struct {
	Provider string `msgpack:"provider" json:"provider"`
	Size     int    `msgpack:"size" json:"size"`
	Warm     int    `msgpack:"warm" json:"warm"`
	// MaxSandboxes caps the live sandboxes (envs, warm ones, replicas);
	// resets beyond it queue until their reset_timeout.
	MaxSandboxes int    `msgpack:"max_sandboxes" json:"max_sandboxes"`
	SnapshotKind string `msgpack:"snapshot_kind" json:"snapshot_kind"`
	Fork         bool   `msgpack:"fork" json:"fork"`
	// ResetMode is how a finished episode's sandbox is reused: "inplace"
	// (reset in place to its task's checkpoint and kept warm) or "reboot"
	// (retired; a replica boots). docs/architecture.md, "Reset in place".
	ResetMode string `msgpack:"reset_mode" json:"reset_mode"`
	// Checkpoint says POST /v1/checkpoint is served (the provider can
	// snapshot and restore).
	Checkpoint bool   `msgpack:"checkpoint" json:"checkpoint"`
	Confined   bool   `msgpack:"confined" json:"confined"`
	Isolation  string `msgpack:"isolation,omitempty" json:"isolation,omitempty"` // what keeps the reward out of the agent's reach
	Notes      string `msgpack:"notes,omitempty" json:"notes,omitempty"`
	// Confinement is what the provider enforces on each sandbox, as probed
	// at start (namespaces, uids, /dev, cgroup limits, seccomp); absent
	// where it reports none.
	Confinement *aci.Confinement `msgpack:"confinement,omitempty" json:"confinement,omitempty"`
}

// Limits are the request caps, enforced while a body is decoded (before
// anything is allocated from it) and advertised in /v1/spec. A request over
// one is refused whole: batch_too_large for MaxBatch, payload_too_large for
// the others.
type Limits struct {
	MaxBatch          int `msgpack:"max_batch" json:"max_batch"`                       // envs per reset/step/close, children per fork
	MaxBodyBytes      int `msgpack:"max_body_bytes" json:"max_body_bytes"`             // request body
	MaxActionsPerStep int `msgpack:"max_actions_per_step" json:"max_actions_per_step"` // actions of one env's step
	MaxHave           int `msgpack:"max_have" json:"max_have"`                         // have entries
	MaxTextBytes      int `msgpack:"max_text_bytes" json:"max_text_bytes"`             // a "text" field (typed text, dialect text)
	MaxKeyChord       int `msgpack:"max_key_chord" json:"max_key_chord"`               // keys in one chord ("ctrl+shift+t" is 3)
	MaxArgBytes       int `msgpack:"max_arg_bytes" json:"max_arg_bytes"`               // any other string (ids, app, args)
	MaxArgs           int `msgpack:"max_args" json:"max_args"`                         // args or modifiers of one action
	MaxTokens         int `msgpack:"max_tokens" json:"max_tokens"`                     // entries of one token id or logprob list
	MaxRequestIDBytes int `msgpack:"max_request_id_bytes" json:"max_request_id_bytes"` // a step's request_id (absent: no step replay)
	// MaxDecodeFactor bounds what decoding may allocate: at most this many
	// times the body's size (plus a small constant).
	MaxDecodeFactor int `msgpack:"max_decode_factor" json:"max_decode_factor"`
	// Named checkpoints (docs/api.md, "Checkpoints"): at most
	// MaxCheckpoints live at once holding MaxCheckpointBytes in all (over
	// either: checkpoint_limit); one unused for CheckpointTTLS seconds is
	// deleted. All 0 where checkpoints are not served.
	MaxCheckpoints     int   `msgpack:"max_checkpoints" json:"max_checkpoints"`
	MaxCheckpointBytes int64 `msgpack:"max_checkpoint_bytes" json:"max_checkpoint_bytes"`
	CheckpointTTLS     int64 `msgpack:"checkpoint_ttl_s" json:"checkpoint_ttl_s"`
}

// Spec is GET /v1/spec.
type Spec struct {
	Protocol    int             `msgpack:"protocol" json:"protocol"`
	Verbs       []string        `msgpack:"verbs" json:"verbs"`
	Dialects    []string        `msgpack:"dialects" json:"dialects"`
	Observation ObservationSpec `msgpack:"observation" json:"observation"`
	Tasks       []TaskInfo      `msgpack:"tasks" json:"tasks"`
	Pool        PoolSpec        `msgpack:"pool" json:"pool"`
	Limits      Limits          `msgpack:"limits" json:"limits"`
	// Trainer says which of the trainer's own routes this server serves.
	Trainer TrainerSpec `msgpack:"trainer" json:"trainer"`
}

// ObserveRequest is POST /v1/observe: the current observation of each env
// (its frame, the a11y tree where observe asks, the window list with
// Windows), without a step (docs/api.md, "Observation without a step").
type ObserveRequest struct {
	EnvIDs  []string `msgpack:"env_ids" json:"env_ids"`
	Observe *Observe `msgpack:"observe,omitempty" json:"observe,omitempty"`
	Have    []string `msgpack:"have,omitempty" json:"have,omitempty"`
	Windows bool     `msgpack:"windows,omitempty" json:"windows,omitempty"`
}

// FilePutRequest is POST /v1/files/put: Data written to Path in env
// EnvID's sandbox with the agent's rights, SHA256 (hex) the sha256 of
// Data, Mode its permission bits (default 0644); "~/" is the agent's home
// (docs/api.md, "Trainer files").
//
// Kind "tar": Data is a tar archive unpacked below Path, a directory
// (directories and regular files only). Offset > 0: Data is the next
// chunk of a file that holds Offset bytes already (a file larger than a
// request travels in order, chunk by chunk).
type FilePutRequest struct {
	EnvID  string `msgpack:"env_id" json:"env_id"`
	Path   string `msgpack:"path" json:"path"`
	Data   []byte `msgpack:"data" json:"data"`
	SHA256 string `msgpack:"sha256" json:"sha256"`
	Mode   uint32 `msgpack:"mode,omitempty" json:"mode,omitempty"`
	Kind   string `msgpack:"kind,omitempty" json:"kind,omitempty"`
	Offset int64  `msgpack:"offset,omitempty" json:"offset,omitempty"`
}

// FileGetRequest is POST /v1/files/get: the regular file at Path, read
// with the agent's rights; with Length, at most Length bytes from Offset
// (Total in the reply is the file's size); Kind "tar": the directory at
// Path as a tar archive.
type FileGetRequest struct {
	EnvID  string `msgpack:"env_id" json:"env_id"`
	Path   string `msgpack:"path" json:"path"`
	Kind   string `msgpack:"kind,omitempty" json:"kind,omitempty"`
	Offset int64  `msgpack:"offset,omitempty" json:"offset,omitempty"`
	Length int    `msgpack:"length,omitempty" json:"length,omitempty"`
}

// FileReply answers both: the sha256 (hex) and size of the bytes that
// travelled, and for a get the bytes; Total is a chunked get's file size,
// Skipped a tar get's entries left out (FIFOs, sockets, devices).
type FileReply struct {
	EnvID   string   `msgpack:"env_id" json:"env_id"`
	Path    string   `msgpack:"path" json:"path"`
	Kind    string   `msgpack:"kind,omitempty" json:"kind,omitempty"`
	Data    []byte   `msgpack:"data,omitempty" json:"data,omitempty"`
	SHA256  string   `msgpack:"sha256" json:"sha256"`
	Size    int      `msgpack:"size" json:"size"`
	Offset  int64    `msgpack:"offset,omitempty" json:"offset,omitempty"`
	Total   int64    `msgpack:"total,omitempty" json:"total,omitempty"`
	Skipped []string `msgpack:"skipped,omitempty" json:"skipped,omitempty"`
}

// TrainerSpec is what /v1/spec says of the trainer's routes.
type TrainerSpec struct {
	// Observe: POST /v1/observe is served (always).
	Observe bool `msgpack:"observe" json:"observe"`
	// Files: POST /v1/files/put and /v1/files/get are served (always),
	// for files of at most MaxPutBytes, at most MaxGetBytes a get (a
	// chunk, or a directory's archive).
	Files       bool `msgpack:"files" json:"files"`
	MaxPutBytes int  `msgpack:"max_put_bytes" json:"max_put_bytes"`
	MaxGetBytes int  `msgpack:"max_get_bytes" json:"max_get_bytes"`
	// Directories travel as tar archives of at most MaxTreeEntries
	// entries; files larger than a request travel in chunks (offset).
	MaxTreeEntries int `msgpack:"max_tree_entries" json:"max_tree_entries"`
	// Exec: POST /v1/exec runs commands as the agent's user, for at most
	// MaxExecMS each, keeping MaxExecOutputBytes of each output stream.
	Exec               bool `msgpack:"exec" json:"exec"`
	MaxExecMS          int  `msgpack:"max_exec_ms,omitempty" json:"max_exec_ms,omitempty"`
	MaxExecOutputBytes int  `msgpack:"max_exec_output_bytes,omitempty" json:"max_exec_output_bytes,omitempty"`
	// Video: GET /v1/episodes/{id}/video.mp4 is served (absent where the
	// server has no ffmpeg; docs/api.md, "Episode video").
	Video *VideoSpec `msgpack:"video,omitempty" json:"video,omitempty"`
}

// VideoSpec is what /v1/spec says of episode videos: H.264 MP4 of at most
// MaxFrames positions (longer episodes are sampled down), each shown for
// its real duration up to MaxPositionMS, the last screen held TailMS,
// scaled to LongEdge; MaxConcurrent encodes at once (beyond: busy), each
// within TimeoutMS.
type VideoSpec struct {
	MP4           bool `msgpack:"mp4" json:"mp4"`
	MaxFrames     int  `msgpack:"max_frames" json:"max_frames"`
	MaxPositionMS int  `msgpack:"max_position_ms" json:"max_position_ms"`
	TailMS        int  `msgpack:"tail_ms" json:"tail_ms"`
	LongEdge      int  `msgpack:"long_edge" json:"long_edge"`
	MaxConcurrent int  `msgpack:"max_concurrent" json:"max_concurrent"`
	TimeoutMS     int  `msgpack:"timeout_ms" json:"timeout_ms"`
}

// ExecRequest is POST /v1/exec: one command in env EnvID's sandbox, as the
// agent's user (docs/api.md, "Trainer exec"). Exactly one of Argv and
// Shell; Env entries are KEY=VALUE added to the session's environment.
type ExecRequest struct {
	EnvID     string   `msgpack:"env_id" json:"env_id"`
	Argv      []string `msgpack:"argv,omitempty" json:"argv,omitempty"`
	Shell     string   `msgpack:"shell,omitempty" json:"shell,omitempty"`
	Stdin     []byte   `msgpack:"stdin,omitempty" json:"stdin,omitempty"`
	Cwd       string   `msgpack:"cwd,omitempty" json:"cwd,omitempty"`
	Env       []string `msgpack:"env,omitempty" json:"env,omitempty"`
	TimeoutMS int      `msgpack:"timeout_ms,omitempty" json:"timeout_ms,omitempty"`
}

// ExecReply is the command's end: Exit is nil when it was killed (its
// time ran out: TimedOut) or died of a signal; Truncated says an output
// stream was cut at the cap.
type ExecReply struct {
	EnvID      string `msgpack:"env_id" json:"env_id"`
	Exit       *int   `msgpack:"exit" json:"exit"`
	Signal     string `msgpack:"signal,omitempty" json:"signal,omitempty"`
	Stdout     []byte `msgpack:"stdout" json:"stdout"`
	Stderr     []byte `msgpack:"stderr" json:"stderr"`
	Truncated  bool   `msgpack:"truncated" json:"truncated"`
	TimedOut   bool   `msgpack:"timed_out" json:"timed_out"`
	DurationMS int64  `msgpack:"duration_ms" json:"duration_ms"`
}

// Score is a Reward that is a score.
func Score(v float64) *float64 { return &v }

// Scored is r's reward and whether it is a score (false: null on the
// wire, or the result of a reset, a fork or a failed call).
func (r *Result) Scored() (float64, bool) {
	if r.Reward == nil {
		return 0, false
	}
	return *r.Reward, true
}

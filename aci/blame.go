package aci

// Fault says whose failure an error code is. It decides the HTTP status of a
// whole-request failure, the exit reason of an episode it ends, and whether a
// rollout runner may retry the job on a fresh env (only infrastructure
// failures are retried: anything else would buy the agent a free reroll).
type Fault string

const (
	// FaultRequest: the caller sent something malformed or unknown; nothing
	// about the episode changed.
	FaultRequest Fault = "request"
	// FaultAgent: the agent's own action failed or broke its sandbox; the
	// step counts and the episode is the agent's to lose.
	FaultAgent Fault = "agent"
	// FaultTask: the task's verifier gave no valid verdict; the episode is
	// scored scorer_error, never retried and never a fabricated reward.
	FaultTask Fault = "task"
	// FaultInfra: the server, pool or sandbox failed; a runner retries.
	FaultInfra Fault = "infrastructure"
)

// Blame is one row of the error table.
type Blame struct {
	Status int   // HTTP status of a whole-request failure with this code
	Fault  Fault // whose failure it is
	// Gone says the sandbox is gone: an episode that meets this code
	// ends sandbox_died (or agent_error where the agent's use reached a
	// limit of its sandbox).
	Gone bool
}

// Codes is the one error table: every code, its HTTP status, its fault and
// whether it means the sandbox is gone. Every decision on a code reads it.
var Codes = map[Code]Blame{
	CodeBadRequest:       {400, FaultRequest, false},
	CodePayloadTooLarge:  {413, FaultRequest, false},
	CodeBatchTooLarge:    {413, FaultRequest, false},
	CodeUnauthorized:     {401, FaultRequest, false},
	CodeNotFound:         {404, FaultRequest, false},
	CodeUnsupported:      {501, FaultRequest, false},
	CodeEpisodeOver:      {409, FaultRequest, false},
	CodeCheckpointLimit:  {429, FaultRequest, false},
	CodeChecksumMismatch: {422, FaultRequest, false},
	CodeInvalidAction:    {422, FaultAgent, false},
	CodeUnknownVerb:      {422, FaultAgent, false},
	CodeDialectError:     {422, FaultAgent, false},
	CodeTooLarge:         {413, FaultAgent, false},
	CodeAgentError:       {422, FaultAgent, false},
	CodeStaleElementRef:  {409, FaultAgent, false},
	CodeScorerError:      {502, FaultTask, false},
	CodePoolExhausted:    {503, FaultInfra, false},
	CodeSandboxDied:      {502, FaultInfra, true},
	CodeTimeout:          {504, FaultInfra, false},
	CodeInternal:         {500, FaultInfra, false},
	CodeBusy:             {503, FaultInfra, false},
	CodeDisplayError:     {502, FaultInfra, true},
}

// HTTPStatus is the status for a whole-request failure with this code.
func (c Code) HTTPStatus() int {
	if b, ok := Codes[c]; ok {
		return b.Status
	}
	return 500
}

// Fault is whose failure the code is; an unknown code is the infrastructure's.
func (c Code) Fault() Fault {
	if b, ok := Codes[c]; ok {
		return b.Fault
	}
	return FaultInfra
}

// ActionFault is the fault of an error raised while executing one of the
// agent's actions: there the agent's action is the request, so a request
// fault (an unknown window, an unsupported argument, a value over its cap) is
// the agent's. Other faults stay as the table says.
func (c Code) ActionFault() Fault {
	if f := c.Fault(); f != FaultRequest {
		return f
	}
	return FaultAgent
}

// Gone reports whether the code means the sandbox is gone.
func (c Code) Gone() bool { return Codes[c].Gone }

// Retryable reports whether a job that failed with this code may be retried
// on a fresh env: only infrastructure failures are.
func (c Code) Retryable() bool { return c != "" && c.Fault() == FaultInfra }

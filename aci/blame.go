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
}

// Codes is the one error table: every code, its HTTP status and its fault.
var Codes = map[Code]Blame{
	CodeBadRequest:       {400, FaultRequest},
	CodePayloadTooLarge:  {413, FaultRequest},
	CodeBatchTooLarge:    {413, FaultRequest},
	CodeUnauthorized:     {401, FaultRequest},
	CodeNotFound:         {404, FaultRequest},
	CodeUnsupported:      {501, FaultRequest},
	CodeEpisodeOver:      {409, FaultRequest},
	CodeCheckpointLimit:  {429, FaultRequest},
	CodeChecksumMismatch: {422, FaultRequest},
	CodeInvalidAction:    {422, FaultAgent},
	CodeUnknownVerb:      {422, FaultAgent},
	CodeDialectError:     {422, FaultAgent},
	CodeTooLarge:         {413, FaultAgent},
	CodeAgentError:       {422, FaultAgent},
	CodeStaleElementRef:  {409, FaultAgent},
	CodeScorerError:      {502, FaultTask},
	CodePoolExhausted:    {503, FaultInfra},
	CodeSandboxDied:      {502, FaultInfra},
	CodeTimeout:          {504, FaultInfra},
	CodeInternal:         {500, FaultInfra},
	CodeBusy:             {503, FaultInfra},
	CodeDisplayError:     {502, FaultInfra},
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

// Retryable reports whether a job that failed with this code may be retried
// on a fresh env: only infrastructure failures are.
func (c Code) Retryable() bool { return c != "" && c.Fault() == FaultInfra }

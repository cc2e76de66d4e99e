package aci

import (
	"testing"
	"time"
)

func TestEveryCodeIsBlamed(t *testing.T) {
	all := []Code{CodeBadRequest, CodePayloadTooLarge, CodeBatchTooLarge, CodeUnauthorized, CodeNotFound,
		CodeInvalidAction, CodeUnknownVerb, CodeDialectError, CodeUnsupported, CodePoolExhausted,
		CodeSandboxDied, CodeTimeout, CodeEpisodeOver, CodeInternal, CodeScorerError, CodeAgentError,
		CodeBusy, CodeDisplayError, CodeTooLarge, CodeStaleElementRef, CodeCheckpointLimit, CodeChecksumMismatch}
	if len(all) != len(Codes) {
		t.Errorf("table has %d codes; want %d", len(Codes), len(all))
	}
	for _, c := range all {
		b, ok := Codes[c]
		if !ok || b.Status < 400 || b.Fault == "" {
			t.Errorf("%s: got %+v, %v; want a status and a fault", c, b, ok)
		}
	}
	for c, want := range map[Code]bool{CodeSandboxDied: true, CodeTimeout: true, CodeBusy: true,
		CodeInvalidAction: false, CodeAgentError: false, CodeScorerError: false, CodeBadRequest: false, "": false} {
		if got := c.Retryable(); got != want {
			t.Errorf("%q.Retryable() = %v; want %v", c, got, want)
		}
	}
	if CodeNotFound.ActionFault() != FaultAgent || CodeTimeout.ActionFault() != FaultInfra {
		t.Errorf("ActionFault: a request fault raised by an action is the agent's; infrastructure stays")
	}
}

func TestDurationsCheckedBeforeArithmetic(t *testing.T) {
	bad := []Action{
		{Verb: Wait, MS: -1}, {Verb: Wait, MS: Caps.WaitMS + 1}, {Verb: Wait, MS: 1 << 62},
		{Verb: Drag, DurationMS: -5}, {Verb: Drag, DurationMS: 1 << 62}, {Verb: Drag, DurationMS: Caps.DragMS + 1},
		{Verb: Click, DurationMS: 1 << 62},
	}
	for _, a := range bad {
		if _, err := StepDuration([]Action{a}); CodeOf(err) != CodeInvalidAction {
			t.Errorf("%+v: got %v; want invalid_action", a, err)
		}
	}
	over := []Action{{Verb: Wait, MS: Caps.WaitMS}, {Verb: Drag, DurationMS: Caps.DragMS}}
	if _, err := StepDuration(over); CodeOf(err) != CodeInvalidAction {
		t.Errorf("waits past the step budget: got %v; want invalid_action", err)
	}
	d, err := StepDuration([]Action{{Verb: Wait, MS: 100}, {Verb: Drag}, {Verb: Click}})
	if err != nil || d != 400*time.Millisecond {
		t.Errorf("got %v, %v; want 400ms", d, err)
	}
}

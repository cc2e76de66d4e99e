package trajectory

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

func TestAuditOrderAndFailures(t *testing.T) {
	one, zero := 1, 0
	tr := &Trajectory{
		Steps: []Step{
			{Index: 0, Actions: []aci.Action{{Verb: aci.Click}, {Verb: aci.LaunchApp, App: "xterm", Args: []string{"-e", "sh"}}}},
			{Index: 1, Actions: []aci.Action{{Verb: aci.ClipboardSet, Text: "hello"}, {Verb: aci.ClipboardGet}}},
			// The second action failed; the third never ran.
			{Index: 2, Actions: []aci.Action{{Verb: aci.Wait, MS: 1}, {Verb: aci.LaunchApp, App: "nope"}, {Verb: aci.ClipboardSet, Text: "never"}},
				Error: &aci.Error{Code: aci.CodeInvalidAction, Message: "app not allowed"}, Ran: new(int)},
		},
		Events: []Event{
			{Kind: EventPutFile, AfterStep: 0, Path: "in.txt", SHA256: "aa", Size: 3},
			{Kind: EventObserve, AfterStep: 1, Frame: "f"},
			{Kind: EventExec, AfterStep: 1, Argv: []string{"true"}, Exit: &zero},
			{Kind: EventGetFile, AfterStep: 3, Path: "out.txt", Error: "not_found"},
			{Kind: EventExec, AfterStep: 3, Shell: "exit 1", Exit: &one},
		},
	}
	*tr.Steps[2].Ran = 2
	got := Audit(tr)
	want := []Use{
		{By: UseTrainer, Kind: EventPutFile, Step: 0, Path: "in.txt", SHA256: "aa", Bytes: 3},
		{By: UseAgent, Kind: "launch_app", Step: 0, Argv: []string{"xterm", "-e", "sh"}},
		// after one agent step: between steps 0 and 1
		{By: UseTrainer, Kind: EventExec, Step: 1, Argv: []string{"true"}, Exit: &zero},
		{By: UseAgent, Kind: "clipboard_set", Step: 1, Bytes: 5},
		{By: UseAgent, Kind: "clipboard_get", Step: 1},
		{By: UseAgent, Kind: "launch_app", Step: 2, Argv: []string{"nope"}, Failed: true, Error: tr.Steps[2].Error.Error()},
		{By: UseTrainer, Kind: EventGetFile, Step: 3, Path: "out.txt", Failed: true, Error: "not_found"},
		{By: UseTrainer, Kind: EventExec, Step: 3, Shell: "exit 1", Exit: &one},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("audit:\n%s\nwant:\n%s", g, w)
	}
}

func TestAuditEmptyIsAList(t *testing.T) {
	b, _ := json.Marshal(Audit(&Trajectory{}))
	if string(b) != "[]" {
		t.Fatalf("an episode that used nothing audits as %s, want []", b)
	}
}

func TestVerlRowCarriesEnvelopeAndAudit(t *testing.T) {
	tr := &Trajectory{EpisodeID: "ep-1", Task: "t", NumTurns: 1,
		Envelope: &Envelope{Apps: []string{"xterm"}, Clipboard: true, Network: "none"},
		Steps:    []Step{{Index: 0, PromptIDs: []int{1}, ResponseIDs: []int{2}, Actions: []aci.Action{{Verb: aci.LaunchApp, App: "xterm"}}}},
	}
	row, err := VerlRow(tr)
	if err != nil {
		t.Fatal(err)
	}
	if env, ok := row.ExtraFields[FieldEnvelope].(*Envelope); !ok || env.Network != "none" {
		t.Fatalf("envelope field: %#v", row.ExtraFields[FieldEnvelope])
	}
	if uses, ok := row.ExtraFields[FieldAudit].([]Use); !ok || len(uses) != 1 || uses[0].Argv[0] != "xterm" {
		t.Fatalf("audit field: %#v", row.ExtraFields[FieldAudit])
	}
}

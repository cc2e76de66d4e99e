package envserver

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

func TestStepCoordsPrecedence(t *testing.T) {
	frame, norm := aci.Coords{Space: aci.CoordsFrame}, aci.Coords{Space: aci.CoordsNorm1000}
	cases := []struct {
		name          string
		step          any
		env, dialect  *aci.Coords
		want          string
		wantErrorCode aci.Code
	}{
		{name: "nothing is screen", want: aci.CoordsScreen},
		{name: "dialect default", dialect: &norm, want: aci.CoordsNorm1000},
		{name: "env over dialect", env: &frame, dialect: &norm, want: aci.CoordsFrame},
		{name: "step over env", step: "norm", env: &frame, dialect: &norm, want: aci.CoordsNorm},
		{name: "step image", step: map[string]any{"w": int8(100), "h": uint16(50)}, want: "image 100x50"},
		{name: "bad step coords", step: "pixels", wantErrorCode: aci.CodeBadRequest},
	}
	for _, c := range cases {
		got, err := stepCoords(&api.StepEnv{Coords: c.step}, c.env, c.dialect)
		if aci.CodeOf(err) != c.wantErrorCode || (err == nil && got.String() != c.want) {
			t.Errorf("%s: got %v, %v; want %s (error %q)", c.name, got, err, c.want, c.wantErrorCode)
		}
	}
}

// A step in frame coordinates on an env with no delivered frame is refused
// as the agent's invalid_action, naming the action; nothing is guessed.
func TestMapActionsWithoutDescriptor(t *testing.T) {
	acts := []aci.Action{{Verb: aci.Key, Keys: "a"}, {Verb: aci.Click, Target: aci.Px(10, 10)}, {Verb: aci.Click, Target: aci.Px(1, 1)}}
	rs := aci.NewResults(len(acts))
	i, err := mapActions(acts, aci.Coords{Space: aci.CoordsFrame}, nil)
	if aci.CodeOf(err) != aci.CodeInvalidAction || i != 1 {
		t.Fatalf("got action %d, %v; want invalid_action at action 1", i, err)
	}
	rs.Fail(i, err)
	want := []string{aci.StatusSkipped, string(aci.CodeInvalidAction), aci.StatusSkipped}
	for k := range rs {
		if rs[k].Status != want[k] {
			t.Errorf("results[%d] got %q; want %q", k, rs[k].Status, want[k])
		}
	}
	// A descriptor without a delivered size is no descriptor.
	if _, err := mapActions(acts[1:2], aci.Coords{Space: aci.CoordsNorm}, &aci.Display{W: 1280, H: 800}); aci.CodeOf(err) != aci.CodeInvalidAction {
		t.Errorf("empty descriptor: got %v; want invalid_action", err)
	}
	// Screen coordinates need none.
	if _, err := mapActions(acts, aci.Coords{Space: aci.CoordsScreen}, nil); err != nil {
		t.Errorf("screen coords without a descriptor: %v", err)
	}
	// A drag's to is mapped too.
	d := &aci.Display{W: 1280, H: 800, SourceRect: aci.Rect{X: 100, Y: 50, W: 800, H: 600}, Delivered: aci.Rect{W: 400, H: 300}}
	drag := []aci.Action{{Verb: aci.Drag, Target: aci.Px(10, 20), To: aci.Px(399, 299)}}
	if _, err := mapActions(drag, aci.Coords{Space: aci.CoordsFrame}, d); err != nil {
		t.Fatal(err)
	}
	if *drag[0].Target != *aci.Px(120, 90) || *drag[0].To != *aci.Px(898, 648) {
		t.Errorf("drag mapped to %+v → %+v; want (120,90) → (898,648)", *drag[0].Target, *drag[0].To)
	}
}

func TestActedBeforeObserve(t *testing.T) {
	ok, skipped := aci.ActionResult{Status: aci.StatusOK}, aci.ActionResult{Status: aci.StatusSkipped}
	bad := aci.ActionResult{Status: string(aci.CodeInvalidAction)}
	click, shot, done := aci.Action{Verb: aci.Click}, aci.Action{Verb: aci.Screenshot}, aci.Action{Verb: aci.Done}
	cases := []struct {
		acts []aci.Action
		rs   []aci.ActionResult
		want bool
	}{
		{[]aci.Action{shot}, []aci.ActionResult{ok}, false},
		{[]aci.Action{click, done}, []aci.ActionResult{ok, ok}, true},
		{[]aci.Action{click, shot}, []aci.ActionResult{ok, ok}, true},
		{[]aci.Action{click, click}, []aci.ActionResult{ok, bad}, true},
		{[]aci.Action{click, click}, []aci.ActionResult{bad, skipped}, false},
	}
	for i, c := range cases {
		if got := actedBeforeObserve(c.acts, c.rs); got != c.want {
			t.Errorf("case %d: got %v; want %v", i, got, c.want)
		}
	}
}

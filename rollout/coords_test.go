package rollout

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

func TestStepCoordsFollowTheFrame(t *testing.T) {
	shrunk := &api.Observe{Format: aci.FormatPNG, MaxLongEdge: 640}
	cropped := &api.Observe{Format: aci.FormatPNG, Scope: aci.ScopeActiveWindow}
	full := &api.Observe{Format: aci.FormatPNG}
	typed := Decision{Actions: []aci.Action{{Verb: aci.Click, Target: aci.Px(1, 2)}}}
	cases := []struct {
		o    *api.Observe
		d    Decision
		want any
	}{
		{shrunk, typed, aci.CoordsFrame},
		{cropped, typed, aci.CoordsFrame},
		{shrunk, Decision{Text: "pyautogui.click(1, 2)", Dialect: "pyautogui"}, aci.CoordsFrame},
		{shrunk, Decision{Text: "x", Dialect: "auto"}, nil}, // a family's own default stands
		{full, typed, nil},
		{nil, typed, nil},
	}
	for i, c := range cases {
		if got := stepCoords(c.o, c.d); got != c.want {
			t.Errorf("case %d: got %v; want %v", i, got, c.want)
		}
	}
}

package envserver_test

import (
	"bytes"
	"fmt"
	"image"
	_ "image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

// TestSetOfMark drives galculator through Set-of-Mark observations over
// real HTTP: the reset's frame carries numbered marks over the
// calculator's buttons and their table; a policy that clicks mark N for
// each digit button types that digit (the calculator's own display, read
// back from the tree, shows it), as does OSWorld's pyautogui.click(tag_N)
// text; a click on each mark presses inside its element's box; a mark the
// last observation did not draw,
// or one before any marked observation, is the agent's stale_element_ref;
// a raw frame or a diff tree with som is bad_request.
func TestSetOfMark(t *testing.T) {
	s := a11yServer(t)
	for _, bad := range []api.Observe{{Format: aci.FormatRaw, SoM: true}, {Format: aci.FormatPNG, A11y: aci.A11yDiff, SoM: true}} {
		if status, _, _ := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "galculator-compute"}}, Observe: &bad}, nil); status != 400 {
			t.Errorf("observe %+v: status %d; want 400 bad_request", bad, status)
		}
	}

	// Before any marked observation a mark names nothing.
	plain := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "galculator-compute"}}})
	res := oneStep(t, s, nil, api.StepEnv{EnvID: plain.Results[0].EnvID, Action: &aci.Action{Verb: aci.Click, Target: aci.MarkRef("1")}})
	if res.Info.Error == nil || res.Info.Error.Code != aci.CodeStaleElementRef {
		t.Errorf("a mark before any marked observation: %+v; want stale_element_ref", res.Info.Error)
	}
	closeEnvs(s, plain.Results[0].EnvID)

	som := &api.Observe{Format: aci.FormatPNG, SoM: true}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "galculator-compute"}}, Observe: som})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	if len(r.Results[0].Obs.Marks) == 0 {
		t.Fatalf("reset with som: no marks over %q", r.Results[0].Obs.TreeText)
	}
	// The tree is the active app's: bring the calculator forward.
	st := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{
		{Verb: aci.ActivateWindow, App: "galculator"}, {Verb: aci.Wait, MS: 300}, {Verb: aci.Key, Keys: "Escape"}}}}, Observe: som})
	obs := st.Results[0].Obs
	if len(obs.Marks) < 10 {
		t.Fatalf("galculator with som: %d marks over:\n%s", len(obs.Marks), obs.TreeText)
	}
	// The marked frame is a frame of its own, the screen's size, in the
	// reply's frames.
	data := st.Frames[obs.Frame]
	img, format, err := image.Decode(bytes.NewReader(data))
	if err != nil || format != "png" || img.Bounds().Dx() != obs.W || img.Bounds().Dy() != obs.H {
		t.Fatalf("marked frame: %v %s %v; want a %dx%d png", err, format, img.Bounds(), obs.W, obs.H)
	}
	if dir := os.Getenv("SHINKEN_UI_SHOTS"); dir != "" {
		os.WriteFile(filepath.Join(dir, "som-galculator.png"), data, 0o644)
	}
	digit := map[string]aci.MarkLabel{}
	for i, m := range obs.Marks {
		if m.N != i+1 || m.Ref == "" || m.Box.W <= 0 {
			t.Fatalf("mark %d: %+v", i, m)
		}
		if m.Role == "toggle button" && len(m.Name) == 1 && m.Name[0] >= '0' && m.Name[0] <= '9' {
			digit[m.Name] = m
		}
	}
	if len(digit) != 10 {
		t.Fatalf("marks of digit buttons: %v; want 0-9 among %+v", digit, obs.Marks)
	}

	// Click 7, 3, 9 by their marks; each step observes with marks again.
	typed := ""
	for _, d := range []string{"7", "3", "9"} {
		res := oneStep(t, s, som, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Click, Target: aci.MarkRef(strconv.Itoa(digit[d].N))}})
		if res.Info.Error != nil {
			t.Fatalf("click mark %d (%s): %v", digit[d].N, d, res.Info.Error)
		}
		typed += d
		if !strings.Contains(res.Obs.TreeText, typed) {
			t.Errorf("after clicking marks for %s the calculator shows no %q:\n%s", typed, typed, res.Obs.TreeText)
		}
		if len(res.Obs.Marks) == 0 {
			t.Fatalf("step with som: no marks")
		}
	}
	// OSWorld's Set-of-Mark text, as its som agents write it.
	text := fmt.Sprintf("```python\npyautogui.click(tag_%d)\n```", digit["5"].N)
	res = oneStep(t, s, som, api.StepEnv{EnvID: env, Text: &text, Dialect: "auto"})
	if res.Info.Error != nil || !strings.Contains(res.Obs.TreeText, typed+"5") {
		t.Errorf("text %q: error %v; want the calculator to show %s5:\n%s", text, res.Info.Error, typed, res.Obs.TreeText)
	}
	// Every mark, clicked by its number: the pointer that pressed ends in
	// the marked element's box (menus opened on the way are closed). The
	// task's step budget is 12: a fresh episode every 9 marks.
	marks := res.Obs.Marks
	latest := res.Obs.Marks
	fresh := func() {
		t.Helper()
		reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: "galculator-compute"}}, Observe: som})
		st := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{
			{Verb: aci.ActivateWindow, App: "galculator"}, {Verb: aci.Wait, MS: 300}}}}, Observe: som})
		latest = st.Results[0].Obs.Marks
	}
	for i, want := range marks {
		if i%9 == 0 {
			fresh()
		}
		n := ""
		for _, m := range latest { // the same element in the latest numbering
			if m.Role == want.Role && m.Name == want.Name && m.Box == want.Box {
				n = strconv.Itoa(m.N)
			}
		}
		if n == "" {
			t.Errorf("element %s %q lost its mark", want.Role, want.Name)
			continue
		}
		res = oneStep(t, s, som, api.StepEnv{EnvID: env, Actions: []aci.Action{
			{Verb: aci.Click, Target: aci.MarkRef(n)}, {Verb: aci.Key, Keys: "Escape"}}})
		latest = res.Obs.Marks
		p, b := res.Obs.Pointer, want.Box
		if res.Info.Error != nil || p[0] < b.X || p[0] >= b.X+b.W || p[1] < b.Y || p[1] >= b.Y+b.H {
			t.Errorf("click on mark %s (%s %q, box %+v): pointer at %v, error %v", n, want.Role, want.Name, b, p, res.Info.Error)
		}
	}
	res = oneStep(t, s, som, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Click, Target: aci.MarkRef("9999")}})
	if res.Info.Error == nil || res.Info.Error.Code != aci.CodeStaleElementRef || res.Terminated {
		t.Errorf("a mark never drawn: %+v; want the agent's stale_element_ref, the episode going on", res.Info.Error)
	}
}

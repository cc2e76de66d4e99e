package rollout

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
)

// TestOpenAIObserveA11y: with Observe a11y the model gets the tree's text
// and no image; with both, the tree and the image.
func TestOpenAIObserveA11y(t *testing.T) {
	tree := "app: \"mousepad\"\ne1 frame \"x\" (active)\n  e3 menu \"File\" [Actions: Click]\nfocus: none\n"
	png := []byte("\x89PNG\r\n\x1a\nfake")
	obs := &aci.Observation{Frame: "00112233445566778899aabbccddeeff", Format: aci.FormatPNG, TreeText: tree, Tree: "ab"}
	for _, c := range []struct {
		observe string
		images  int
	}{{ObserveA11y, 0}, {ObserveBoth, 1}} {
		llm := newFakeLLM(t, []string{"```python\npyautogui.click(element=\"e3\")\n```"})
		p := &OpenAI{URL: llm.URL + "/v1", Model: "m", Dialect: "pyautogui", Observe: c.observe}
		agent, err := p.Start(context.Background(), api.TaskInfo{ID: "t", Instruction: "open the menu"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		d, err := agent.Act(context.Background(), Turn{Step: 0, Obs: obs, Frame: png, Task: api.TaskInfo{Instruction: "open the menu"}})
		if err != nil || !strings.Contains(d.Text, `element="e3"`) {
			t.Fatalf("%s: decision %+v, %v", c.observe, d, err)
		}
		llm.mu.Lock()
		req, _ := json.Marshal(llm.requests[0])
		images := llm.images
		llm.mu.Unlock()
		if !strings.Contains(string(req), `e3 menu \"File\"`) || !strings.Contains(string(req), `pyautogui.click(element=\"e12\")`) {
			t.Errorf("%s: request lacks the tree text and how to use refs: %s", c.observe, req)
		}
		if images != c.images {
			t.Errorf("%s: %d image parts; want %d", c.observe, images, c.images)
		}
	}
	if ObserveTree(ObserveA11y) != aci.A11yFull || ObserveTree(ObserveFrame) != "" || CheckObserve("pixels") == nil {
		t.Error("observe tracks map wrongly")
	}
}

// TestScriptSettle: a scripted policy's steps settle with the script
// settle (it cannot look at the screen) unless the config names a settle;
// a model's policy keeps the config's observation as it is.
func TestScriptSettle(t *testing.T) {
	own := &aci.Settle{QuietMS: 100, MaxMS: 500}
	for _, c := range []struct {
		name   string
		policy Policy
		cfg    *api.Observe
		want   *aci.Settle
	}{
		{"scripted, no observe", &Scripted{}, nil, &configs.ScriptSettle},
		{"scripted, observe without settle", &Scripted{}, &api.Observe{Format: aci.FormatJPEG}, &configs.ScriptSettle},
		{"scripted, its own settle", &Scripted{}, &api.Observe{Settle: own}, own},
		{"a model", &Random{}, nil, nil},
		{"a wrapper that forwards", &countStarts{Policy: &Scripted{}}, nil, &configs.ScriptSettle},
		{"a wrapper of a model", &countStarts{Policy: &Random{}}, nil, nil},
	} {
		r := &runner{cfg: Config{Policy: c.policy, Observe: c.cfg}}
		o := r.observe("xterm-hello-file")
		var got *aci.Settle
		if o != nil {
			got = o.Settle
		}
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: settle %+v; want %+v", c.name, got, c.want)
		}
		if c.cfg != nil && o.Format != c.cfg.Format {
			t.Errorf("%s: format %q; want the config's %q", c.name, o.Format, c.cfg.Format)
		}
	}
}

package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/aci/dialect"
	"github.com/shinken-rl/shinken/envserver/api"
)

// TestOpenAIPolicyFamilies drives each model family through the
// chat-completions double: the request carries the family's prompt and
// the turn's coordinate space, and the reply goes to the server in the
// family's dialect with the declared space, where it parses into actions
// whose points land where the model meant on the screen.
func TestOpenAIPolicyFamilies(t *testing.T) {
	// A 1920x1080 screen delivered as a 1280x720 frame.
	obs := &aci.Observation{Frame: "00112233445566778899aabbccddeeff", Format: aci.FormatPNG, W: 1280, H: 720,
		Display: aci.Display{W: 1920, H: 1080, SourceRect: aci.Rect{W: 1920, H: 1080}, Delivered: aci.Rect{W: 1280, H: 720}}}
	for _, c := range []struct {
		dialect, coords string
		reply           string
		prompt          string // in the system prompt
		told            string // in the turn's text
		wire            any    // the step's coords; nil: the dialect's default, not sent
		point           string // where the click lands on the screen
	}{
		{dialect.UITARS, "", "Thought: click the icon\nAction: click(start_box='<|box_start|>(500,500)<|box_end|>')",
			"left_double(", "from 0 to 1000", nil, "960,540"},
		{dialect.UITARS, CoordsSmartResize, "Action: click(point='<point>644 364</point>')",
			"left_double(", "resized to 1288x728", map[string]any{"w": 1288, "h": 728}, "960,540"},
		{dialect.Qwen, "norm1000", "<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"left_click\", \"coordinate\": [500, 500]}}\n</tool_call>",
			"<tools>", "from 0 to 1000", "norm1000", "960,540"},
		{dialect.OpenAI, "", `[{"type": "computer_call", "call_id": "c1", "action": {"type": "click", "button": "left", "x": 640, "y": 360}}]`,
			"computer_call", "pixels of this 1280x720 screenshot", nil, "960,540"},
		{dialect.Anthropic, "frame", `[{"type": "tool_use", "id": "t1", "name": "computer", "input": {"action": "left_click", "coordinate": [640, 360]}}]`,
			"tool_use", "pixels of this 1280x720 screenshot", "frame", "960,540"},
		{dialect.OSWorld, "", "```python\npyautogui.click(960, 540)\n```",
			"pyautogui", "pixels of the 1920x1080 screen", nil, "960,540"},
		{dialect.OSWorld, "640x360", "```python\npyautogui.click(320, 180)\n```",
			"pyautogui", "resized to 640x360", map[string]any{"w": 640, "h": 360}, "960,540"},
	} {
		t.Run(c.dialect+"/"+c.coords, func(t *testing.T) {
			llm := newFakeLLM(t, []string{c.reply})
			p := &OpenAI{URL: llm.URL + "/v1", Model: "m", Dialect: c.dialect, Coords: c.coords}
			ctx := context.Background()
			agent, err := p.Start(ctx, api.TaskInfo{ID: "t", Instruction: "open it"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			d, err := agent.Act(ctx, Turn{Step: 0, Obs: obs, Frame: []byte("\x89PNG\r\n\x1a\nfake"), Task: api.TaskInfo{Instruction: "open it"}})
			if err != nil {
				t.Fatal(err)
			}
			llm.mu.Lock()
			req, _ := json.Marshal(llm.requests[0])
			llm.mu.Unlock()
			var sent struct {
				Messages []struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			json.Unmarshal(req, &sent)
			if len(sent.Messages) < 2 || !strings.Contains(string(sent.Messages[0].Content), jsonQuote(c.prompt)) {
				t.Errorf("system prompt lacks %q: %s", c.prompt, sent.Messages[0].Content)
			}
			if !strings.Contains(string(sent.Messages[1].Content), c.told) {
				t.Errorf("turn text does not say %q: %s", c.told, sent.Messages[1].Content)
			}
			if d.Dialect != c.dialect || d.Text != c.reply {
				t.Errorf("decision %s %q; want %s %q", d.Dialect, d.Text, c.dialect, c.reply)
			}
			if !reflect.DeepEqual(d.Coords, c.wire) {
				t.Errorf("step coords %#v; want %#v", d.Coords, c.wire)
			}
			// What the server will do with it.
			parsed, err := dialect.Parse(d.Dialect, d.Text)
			if err != nil {
				t.Fatal(err)
			}
			space := parsed.Coords
			if d.Coords != nil {
				if space, err = aci.ParseCoords(d.Coords); err != nil {
					t.Fatal(err)
				}
			}
			a := parsed.Actions[0]
			if err := space.MapAction(&a, &obs.Display); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%g,%g", a.Target.X, a.Target.Y); a.Verb != aci.Click || got != c.point {
				t.Errorf("%s lands at %s; want a click at %s", a.Verb, got, c.point)
			}
		})
	}
}

// TestOpenAIPolicyToolCalls: a server that parses tool calls out of the
// reply returns message.tool_calls; the qwen dialect reads them as they
// are, other dialects hand them to json with the model's own space.
func TestOpenAIPolicyToolCalls(t *testing.T) {
	obs := &aci.Observation{Format: aci.FormatPNG,
		Display: aci.Display{W: 1920, H: 1080, SourceRect: aci.Rect{W: 1920, H: 1080}, Delivered: aci.Rect{W: 1280, H: 720}}}
	calls := `[{"id": "call_1", "type": "function", "function": {"name": "computer_use", "arguments": "{\"action\": \"left_click\", \"coordinate\": [500, 500]}"}}]`
	for _, c := range []struct {
		dialect, wantDialect string
		wantCoords           any
	}{
		{dialect.Qwen, dialect.Qwen, nil},
		{dialect.Anthropic, dialect.JSON, "frame"},
		{dialect.UITARS, dialect.JSON, "norm1000"},
	} {
		llm := newFakeLLM(t, []string{toolCallsReply + calls})
		p := &OpenAI{URL: llm.URL + "/v1", Model: "m", Dialect: c.dialect}
		agent, err := p.Start(context.Background(), api.TaskInfo{ID: "t"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		d, err := agent.Act(context.Background(), Turn{Obs: obs})
		if err != nil {
			t.Fatal(err)
		}
		if d.Dialect != c.wantDialect || !reflect.DeepEqual(d.Coords, c.wantCoords) {
			t.Errorf("%s: decision dialect %s coords %v; want %s, %v", c.dialect, d.Dialect, d.Coords, c.wantDialect, c.wantCoords)
		}
		parsed, err := dialect.Parse(d.Dialect, d.Text)
		if err != nil || len(parsed.Actions) != 1 || parsed.Actions[0].Verb != aci.Click {
			t.Errorf("%s: the server would read %q as %v, %v", c.dialect, d.Text, parsed.Actions, err)
		}
	}
}

// jsonQuote is s as it appears inside a JSON string.
func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func TestSmartResize(t *testing.T) {
	for _, c := range []struct{ h, w, wh, ww int }{
		{720, 1280, 728, 1288},
		{1080, 1920, 1092, 1932},
		{768, 1024, 756, 1036},
		{20, 20, 56, 56},         // under the minimum area: scaled up
		{8000, 8000, 3584, 3584}, // over the maximum area: scaled down
	} {
		h, w, err := SmartResize(c.h, c.w)
		if err != nil || h != c.wh || w != c.ww {
			t.Errorf("SmartResize(%d, %d) = %d, %d, %v; want %d, %d", c.h, c.w, h, w, err, c.wh, c.ww)
		}
		if h%28 != 0 || w%28 != 0 || h*w > resizeMaxPixels || h*w < resizeMinPixels {
			t.Errorf("SmartResize(%d, %d) = %dx%d breaks the processor's bounds", c.h, c.w, w, h)
		}
	}
	if _, _, err := SmartResize(1, 500); err == nil {
		t.Error("SmartResize of a 500:1 strip succeeded")
	}
	for _, bad := range []string{"0x10", "axb", "bogus", "10x"} {
		if _, err := parseCoordsMode(bad); err == nil {
			t.Errorf("parseCoordsMode(%q) succeeded", bad)
		}
	}
}

package rollout

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

// fakeLLM is a test double of an OpenAI-compatible chat-completions server
// on real loopback HTTP. It answers each conversation's n-th turn with
// replies[n], and (like vLLM with return_token_ids) returns token ids from a
// toy tokenizer whose chat template makes every prompt extend the previous
// prompt + response, so a verl export of its episodes has no drift.
type fakeLLM struct {
	*httptest.Server
	replies []string

	mu       sync.Mutex
	requests []map[string]any
	images   int // image parts seen whose bytes are a PNG
}

const (
	tokEnd       = 1
	tokImage     = 2
	tokRoleBase  = 10 // + role index
	tokWordsBase = 1000
)

var roles = map[string]int{"system": 0, "user": 1, "assistant": 2}

func words(s string) []int {
	var ids []int
	for _, w := range strings.Fields(s) {
		h := fnv.New32a()
		h.Write([]byte(w))
		ids = append(ids, tokWordsBase+int(h.Sum32()%50000))
	}
	return ids
}

func newFakeLLM(t *testing.T, replies []string) *fakeLLM {
	f := &fakeLLM{replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeLLM) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	var req struct {
		Model          string `json:"model"`
		ReturnTokenIDs bool   `json:"return_token_ids"`
		Messages       []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	var raw map[string]any
	body := new(bytes.Buffer)
	body.ReadFrom(r.Body)
	if err := json.Unmarshal(body.Bytes(), &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	json.Unmarshal(body.Bytes(), &raw)
	var prompt []int
	turn := 0
	images := 0
	for _, m := range req.Messages {
		prompt = append(prompt, tokRoleBase+roles[m.Role])
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			prompt = append(prompt, words(s)...)
		} else {
			var parts []struct {
				Type     string `json:"type"`
				Text     string `json:"text"`
				ImageURL struct {
					URL string `json:"url"`
				} `json:"image_url"`
			}
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				http.Error(w, "bad content: "+err.Error(), http.StatusBadRequest)
				return
			}
			for _, p := range parts {
				switch p.Type {
				case "text":
					prompt = append(prompt, words(p.Text)...)
				case "image_url":
					b64, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,")
					png, err := base64.StdEncoding.DecodeString(b64)
					if ok && err == nil && bytes.HasPrefix(png, []byte("\x89PNG")) {
						images++
					}
					prompt = append(prompt, tokImage)
				}
			}
		}
		prompt = append(prompt, tokEnd)
		if m.Role == "assistant" {
			turn++
		}
	}
	prompt = append(prompt, tokRoleBase+roles["assistant"]) // generation prompt
	f.mu.Lock()
	f.requests = append(f.requests, raw)
	f.images += images
	f.mu.Unlock()
	reply := "```FAIL```"
	if turn < len(f.replies) {
		reply = f.replies[turn]
	}
	resp := words(reply)
	resp = append(resp, tokEnd)
	lp := make([]map[string]any, len(resp))
	for i := range lp {
		lp[i] = map[string]any{"token": "t", "logprob": -0.5}
	}
	msg := map[string]any{"role": "assistant", "content": reply}
	if calls, ok := strings.CutPrefix(reply, toolCallsReply); ok { // a server that parsed tool calls out
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": json.RawMessage(calls)}
	}
	out := map[string]any{
		"id": "cmpl", "object": "chat.completion", "model": req.Model,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message":  msg,
			"logprobs": map[string]any{"content": lp}}},
	}
	if req.ReturnTokenIDs {
		out["prompt_token_ids"] = prompt
		out["choices"].([]map[string]any)[0]["token_ids"] = resp
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// toolCallsReply prefixes a canned reply that the double returns as
// message.tool_calls (the JSON after the prefix) instead of content.
const toolCallsReply = "TOOL_CALLS:"

// TestOpenAIPolicyRequest drives the policy alone against the double and
// checks what it sends and what it records.
func TestOpenAIPolicyRequest(t *testing.T) {
	llm := newFakeLLM(t, []string{"```python\npyautogui.click(1, 2)\n```", "```DONE```"})
	p := &OpenAI{URL: llm.URL + "/v1", Model: "m", Dialect: "pyautogui", TokenIDs: true}
	ctx := context.Background()
	agent, err := p.Start(ctx, api.TaskInfo{ID: "t", Instruction: "do the thing"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	png := []byte("\x89PNG\r\n\x1a\nfake")
	obs := &aci.Observation{Frame: "00112233445566778899aabbccddeeff", Format: aci.FormatPNG}
	d0, err := agent.Act(ctx, Turn{Step: 0, Obs: obs, Frame: png, Task: api.TaskInfo{Instruction: "do the thing"}})
	if err != nil {
		t.Fatal(err)
	}
	if d0.Dialect != "pyautogui" || !strings.Contains(d0.Text, "pyautogui.click(1, 2)") {
		t.Errorf("decision %+v; want the canned pyautogui text", d0)
	}
	if d0.Tokens == nil || len(d0.Tokens.PromptIDs) == 0 || len(d0.Tokens.ResponseIDs) == 0 ||
		len(d0.Tokens.ResponseLogprobs) != len(d0.Tokens.ResponseIDs) || d0.Tokens.FinishReason != "stop" {
		t.Fatalf("tokens %+v; want prompt, response ids and one logprob per response id", d0.Tokens)
	}
	d1, err := agent.Act(ctx, Turn{Step: 1, Obs: obs, Frame: png, LastError: aci.Errorf(aci.CodeInvalidAction, "off screen")})
	if err != nil {
		t.Fatal(err)
	}
	// The second prompt extends the first prompt + response.
	ctxIDs := append(append([]int{}, d0.Tokens.PromptIDs...), d0.Tokens.ResponseIDs...)
	if !hasPrefixInts(d1.Tokens.PromptIDs, ctxIDs) {
		t.Errorf("second prompt %v does not extend %v", d1.Tokens.PromptIDs, ctxIDs)
	}
	llm.mu.Lock()
	defer llm.mu.Unlock()
	if llm.images != 3 { // one image in turn 0's request, two in turn 1's
		t.Errorf("PNG image parts received: %d; want 3", llm.images)
	}
	last, _ := json.Marshal(llm.requests[1])
	if !strings.Contains(string(last), "invalid_action") || !strings.Contains(string(last), "do the thing") {
		t.Errorf("second request lacks the instruction or the last error: %s", last)
	}
	if llm.requests[0]["return_token_ids"] != true || llm.requests[0]["logprobs"] != true {
		t.Errorf("request did not ask for token ids and logprobs: %v", llm.requests[0])
	}
}

func hasPrefixInts(s, p []int) bool {
	if len(s) < len(p) {
		return false
	}
	for i := range p {
		if s[i] != p[i] {
			return false
		}
	}
	return true
}

func TestOpenAIRetriesThenFails(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	p := &OpenAI{URL: srv.URL, Model: "m", Retries: 1}
	agent, err := p.Start(context.Background(), api.TaskInfo{ID: "t"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Act(context.Background(), Turn{}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("Act error %v; want a 503 failure", err)
	}
	if calls != 2 {
		t.Errorf("calls %d; want 2 (one retry)", calls)
	}
}

func TestParseKey(t *testing.T) {
	for _, j := range []Job{{"xterm-hello-file", 0, 0}, {"a", 12, 3}, {"x.y_z", 1 << 40, 7}} {
		got, ok := parseKey(j.Key())
		if !ok || got != j {
			t.Errorf("parseKey(%q) = %+v, %v; want %+v", j.Key(), got, ok, j)
		}
	}
	for _, k := range []string{"", "a", "a/1", "/1/2", "a/x/1", "a/1/y"} {
		if _, ok := parseKey(k); ok {
			t.Errorf("parseKey(%q) ok; want failure", k)
		}
	}
}

func TestRandomPolicyValid(t *testing.T) {
	p := &Random{}
	ag, _ := p.Start(context.Background(), api.TaskInfo{ID: "t"}, 3)
	obs := &aci.Observation{Display: aci.Display{W: 640, H: 480}}
	for i := range 200 {
		d, err := ag.Act(context.Background(), Turn{Step: i, Obs: obs})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range d.Actions {
			if !a.Verb.Known() {
				t.Fatalf("unknown verb %q", a.Verb)
			}
			if pt, ok := a.Point(); ok && (pt.X < 0 || pt.X >= 640 || pt.Y < 0 || pt.Y >= 480) {
				t.Fatalf("point %v off a 640x480 screen", pt)
			}
		}
	}
}

package envserver

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/vmihailenco/msgpack/v5"
)

// seedRequests are real requests as the Python client and rollout send them.
func seedRequests() [][]byte {
	x, y := 10.0, 20.0
	text := "pyautogui.click(10, 20)"
	seed := int64(7)
	reqs := []any{
		api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file", Seed: &seed}, {EnvID: "env-1", Task: "t"}}, Observe: &api.Observe{Format: "jpeg", Quality: 70, MaxLongEdge: 640}, Have: []string{"0123456789abcdef0123456789abcdef"}},
		api.StepRequest{Steps: []api.StepEnv{
			{EnvID: "env-1", Action: &aci.Action{Verb: aci.Click, X: &x, Y: &y}},
			{EnvID: "env-2", Actions: []aci.Action{{Verb: aci.TypeText, Text: "héllo"}, {Verb: aci.Key, Keys: "ctrl+s"}}},
			{EnvID: "env-3", Text: &text, Dialect: "pyautogui", Tokens: &api.Tokens{PromptIDs: []int{1, 2}, ResponseIDs: []int{3}, ResponseLogprobs: []float64{-0.1}}},
		}},
		api.ForkRequest{EnvID: "env-1", N: 8},
		api.CloseRequest{EnvIDs: []string{"env-1", "env-2"}},
	}
	var out [][]byte
	for _, r := range reqs {
		b, err := msgpack.Marshal(r)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

// FuzzDecodeRequest: any body decodes into a request or fails bad_request;
// nothing panics and no declared length sizes an allocation.
func FuzzDecodeRequest(f *testing.F) {
	for _, b := range seedRequests() {
		f.Add(b)
	}
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, v := range []any{&api.ResetRequest{}, &api.StepRequest{}, &api.ForkRequest{}, &api.CloseRequest{}} {
			if err := codecMsgpack.decode(b, v); err != nil && !decodeCode(aci.CodeOf(err)) {
				t.Fatalf("got code %s; want bad_request", aci.CodeOf(err))
			}
			_ = codecJSON.decode(b, v)
		}
	})
}

func TestDecodeSeeds(t *testing.T) {
	for i, b := range seedRequests() {
		if err := checkMsgpack(b); err != nil {
			t.Errorf("seed %d: %v", i, err)
		}
	}
	var st api.StepRequest
	if err := codecMsgpack.decode(seedRequests()[1], &st); err != nil || len(st.Steps) != 3 || st.Steps[1].Actions[0].Text != "héllo" {
		t.Errorf("step decode: got %+v, %v", st, err)
	}
}

func TestFrameCacheBound(t *testing.T) {
	c := newFrameCache(100)
	for i := 0; i < 10; i++ {
		c.put(frameKey{hash: string(rune('a' + i)), format: "png"}, make([]byte, 30))
	}
	n, size := c.stats()
	if size > 100 || n != 3 {
		t.Errorf("got %d entries, %d bytes; want 3 entries within 100 bytes", n, size)
	}
	if _, ok := c.getStored(frameKey{hash: "a", format: "png"}); ok {
		t.Errorf("oldest entry survived eviction")
	}
	if _, ok := c.getStored(frameKey{hash: "j", format: "png"}); !ok {
		t.Errorf("newest entry evicted")
	}
	if got := c.recent("png", 0, 2); len(got) != 2 || got[0] != "j" {
		t.Errorf("recent: got %v; want [j i]", got)
	}
	c.put(frameKey{hash: "big", format: "png"}, make([]byte, 101))
	if _, ok := c.getStored(frameKey{hash: "big", format: "png"}); ok {
		t.Errorf("a frame over the bound was cached")
	}
}

// decodeCode reports the codes a refused body may get.
func decodeCode(c aci.Code) bool {
	return c == aci.CodeBadRequest || c == aci.CodePayloadTooLarge || c == aci.CodeBatchTooLarge
}

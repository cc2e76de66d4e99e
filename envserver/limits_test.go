package envserver

import (
	"bytes"
	"encoding/binary"
	"runtime"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/vmihailenco/msgpack/v5"
)

// nilActionsBody is a step request whose envs each carry n nil actions:
// one byte on the wire each, a whole aci.Action once decoded.
func nilActionsBody(envs, n int) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x81, 0xa5})
	b.WriteString("steps")
	b.WriteByte(0xdc)
	binary.Write(&b, binary.BigEndian, uint16(envs))
	for range envs {
		b.Write([]byte{0x82, 0xa6})
		b.WriteString("env_id")
		b.Write([]byte{0xa1, 'e', 0xa7})
		b.WriteString("actions")
		b.WriteByte(0xdc)
		binary.Write(&b, binary.BigEndian, uint16(n))
		b.Write(bytes.Repeat([]byte{0xc0}, n))
	}
	return b.Bytes()
}

// allocated returns the bytes f allocates (averaged over a few runs).
func allocated(f func()) uint64 {
	const runs = 5
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / runs
}

// TestDecodeAllocationBounded: decoding allocates at most a small constant
// factor of the body, also for a body crafted so that each byte becomes a
// 200-byte action, which is refused before it is decoded.
func TestDecodeAllocationBounded(t *testing.T) {
	lim := DefaultLimits(1024, 64<<20)
	lim.MaxActionsPerStep = 1 << 16
	// Crafted: 64 envs x 4096 nil actions, ~262 KB that would decode to ~52 MB.
	body := nilActionsBody(64, 4096)
	var req api.StepRequest
	var err error
	got := allocated(func() { err = codecMsgpack.decodeWithin(body, &req, &lim) })
	if aci.CodeOf(err) != aci.CodePayloadTooLarge {
		t.Fatalf("nil-action body: got %v; want payload_too_large", err)
	}
	if got > uint64(len(body)) {
		t.Errorf("refusing a %d-byte crafted body allocated %d bytes; want less than the body", len(body), got)
	}
	// A body within the factor decodes, and allocates within it.
	body = nilActionsBody(4, 64)
	got = allocated(func() {
		req = api.StepRequest{}
		err = codecMsgpack.decodeWithin(body, &req, &lim)
	})
	if err != nil {
		t.Fatalf("small nil-action body: %v", err)
	}
	if bound := uint64(lim.MaxDecodeFactor)*uint64(len(body)) + decodeFloor; got > bound {
		t.Errorf("decoding %d bytes allocated %d; want at most %d (factor %d + %d)", len(body), got, bound, lim.MaxDecodeFactor, decodeFloor)
	}
	// A realistic full batch stays far inside the factor.
	var full api.StepRequest
	x, y := 10.0, 20.0
	for i := range 64 {
		full.Steps = append(full.Steps, api.StepEnv{EnvID: "env-" + strings.Repeat("x", i%8), Actions: []aci.Action{{Verb: aci.Click, X: &x, Y: &y}, {Verb: aci.TypeText, Text: "hello"}}})
	}
	body, _ = msgpack.Marshal(&full)
	got = allocated(func() {
		req = api.StepRequest{}
		err = codecMsgpack.decodeWithin(body, &req, &lim)
	})
	if err != nil {
		t.Fatalf("full batch: %v", err)
	}
	t.Logf("full batch: %d bytes decoded with %d bytes allocated (%.1fx)", len(body), got, float64(got)/float64(len(body)))
	if bound := uint64(lim.MaxDecodeFactor)*uint64(len(body)) + decodeFloor; got > bound {
		t.Errorf("full batch: allocated %d; want at most %d", got, bound)
	}
}

// TestFieldCaps: each cap of the limits table refuses a request over it,
// with the code the table says, in msgpack and in JSON.
func TestFieldCaps(t *testing.T) {
	lim := DefaultLimits(4, 0)
	act := func(a aci.Action) api.StepRequest {
		return api.StepRequest{Steps: []api.StepEnv{{EnvID: "e", Actions: []aci.Action{a}}}}
	}
	many := func(n int) []string { return make([]string, n) }
	cases := []struct {
		name string
		req  any
		code aci.Code
	}{
		{"batch", api.StepRequest{Steps: make([]api.StepEnv, 5)}, aci.CodeBatchTooLarge},
		{"close batch", api.CloseRequest{EnvIDs: many(5)}, aci.CodeBatchTooLarge},
		{"actions", api.StepRequest{Steps: []api.StepEnv{{EnvID: "e", Actions: make([]aci.Action, lim.MaxActionsPerStep+1)}}}, aci.CodePayloadTooLarge},
		{"have", api.StepRequest{Have: many(lim.MaxHave + 1)}, aci.CodePayloadTooLarge},
		{"text", act(aci.Action{Verb: aci.TypeText, Text: strings.Repeat("a", lim.MaxTextBytes+1)}), aci.CodePayloadTooLarge},
		{"chord", act(aci.Action{Verb: aci.Key, Keys: strings.Repeat("a+", lim.MaxKeyChord) + "a"}), aci.CodePayloadTooLarge},
		{"arg bytes", act(aci.Action{Verb: aci.LaunchApp, App: strings.Repeat("a", lim.MaxArgBytes+1)}), aci.CodePayloadTooLarge},
		{"args", act(aci.Action{Verb: aci.LaunchApp, App: "xterm", Args: many(lim.MaxArgs + 1)}), aci.CodePayloadTooLarge},
		{"tokens", api.StepRequest{Steps: []api.StepEnv{{EnvID: "e", Tokens: &api.Tokens{PromptIDs: make([]int, lim.MaxTokens+1)}}}}, aci.CodePayloadTooLarge},
	}
	for _, tc := range cases {
		for _, c := range []codec{codecMsgpack, codecJSON} {
			body, err := c.encode(tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var err2 error
			switch tc.req.(type) {
			case api.CloseRequest:
				err2 = c.decodeWithin(body, &api.CloseRequest{}, &lim)
			default:
				err2 = c.decodeWithin(body, &api.StepRequest{}, &lim)
			}
			if aci.CodeOf(err2) != tc.code {
				t.Errorf("%s (%s): got %v; want %s", tc.name, c.contentType(), err2, tc.code)
			}
		}
	}
	// At the caps, the same requests pass.
	ok := act(aci.Action{Verb: aci.Key, Keys: strings.Repeat("a+", lim.MaxKeyChord-1) + "a"})
	if body, _ := msgpack.Marshal(ok); codecMsgpack.decodeWithin(body, &api.StepRequest{}, &lim) != nil {
		t.Errorf("a chord of exactly max_key_chord keys was refused")
	}
}

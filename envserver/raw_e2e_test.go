package envserver_test

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest"
)

// TestRawFramesDelivered: raw frames cross the guest socket S2-compressed,
// are kept so, and are decoded into buffers a reply lends and hands back
// once written (docs/architecture.md, "Cost of a step"). Every raw frame a
// reply carries must still be exactly the pixels its hash names: two envs'
// different frames in one batch, and a resent step's stored reply after
// other raw replies have reused the buffers.
func TestRawFramesDelivered(t *testing.T) {
	s := server(t)
	raw := &api.Observe{Format: aci.FormatRaw}
	task := api.ResetEnv{Task: "xterm-hello-file"}
	r := reset(t, s, api.ResetRequest{Observe: raw, Envs: []api.ResetEnv{task, task, task}})
	a, b, c := r.Results[0].EnvID, r.Results[1].EnvID, r.Results[2].EnvID
	defer closeEnvs(s, a, b, c)
	check := func(what string, rep *api.BatchReply, i int) string {
		t.Helper()
		res := rep.Results[i]
		if res.Error != nil || res.Obs == nil {
			t.Fatalf("%s: %+v", what, res)
		}
		o := res.Obs
		data := rep.Frames[o.Frame]
		if o.Format != aci.FormatRaw || len(data) != o.W*o.H*3 {
			t.Fatalf("%s: format %q, %d bytes for %dx%d; want raw RGB24", what, o.Format, len(data), o.W, o.H)
		}
		if h := guest.FrameHash(data, o.W, o.H); h != o.Frame {
			t.Fatalf("%s: delivered pixels hash to %s; the observation names %s", what, h, o.Frame)
		}
		return o.Frame
	}
	check("reset env a", r, 0)

	typed := func(env, id, text string) api.StepEnv {
		return api.StepEnv{EnvID: env, RequestID: id, Action: &aci.Action{Verb: aci.TypeText, Text: text}}
	}
	both := step(t, s, api.StepRequest{Observe: raw, Steps: []api.StepEnv{typed(a, "a-1", "echo one"), typed(b, "b-1", "echo two two")}})
	fa, fb := check("batch env a", both, 0), check("batch env b", both, 1)
	if fa == fb {
		t.Fatalf("envs typing different text show one frame %s", fa)
	}
	// Envs b and c's further raw steps reuse the lent buffers; env a's
	// resent step must still get its own frame.
	for i, text := range []string{" three", " four", " five"} {
		rep := step(t, s, api.StepRequest{Observe: raw, Steps: []api.StepEnv{typed(b, "b-"+text, text), typed(c, "c-"+text, "echo"+text)}})
		check("env b step", rep, 0)
		check("env c step", rep, 1)
		again := step(t, s, api.StepRequest{Observe: raw, Steps: []api.StepEnv{typed(a, "a-1", "echo one")}})
		if got := check("resent step of env a", again, 0); got != fa || again.Results[0].Info.Step != 1 {
			t.Fatalf("resend %d of env a's step: frame %s, step %d; want the stored %s, step 1", i, got, again.Results[0].Info.Step, fa)
		}
	}
}

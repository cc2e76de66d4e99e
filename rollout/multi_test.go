package rollout

import (
	"net"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// deadURL is the URL of a loopback port nothing listens on.
func deadURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

// TestServersSpreadAndSurvive runs the batch runner over two real env
// servers and a dead URL, then loses one server (its network path, a proxy,
// is closed) under live envs.
func TestServersSpreadAndSurvive(t *testing.T) {
	if testing.Short() {
		t.Skip("boots real sandboxes")
	}
	a := servertest.Start(t, servertest.Options{Pool: 2, Token: "tok"})
	b := servertest.Start(t, servertest.Options{Pool: 2, Token: "tok"})
	bu, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(bu))
	defer proxy.Close()
	s, err := NewServers([]string{a.URL, proxy.URL, deadURL(t)}, "tok", nil)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := configs.LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	id := "xterm-hello-file"
	ctx := runCtx(t)

	t.Run("RunnerSpreadsJobs", func(t *testing.T) {
		sum, err := Run(ctx, Config{Client: s, Policy: &Scripted{Tasks: tasks}, Tasks: []string{id}, Seeds: 4,
			Concurrency: 4, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Passed != 4 {
			t.Fatalf("passed %d of 4 (%v); want all: the dead URL costs nothing", sum.Passed, sum.ExitReasons)
		}
		on := map[int]int{}
		for _, r := range sum.Results {
			on[s.episodes[r.EpisodeID]]++
		}
		if on[0] == 0 || on[1] == 0 || on[2] != 0 {
			t.Errorf("episodes per server %v; want some on each live server, none on the dead one", on)
		}
		if l := s.Load(); l[0] != 0 || l[1] != 0 || l[2] != 0 {
			t.Errorf("load after the run %v; want every env closed", l)
		}
	})

	t.Run("ForkStaysOnTheParentsServer", func(t *testing.T) {
		rep, err := s.Reset(ctx, &api.ResetRequest{Envs: []api.ResetEnv{{Task: id}}})
		if err != nil || rep.Results[0].Error != nil {
			t.Fatalf("reset: %v %v", err, rep)
		}
		parent := rep.Results[0].EnvID
		kids, err := s.Fork(ctx, &api.ForkRequest{EnvID: parent, N: 2})
		if err != nil {
			if aci.CodeOf(err) == aci.CodeUnsupported {
				t.Skip("the provider cannot fork")
			}
			t.Fatal(err)
		}
		ids := []string{parent}
		for _, k := range kids.Results {
			if k.Error != nil || s.ServerOf(k.EnvID) != s.ServerOf(parent) {
				t.Errorf("child %s on server %d (err %v); want the parent's %d", k.EnvID, s.ServerOf(k.EnvID), k.Error, s.ServerOf(parent))
			}
			ids = append(ids, k.EnvID)
		}
		if err := s.Close(ctx, ids...); err != nil {
			t.Error(err)
		}
	})

	t.Run("LostServerFailsOnlyItsEnvs", func(t *testing.T) {
		rep, err := s.Reset(ctx, &api.ResetRequest{Envs: []api.ResetEnv{{Task: id}, {Task: id}}})
		if err != nil {
			t.Fatal(err)
		}
		var onA, onB string
		for _, r := range rep.Results {
			if r.Error != nil {
				t.Fatalf("reset: %v", r.Error)
			}
			switch s.ServerOf(r.EnvID) {
			case 0:
				onA = r.EnvID
			case 1:
				onB = r.EnvID
			}
		}
		if onA == "" || onB == "" {
			t.Fatalf("two new envs placed %v; want one per live server", s.Load())
		}
		proxy.CloseClientConnections()
		proxy.Close()
		wait := aci.Action{Verb: aci.Wait, MS: 10}
		st, err := s.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: onA, Action: &wait}, {EnvID: onB, Action: &wait}}})
		if err != nil {
			t.Fatal(err)
		}
		if st.Results[0].Error != nil || st.Results[0].Info == nil || st.Results[0].Info.Step != 1 {
			t.Errorf("env on the live server: %+v; want its step", st.Results[0])
		}
		if e := st.Results[1].Error; e == nil || e.Code != aci.CodeSandboxDied || !isLost(e) {
			t.Errorf("env on the lost server: error %v; want sandbox_died naming the server", e)
		}
		if _, err := s.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: onB, Action: &wait}}}); aci.CodeOf(err) != aci.CodeSandboxDied {
			t.Errorf("one env on the lost server: %v; want sandbox_died for the call", err)
		}
		fresh, err := s.Reset(ctx, &api.ResetRequest{Envs: []api.ResetEnv{{Task: id}}})
		if err != nil || fresh.Results[0].Error != nil || s.ServerOf(fresh.Results[0].EnvID) != 0 {
			t.Errorf("a new env after the loss: %v %+v on server %d; want it on the live one", err, fresh, s.ServerOf(fresh.Results[0].EnvID))
		}
		s.Close(ctx, onA, onB, fresh.Results[0].EnvID)
	})
}

package envserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/vmihailenco/msgpack/v5"
)

// wantCode asserts a whole-request failure with the given code and status.
func wantCode(t *testing.T, name string, status int, err error, code aci.Code) {
	t.Helper()
	e, ok := err.(*aci.Error)
	if !ok || e.Code != code {
		t.Errorf("%s: got %v (status %d); want %s", name, err, status, code)
		return
	}
	if status != code.HTTPStatus() {
		t.Errorf("%s: got status %d; want %d", name, status, code.HTTPStatus())
	}
}

func mp(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestBadInput(t *testing.T) {
	s := server(t)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-sort-names"}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)

	whole := []struct {
		name, path, ctype string
		body              []byte
		code              aci.Code
	}{
		{"empty body", "/v1/step", "application/msgpack", nil, aci.CodeBadRequest},
		{"garbage msgpack", "/v1/step", "application/msgpack", []byte{0xc1, 0x00, 0xff}, aci.CodeBadRequest},
		{"huge declared array", "/v1/step", "application/msgpack", append([]byte{0x81, 0xa5, 's', 't', 'e', 'p', 's', 0xdd, 0x7f, 0xff, 0xff, 0xff}, 0x80), aci.CodeBadRequest},
		{"huge declared string", "/v1/reset", "application/msgpack", []byte{0x81, 0xa4, 'e', 'n', 'v', 's', 0xdb, 0x7f, 0xff, 0xff, 0xff}, aci.CodeBadRequest},
		{"trailing bytes", "/v1/close", "application/msgpack", append(mp(api.CloseRequest{EnvIDs: []string{"x"}}), 0x01), aci.CodeBadRequest},
		{"malformed json", "/v1/step", "application/json", []byte(`{"steps": [`), aci.CodeBadRequest},
		{"unknown field", "/v1/step", "application/json", []byte(`{"stepz": []}`), aci.CodeBadRequest},
		{"empty batch", "/v1/step", "application/msgpack", mp(api.StepRequest{}), aci.CodeBadRequest},
		{"batch too large", "/v1/step", "application/msgpack", mp(api.StepRequest{Steps: make([]api.StepEnv, 65)}), aci.CodeBatchTooLarge},
		{"duplicate env", "/v1/step", "application/msgpack", mp(api.StepRequest{Steps: []api.StepEnv{{EnvID: env}, {EnvID: env}}}), aci.CodeBadRequest},
		{"bad observe format", "/v1/step", "application/msgpack", mp(api.StepRequest{Steps: []api.StepEnv{{EnvID: env}}, Observe: &api.Observe{Format: "gif"}}), aci.CodeBadRequest},
		{"payload too large", "/v1/step", "application/msgpack", bytes.Repeat([]byte{0}, 9<<20), aci.CodePayloadTooLarge},
		{"fork unknown env", "/v1/fork", "application/msgpack", mp(api.ForkRequest{EnvID: "env-nope", N: 1}), aci.CodeNotFound},
		{"fork zero", "/v1/fork", "application/msgpack", mp(api.ForkRequest{EnvID: env, N: 0}), aci.CodeBadRequest},
		{"no route", "/v1/teleport", "application/msgpack", mp(map[string]int{}), aci.CodeNotFound},
	}
	for _, c := range whole {
		status, _, err := s.Raw(c.path, c.ctype, c.body, nil)
		wantCode(t, c.name, status, err, c.code)
	}

	// Per-slot errors: the request succeeds, the slot carries the code.
	x, y := 99999.0, 5.0
	slots := []struct {
		name string
		st   api.StepEnv
		code aci.Code
		// agent errors land in info.error with an observation; the rest in the slot
		agent bool
	}{
		{"unknown env", api.StepEnv{EnvID: "env-nope", Action: &aci.Action{Verb: aci.Wait}}, aci.CodeNotFound, false},
		{"no action", api.StepEnv{EnvID: env}, aci.CodeBadRequest, false},
		{"unknown verb", api.StepEnv{EnvID: env, Action: &aci.Action{Verb: "teleport"}}, aci.CodeUnknownVerb, true},
		{"exec is not an agent verb", api.StepEnv{EnvID: env, Action: &aci.Action{Verb: "exec", Text: "rm -rf /"}}, aci.CodeUnknownVerb, true},
		{"off-screen click", api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Click, X: &x, Y: &y}}, aci.CodeInvalidAction, true},
		{"norm out of range", api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Click, Target: aci.Norm(1.5, 0.5)}}, aci.CodeInvalidAction, true},
		{"bad dialect text", api.StepEnv{EnvID: env, Text: strp("pyautogui.teleport(1, 2)"), Dialect: "pyautogui"}, aci.CodeDialectError, true},
		// A model asking for what a desktop cannot do is the agent's step.
		{"a shell tool in model text", api.StepEnv{EnvID: env, Text: strp(`{"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}`), Dialect: "auto"}, aci.CodeUnsupported, true},
		{"a target that needs grounding", api.StepEnv{EnvID: env, Text: strp(`agent.click("The Save button", 1, "left")`), Dialect: "auto"}, aci.CodeUnsupported, true},
		{"an unknown dialect name", api.StepEnv{EnvID: env, Text: strp("click"), Dialect: "klingon"}, aci.CodeBadRequest, false},
	}
	for _, c := range slots {
		var out api.BatchReply
		if _, _, err := s.Call("/v1/step", api.StepRequest{Steps: []api.StepEnv{c.st}}, &out); err != nil {
			t.Errorf("%s: whole request failed: %v", c.name, err)
			continue
		}
		res := out.Results[0]
		var got *aci.Error
		if c.agent {
			if res.Info != nil {
				got = res.Info.Error
			}
			if res.Obs == nil {
				t.Errorf("%s: agent error without an observation", c.name)
			}
		} else {
			got = res.Error
		}
		if got == nil || got.Code != c.code {
			t.Errorf("%s: got %+v; want %s", c.name, got, c.code)
		}
	}

	var rr api.BatchReply
	if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "no-such-task"}}}, &rr); err != nil || rr.Results[0].Error == nil || rr.Results[0].Error.Code != aci.CodeNotFound {
		t.Errorf("unknown task: got %+v, %v; want not_found in the slot", rr.Results, err)
	}
	for _, id := range []string{"ep-nope", "..%2F..%2Fetc%2Fpasswd", "%2E%2E"} {
		r, err := http.Get(s.URL + "/v1/episodes/" + id)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 404 {
			t.Errorf("episode %q: got status %d; want 404 not_found", id, r.StatusCode)
		}
	}
	resp := getBody(t, s, "/v1/spec")
	var spec api.Spec
	if err := msgpack.Unmarshal([]byte(resp), &spec); err != nil {
		t.Fatalf("spec: %v", err)
	}
	if spec.Protocol != api.Protocol || len(spec.Tasks) != len(s.Tasks) || spec.Pool.Provider != "process" {
		t.Errorf("spec: got %+v", spec)
	}
	if !strings.Contains(strings.Join(spec.Verbs, " "), "double_click") {
		t.Errorf("spec verbs: got %v", spec.Verbs)
	}
}

func strp(s string) *string { return &s }

// TestAuth: a server with a token refuses requests without it, and a
// non-loopback listen address without a token is refused outright.
func TestAuth(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Token: "s3cret"})
	body, _ := json.Marshal(api.CloseRequest{EnvIDs: []string{"x"}})
	good := *s
	if _, _, err := good.Raw("/v1/close", "application/json", body, nil); err != nil {
		t.Errorf("with token: %v", err)
	}
	bad := *s
	bad.Token = "wrong"
	status, _, err := bad.Raw("/v1/close", "application/json", body, nil)
	wantCode(t, "wrong token", status, err, aci.CodeUnauthorized)
	bad.Token = ""
	status, _, err = bad.Raw("/v1/close", "application/json", body, nil)
	wantCode(t, "no token", status, err, aci.CodeUnauthorized)
	if err := s.Stack.Serve("0.0.0.0:0", ""); err == nil {
		t.Errorf("listening beyond loopback without a token: got no error")
	}
}

// TestIdleEnvClosed: an env whose client went quiet past the idle TTL is
// closed and its sandbox released.
func TestIdleEnvClosed(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) { c.IdleTTL = configs.Duration(time.Second) }})
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env := r.Results[0].EnvID
	deadline := time.Now().Add(30 * time.Second)
	for {
		var out api.BatchReply
		time.Sleep(50 * time.Millisecond) // polls the env table for the reaper's close
		if _, ok := s.Server.EnvSandbox(env); !ok {
			if _, _, err := s.Call("/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Wait}}}}, &out); err != nil || out.Results[0].Error == nil || out.Results[0].Error.Code != aci.CodeNotFound {
				t.Errorf("step on a reaped env: got %+v, %v; want not_found", out.Results, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("env %s still open 30 s after a 1 s idle TTL", env)
		}
	}
}

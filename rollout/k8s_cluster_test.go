package rollout

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// TestK8sCluster runs K8sServers against a real kube-apiserver (make
// test-k8s starts it and runs this through deploy/kubernetes/test): pod
// objects whose status is set as a kubelet would, pointing at real
// envservers on loopback (pods go-*: the Python discovery test's a, b and c
// may still be terminating in the same namespace). Skipped without
// $SHINKEN_K8S_KUBECONFIG.
func TestK8sCluster(t *testing.T) {
	kc := os.Getenv("SHINKEN_K8S_KUBECONFIG")
	if kc == "" {
		t.Skip("make test-k8s runs this against a real kube-apiserver")
	}
	const ns, label = "shinken", "shinken-test=go-discovery"
	kubectl := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(os.Getenv("SHINKEN_K8S_KUBECTL"), append([]string{"--kubeconfig", kc}, args...)...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	makePod := func(name, u string, ready bool) {
		t.Helper()
		port := u[strings.LastIndexByte(u, ':')+1:]
		p, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]string{"shinken-test": "go-discovery"}},
			"spec": map[string]any{"nodeName": "node-1", "automountServiceAccountToken": false,
				"containers": []any{map[string]any{"name": "envserver", "image": "shinken-envserver:latest",
					"ports": []any{map[string]any{"name": "http", "containerPort": json.Number(port)}}}}}})
		kubectl(string(p), "create", "-f", "-")
		st := "True"
		if !ready {
			st = "False"
		}
		kubectl("", "patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge", "-p",
			`{"status":{"phase":"Running","podIP":"127.0.0.1","podIPs":[{"ip":"127.0.0.1"}],"hostIP":"127.0.0.1",`+
				`"conditions":[{"type":"Ready","status":"`+st+`"}]}}`)
	}
	cleanup := func() {
		exec.Command(os.Getenv("SHINKEN_K8S_KUBECTL"), "--kubeconfig", kc, "delete", "pods", "-n", ns, "-l", label,
			"--force", "--grace-period=0", "--ignore-not-found").Run()
	}
	cleanup()
	t.Cleanup(cleanup)

	a := servertest.Start(t, servertest.Options{Pool: 1, Token: "tok"})
	b := servertest.Start(t, servertest.Options{Pool: 1, Token: "tok"})
	bu, _ := url.Parse(b.URL)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(bu)) // b's network path, cut below
	defer proxy.Close()
	makePod("go-a", a.URL, true)
	makePod("go-b", proxy.URL, true)
	makePod("go-c-unready", "http://127.0.0.1:1", false)

	// The trainer's service account token (components/client-rbac), the
	// CA by path: what a trainer outside the cluster has.
	kapi, err := KubeconfigAPI(os.Getenv("SHINKEN_K8S_TOKEN_KUBECONFIG"), "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := runCtx(t)
	k, err := NewK8sServers(ctx, "k8s://"+ns+"/"+label, "tok", kapi, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := k.InPlacement(); !slices.Equal(got, []string{a.URL, proxy.URL}) {
		t.Fatalf("servers %v; want a's and b's", got)
	}
	if _, err := DiscoverK8s(ctx, "k8s://kube-system/"+label, kapi); !IsDiscoveryError(err) || !strings.Contains(err.Error(), "403") {
		t.Errorf("another namespace with the trainer's token: %v; want 403", err)
	}

	id := "xterm-hello-file"
	reset := func(n int) []string {
		t.Helper()
		envs := make([]api.ResetEnv, n)
		for i := range envs {
			envs[i] = api.ResetEnv{Task: id}
		}
		rep, err := k.Reset(ctx, &api.ResetRequest{Envs: envs})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rep.Results {
			if r.Error != nil {
				t.Fatalf("reset: %v", r.Error)
			}
			ids = append(ids, r.EnvID)
		}
		return ids
	}
	ids := reset(2)
	on := map[string]string{}
	urls := k.URLs()
	for _, e := range ids {
		on[e] = urls[k.ServerOf(e)]
	}
	if on[ids[0]] == on[ids[1]] {
		t.Fatalf("two envs on one server %v; want them spread", on)
	}
	wait := aci.Action{Verb: aci.Wait, MS: 10}
	step := func(ids []string) *api.BatchReply {
		t.Helper()
		req := &api.StepRequest{}
		for _, e := range ids {
			req.Steps = append(req.Steps, api.StepEnv{EnvID: e, Action: &wait})
		}
		rep, err := k.Step(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for _, r := range step(ids).Results {
		if r.Error != nil {
			t.Fatalf("step: %v", r.Error)
		}
	}

	// b's pod goes (as at a scale-down), its server's path is cut; a new
	// pod c comes. The failure lists the pods again: c takes new envs.
	c := servertest.Start(t, servertest.Options{Pool: 1, Token: "tok"})
	kubectl("", "delete", "pod", "go-b", "-n", ns, "--wait=false")
	makePod("go-c", c.URL, true)
	proxy.CloseClientConnections()
	proxy.Close()
	lostAt := time.Now()
	for i, r := range step(ids).Results {
		if on[ids[i]] == proxy.URL {
			if r.Error == nil || r.Error.Code != aci.CodeSandboxDied || !isLost(r.Error) {
				t.Errorf("env on the deleted pod: %+v; want sandbox_died naming its server", r.Error)
			}
		} else if r.Error != nil {
			t.Errorf("env on a: %v; want its step", r.Error)
		}
	}
	more := reset(2)
	t.Logf("from the lost step to 2 new envs placed on the pods found again: %.0f ms", float64(time.Since(lostAt).Microseconds())/1000)
	urls = k.URLs()
	var placed []string
	for _, e := range more {
		placed = append(placed, urls[k.ServerOf(e)])
	}
	want := []string{a.URL, c.URL}
	slices.Sort(placed)
	slices.Sort(want)
	if !slices.Equal(placed, want) {
		t.Errorf("new envs on %v; want one on a, one on c (b's pod is being deleted)", placed)
	}
	if got := k.InPlacement(); !slices.Equal(got, []string{a.URL, c.URL}) {
		t.Errorf("servers in placement %v; want a's and c's", got)
	}
	var alive []string
	for _, e := range ids {
		if on[e] == a.URL {
			alive = append(alive, e)
		}
	}
	if err := k.Close(context.Background(), append(alive, more...)...); err != nil {
		t.Error(err)
	}
}

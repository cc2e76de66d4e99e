package rollout

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

func TestParseK8sURL(t *testing.T) {
	for _, c := range []struct {
		in   string
		want K8sTarget
	}{
		{"k8s://shinken/app.kubernetes.io/name=shinken-envserver", K8sTarget{"shinken", "app.kubernetes.io/name=shinken-envserver", "http"}},
		{"k8s://ns/tier%20in%20(a,b)?port=metrics", K8sTarget{"ns", "tier in (a,b)", "metrics"}},
		{"k8s://ns/a=b?port=8701", K8sTarget{"ns", "a=b", "8701"}},
	} {
		got, err := ParseK8sURL(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseK8sURL(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if back, err := ParseK8sURL(got.String()); err != nil || back != got {
			t.Errorf("%q: String %q parses to %+v, %v", c.in, got.String(), back, err)
		}
	}
	for _, bad := range []string{"http://x", "k8s://ns", "k8s://ns/", "k8s:///a=b", "k8s://Ns/a=b", "k8s://-n/a=b",
		"k8s://ns/a=b?port=", "k8s://ns/a=b?port=0", "k8s://ns/a=b?port=70000", "k8s://ns/a=b?x=1"} {
		if _, err := ParseK8sURL(bad); err == nil {
			t.Errorf("ParseK8sURL(%q) accepted", bad)
		}
	}
}

// pod is a pod object as the API returns it.
func pod(name, uid, ip string, port int, hostNet, ready bool, phase string, deleting bool) map[string]any {
	meta := map[string]any{"name": name, "uid": uid}
	if deleting {
		meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	}
	st := "False"
	if ready {
		st = "True"
	}
	return map[string]any{
		"metadata": meta,
		"spec": map[string]any{"hostNetwork": hostNet, "containers": []any{map[string]any{
			"ports": []any{map[string]any{"name": "http", "containerPort": port}}}}},
		"status": map[string]any{"phase": phase, "podIP": ip, "hostIP": "10.9.9.9",
			"conditions": []any{map[string]any{"type": "Ready", "status": st}}},
	}
}

func TestReadyServers(t *testing.T) {
	items := []any{
		pod("b", "u2", "10.0.0.2", 8700, false, true, "Running", false),
		pod("a", "u1", "10.0.0.1", 8700, false, true, "Running", false),
		pod("c-unready", "u3", "10.0.0.3", 8700, false, false, "Running", false),
		pod("d-pending", "u4", "", 8700, false, false, "Pending", false),
		pod("e-deleting", "u5", "10.0.0.5", 8700, false, true, "Running", true),
		pod("f-host", "u6", "10.0.0.6", 18701, true, true, "Running", false),
		pod("g-same-url", "u7", "10.0.0.1", 8700, false, true, "Running", false),
	}
	b, _ := json.Marshal(map[string]any{"items": items})
	var l PodList
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	got := ReadyServers(&l, "http")
	want := []ReadyServer{{Pod: "a", UID: "u1", URL: "http://10.0.0.1:8700"}, {Pod: "b", UID: "u2", URL: "http://10.0.0.2:8700"},
		{Pod: "f-host", UID: "u6", URL: "http://10.9.9.9:18701"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadyServers = %+v; want %+v", got, want)
	}
	if got := ReadyServers(&l, "9000"); len(got) != 3 || got[0].URL != "http://10.0.0.1:9000" {
		t.Errorf("by number: %+v", got)
	}
	if got := ReadyServers(&l, "metrics"); len(got) != 0 {
		t.Errorf("no such port name: %+v", got)
	}
}

// kubectlConfig is a kubeconfig as kubectl config set-* writes it.
const kubectlConfig = `apiVersion: v1
clusters:
- cluster:
    certificate-authority: pki/ca.crt
    server: %s
  name: test
contexts:
- context:
    cluster: test
    namespace: shinken
    user: trainer
  name: test
- context:
    cluster: test
    user: plugin
  name: plugin
current-context: test
kind: Config
preferences: {}
users:
- name: trainer
  user:
    token: "tok-123" # quoted
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: gke-gcloud-auth-plugin
`

// fakeAPI is a TLS API server that answers the pod list of namespace
// shinken with what pods returns, checking the bearer token.
type fakeAPI struct {
	*httptest.Server
	mu    sync.Mutex
	pods  []any
	calls int
	fail  bool
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{}
	f.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls++
		if r.Header.Get("Authorization") != "Bearer tok-123" {
			w.WriteHeader(401)
			fmt.Fprint(w, `{"kind":"Status","message":"Unauthorized"}`)
			return
		}
		if f.fail || r.URL.Path != "/api/v1/namespaces/shinken/pods" || r.URL.Query().Get("labelSelector") != "app=env" {
			w.WriteHeader(403)
			fmt.Fprintf(w, `{"kind":"Status","message":"forbidden: %s"}`, r.URL.Path)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"kind": "PodList", "items": f.pods})
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) set(pods ...any) {
	f.mu.Lock()
	f.pods = pods
	f.mu.Unlock()
}

func TestKubeconfigAndAPI(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "pki"), 0o755)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.Certificate().Raw})
	os.WriteFile(filepath.Join(dir, "pki", "ca.crt"), ca, 0o644)
	kc := filepath.Join(dir, "config")
	os.WriteFile(kc, []byte(fmt.Sprintf(kubectlConfig, f.URL)), 0o600)

	c, err := LoadKubeconfig(kc, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Server != f.URL || c.Token != "tok-123" || c.CAFile != filepath.Join(dir, "pki", "ca.crt") {
		t.Errorf("credentials %+v", c)
	}
	if _, err := LoadKubeconfig(kc, "plugin"); err == nil || !strings.Contains(err.Error(), "exec plugin") {
		t.Errorf("an exec plugin: %v; want refused naming it", err)
	}
	t.Setenv("KUBECONFIG", kc+string(os.PathListSeparator)+"/nonexistent")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	kapi, err := AutoKubeAPI()
	if err != nil {
		t.Fatal(err)
	}
	f.set(pod("a", "u1", "10.0.0.1", 8700, false, true, "Running", false))
	urls, err := DiscoverK8s(context.Background(), "k8s://shinken/app=env", kapi)
	if err != nil || !reflect.DeepEqual(urls, []string{"http://10.0.0.1:8700"}) {
		t.Errorf("DiscoverK8s = %v, %v", urls, err)
	}
	if _, err := DiscoverK8s(context.Background(), "k8s://default/app=env", kapi); !IsDiscoveryError(err) || !strings.Contains(err.Error(), "403") {
		t.Errorf("another namespace: %v; want a DiscoveryError with 403", err)
	}
	// In a pod: the service account directory, the token re-read each call.
	sa := t.TempDir()
	os.WriteFile(filepath.Join(sa, "ca.crt"), ca, 0o644)
	os.WriteFile(filepath.Join(sa, "token"), []byte("stale\n"), 0o600)
	host, port, _ := strings.Cut(strings.TrimPrefix(f.URL, "https://"), ":")
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	in, err := InClusterKubeAPI(sa)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DiscoverK8s(context.Background(), "k8s://shinken/app=env", in); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a stale token: %v; want 401", err)
	}
	os.WriteFile(filepath.Join(sa, "token"), []byte("tok-123\n"), 0o600)
	if urls, err := DiscoverK8s(context.Background(), "k8s://shinken/app=env", in); err != nil || len(urls) != 1 {
		t.Errorf("the rotated token: %v, %v", urls, err)
	}
	// Without the CA, the server's certificate is refused.
	noCA, _ := NewKubeAPI(KubeCredentials{Server: f.URL, Token: "tok-123"})
	if _, err := DiscoverK8s(context.Background(), "k8s://shinken/app=env", noCA); err == nil {
		t.Error("an unknown CA was trusted")
	}
}

func TestParseKubeYAML(t *testing.T) {
	v, err := parseKubeYAML("a:\n  b: 'it''s'\n  c: [] \n  d:\n  - x: 1\n    y: \"q#\" # c\n  - - z\n  e: true\n  f: null\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": map[string]any{"b": "it's", "c": []any{}, "d": []any{
		map[string]any{"x": "1", "y": "q#"}, []any{"z"}}, "e": true, "f": nil}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got %#v", v)
	}
	for _, bad := range []string{"a: &x 1", "a: |\n  b", "a: {b: 1}", "a:\n\tb: 1"} {
		if _, err := parseKubeYAML(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestK8sServersMembership: pods that join, leave, become unready or are
// replaced behind the same address change placement; envs on a replaced
// pod fail as sandbox_died naming the server. No envserver is called.
func TestK8sServersMembership(t *testing.T) {
	f := newFakeAPI(t)
	kapi, err := NewKubeAPI(KubeCredentials{Server: f.URL, Token: "tok-123", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.set()
	if _, err := NewK8sServers(ctx, "k8s://shinken/app=env", "t", kapi, nil); err == nil || !strings.Contains(err.Error(), "no ready envserver") {
		t.Fatalf("no pods: %v", err)
	}
	a := pod("a", "ua", "10.0.0.1", 8700, false, true, "Running", false)
	b := pod("b", "ub", "10.0.0.2", 8700, false, true, "Running", false)
	f.set(a, b)
	k, err := NewK8sServers(ctx, "k8s://shinken/app=env", "t", kapi, nil)
	if err != nil {
		t.Fatal(err)
	}
	ua, ub, uc := "http://10.0.0.1:8700", "http://10.0.0.2:8700", "http://10.0.0.3:8700"
	if got := k.InPlacement(); !reflect.DeepEqual(got, []string{ua, ub}) {
		t.Fatalf("placement %v", got)
	}
	k.placement["e-a"], k.placement["e-b"] = 0, 1
	// b is being deleted, c comes: b leaves placement, its env stays on it.
	f.set(a, pod("b", "ub", "10.0.0.2", 8700, false, true, "Running", true), pod("c", "uc", "10.0.0.3", 8700, false, true, "Running", false))
	if _, err := k.Rediscover(ctx); err != nil {
		t.Fatal(err)
	}
	if got := k.InPlacement(); !reflect.DeepEqual(got, []string{ua, uc}) {
		t.Errorf("placement %v; want a and c", got)
	}
	if k.ServerOf("e-b") != 1 {
		t.Error("the env on the terminating pod left its server")
	}
	// a is replaced by a new pod at its address: a's env is lost, typed.
	f.set(pod("a2", "ua2", "10.0.0.1", 8700, false, true, "Running", false), pod("c", "uc", "10.0.0.3", 8700, false, true, "Running", false))
	k.Rediscover(ctx)
	if got := k.InPlacement(); !reflect.DeepEqual(got, []string{ua, uc}) {
		t.Errorf("placement %v; want a's address and c", got)
	}
	if k.ServerOf("e-a") != -1 {
		t.Error("the env of a replaced pod is still placed")
	}
	e := k.unplaced("e-a")
	if e.Code != aci.CodeSandboxDied || !isLost(e) || !strings.Contains(e.Message, "replaced by pod a2") {
		t.Errorf("the replaced pod's env: %+v", e)
	}
	// c's container restarts (a crash; same pod, same UID): its envs are
	// lost too.
	k.placement["e-c"] = 2
	c2 := pod("c", "uc", "10.0.0.3", 8700, false, true, "Running", false)
	c2["status"].(map[string]any)["containerStatuses"] = []any{map[string]any{"restartCount": 1}}
	f.set(pod("a2", "ua2", "10.0.0.1", 8700, false, true, "Running", false), c2)
	k.Rediscover(ctx)
	if e := k.unplaced("e-c"); e.Code != aci.CodeSandboxDied || !strings.Contains(e.Message, "server restarted") {
		t.Errorf("the env of a restarted container: %+v", e)
	}
	// The API away: the last list stays.
	f.mu.Lock()
	f.fail = true
	f.mu.Unlock()
	if _, err := k.Rediscover(ctx); !IsDiscoveryError(err) {
		t.Errorf("API failure: %v", err)
	}
	if got := k.InPlacement(); len(got) != 2 {
		t.Errorf("placement after an API failure %v; want the last list", got)
	}
	// A loss marks the list stale: the next placement lists again.
	f.mu.Lock()
	f.fail = false
	before := f.calls
	f.mu.Unlock()
	k.refresh(ctx)
	k.Servers.onLoss(0)
	k.refresh(ctx)
	f.mu.Lock()
	if f.calls != before+1 {
		t.Errorf("%d listings after one loss; want 1", f.calls-before)
	}
	f.mu.Unlock()
}

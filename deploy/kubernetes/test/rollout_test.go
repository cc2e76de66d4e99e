package k8stest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoDiscovery runs the Go rollout's k8s:// discovery
// (rollout/k8s_cluster_test.go, TestK8sCluster) against this apiserver,
// with real envservers in that test's process (envserver/servertest): the ready pods only, found with
// a service account's token (bound by components/client-rbac); envs spread
// and sticky; a deleted pod and a lost server make it list the pods again,
// the new pod's server takes new envs, the lost server's envs fail typed.
func TestGoDiscovery(t *testing.T) {
	c := need(t)
	tkc := trainerKubeconfig(t, c)
	root, _ := filepath.Abs(filepath.Join("..", "..", ".."))
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.CommandContext(t.Context(), goBin, "test", "-count=1", "-v", "-run", "^TestK8sCluster$", "./rollout")
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"SHINKEN_K8S_KUBECONFIG="+c.kubeconfig,
		"SHINKEN_K8S_TOKEN_KUBECONFIG="+tkc,
		"SHINKEN_K8S_KUBECTL="+filepath.Join(c.bin, "kubectl"),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("go test ./rollout -run TestK8sCluster:\n%s", out)
	if err != nil {
		t.Fatalf("go test ./rollout: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestK8sCluster") {
		t.Fatal("TestK8sCluster did not pass (skipped?)")
	}
}

// trainerKubeconfig returns a kubeconfig with the trainer's token
// (trainerToken) and the cluster's CA by path, written by kubectl.
func trainerKubeconfig(t *testing.T, c *cluster) string {
	t.Helper()
	tok := trainerToken(t, c)
	tkc := filepath.Join(t.TempDir(), "trainer.kubeconfig")
	for _, args := range [][]string{
		{"config", "set-cluster", "test", "--server=" + c.server, "--certificate-authority=" + filepath.Join(c.dir, "pki", "ca.crt")},
		{"config", "set-credentials", "trainer", "--token=" + tok},
		{"config", "set-context", "test", "--cluster=test", "--user=trainer", "--namespace=shinken"},
		{"config", "use-context", "test"},
	} {
		if out, err := exec.Command(filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig=" + tkc}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	return tkc
}

// trainerToken makes the namespace shinken, its default service account
// (the controller manager that would make it is not running), the
// trainer's service account and role (components/client-rbac), and returns
// a token of the trainer's.
func trainerToken(t *testing.T, c *cluster) string {
	t.Helper()
	if _, err := c.kubectl(nil, "get", "namespace", "shinken"); err != nil {
		if out, err := c.kubectl(nil, "create", "namespace", "shinken"); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	// The account pods default to (the controller manager that would
	// make it is not running).
	if _, err := c.kubectl(nil, "-n", "shinken", "get", "serviceaccount", "default"); err != nil {
		if _, err := c.kubectl(nil, "-n", "shinken", "create", "serviceaccount", "default"); err != nil {
			t.Fatal(err)
		}
	}
	rbac := t.TempDir()
	os.WriteFile(filepath.Join(rbac, "kustomization.yaml"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: shinken\ncomponents:\n- "+
		relTo(t, rbac)("components/client-rbac")+"\n"), 0o644)
	if _, err := c.kubectl(nil, "apply", "--server-side", "--field-manager=shinken-test", "-k", rbac); err != nil {
		t.Fatal(err)
	}
	tok, err := c.kubectl(nil, "-n", "shinken", "create", "token", "shinken-trainer", "--duration=1h")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(tok)
}

package k8stest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPythonDiscovery runs the Python client's k8s:// discovery
// (clients/python/tests/test_k8s_cluster.py) against this apiserver, with
// real envservers from $SHINKEN_BIN: the ready pods only, with a kubeconfig's
// certificates, a service account's token (bound by
// components/client-rbac) and in-cluster credentials; envs spread, sticky,
// forks beside their parent; a deleted pod and a lost server make the
// client list the pods again.
func TestPythonDiscovery(t *testing.T) {
	c := need(t)
	if os.Getenv("SHINKEN_BIN") == "" {
		t.Skip("SHINKEN_BIN unset: make test-k8s builds the envserver")
	}
	py := os.Getenv("SHINKEN_PYTHON")
	if py == "" {
		py = "python3"
	}
	tok := trainerToken(t, c)

	// The trainer's kubeconfig (token, CA by path), written by kubectl;
	// and a service account directory as a pod would have it.
	dir := t.TempDir()
	ca := filepath.Join(c.dir, "pki", "ca.crt")
	tkc := filepath.Join(dir, "trainer.kubeconfig")
	for _, args := range [][]string{
		{"config", "set-cluster", "test", "--server=" + c.server, "--certificate-authority=" + ca},
		{"config", "set-credentials", "trainer", "--token=" + tok},
		{"config", "set-context", "test", "--cluster=test", "--user=trainer", "--namespace=shinken"},
		{"config", "use-context", "test"},
	} {
		if out, err := exec.Command(filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig=" + tkc}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	sa := filepath.Join(dir, "serviceaccount")
	os.MkdirAll(sa, 0o755)
	os.WriteFile(filepath.Join(sa, "token"), []byte(tok), 0o600)
	caPEM, _ := os.ReadFile(ca)
	os.WriteFile(filepath.Join(sa, "ca.crt"), caPEM, 0o644)
	os.WriteFile(filepath.Join(sa, "namespace"), []byte("shinken"), 0o644)

	pyDir, _ := filepath.Abs(filepath.Join("..", "..", "..", "clients", "python"))
	cmd := exec.CommandContext(t.Context(), py, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/test_k8s_cluster.py")
	cmd.Dir = pyDir
	cmd.Env = append(os.Environ(),
		"SHINKEN_K8S_KUBECONFIG="+c.kubeconfig,
		"SHINKEN_K8S_TOKEN_KUBECONFIG="+tkc,
		"SHINKEN_K8S_SA_DIR="+sa,
		"SHINKEN_K8S_SERVER="+strings.TrimPrefix(c.server, "https://"),
		"SHINKEN_K8S_KUBECTL="+filepath.Join(c.bin, "kubectl"),
		"SHINKEN_TEST_POOL=1",
	)
	out, err := cmd.CombinedOutput()
	t.Logf("pytest:\n%s", out)
	if err != nil {
		t.Fatalf("pytest tests/test_k8s_cluster.py: %v", err)
	}
	if strings.Contains(string(out), "skipped") && !strings.Contains(string(out), "passed") {
		t.Fatal("the cluster tests skipped")
	}
}

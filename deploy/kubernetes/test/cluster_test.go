package k8stest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cluster is an etcd and a kube-apiserver on loopback, in a directory of
// their own, with an admin kubeconfig.
type cluster struct {
	dir        string
	bin        string
	server     string // https://127.0.0.1:PORT
	kubeconfig string // admin (system:masters), certificates embedded
	procs      []proc
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited
}

var k8s *cluster

func TestMain(m *testing.M) {
	bin := os.Getenv("SHINKEN_K8S_BIN")
	if bin == "" {
		fmt.Println("SHINKEN_K8S_BIN unset: the Kubernetes tests skip (run them with make test-k8s)")
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "shinken-k8s-")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	start := time.Now()
	c, err := startCluster(dir, bin)
	if err != nil {
		fmt.Printf("starting the control plane: %v\n", err)
		if c != nil {
			c.dumpLogs()
			c.stop()
		}
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Printf("kube-apiserver ready at %s in %.1fs\n", c.server, time.Since(start).Seconds())
	k8s = c
	code := m.Run()
	if code != 0 {
		c.dumpLogs()
	}
	c.stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

func need(t *testing.T) *cluster {
	t.Helper()
	if k8s == nil {
		t.Skip("SHINKEN_K8S_BIN unset: run make test-k8s")
	}
	return k8s
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startCluster(dir, bin string) (*cluster, error) {
	c := &cluster{dir: dir, bin: bin}
	pki := filepath.Join(dir, "pki")
	if err := writePKI(pki); err != nil {
		return nil, err
	}
	ports := make([]int, 3)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if err := c.spawn("etcd", filepath.Join(bin, "etcd"),
		"--name=shinken-test", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=shinken-test="+peerURL, "--unsafe-no-fsync"); err != nil {
		return c, err
	}
	p := func(f string) string { return filepath.Join(pki, f) }
	if err := c.spawn("kube-apiserver", filepath.Join(bin, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--client-ca-file="+p("ca.crt"),
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
		// A kubelet (the node test, node_test.go) is reached by its name,
		// localhost, so exec and logs stay on loopback.
		"--kubelet-client-certificate="+p("apiserver-kubelet-client.crt"), "--kubelet-client-key="+p("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority="+p("ca.crt"), "--kubelet-preferred-address-types=Hostname",
		"--endpoint-reconciler-type=none", "--allow-privileged=true"); err != nil {
		return c, err
	}
	c.server = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	c.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	// Written by kubectl itself, so the client's kubeconfig reader meets
	// kubectl's own YAML.
	kc := []string{"--kubeconfig=" + c.kubeconfig}
	for _, args := range [][]string{
		{"config", "set-cluster", "test", "--server=" + c.server, "--certificate-authority=" + p("ca.crt"), "--embed-certs=true"},
		{"config", "set-credentials", "admin", "--client-certificate=" + p("admin.crt"), "--client-key=" + p("admin.key"), "--embed-certs=true"},
		{"config", "set-context", "test", "--cluster=test", "--user=admin"},
		{"config", "use-context", "test"},
	} {
		if out, err := exec.Command(filepath.Join(bin, "kubectl"), append(kc, args...)...).CombinedOutput(); err != nil {
			return c, fmt.Errorf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := c.kubectlCmd(context.Background(), nil, "get", "--raw", "/readyz").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) == "ok" {
			return c, nil
		}
		if time.Now().After(deadline) {
			return c, fmt.Errorf("kube-apiserver not ready after 90 s: %v %s", err, out)
		}
		for _, pr := range c.procs {
			select {
			case <-pr.done:
				return c, fmt.Errorf("%s exited", pr.name)
			default:
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (c *cluster) spawn(name, path string, args ...string) error {
	log, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	pr := proc{name: name, cmd: cmd, done: make(chan struct{})}
	c.procs = append(c.procs, pr)
	go func() { cmd.Wait(); log.Close(); close(pr.done) }()
	return nil
}

// stop ends the apiserver, then etcd (the reverse of their start).
func (c *cluster) stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		p.cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
}

func (c *cluster) dumpLogs() {
	for _, n := range []string{"etcd", "kube-apiserver"} {
		b, _ := os.ReadFile(filepath.Join(c.dir, n+".log"))
		if len(b) > 3000 {
			b = b[len(b)-3000:]
		}
		fmt.Printf("--- %s log (tail) ---\n%s\n", n, b)
	}
}

func (c *cluster) kubectlCmd(ctx context.Context, stdin []byte, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig=" + c.kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	return cmd
}

// kubectl runs kubectl as the admin; err carries its output.
func (c *cluster) kubectl(stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := c.kubectlCmd(ctx, stdin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// writePKI makes the cluster's CA, the apiserver's serving certificate
// (127.0.0.1, localhost), an admin client certificate (system:masters)
// and the service-account signing key.
func writePKI(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	newKey := func() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
	writeKey := func(name string, k *ecdsa.PrivateKey) error {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	}
	writeCert := func(name string, der []byte) error {
		return os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := newKey()
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "shinken-test-ca"},
		NotBefore: now, NotAfter: now.Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := writeCert("ca.crt", caDER); err != nil {
		return err
	}
	leaf := func(name string, serial int64, subj pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dns []string) error {
		k, err := newKey()
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: subj, NotBefore: now, NotAfter: now.Add(48 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: ips, DNSNames: dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := writeCert(name+".crt", der); err != nil {
			return err
		}
		return writeKey(name+".key", k)
	}
	if err := leaf("apiserver", 2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 0, 0, 1)}, []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}); err != nil {
		return err
	}
	if err := leaf("admin", 3, pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return err
	}
	// For the node test: the apiserver's client certificate to the kubelet,
	// the kubelet's serving certificate and its node identity (the node is
	// named localhost: a kubelet refuses a loopback node IP otherwise).
	if err := leaf("apiserver-kubelet-client", 4, pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return err
	}
	if err := leaf("kubelet", 5, pkix.Name{CommonName: "localhost"}, x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}); err != nil {
		return err
	}
	if err := leaf("node", 6, pkix.Name{CommonName: "system:node:localhost", Organization: []string{"system:nodes"}}, x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return err
	}
	sa, err := newKey()
	if err != nil {
		return err
	}
	if err := writeKey("sa.key", sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNode runs a real single node on this machine (make test-k8s-node;
// docs/kubernetes.md, "A real node"): containerd (Debian's, with runc and
// the CNI plugins) and a kubelet named localhost beside this test's
// apiserver, a controller manager and a scheduler; two envserver pods
// (hostNetwork, two single-replica Deployments on distinct ports) from the
// deployment variant; then the Python client's failover and rolling-update
// run (clients/python/tests/test_k8s_node.py), and the pod start latency and
// per-pod overhead of minimal pods. Opt-in ($SHINKEN_K8S_NODE=1, root): it
// changes the host while it runs (cgroups under kubepods, mounts under its
// own directory, the kernel tunables the kubelet sets) and undoes each
// change in its cleanup. The network is hostNetwork only (a loopback CNI
// config): no bridge, no iptables rule.
func TestNode(t *testing.T) {
	c := need(t)
	if os.Getenv("SHINKEN_K8S_NODE") != "1" {
		t.Skip("SHINKEN_K8S_NODE unset: make test-k8s-node runs the real node")
	}
	if os.Geteuid() != 0 {
		t.Skip("the node needs root")
	}
	for _, b := range []string{"kubelet", "kube-controller-manager", "kube-scheduler"} {
		if _, err := os.Stat(filepath.Join(c.bin, b)); err != nil {
			t.Fatalf("%s not built: make test-k8s-node builds it", b)
		}
	}
	for _, p := range []string{"/usr/bin/containerd", "/usr/sbin/runc", "/usr/bin/ctr", "/usr/lib/cni/loopback"} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("%s missing (Debian packages containerd, runc, containernetworking-plugins)", p)
		}
	}
	image := os.Getenv("SHINKEN_ENVSERVER_IMAGE")
	if image == "" {
		image = "shinken-envserver:latest"
	}
	n := &node{t: t, c: c, dir: filepath.Join(c.dir, "node")}
	t.Cleanup(n.teardown) // every host change undone, whatever failed
	n.start(image)

	ns := "shinken"
	token := n.envservers(ns, image)
	n.python(ns, token)
	n.measureMinimalPods(ns)
}

type node struct {
	t      *testing.T
	c      *cluster
	dir    string
	procs  []proc
	sysctl map[string]string // kernel tunables as they were before the kubelet
	// hostDirs: the entries of the host directories the kubelet and
	// containerd write to whatever their configuration (log links, shim
	// sockets), as they were before; nil for a directory that did not exist.
	hostDirs map[string]map[string]bool
	iptables string
	// chains: "iptables mangle KUBE-X" for each chain there was before;
	// nftTables: the nftables tables there were before.
	chains    map[string]bool
	nftTables map[string]bool
	ports     [2]int
}

func (n *node) path(p ...string) string { return filepath.Join(append([]string{n.dir}, p...)...) }

func (n *node) spawn(name, path string, args ...string) {
	n.t.Helper()
	log, err := os.Create(n.path("logs", name+".log"))
	if err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("%s: %v", name, err)
	}
	p := proc{name: name, cmd: cmd, done: make(chan struct{})}
	n.procs = append(n.procs, p)
	go func() { cmd.Wait(); log.Close(); close(p.done) }()
}

func (n *node) logTail(name string, max int) string {
	b, _ := os.ReadFile(n.path("logs", name+".log"))
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// hostPaths are the host directories a kubelet and containerd write to
// whatever their configuration: the container log links, containerd's shim
// sockets, and the usual state directories in case a default slips
// through. Teardown removes what was not there before.
// (/run/containerd/s holds every containerd's shim sockets, Docker's too:
// only sockets new, and that nothing listens on any more, are removed.)
var hostPaths = []string{"/run/containerd", "/run/containerd/s", "/var/log/containers", "/var/log/pods",
	"/var/lib/kubelet", "/var/lib/containerd", "/etc/kubernetes", "/var/lib/cni"}

// iptablesRules is iptables-save's output without comments and counters.
func iptablesRules(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		if strings.HasPrefix(l, ":") {
			if i := strings.IndexByte(l, '['); i > 0 {
				l = l[:i]
			}
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// kernelTunables are the sysctls a kubelet sets when protectKernelDefaults
// is false (pkg/kubelet/cm setupKernelTunables); teardown restores them.
var kernelTunables = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func (n *node) start(image string) {
	t := n.t
	for _, d := range []string{"logs", "run/containerd", "cni/net.d", "manifests", "kubelet", "pods-logs", "state-a", "state-b", "uids", "image"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.hostDirs = map[string]map[string]bool{}
	for _, d := range hostPaths {
		if ents, err := os.ReadDir(d); err == nil {
			m := map[string]bool{}
			for _, e := range ents {
				m[e.Name()] = true
			}
			n.hostDirs[d] = m
		} else {
			n.hostDirs[d] = nil
		}
	}
	if out, err := exec.Command("iptables-save").Output(); err == nil {
		n.iptables = iptablesRules(string(out))
	}
	n.chains, n.nftTables = iptablesChains(), nftTables()
	n.sysctl = map[string]string{}
	for _, k := range kernelTunables {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil {
			n.sysctl[k] = strings.TrimSpace(string(b))
		}
	}
	pki := filepath.Join(n.c.dir, "pki")
	sock := n.path("run/containerd/containerd.sock")

	// containerd: its own root, state and socket; restrict_oom_score_adj
	// (runc cannot lower oom_score_adj here); the pause image built below.
	os.WriteFile(n.path("containerd.toml"), []byte(fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = "%s.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "shinken-pause:test"
  enable_selinux = false
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
      BinaryName = "/usr/sbin/runc"
`, n.path("run/containerd/root"), n.path("run/containerd/state"), sock, sock, n.path("cni/net.d"))), 0o644)
	// Loopback only: the node is Ready for hostNetwork pods, and no bridge
	// or iptables rule is needed.
	os.WriteFile(n.path("cni/net.d/10-loopback.conflist"), []byte(`{"cniVersion":"0.4.0","name":"lo","plugins":[{"type":"loopback"}]}`), 0o644)
	n.spawn("containerd", "/usr/bin/containerd", "--config", n.path("containerd.toml"))
	n.waitFor("containerd's socket", 30*time.Second, func() bool { _, err := os.Stat(sock); return err == nil })

	// Images: a static pause (this test's pause/ program) FROM scratch, and
	// the envserver image, from Docker into containerd; no registry.
	start := time.Now()
	pause := n.path("image", "pause")
	gb := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", pause, "./pause")
	gb.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := gb.CombinedOutput(); err != nil {
		t.Fatalf("building pause: %v\n%s", err, out)
	}
	n.run("", "sh", "-c", fmt.Sprintf(`tar -C %s -c pause | docker import --change 'ENTRYPOINT ["/pause"]' - shinken-pause:test >/dev/null`, n.path("image")))
	n.run("", "sh", "-c", fmt.Sprintf(`docker save shinken-pause:test %s | ctr -a %s -n k8s.io images import - >/dev/null`, image, sock))
	t.Logf("images imported into containerd in %.1fs", time.Since(start).Seconds())

	// The kubelet: node localhost, cgroupfs on this cgroup v1 host, its
	// own root and pod log directories.
	kc := n.path("kubelet.kubeconfig")
	for _, args := range [][]string{
		{"config", "set-cluster", "test", "--server=" + n.c.server, "--certificate-authority=" + filepath.Join(pki, "ca.crt"), "--embed-certs=true"},
		{"config", "set-credentials", "node", "--client-certificate=" + filepath.Join(pki, "node.crt"), "--client-key=" + filepath.Join(pki, "node.key"), "--embed-certs=true"},
		{"config", "set-context", "test", "--cluster=test", "--user=node"},
		{"config", "use-context", "test"},
	} {
		if out, err := exec.Command(filepath.Join(n.c.bin, "kubectl"), append([]string{"--kubeconfig=" + kc}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(n.path("kubelet.yaml"), []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
staticPodPath: %s
podLogsDir: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
tlsCertFile: %s
tlsPrivateKeyFile: %s
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
enforceNodeAllocatable: []
cgroupsPerQOS: true
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
protectKernelDefaults: false
serializeImagePulls: false
makeIPTablesUtilChains: false
`, sock, n.path("manifests"), n.path("pods-logs"), filepath.Join(pki, "ca.crt"), filepath.Join(pki, "kubelet.crt"), filepath.Join(pki, "kubelet.key"))), 0o644)
	n.spawn("kubelet", filepath.Join(n.c.bin, "kubelet"), "--config="+n.path("kubelet.yaml"), "--kubeconfig="+kc,
		"--root-dir="+n.path("kubelet"), "--hostname-override=localhost", "--v=1")
	// The controller manager (Deployments → ReplicaSets → pods, service
	// account tokens) and the scheduler, as the admin.
	n.spawn("kube-controller-manager", filepath.Join(n.c.bin, "kube-controller-manager"),
		"--kubeconfig="+n.c.kubeconfig, "--authentication-kubeconfig="+n.c.kubeconfig, "--authorization-kubeconfig="+n.c.kubeconfig,
		"--service-account-private-key-file="+filepath.Join(pki, "sa.key"), "--root-ca-file="+filepath.Join(pki, "ca.crt"),
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(mustPort(t)))
	n.spawn("kube-scheduler", filepath.Join(n.c.bin, "kube-scheduler"),
		"--kubeconfig="+n.c.kubeconfig, "--authentication-kubeconfig="+n.c.kubeconfig, "--authorization-kubeconfig="+n.c.kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(mustPort(t)))
	start = time.Now()
	n.waitFor("node localhost Ready", 120*time.Second, func() bool {
		out, err := n.c.kubectl(nil, "get", "node", "localhost", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return err == nil && out == "True"
	})
	t.Logf("node Ready %.1fs after the kubelet started", time.Since(start).Seconds())
}

func mustPort(t *testing.T) int {
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (n *node) run(stdin string, name string, args ...string) string {
	n.t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		n.t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func (n *node) waitFor(what string, d time.Duration, ok func() bool) {
	n.t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		for _, p := range n.procs {
			select {
			case <-p.done:
				n.t.Fatalf("%s exited while waiting for %s:\n%s", p.name, what, n.logTail(p.name, 3000))
			default:
			}
		}
		if time.Now().After(deadline) {
			for _, p := range n.procs {
				n.t.Logf("--- %s log (tail) ---\n%s", p.name, n.logTail(p.name, 2000))
			}
			n.t.Fatalf("%s: not after %v", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// envservers applies the deployment variant as two single-replica,
// hostNetwork Deployments (a and b) on distinct ports, their state and uid
// directories under the node's directory, and waits for both pods to be
// Ready. It returns the envservers' token.
func (n *node) envservers(ns, image string) string {
	t := n.t
	out, err := n.c.kubectl(nil, "kustomize", manifests+"/deployment")
	if err != nil {
		t.Fatal(err)
	}
	docs := splitYAMLDocs(out)
	var keep []string
	var deployment string
	for _, d := range docs {
		if slices.Contains(strings.Split(d, "\n"), "kind: Deployment") {
			deployment = d
			continue
		}
		keep = append(keep, d)
	}
	if deployment == "" {
		t.Fatal("no Deployment in the deployment variant")
	}
	if _, err := n.c.kubectl([]byte(strings.Join(keep, "\n---\n")), "apply", "--server-side", "--field-manager=shinken-test", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	token := "node-test-token-0123456789abcdef"
	n.c.kubectl(nil, "-n", ns, "delete", "secret", "shinken-token", "--ignore-not-found")
	if _, err := n.c.kubectl(nil, "-n", ns, "create", "secret", "generic", "shinken-token", "--from-literal=token="+token); err != nil {
		t.Fatal(err)
	}
	// The Deployment as JSON, then each copy patched.
	js, err := n.c.kubectl([]byte(deployment), "create", "--dry-run=client", "-o", "json", "-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for k, name := range []string{"a", "b"} {
		port := mustPort(t)
		n.ports[k] = port
		var d map[string]any
		json.Unmarshal([]byte(js), &d)
		patchDeployment(d, name, image, port, n.path("state-"+name), n.path("uids"))
		b, _ := json.Marshal(d)
		if _, err := n.c.kubectl(b, "apply", "--server-side", "--field-manager=shinken-test", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	n.waitFor("both envserver pods Ready", 5*time.Minute, func() bool {
		return len(n.readyPods(ns, "shinken-node-test")) == 2
	})
	t.Logf("two envserver pods Ready %.1fs after their Deployments were applied (ports %d, %d)", time.Since(start).Seconds(), n.ports[0], n.ports[1])
	return token
}

// patchDeployment makes d the single-replica, hostNetwork Deployment
// shinken-envserver-<name> listening on port: a DaemonSet's pod on a node
// of its own, twice on one node. A hostNetwork pod holds its port on the
// node, so a rolling update must stop the old pod first (maxSurge 0).
func patchDeployment(d map[string]any, name, image string, port int, state, uids string) {
	m := func(v any, k string) map[string]any { return v.(map[string]any)[k].(map[string]any) }
	meta := d["metadata"].(map[string]any)
	meta["name"] = "shinken-envserver-" + name
	spec := d["spec"].(map[string]any)
	spec["replicas"] = 1
	spec["strategy"] = map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": 0, "maxUnavailable": 1}}
	m(spec, "selector")["matchLabels"].(map[string]any)["shinken-node-test"] = name
	tmpl := spec["template"].(map[string]any)
	m(tmpl, "metadata")["labels"].(map[string]any)["shinken-node-test"] = name
	m(tmpl, "metadata")["annotations"].(map[string]any)["prometheus.io/port"] = strconv.Itoa(port)
	ps := m(tmpl, "spec")
	ps["hostNetwork"] = true
	ps["dnsPolicy"] = "ClusterFirstWithHostNet"
	delete(ps, "affinity")
	c := ps["containers"].([]any)[0].(map[string]any)
	c["image"] = image
	var args []any
	for _, a := range c["args"].([]any) {
		if !strings.HasPrefix(a.(string), "--listen=") {
			args = append(args, a)
		}
	}
	c["args"] = append(args, fmt.Sprintf("--listen=0.0.0.0:%d", port))
	c["ports"] = []any{map[string]any{"name": "http", "containerPort": port, "protocol": "TCP"}}
	// Two on a node of two cores: requests that fit both (the manifests'
	// are sized for 16 desktops each).
	c["resources"] = map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "512Mi"}, "limits": map[string]any{"memory": "6Gi"}}
	for _, v := range ps["volumes"].([]any) {
		vol := v.(map[string]any)
		switch vol["name"] {
		case "state":
			delete(vol, "emptyDir")
			vol["hostPath"] = map[string]any{"path": state, "type": "DirectoryOrCreate"}
		case "uids":
			vol["hostPath"] = map[string]any{"path": uids, "type": "DirectoryOrCreate"}
		}
	}
}

func splitYAMLDocs(s string) []string {
	var out []string
	for _, d := range strings.Split(s, "\n---\n") {
		if strings.TrimSpace(d) != "" {
			out = append(out, d)
		}
	}
	return out
}

// readyPods returns the names of the Ready pods with the label key.
func (n *node) readyPods(ns, label string) []string {
	out, err := n.c.kubectl(nil, "-n", ns, "get", "pods", "-l", label, "-o", "json")
	if err != nil {
		return nil
	}
	var l struct {
		Items []struct {
			Metadata struct {
				Name              string  `json:"name"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	json.Unmarshal([]byte(out), &l)
	var names []string
	for _, p := range l.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" && p.Metadata.DeletionTimestamp == nil {
				names = append(names, p.Metadata.Name)
			}
		}
	}
	sort.Strings(names)
	return names
}

// python runs clients/python/tests/test_k8s_node.py: discovery of both
// pods, 8 envs spread, a pod deleted mid-episode, its replacement used
// again, a rolling update that drains. It prints its measurements.
func (n *node) python(ns, token string) {
	t := n.t
	py := os.Getenv("SHINKEN_PYTHON")
	if py == "" {
		py = "python3"
	}
	pyDir, _ := filepath.Abs(filepath.Join("..", "..", "..", "clients", "python"))
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "pytest", "-q", "-x", "-s", "-p", "no:cacheprovider", "tests/test_k8s_node.py")
	cmd.Dir = pyDir
	cmd.Env = append(os.Environ(),
		"SHINKEN_K8S_NODE_KUBECONFIG="+n.c.kubeconfig,
		"SHINKEN_K8S_KUBECTL="+filepath.Join(n.c.bin, "kubectl"),
		"SHINKEN_K8S_NODE_NS="+ns,
		"SHINKEN_K8S_NODE_TOKEN="+token,
		"SHINKEN_K8S_NODE_CTR_ADDRESS="+n.path("run/containerd/containerd.sock"),
	)
	out, err := cmd.CombinedOutput()
	t.Logf("pytest tests/test_k8s_node.py:\n%s", out)
	if err != nil {
		for _, p := range []string{"kubelet"} {
			t.Logf("--- %s log (tail) ---\n%s", p, n.logTail(p, 3000))
		}
		t.Fatalf("pytest: %v", err)
	}
	if !strings.Contains(string(out), "passed") {
		t.Fatal("the node run did not pass (skipped?)")
	}
}

// measureMinimalPods starts minimal pods (the pause image as the one
// container, hostNetwork) one after another and reports the time from
// create to Ready, and the memory the runtime adds per pod (the shim and
// pause processes' RSS).
func (n *node) measureMinimalPods(ns string) {
	t := n.t
	const count = 5
	sock := n.path("run/containerd/containerd.sock")
	before := shimRSS(sock)
	var lat []float64
	for i := range count {
		name := fmt.Sprintf("latency-%d", i)
		pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":{"shinken-latency":"1"}},
"spec":{"hostNetwork":true,"automountServiceAccountToken":false,"enableServiceLinks":false,"terminationGracePeriodSeconds":1,
"containers":[{"name":"c","image":"shinken-pause:test","imagePullPolicy":"Never"}]}}`, name, ns)
		start := time.Now()
		if _, err := n.c.kubectl([]byte(pod), "create", "-f", "-"); err != nil {
			t.Fatal(err)
		}
		n.waitFor("pod "+name+" Ready", 60*time.Second, func() bool {
			out, err := n.c.kubectl(nil, "-n", ns, "get", "pod", name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return err == nil && out == "True"
		})
		lat = append(lat, time.Since(start).Seconds())
	}
	after := shimRSS(sock)
	sort.Float64s(lat)
	t.Logf("MEASURE minimal pod create→Ready (hostNetwork, pause image, %d pods one after another): median %.2fs, min %.2fs, max %.2fs",
		count, lat[len(lat)/2], lat[0], lat[len(lat)-1])
	t.Logf("MEASURE per-pod runtime overhead (containerd shim + pause processes' RSS): %.1f MiB per pod (%d pods: %.1f MiB → %.1f MiB)",
		float64(after.rss-before.rss)/count/(1<<20), count, float64(before.rss)/(1<<20), float64(after.rss)/(1<<20))
	n.c.kubectl(nil, "-n", ns, "delete", "pods", "-l", "shinken-latency", "--grace-period=1")
}

type rssSum struct{ rss int64 }

// shimRSS sums the resident memory of this node's containerd shims (their
// command line names its socket) and of the pause processes they run.
func shimRSS(sock string) rssSum {
	var s rssSum
	shims := map[string]bool{}
	for _, pid := range procsWith(sock) {
		shims[strconv.Itoa(pid)] = true
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if !shims[e.Name()] {
			comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
			if strings.TrimSpace(string(comm)) != "pause" || len(f) < 2 || !shims[f[1]] {
				continue
			}
		}
		f, err := os.Open("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				s.rss += kb << 10
			}
		}
		f.Close()
	}
	return s
}

// teardown deletes every pod, stops the kubelet, the controllers and
// containerd, ends the shims they left, unmounts what they mounted under
// the node's directory, removes the kubepods cgroups and restores the
// kernel tunables.
func (n *node) teardown() {
	t := n.t
	if n.c != nil && len(n.procs) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		n.c.kubectlCmd(ctx, nil, "delete", "deployments,pods", "--all", "-n", "shinken", "--grace-period=5", "--wait=true").Run()
		cancel()
	}
	stop := func(p proc) {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	// The scheduler, the controller manager, the kubelet; containerd last
	// (it was started first), once it has stopped what is left.
	for i := len(n.procs) - 1; i >= 1; i-- {
		stop(n.procs[i])
	}
	sock := n.path("run/containerd/containerd.sock")
	if len(n.procs) > 0 {
		ctr := func(args ...string) string {
			out, _ := exec.Command("ctr", append([]string{"-a", sock, "-n", "k8s.io"}, args...)...).Output()
			return string(out)
		}
		for _, id := range strings.Fields(ctr("tasks", "ls", "-q")) {
			ctr("tasks", "kill", "-s", "SIGKILL", id)
		}
		time.Sleep(time.Second)
		for _, id := range strings.Fields(ctr("tasks", "ls", "-q")) {
			ctr("tasks", "delete", "-f", id)
		}
		for _, id := range strings.Fields(ctr("containers", "ls", "-q")) {
			ctr("containers", "rm", id)
		}
		stop(n.procs[0])
	}
	// Whatever still runs in the kubelet's cgroups, and the shims that
	// outlive containerd (found by its socket path on their command line),
	// are this node's: end them.
	for range 5 {
		pids := append(cgroupPids("/sys/fs/cgroup/pids/kubepods"), procsWith(sock)...)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if left := append(cgroupPids("/sys/fs/cgroup/pids/kubepods"), procsWith(sock)...); len(left) > 0 {
		t.Errorf("processes of this node still running: %v", left)
	}
	// Mounts under the node's directory (overlay rootfs, shm, secret
	// tmpfs), deepest first.
	for range 3 {
		ms := mountsUnder(n.dir)
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			if err := syscall.Unmount(m, 0); err != nil {
				syscall.Unmount(m, syscall.MNT_DETACH)
			}
		}
	}
	if ms := mountsUnder(n.dir); len(ms) > 0 {
		t.Errorf("mounts left under the node's directory: %v", ms)
	}
	// The kubelet's cgroups (kubepods, under every v1 hierarchy).
	var left []string
	hier, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		hier = append(hier, "/sys/fs/cgroup/kubepods")
	}
	for _, h := range hier {
		var dirs []string
		filepath.WalkDir(h, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				left = append(left, dirs[i])
			}
		}
	}
	if len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	for k, v := range n.sysctl {
		if b, _ := os.ReadFile("/proc/sys/" + k); strings.TrimSpace(string(b)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				t.Errorf("restoring %s to %s: %v", k, v, err)
			}
		}
	}
	// What the kubelet and containerd left in host directories: entries
	// that were not there before, and directories they created (deepest
	// first, so /run/containerd/s before /run/containerd).
	for i := len(hostPaths) - 1; i >= 0; i-- {
		d := hostPaths[i]
		before, ok := n.hostDirs[d]
		if !ok {
			continue
		}
		if before == nil {
			if _, err := os.Lstat(d); err == nil {
				if d == "/run/containerd" || d == "/run/containerd/s" {
					os.Remove(d) // only if empty: another containerd may have made it meanwhile
					continue
				}
				t.Logf("removing %s (created while the node ran)", d)
				if err := os.RemoveAll(d); err != nil {
					t.Errorf("removing %s: %v", d, err)
				}
			}
			continue
		}
		ents, _ := os.ReadDir(d)
		listening := ""
		if d == "/run/containerd/s" {
			b, _ := os.ReadFile("/proc/net/unix")
			listening = string(b)
		}
		for _, e := range ents {
			if d == "/run/containerd/s" && strings.Contains(listening, filepath.Join(d, e.Name())) {
				continue // a live shim's, not ours
			}
			if !before[e.Name()] {
				t.Logf("removing %s/%s (created while the node ran)", d, e.Name())
				os.RemoveAll(filepath.Join(d, e.Name()))
			}
		}
	}
	// The kubelet's iptables chains (KUBE-FIREWALL, the canaries) and the
	// tables it made, where makeIPTablesUtilChains: false did not keep it
	// from them.
	for _, c := range n.newChains() {
		t.Logf("removing the kubelet's iptables chain %s", c)
	}
	for tb := range nftTables() {
		if n.nftTables != nil && !n.nftTables[tb] {
			if out, _ := exec.Command("nft", "list", "table", tb).Output(); !strings.Contains(string(out), "chain ") {
				t.Logf("removing the empty nftables table %s (made while the node ran)", tb)
				exec.Command("nft", "delete", "table", tb).Run()
			}
		}
	}
	if n.iptables != "" {
		if out, err := exec.Command("iptables-save").Output(); err == nil {
			if now := iptablesRules(string(out)); now != n.iptables {
				t.Logf("iptables rules differ from before the node (another user of this host, or the node):\n--- before\n%s\n--- after\n%s", n.iptables, now)
			} else {
				t.Logf("iptables rules as before the node")
			}
		}
	}
	exec.Command("docker", "rmi", "shinken-pause:test").Run()
}

// iptablesChains returns "<binary> <table> <chain>" for each KUBE- chain of
// iptables and ip6tables.
func iptablesChains() map[string]bool {
	m := map[string]bool{}
	for _, bin := range []string{"iptables", "ip6tables"} {
		out, err := exec.Command(bin + "-save").Output()
		if err != nil {
			continue
		}
		table := ""
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "*") {
				table = l[1:]
			} else if strings.HasPrefix(l, ":KUBE-") {
				m[bin+" "+table+" "+strings.Fields(l[1:])[0]] = true
			}
		}
	}
	return m
}

// newChains removes the KUBE- chains that were not there before, the
// rules that jump to them first, and returns them.
func (n *node) newChains() []string {
	var gone []string
	for c := range iptablesChains() {
		if n.chains == nil || n.chains[c] {
			continue
		}
		f := strings.Fields(c)
		bin, table, chain := f[0], f[1], f[2]
		out, _ := exec.Command(bin+"-save", "-t", table).Output()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "-A ") && strings.HasSuffix(l, "-j "+chain) {
				args := append([]string{"-t", table, "-D"}, strings.Fields(l)[1:]...)
				exec.Command(bin, args...).Run()
			}
		}
		gone = append(gone, c)
	}
	for _, c := range gone {
		f := strings.Fields(c)
		exec.Command(f[0], "-t", f[1], "-F", f[2]).Run()
	}
	for _, c := range gone {
		f := strings.Fields(c)
		exec.Command(f[0], "-t", f[1], "-X", f[2]).Run()
	}
	return gone
}

// nftTables returns the nftables tables ("ip filter"), nil without nft.
func nftTables() map[string]bool {
	out, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		return nil
	}
	m := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(l), "table "); ok {
			m[t] = true
		}
	}
	return m
}

// cgroupPids returns the pids in the cgroup tree at dir.
func cgroupPids(dir string) []int {
	var pids []int
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "cgroup.procs" {
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
		}
		return nil
	})
	return pids
}

// procsWith returns the pids whose command line contains s.
func procsWith(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder returns the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var ms []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			ms = append(ms, f[4])
		}
	}
	sort.Slice(ms, func(i, j int) bool { return len(ms[i]) > len(ms[j]) })
	return ms
}

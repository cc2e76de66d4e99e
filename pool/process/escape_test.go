package process

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
	"golang.org/x/sys/unix"
)

// TestEscapes drives a sandbox as an agent would (shell commands through
// guestd's exec, as the agent's uid) and tries the ways out a reviewer
// would: unmounting or remounting its view of the host, listing the host's
// processes, reaching a docker socket or another X server, using a
// world-writable host device node, gaining privileges through setuid
// binaries or new namespaces. Each must fail, with nothing written on the
// host.
func TestEscapes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("confined sandboxes need root (rootless is refused: TestRootlessRefused)")
	}
	// Host bait: a world-writable device node with /dev/null's numbers
	// (as a GPU's would be), a docker-like socket, an X-like abstract
	// socket, and a host process with a marker in its argv.
	node := "/dev/shinken-test-gpu-" + strconv.Itoa(os.Getpid())
	if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod: %v", err)
	}
	defer os.Remove(node)
	os.Chmod(node, 0o666)
	sockDir := t.TempDir()
	os.Chmod(sockDir, 0o755)
	dockerSock := filepath.Join(sockDir, "docker.sock")
	ln, err := net.Listen("unix", dockerSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(dockerSock, 0o666)
	xName := fmt.Sprintf("@/tmp/.X11-unix/X%d", 9000+os.Getpid()%500)
	xl, err := net.Listen("unix", xName)
	if err != nil {
		t.Fatal(err)
	}
	defer xl.Close()
	marker := "shinken-escape-marker-" + strconv.Itoa(os.Getpid())
	bait := exec.Command("sh", "-c", "exec -a "+marker+" sleep 600")
	if err := bait.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { bait.Process.Kill(); bait.Wait() }()

	p := newTestProvider(t, Options{StateBytes: 96 << 20})
	sb := pooltest.Create(t, p)
	c := pooltest.Dial(t, sb)
	hostRoot := p.opts.Root
	for _, tc := range []struct{ name, script string }{
		{"umount /run", "umount -l /run"},
		{"umount /proc", "umount -l /proc"},
		{"umount /", "umount -l /"},
		{"remount / rw", "mount -o remount,rw /"},
		{"remount /usr rw", "mount -o remount,bind,rw /usr"},
		{"write /usr", "touch /usr/shinken-escape"},
		{"write /etc", "echo x >> /etc/passwd"},
		{"new mount namespace", "unshare -m true"},
		{"new user namespace remount", "unshare -Urm sh -c 'umount -l /run && ls /run'"},
		{"mount proc", "mkdir -p /tmp/p && mount -t proc proc /tmp/p"},
		{"host process listed", "cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -q '" + strings.Replace(marker, "marker", "marke[r]", 1) + "'"},
		{"host pid visible", "test -e /proc/" + strconv.Itoa(os.Getpid())},
		{"docker socket", "ls " + dockerSock + " || test -S /run/docker.sock || test -S /var/run/docker.sock"},
		{"host X socket", "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0" + strings.TrimPrefix(xName, "@") + "\")'"},
		{"host device node", "ls " + node + " || cat /dev/shinken-test-gpu* </dev/null"},
		{"mknod", "mknod /tmp/gpu c 1 3"},
		{"device in /dev/shm", "cp -a /dev/null /dev/shm/n && echo x > /dev/shm/n"},
		{"setuid su", "su -c id root </dev/null"},
		{"setuid mount", "mount -t tmpfs x /tmp"},
		{"host state", "ls " + hostRoot},
		{"chroot", "chroot / true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, code := pooltest.Sh(t, c, "("+tc.script+") 2>&1"); code == 0 {
				t.Errorf("%s: succeeded (%q); want refused", tc.script, out)
			}
		})
	}
	// What the agent holds: no uid 0, no capability, no_new_privs.
	st := pooltest.MustSh(t, c, "grep -E '^(Uid|CapEff|CapPrm|CapBnd|NoNewPrivs):' /proc/self/status")
	if !strings.Contains(st, "CapEff:\t0000000000000000") || !strings.Contains(st, "CapPrm:\t0000000000000000") ||
		!strings.Contains(st, "NoNewPrivs:\t1") || strings.Contains(st, "Uid:\t0\t") {
		t.Errorf("agent status:\n%s\nwant a non-zero uid, no capabilities, no_new_privs", st)
	}
	// The private /dev holds exactly the safe nodes, and writable mounts
	// are nosuid,nodev.
	devs := strings.Fields(pooltest.MustSh(t, c, "ls /dev"))
	want := map[string]bool{"null": true, "zero": true, "full": true, "random": true, "urandom": true, "tty": true,
		"ptmx": true, "pts": true, "shm": true, "mqueue": true, "fd": true, "stdin": true, "stdout": true, "stderr": true}
	for _, d := range devs {
		if !want[d] {
			t.Errorf("/dev holds %q; want only %v", d, want)
		}
	}
	mounts := pooltest.MustSh(t, c, "cat /proc/self/mounts")
	for _, l := range strings.Split(mounts, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || !strings.Contains(","+f[3]+",", ",rw,") {
			continue
		}
		// The device nodes' own binds are the only mounts with devices.
		if !strings.Contains(f[3], "nosuid") || (!strings.Contains(f[3], "nodev") && !want[strings.TrimPrefix(f[1], "/dev/")]) {
			t.Errorf("writable mount %s (%s): want nosuid,nodev", f[1], f[3])
		}
	}
	if out := pooltest.MustSh(t, c, "cat /proc/sys/kernel/shmmax"); out != strconv.FormatInt(p.opts.ShmBytes, 10) {
		t.Errorf("kernel.shmmax in the sandbox = %s; want %d", out, p.opts.ShmBytes)
	}
	if out := pooltest.MustSh(t, c, "ulimit -f"); out == "unlimited" {
		t.Errorf("RLIMIT_FSIZE unlimited in the sandbox")
	}
	// The writable state is bounded: a filler stops at StateBytes.
	pooltest.Sh(t, c, "head -c 64M /dev/zero > /tmp/fill 2>&1")
	if out, code := pooltest.Sh(t, c, "head -c 64M /dev/zero > /home/workspace/fill2 2>&1"); code == 0 {
		t.Errorf("wrote 128 MiB into a %d-byte state: %q", p.opts.StateBytes, out)
	}
	h, err := c.Health(context.Background())
	if err != nil || !h.X {
		t.Errorf("health after the escapes: %+v, %v", h, err)
	}
	for _, f := range []string{"/usr/shinken-escape"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s written on the host", f)
		}
	}
}

// TestRootlessRefused runs the provider as an unprivileged user (made for
// the test): it refuses with an error naming what to configure, and with
// AllowUnconfined says confined=false. Never confined=true as non-root.
func TestRootlessRefused(t *testing.T) {
	if os.Getenv("SHINKEN_ROOTLESS_CHILD") == "1" {
		rootlessChild(t)
		return
	}
	needX(t)
	if os.Geteuid() != 0 {
		rootlessChild(t)
		return
	}
	const name = "shinken-rootless-test"
	if _, err := user.Lookup(name); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", name).CombinedOutput(); err != nil {
			t.Skipf("useradd: %v: %s", err, out)
		}
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "rootless-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "process.test")
	if out, err := exec.Command("cp", self, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	gd := filepath.Join(dir, "guestd")
	if out, err := exec.Command("cp", guestdPath, gd).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	os.Chmod(bin, 0o755)
	os.Chown(dir, uid, gid)
	os.Chmod(gd, 0o755)
	cmd := exec.Command(bin, "-test.run=^TestRootlessRefused$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{"SHINKEN_ROOTLESS_CHILD=1", "SHINKEN_GUESTD=" + gd, "PATH=/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestRootlessRefused") {
		t.Fatalf("as %s: %v\n%s", name, err, out)
	}
}

func rootlessChild(t *testing.T) {
	gd := os.Getenv("SHINKEN_GUESTD")
	if gd == "" {
		gd = guestdPath
	}
	if os.Geteuid() == 0 {
		t.Fatal("the rootless child runs as root")
	}
	root := filepath.Join(os.TempDir(), "rootless-"+strconv.Itoa(os.Getpid()))
	defer os.RemoveAll(root)
	_, err := New(context.Background(), Options{Root: root, GuestdPath: gd, UIDLockDir: filepath.Join(root, "uids")})
	if err == nil || !errors.Is(err, pool.ErrUnsupported) || aci.CodeOf(err) != aci.CodeUnsupported ||
		!strings.Contains(err.Error(), "run the server as root") || !strings.Contains(err.Error(), "AllowUnconfined") {
		t.Fatalf("New as uid %d = %v; want a refusal naming what to configure", os.Geteuid(), err)
	}
	p, err := New(context.Background(), Options{Root: root, GuestdPath: gd, AllowUnconfined: true, UIDLockDir: filepath.Join(root, "uids")})
	if err != nil {
		t.Fatalf("New unconfined: %v", err)
	}
	defer p.Close(context.Background())
	caps := p.Capabilities()
	if caps.Confined || caps.Confinement == nil || caps.Confinement.Dev != "host" || caps.Confinement.Cgroup != "" {
		t.Fatalf("rootless caps = %+v %+v; want confined=false, host /dev, no cgroup", caps, caps.Confinement)
	}
}

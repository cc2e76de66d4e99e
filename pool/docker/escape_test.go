package docker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/internal/safecopy"
)

// The escape tests play what an agent can do with a shell in its
// container (exec runs as the agent, as launch_app does) and check that
// each attempt is contained (docs/architecture.md, "Docker hardening").

// try runs script as the agent and returns its exit code and output.
func try(t *testing.T, c *client.Client, script string) (int, string) {
	t.Helper()
	res, err := c.Exec(testCtx(t, time.Minute), wire.ExecArgs{Shell: script, TimeoutMS: 30000})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	code := -1
	if res.ExitCode != nil {
		code = *res.ExitCode
	}
	return code, string(res.Stdout) + string(res.Stderr)
}

// TestAgentEscapes: the engine's socket is absent, the root filesystem and
// every directory outside home and /tmp refuse writes (remounting does
// not help), /proc lists the container's processes only, setuid binaries
// give nothing (no-new-privileges), seccomp filters the agent's syscalls,
// it holds no capability, and filling its writable state ends at the
// tmpfs bound with the sandbox still working.
func TestAgentEscapes(t *testing.T) {
	t.Parallel()
	p := newProviderOpts(t, Options{HomeBytes: 64 << 20, TmpBytes: 32 << 20})
	ctx := testCtx(t, 3*time.Minute)
	sb, err := p.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	c := dial(t, ctx, sb)
	status := sh(t, ctx, c, "cat /proc/self/status")
	for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000"} {
		if !strings.Contains(status, want) {
			t.Errorf("agent's /proc/self/status lacks %q", want)
		}
	}
	for _, x := range []struct{ name, script string }{
		{"docker socket", "test -S /var/run/docker.sock || test -S /run/docker.sock || find / -xdev -type s -name 'docker*' 2>/dev/null | grep -q ."},
		{"write /etc", "echo x > /etc/owned"},
		{"write /usr/bin", "touch /usr/bin/owned"},
		{"write /var/tmp", "touch /var/tmp/owned"},
		{"write /opt/shinken", "touch /opt/shinken/owned"},
		{"remount / rw", "mount -o remount,rw / && touch /owned"},
		{"mount a tmpfs (setuid mount)", "mkdir -p $HOME/m && mount -t tmpfs x $HOME/m"},
		{"setuid su", "su -c id root </dev/null"},
		{"host processes", "grep -lE '^(dockerd|containerd|systemd|sshd|go)$' /proc/[0-9]*/comm"},
		{"unshare a user namespace (seccomp)", "unshare -U -r id"},
	} {
		if code, out := try(t, c, x.script); code == 0 {
			t.Errorf("%s: the agent succeeded (%q); want it refused", x.name, out)
		}
	}
	if got := sh(t, ctx, c, "cat /proc/1/comm"); got != "guestd\n" {
		t.Errorf("PID 1 seen by the agent: %q; want guestd (the container's own /proc)", got)
	}
	// The kernel mounts / read-only, home and /tmp as bounded tmpfs.
	mounts := sh(t, ctx, c, "cat /proc/mounts")
	for _, want := range []string{" / ", " /home/agent tmpfs ", " /tmp tmpfs "} {
		line := ""
		for _, l := range strings.Split(mounts, "\n") {
			if strings.Contains(l, want) {
				line = l
			}
		}
		switch {
		case line == "":
			t.Errorf("no mount %q in %s", want, mounts)
		case want == " / " && !strings.Contains(line, " ro,"):
			t.Errorf("root mount %q; want read-only", line)
		case want != " / " && (!strings.Contains(line, "size=") || !strings.Contains(line, "nosuid") || !strings.Contains(line, "nodev") || strings.Contains(line, "noexec")):
			t.Errorf("writable mount %q; want size-bounded, nosuid, nodev, exec", line)
		}
	}
	info, err := engine(t).ContainerInspect(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if hc := info.HostConfig; !hc.ReadonlyRootfs || hc.LogConfig.Config["max-size"] == "" || hc.NanoCPUs != 1e9 {
		t.Errorf("host config: read-only %v, log %v, nano cpus %d; want read-only, a capped log, 1 CPU", hc.ReadonlyRootfs, hc.LogConfig, hc.NanoCPUs)
	}
	for _, o := range info.HostConfig.SecurityOpt {
		if strings.Contains(o, "unconfined") {
			t.Errorf("security option %.60q: want the default profile", o)
		}
	}
	// Filling home stops at its tmpfs bound; the desktop keeps working.
	// (Files of 48 MiB each: one file stops at RLIMIT_FSIZE, which equals
	// the home's size, before the tmpfs is full.)
	code, out := try(t, c, "dd if=/dev/zero of=$HOME/fill bs=1M count=48 && dd if=/dev/zero of=$HOME/fill2 bs=1M count=48")
	if code == 0 || !strings.Contains(out, "No space left") {
		t.Errorf("writing 96 MiB to a 64 MiB home: exit %d %q; want ENOSPC", code, out)
	}
	sh(t, ctx, c, "rm -f $HOME/fill $HOME/fill2")
	if err := p.Alive(ctx, sb.ID); err != nil {
		t.Errorf("after the disk filler: %v", err)
	}
	if h, err := c.Health(ctx); err != nil || !h.X {
		t.Errorf("health after the disk filler: %+v %v", h, err)
	}
}

// TestSnapshotAttacks plays the snapshot attacks: links to a root-only host
// file and directory made before the snapshot are copied as links (the
// host's bytes appear nowhere in the snapshot or the fork), a 100 GB sparse
// file is refused at creation or copied as holes, and a real file beyond
// the snapshot cap fails with a typed too_large while the sandbox keeps
// working.
func TestSnapshotAttacks(t *testing.T) {
	t.Parallel()
	p := newProviderOpts(t, Options{SnapshotBytes: 48 << 20})
	ctx := testCtx(t, 4*time.Minute)
	hostDir := t.TempDir()
	secret := []byte("host-secret-" + randomID())
	if err := os.WriteFile(filepath.Join(hostDir, "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	c := dial(t, ctx, sb)
	sh(t, ctx, c, fmt.Sprintf("ln -s %s/secret $HOME/leak && ln -s %s $HOME/dirleak && ln -s /proc/1/root $HOME/rootleak && echo mine > $HOME/own", hostDir, hostDir))
	sparse, out := try(t, c, "truncate -s 100G $HOME/sparse && printf tail | dd of=$HOME/sparse bs=1 seek=107374182396 conv=notrunc 2>/dev/null")
	t.Logf("100 GB sparse file: exit %d %q", sparse, out)
	snap, err := p.Snapshot(ctx, sb.ID)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	dir := filepath.Join(p.stateDir, "snapshots", snap)
	walkNoSecret(t, dir, secret)
	if got, err := os.Readlink(filepath.Join(dir, "home", "leak")); err != nil || !strings.HasSuffix(got, "/secret") {
		t.Errorf("leak in the snapshot: %q %v; want the link itself", got, err)
	}
	forks, err := p.Fork(ctx, snap, 1, pool.Spec{})
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	fc := dial(t, ctx, forks[0])
	if got := sh(t, ctx, fc, "cat $HOME/own; cat $HOME/leak 2>/dev/null; ls $HOME/dirleak/ 2>/dev/null; true"); got != "mine\n" {
		t.Errorf("the fork reads %q; want only its own file", got)
	}
	if sparse == 0 {
		if got := sh(t, ctx, fc, "stat -c '%s %b' $HOME/sparse; tail -c 4 $HOME/sparse"); !strings.HasPrefix(got, "107374182400 ") || !strings.HasSuffix(got, "tail") {
			t.Errorf("sparse file in the fork: %q; want 100 GB long, its data kept", got)
		}
	}
	// A real file beyond the cap: too_large, and the sandbox keeps working.
	sh(t, ctx, c, "rm -f $HOME/sparse; head -c 64M /dev/urandom > $HOME/big")
	if _, err := p.Snapshot(ctx, sb.ID); !errors.Is(err, safecopy.ErrTooLarge) || aci.CodeOf(err) != aci.CodeTooLarge {
		t.Fatalf("snapshot of 64 MiB under a 48 MiB cap: got %v; want too_large", err)
	}
	if err := p.Alive(ctx, sb.ID); err != nil {
		t.Fatalf("after a refused snapshot: %v", err)
	}
	if got := sh(t, ctx, c, "echo alive"); got != "alive\n" {
		t.Errorf("after a refused snapshot the agent's shell says %q", got)
	}
	if got := len(p.Snapshots()); got != 1 {
		t.Errorf("snapshots held: %d; want 1 (the refused one left nothing)", got)
	}
}

// walkNoSecret fails if any regular file under dir holds secret (links are
// not followed).
func walkNoSecret(t *testing.T, dir string, secret []byte) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, secret) {
			t.Errorf("%s holds the host's secret", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

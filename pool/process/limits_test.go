package process

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// TestChaos (bounded): well-behaved sandboxes step (exec, screenshot,
// health) while hostile neighbours run a memory hog, a fork bomb, a disk
// filler and a CPU spinner. The well-behaved finish every step with no
// death; the memory hog ends its own sandbox with reason oom; the fork
// bomb is contained in its agent's leaf, the filler's writes fail (its
// state is bounded) and the spinner is capped, all alive; after Close
// nothing is left:
// processes, mounts, cgroups, display locks. SHINKEN_CHAOS_GOOD and
// SHINKEN_CHAOS_STEPS scale it up (defaults 4 and 40; e.g. 12 and 1500 for
// 16 sandboxes over minutes). A sandbox that dies where it should not is
// reported with why (deathReport): its exit, the head of guestd's crash
// and its pids counters, read before Close removes them.
func TestChaos(t *testing.T) {
	p := newTestProvider(t, Options{StateBytes: 128 << 20})
	if p.cgroups == nil {
		t.Skip("no cgroups on this host")
	}
	good, steps := envInt("SHINKEN_CHAOS_GOOD", 4), envInt("SHINKEN_CHAOS_STEPS", 40)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute+time.Duration(good*steps)*40*time.Millisecond)
	defer cancel()
	hostile := []struct{ name, script, reason string }{
		{"memory hog", `python3 -c 'x = bytearray(900 << 20); x[::4096] = b"x" * len(x[::4096])'`, reasonOOM},
		{"fork bomb", `f() { f | f & }; f`, ""},
		{"disk filler", `i=0; while head -c 16M /dev/zero > /home/workspace/f$i; do i=$((i+1)); done; head -c 600M /dev/zero > /tmp/big; exit 1`, ""},
		{"cpu spinner", `for i in 1 2 3 4; do (while :; do :; done) & done; wait`, ""},
	}
	spec := pool.Spec{MemoryBytes: 384 << 20, Pids: 256}
	n := good + len(hostile)
	sbs := make([]*pool.Sandbox, n)
	var nss []string
	for i := range sbs {
		sb, err := p.Create(ctx, spec)
		if err != nil {
			t.Fatalf("boot %d: %v", i, err)
		}
		sbs[i] = sb
		nss = append(nss, p.PIDNamespace(sb.ID))
	}
	var cgDirs []string
	p.mu.Lock()
	for _, b := range p.boxes {
		cgDirs = append(cgDirs, b.cg.dirs()...)
	}
	p.mu.Unlock()
	for i, h := range hostile {
		c := pooltest.Dial(t, sbs[good+i])
		// A hog may end its sandbox before exec answers.
		_, err := c.Exec(ctx, wire.ExecArgs{Shell: "(" + h.script + ") >/dev/null 2>&1 &", TimeoutMS: 5000})
		if err != nil && h.reason == "" {
			t.Fatalf("%s: start: %v%s", h.name, err, deathReport(p, sbs[good+i], err))
		}
	}
	rss0 := vmRSS()
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, good)
	for i := range good {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctx, sbs[i].GuestNetwork, sbs[i].GuestAddr)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			for s := range steps {
				sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
				res, err := c.Exec(sctx, wire.ExecArgs{Shell: fmt.Sprintf("echo step%d > $HOME/s && cat $HOME/s", s), TimeoutMS: 15000})
				if err == nil && strings.TrimSpace(string(res.Stdout)) != fmt.Sprintf("step%d", s) {
					err = fmt.Errorf("step %d: %q", s, res.Stdout)
				}
				if err == nil {
					_, err = c.Screenshot(sctx, wire.ObserveArgs{})
				}
				scancel()
				if err != nil {
					errs[i] = fmt.Errorf("step %d: %w", s, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d well-behaved sandboxes x %d steps in %s beside %d hostile ones; server RSS %d -> %d KiB", good, steps, time.Since(t0).Round(time.Millisecond), len(hostile), rss0, vmRSS())
	for i, err := range errs {
		if err != nil {
			t.Errorf("well-behaved sandbox %d: %v%s", i, err, deathReport(p, sbs[i], err))
		} else if err := p.Alive(ctx, sbs[i].ID); err != nil {
			t.Errorf("well-behaved sandbox %d: %v%s", i, err, deathReport(p, sbs[i], err))
		}
	}
	for i, h := range hostile {
		sb := sbs[good+i]
		if h.reason == "" {
			if err := p.Alive(ctx, sb.ID); err != nil {
				t.Errorf("%s: sandbox died (%v); want it alive, its forks, writes or CPU bounded%s", h.name, err, deathReport(p, sb, err))
			}
			continue
		}
		select {
		case <-sb.Dead:
		case <-ctx.Done():
			t.Fatalf("%s: sandbox alive; want sandbox_died{%s}", h.name, h.reason)
		}
		if r := sb.LimitHit(); r != h.reason {
			t.Errorf("%s: reason %q; want %q%s", h.name, r, h.reason, deathReport(p, sb, nil))
		}
	}
	// The filler stopped at the state bound.
	if st, err := os.ReadFile(filepath.Join(p.SandboxDir(sbs[good+2].ID), "tmp", "big")); err == nil && int64(len(st)) >= 600<<20 {
		t.Errorf("disk filler wrote %d bytes; want bounded", len(st))
	}
	root := p.opts.Root
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	for i, ns := range nss {
		// A namespace's id is an inode number the kernel reuses: count
		// only this test's descendants.
		var desc []string
		for pid := range pooltest.NSProcs(ns) {
			if descendsFromUs(pid) {
				st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				desc = append(desc, string(st))
			}
		}
		if len(desc) > 0 {
			t.Errorf("processes left in sandbox %d's %s: %v", i, ns, desc)
		}
	}
	p.displays.mu.Lock()
	if len(p.displays.held) > 0 {
		t.Errorf("displays held after close: %v", p.displays.held)
	}
	p.displays.mu.Unlock()
	for _, d := range cgDirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left (%v)", d, err)
		}
	}
	if m := mountsUnder(root); len(m) > 0 {
		t.Errorf("mounts left under the state root: %v", m)
	}
}

// deathReport says why sb died, for a failure message; call it before the
// sandbox is destroyed, while its directory is there. err is what the test
// met: when it says the guest went away (sandbox_died), the report first
// waits (bounded) for the provider to reap the init. It gives the
// provider's verdict (Alive: the init's exit, the limit it was ended at),
// the head of a crash in the sandbox's log (the provider logs only the
// tail, which for guestd is the end of a goroutine dump: the cause is the
// "fatal error" and "runtime:" lines at its start) and the pids of the
// sandbox's cgroup and of its agent leaf.
func deathReport(p *Provider, sb *pool.Sandbox, err error) string {
	if aci.CodeOf(err) == aci.CodeSandboxDied {
		select {
		case <-sb.Dead:
		case <-time.After(10 * time.Second):
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "\n\tsandbox %s: ", sb.ID)
	if aerr := p.Alive(context.Background(), sb.ID); aerr != nil {
		out.WriteString(aerr.Error())
	} else {
		out.WriteString("alive")
	}
	log, _ := os.ReadFile(filepath.Join(p.SandboxDir(sb.ID), "log"))
	if lines, crash := crashLines(log); crash {
		fmt.Fprintf(&out, "\n\tits crash: %s", strings.Join(lines, " | "))
	} else if len(lines) > 0 {
		fmt.Fprintf(&out, "\n\tits log ends: %s", strings.Join(lines, " | "))
	}
	p.mu.Lock()
	var dirs []string
	if b := p.boxes[sb.ID]; b != nil && b.cg != nil {
		dirs = b.cg.dirs()
	}
	p.mu.Unlock()
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pids.max")); err != nil {
			continue // another v1 controller's directory
		}
		read := func(leaf, file string) string {
			b, _ := os.ReadFile(filepath.Join(d, leaf, file))
			return strings.TrimSpace(string(b))
		}
		fmt.Fprintf(&out, "\n\tpids now: sandbox %s of %s, agent leaf %s of %s (a full agent leaf has refused %d forks)",
			read("", "pids.current"), read("", "pids.max"), read("agent", "pids.current"), read("agent", "pids.max"),
			readKV(filepath.Join(d, "agent", "pids.events"))["max"])
	}
	if bytes.Contains(log, []byte("failed to create new OS thread")) {
		out.WriteString("\n\tguestd could not create a thread (EAGAIN: a pids limit). guestd steps into the agent's cgroups " +
			"to fork the agent's processes (guest/cgroups.go, AgentCgroups.Start; docs/architecture.md, \"Sandbox limits\"): " +
			"while it is there its threads count against the agent leaf's pids.max, which the agent's own processes can fill")
	}
	return out.String()
}

// crashLines picks from a sandbox's log the lines that say why its init or
// guestd ended: a Go crash's "fatal error:", "panic:", "runtime:" and
// "SIGxxx:" lines (the goroutine dump after them is left out) and the
// init's own "sandbox init:" line, with crash true; failing those, its last
// three lines.
func crashLines(log []byte) (lines []string, crash bool) {
	var out, last []string
	for _, l := range strings.Split(string(log), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		sig, _, _ := strings.Cut(l, ": ")
		crash := strings.HasPrefix(sig, "SIG") && sig == strings.ToUpper(sig) && !strings.Contains(sig, " ")
		for _, p := range []string{"fatal error:", "panic:", "runtime:", "sandbox init:"} {
			crash = crash || strings.HasPrefix(l, p)
		}
		if crash && len(out) < 6 {
			out = append(out, l)
		}
		if last = append(last, l); len(last) > 3 {
			last = last[1:]
		}
	}
	if len(out) == 0 {
		return last, false
	}
	return out, true
}

// mountsUnder lists this mount namespace's mounts under dir.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.HasPrefix(fs[4], dir+"/") {
			out = append(out, fs[4])
		}
	}
	return out
}

// BenchmarkBootCgroups: one sandbox's boot (to hello) and teardown with
// its cgroup and watch against the same without cgroups, interleaved in
// one run; the ratios are with/without. boot_ratio_setup_only is a cgroup
// whose CPU limits no boot reaches: the setup's own cost.
//
//	go test -run '^$' -bench BenchmarkBootCgroups -benchtime 10x ./pool/process/
func BenchmarkBootCgroups(b *testing.B) {
	with := newTestProvider(b, Options{})
	without := newTestProvider(b, Options{noCgroups: true})
	// The cgroup's setup alone: limits no boot reaches, the most weight.
	setup := newTestProvider(b, Options{CPUs: 64, CPUWeight: 10000})
	if with.cgroups == nil {
		b.Skip("no cgroups on this host")
	}
	ctx := context.Background()
	var bootW, bootWO, downW, downWO, bootS, downS time.Duration
	cycle := func(p *Provider, boot, down *time.Duration) {
		t0 := time.Now()
		sb, err := p.Create(ctx, pool.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := p.Destroy(ctx, sb.ID); err != nil {
			b.Fatal(err)
		}
		*boot += t1.Sub(t0)
		*down += time.Since(t1)
	}
	b.ResetTimer()
	for range b.N {
		cycle(with, &bootW, &downW)
		cycle(without, &bootWO, &downWO)
		cycle(setup, &bootS, &downS)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(ms(bootW), "boot_ms_cgroups")
	b.ReportMetric(ms(bootWO), "boot_ms_plain")
	b.ReportMetric(float64(bootW)/float64(bootWO), "boot_ratio")
	b.ReportMetric(float64(bootS)/float64(bootWO), "boot_ratio_setup_only")
	b.ReportMetric(ms(downW), "destroy_ms_cgroups")
	b.ReportMetric(ms(downWO), "destroy_ms_plain")
	b.ReportMetric(float64(downW)/float64(downWO), "destroy_ratio")
}

// vmRSS is this process's resident set in KiB.
func vmRSS() int {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// descendsFromUs reports whether pid is a descendant of this process.
func descendsFromUs(pid int) bool {
	for range 64 {
		st, err := procstat.Read(pid)
		if err != nil {
			return false
		}
		pp := st.PPID
		if pp == os.Getpid() {
			return true
		}
		if pp <= 1 {
			return false
		}
		pid = pp
	}
	return false
}

// envInt is the positive integer in $name, or def.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

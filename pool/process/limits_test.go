package process

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
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
// 16 sandboxes over minutes).
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
			t.Fatalf("%s: start: %v", h.name, err)
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
			t.Errorf("well-behaved sandbox %d: %v", i, err)
		}
		if err := p.Alive(ctx, sbs[i].ID); err != nil {
			t.Errorf("well-behaved sandbox %d: %v", i, err)
		}
	}
	for i, h := range hostile {
		sb := sbs[good+i]
		if h.reason == "" {
			if err := p.Alive(ctx, sb.ID); err != nil {
				t.Errorf("%s: sandbox died (%v); want it alive, its forks, writes or CPU bounded", h.name, err)
			}
			continue
		}
		select {
		case <-sb.Dead:
		case <-ctx.Done():
			t.Fatalf("%s: sandbox alive; want sandbox_died{%s}", h.name, h.reason)
		}
		if r := sb.LimitHit(); r != h.reason {
			t.Errorf("%s: reason %q; want %q", h.name, r, h.reason)
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
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		i := strings.LastIndexByte(string(st), ')')
		f := strings.Fields(string(st[i+1:]))
		if len(f) < 2 {
			return false
		}
		pp, _ := strconv.Atoi(f[1])
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

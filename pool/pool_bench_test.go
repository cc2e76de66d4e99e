package pool_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// Benchmarks report medians (p50) with b.ReportMetric; run them with a
// fixed count, e.g.
//
//	go test ./pool -run '^$' -bench . -benchtime 10x
//
// BenchmarkIdleCapacity is opt-in: SHINKEN_BENCH_CAPACITY=64 (the target).

func p50(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

// coldBoots times n Create+hello of the provider (the baseline).
func coldBoots(b *testing.B, prov pool.Provider, n int) []time.Duration {
	var ds []time.Duration
	for range n {
		start := time.Now()
		sb, err := prov.Create(ctxT(b), pool.Spec{})
		ds = append(ds, time.Since(start))
		if err != nil {
			b.Fatalf("Create: %v", err)
		}
		if err := prov.Destroy(ctxT(b), sb.ID); err != nil {
			b.Fatalf("Destroy: %v", err)
		}
	}
	return ds
}

func BenchmarkColdBoot(b *testing.B) {
	prov := newProvider(b)
	b.ResetTimer()
	ds := coldBoots(b, prov, b.N)
	b.ReportMetric(p50(ds), "ms/boot-p50")
}

func BenchmarkLeaseWarm(b *testing.B) {
	prov := newProvider(b)
	p := newPool(b, prov, pool.Config{Size: 2})
	cold := p50(coldBoots(b, prov, 3))
	var ds []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := p.WaitWarm(ctxT(b), 1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		l, err := p.Lease(ctxT(b))
		ds = append(ds, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		l.Release(ctxT(b))
	}
	b.ReportMetric(p50(ds), "ms/lease-p50")
	b.ReportMetric(cold, "ms/coldboot-p50")
	b.ReportMetric(cold/max(p50(ds), 0.001), "x-faster-than-boot")
}

func BenchmarkResetGolden(b *testing.B) {
	prov := newProvider(b)
	p := newPool(b, prov, pool.Config{Size: 1, ReplicasPerGolden: 2})
	setup := func(ctx context.Context, l *pool.Lease) error {
		return l.Guest().PutFile(ctx, wire.PutFileArgs{Path: "/home/workspace/task.txt", Data: []byte("x")})
	}
	l, err := p.LeaseGolden(ctxT(b), "task", setup)
	if err != nil {
		b.Fatal(err)
	}
	l.Release(ctxT(b))
	cold := p50(coldBoots(b, prov, 3))
	var ds []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := p.WaitReplicas(ctxT(b), "task", 1); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		l, err := p.LeaseGolden(ctxT(b), "task", setup)
		ds = append(ds, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		l.Release(ctxT(b))
	}
	b.ReportMetric(p50(ds), "ms/reset-p50")
	b.ReportMetric(cold, "ms/coldboot-p50")
	b.ReportMetric(cold/max(p50(ds), 0.001), "x-faster-than-boot")
}

func BenchmarkFork(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			prov := newProvider(b)
			p := newPool(b, prov, pool.Config{Size: 1, MaxSandboxes: n + 4, MaxConcurrentBoots: 8})
			src, err := p.Lease(ctxT(b))
			if err != nil {
				b.Fatal(err)
			}
			defer src.Release(ctxT(b))
			var ds []time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				forks, err := p.Fork(ctxT(b), src, n)
				ds = append(ds, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for _, f := range forks {
					f.Release(ctxT(b))
				}
				// Let teardown finish before the next fork.
				for p.Stats().Leased > 1 {
					time.Sleep(10 * time.Millisecond)
				}
				b.StartTimer()
			}
			b.ReportMetric(p50(ds), "ms/fork-p50")
		})
	}
}

// sandboxRSS sums VmRSS (KiB) of the processes in pid namespace ns.
func sandboxRSS(ns string) int64 {
	var kib int64
	for pid := range pooltest.NSProcs(ns) {
		f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				kib += n
			}
		}
		f.Close()
	}
	return kib
}

func BenchmarkIdleRSS(b *testing.B) {
	prov := newProvider(b)
	const n = 4
	var ids []string
	for range n {
		sb, err := prov.Create(ctxT(b), pool.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, sb.ID)
	}
	time.Sleep(time.Second) // let the desktops settle to idle before measuring
	b.ResetTimer()
	var total int64
	for range b.N {
		total = 0
		for _, id := range ids {
			total += sandboxRSS(prov.PIDNamespace(id))
		}
	}
	b.ReportMetric(float64(total)/n/1024, "MiB-RSS/sandbox")
}

// BenchmarkIdleCapacity boots idle sandboxes until SHINKEN_BENCH_CAPACITY
// are up (or a boot fails, or free memory drops under 10%), and reports
// how many this machine held.
func BenchmarkIdleCapacity(b *testing.B) {
	target, _ := strconv.Atoi(os.Getenv("SHINKEN_BENCH_CAPACITY"))
	if target <= 0 {
		b.Skip("opt-in: set SHINKEN_BENCH_CAPACITY=64")
	}
	prov := newProvider(b)
	p := newPool(b, prov, pool.Config{Size: target, MaxSandboxes: target, MaxConcurrentBoots: 2, HealthInterval: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	held := 0
	for held < target {
		if err := p.WaitWarm(ctx, held+1); err != nil {
			b.Logf("stopped at %d: %v", held, err)
			break
		}
		held = p.Stats().Warm
		if memAvailableFrac() < 0.10 {
			b.Logf("stopped at %d: under 10%% memory available", held)
			break
		}
	}
	// All of them answer.
	for range held {
		l, err := p.Lease(ctx)
		if err != nil {
			break
		}
		if h, err := l.Guest().Health(ctx); err != nil || !h.X {
			b.Errorf("sandbox %s unhealthy: %+v %v", l.ID(), h, err)
		}
	}
	b.ReportMetric(float64(held), "idle-sandboxes")
	b.ReportMetric(100*(1-memAvailableFrac()), "%mem-used")
}

func memAvailableFrac() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 1
	}
	var total, avail float64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			avail = v
		}
	}
	if total == 0 {
		return 1
	}
	return avail / total
}

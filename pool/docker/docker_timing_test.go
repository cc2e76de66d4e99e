package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/process"
)

// Benchmarks compare the docker provider with the process provider in the
// same run. Suggested: go test ./pool/docker -run '^$' -bench . -benchtime 3x

type benchProvider interface {
	pool.Provider
	pool.Snapshotter
	pool.Forker
}

// providers yields the docker provider and, where the host allows it, the
// process provider as the baseline.
func providers(b *testing.B) map[string]func(b *testing.B) benchProvider {
	return map[string]func(b *testing.B) benchProvider{
		"docker": func(b *testing.B) benchProvider { return newProvider(b) },
		"process": func(b *testing.B) benchProvider {
			if guestdBin == "" {
				b.Skip(skipWhy)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p, err := process.New(ctx, process.Options{GuestdPath: guestdBin, Root: b.TempDir()})
			if err != nil {
				b.Skipf("process provider unavailable: %v", err)
			}
			b.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				p.Close(ctx)
			})
			return p
		},
	}
}

var providerOrder = []string{"process", "docker"}

// BenchmarkColdCreate: one sandbox from nothing to guest hello.
func BenchmarkColdCreate(b *testing.B) {
	all := providers(b)
	for _, name := range providerOrder {
		b.Run(name, func(b *testing.B) {
			p := all[name](b)
			ctx := testCtx(b, 10*time.Minute)
			for b.Loop() {
				sb, err := p.Create(ctx, pool.Spec{})
				if err != nil {
					b.Fatalf("Create: %v", err)
				}
				b.StopTimer()
				p.Destroy(ctx, sb.ID)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkFork: n sandboxes from one snapshot, each up to hello.
func BenchmarkFork(b *testing.B) {
	all := providers(b)
	for _, name := range providerOrder {
		for _, n := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("%s/n=%d", name, n), func(b *testing.B) {
				p := all[name](b)
				ctx := testCtx(b, 10*time.Minute)
				sb, err := p.Create(ctx, pool.Spec{})
				if err != nil {
					b.Fatalf("Create: %v", err)
				}
				snap, err := p.Snapshot(ctx, sb.ID)
				if err != nil {
					b.Fatalf("Snapshot: %v", err)
				}
				for b.Loop() {
					sbs, err := p.Fork(ctx, snap, n, pool.Spec{})
					if err != nil {
						b.Fatalf("Fork(%d): %v", n, err)
					}
					b.StopTimer()
					for _, s := range sbs {
						p.Destroy(ctx, s.ID)
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N*n), "ms/sandbox")
			})
		}
	}
}

// BenchmarkMemoryPerSandbox reports the resident memory of one idle desktop
// (Xvfb + openbox + guestd): for docker the sum of RSS of the container's
// processes, for process that of the sandbox's pid namespace, both read from
// the host's /proc.
func BenchmarkMemoryPerSandbox(b *testing.B) {
	all := providers(b)
	for _, name := range providerOrder {
		b.Run(name, func(b *testing.B) {
			p := all[name](b)
			ctx := testCtx(b, 10*time.Minute)
			var total int64
			for b.Loop() {
				sb, err := p.Create(ctx, pool.Spec{})
				if err != nil {
					b.Fatalf("Create: %v", err)
				}
				b.StopTimer()
				ns, err := pidNamespace(ctx, p, sb.ID)
				if err != nil {
					b.Fatalf("pid namespace: %v", err)
				}
				rss, err := rssOfNamespace(ns)
				if err != nil {
					b.Fatalf("rss: %v", err)
				}
				total += rss
				p.Destroy(ctx, sb.ID)
				b.StartTimer()
			}
			b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "MiB-rss/sandbox")
		})
	}
}

// pidNamespace returns the "pid:[inode]" link of a sandbox's pid namespace.
func pidNamespace(ctx context.Context, p benchProvider, id string) (string, error) {
	var pid int
	switch p := p.(type) {
	case *Provider:
		info, err := p.cli.ContainerInspect(ctx, id)
		if err != nil {
			return "", err
		}
		pid = info.State.Pid
	case *process.Provider:
		pid = p.InitPID(id)
	}
	if pid == 0 {
		return "", fmt.Errorf("no pid for %s", id)
	}
	return os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
}

// rssOfNamespace sums VmRSS over the host's processes in pid namespace ns.
func rssOfNamespace(ns string) (int64, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "pid")); err != nil || l != ns {
			continue
		}
		st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(st), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				sum += kb << 10
			}
		}
	}
	return sum, nil
}

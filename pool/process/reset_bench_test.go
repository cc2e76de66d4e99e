package process

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/pool"
)

// BenchmarkReset compares the two ways a sandbox gets back to a task's
// checkpoint (a snapshot of a desktop with an xterm, like xterm-hello-file's
// golden): in place (ResetInPlace of a sandbox after an episode) and by a
// boot (Restore of a new sandbox, and Destroy of the old one). Each
// iteration ends with the relaunched xterm's window mapped. It reports
// milliseconds per reset and the CPU seconds the whole process tree spent
// (this process and every sandbox, reaped or not).
//
// Each runs twice, with the sandboxes' cgroups ("cgroups/") and without
// ("plain/"), so the cgroups' cost reads as a ratio from one run.
//
//	go test ./pool/process -run '^$' -bench Reset -benchtime 10x
func BenchmarkReset(b *testing.B) {
	if _, err := exec.LookPath("xterm"); err != nil {
		b.Skip("xterm not installed")
	}
	b.Run("cgroups", func(b *testing.B) {
		p := newTestProvider(b, Options{})
		if p.cgroups == nil {
			b.Skip("no cgroups on this host")
		}
		benchReset(b, p)
	})
	b.Run("plain", func(b *testing.B) { benchReset(b, newTestProvider(b, Options{noCgroups: true})) })
}

func benchReset(b *testing.B, p *Provider) {
	ctx := context.Background()
	sb, err := p.Create(ctx, pool.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.Dial(ctx, sb.GuestNetwork, sb.GuestAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-title", "golden"}}}); err != nil {
		b.Fatal(err)
	}
	snap, err := p.Snapshot(ctx, sb.ID)
	if err != nil {
		b.Fatal(err)
	}
	awaitXterm := func(c *client.Client) {
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if ws, err := c.ListWindows(ctx); err == nil {
				for _, w := range ws.Windows {
					if w.Title == "golden" {
						return
					}
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.Fatal("xterm never mapped")
	}
	episode := func(c *client.Client) {
		if _, err := c.Exec(ctx, wire.ExecArgs{Shell: `echo dirty > "$HOME/dirty" && (setsid sleep 600 </dev/null >/dev/null 2>&1 &)`}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("inplace", func(b *testing.B) {
		cpu0 := treeCPU()
		for b.Loop() {
			episode(c)
			if err := p.ResetInPlace(ctx, sb.ID, snap, c); err != nil {
				b.Fatal(err)
			}
			awaitXterm(c)
		}
		b.ReportMetric((treeCPU()-cpu0)/float64(b.N), "cpu-s/op")
	})
	b.Run("reboot", func(b *testing.B) {
		cur, cc := sb, c
		cpu0 := treeCPU()
		for b.Loop() {
			episode(cc)
			nsb, err := p.Restore(ctx, snap, pool.Spec{})
			if err != nil {
				b.Fatal(err)
			}
			if cc != c {
				cc.Close()
			}
			if cur != sb {
				p.Destroy(ctx, cur.ID)
			}
			cur = nsb
			if cc, err = client.Dial(ctx, nsb.GuestNetwork, nsb.GuestAddr); err != nil {
				b.Fatal(err)
			}
			awaitXterm(cc)
		}
		b.ReportMetric((treeCPU()-cpu0)/float64(b.N), "cpu-s/op")
	})
	b.Run("files", func(b *testing.B) {
		// The restore step alone (last: it keeps no bus directory): home, workspace and /tmp emptied and
		// refilled from the snapshot.
		p.mu.Lock()
		bx, dir := p.boxes[sb.ID], p.snaps[snap]
		p.mu.Unlock()
		for b.Loop() {
			for _, d := range writableDirs {
				if err := restoreTree(ctx, filepath.Join(dir, d), filepath.Join(bx.dir, d), bx.uidOr(-1), bx.uidOr(-1), keepSession(d, bx.display)); err != nil {
					b.Fatal(err)
				}
			}
		}
		var bytes int64
		filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				bytes += fi.Size()
			}
			return nil
		})
		b.ReportMetric(float64(bytes)/1024, "snapshot-KiB")
	})
}

// treeCPU is the CPU seconds of this process and all its live descendants,
// each with its reaped children's.
func treeCPU() float64 {
	type st struct {
		ppid int
		cpu  float64
	}
	procs := map[int]st{}
	for _, p := range procstat.All() {
		ticks := float64(p.UTime + p.STime + p.CUTime + p.CSTime)
		procs[p.PID] = st{p.PPID, ticks / 100} // USER_HZ
	}
	self := os.Getpid()
	total := 0.0
	for pid, p := range procs {
		for a, i := pid, 0; i < 64 && a > 1; i++ {
			if a == self {
				total += p.cpu
				break
			}
			a = procs[a].ppid
		}
	}
	return total
}

package guest

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// BenchmarkObserveNoDamage measures an observe of an unchanged 1280x800
// screen whose frame the caller holds, inside guestd (no socket): with X
// DAMAGE it answers not_modified from the last capture without reading a
// pixel; the baseline in the same run is the capture-and-hash path it
// replaces (GetImage, convert, hash, compare), with DAMAGE switched off.
func BenchmarkObserveNoDamage(b *testing.B) {
	if _, err := exec.LookPath("Xvfb"); err != nil {
		b.Skip("Xvfb not on PATH")
	}
	ctx := context.Background()
	sess, err := StartSession(ctx, SessionConfig{Screen: "1280x800x24", WM: "none"})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	s, err := NewServer(Config{Display: sess.Display()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	settle := &aci.Settle{FirstMS: 200, QuietMS: 300, MaxMS: 2000}
	first, err := s.observe(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		damage bool
		settle *aci.Settle
	}{{"baseline_capture_hash", false, nil}, {"damage_not_modified", true, nil}, {"damage_not_modified_settled", true, settle}} {
		b.Run(c.name, func(b *testing.B) {
			s.x.run(ctx, 0, func(x *xconn) error { x.dmg.ok = c.damage; return nil })
			args := wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, Settle: c.settle}, IfNoneMatch: []string{first.Hash}}
			durs := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				shot, err := s.observe(ctx, args, nil)
				durs = append(durs, time.Since(t0))
				if err != nil || !shot.NotModified {
					b.Fatalf("got %+v, %v; want not_modified", shot, err)
				}
			}
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1e6, "p50_ms")
			b.ReportMetric(float64(durs[len(durs)*95/100].Nanoseconds())/1e6, "p95_ms")
		})
	}
}

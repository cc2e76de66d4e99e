package guest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// baselineP50 is the xdotool+scrot step's p50, measured first in the same run.
var baselineP50 time.Duration

func p50(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

func report(b *testing.B, d []time.Duration, vsBaseline bool) time.Duration {
	m := p50(d)
	b.ReportMetric(float64(m.Microseconds())/1000, "p50_ms")
	if vsBaseline && baselineP50 > 0 {
		b.ReportMetric(float64(baselineP50)/float64(m), "x_vs_xdotool_scrot")
	}
	return m
}

// BenchmarkActObserve measures one agent step — a click, then a capture of
// the 1280x800 screen — through the real unix socket, against the common way
// of doing the same (xdotool click + scrot capture as subprocesses).
func BenchmarkActObserve(b *testing.B) {
	d := startDesk(b, 1280, 800, "")
	r := recorder(b, d, 0, 0, 1280, 800)
	for i := 0; i < 16; i++ { // something to look at
		r.Fill(i*80, i*50, 200, 120, uint32(0x203040+i*0x0a0b0c))
	}
	points := [][2]float64{{100, 100}, {700, 400}, {1200, 750}}

	b.Run("baseline_xdotool_scrot", func(b *testing.B) {
		for _, tool := range []string{"xdotool", "scrot"} {
			if _, err := exec.LookPath(tool); err != nil {
				b.Skipf("%s not installed", tool)
			}
		}
		out := filepath.Join(b.TempDir(), "shot.png")
		env := append(os.Environ(), "DISPLAY="+d.sess.Display())
		durs := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			p := points[i%len(points)]
			start := time.Now()
			click := exec.Command("xdotool", "mousemove", itoa(p[0]), itoa(p[1]), "click", "1")
			click.Env = env
			if err := click.Run(); err != nil {
				b.Fatal(err)
			}
			shot := exec.Command("scrot", "-o", out)
			shot.Env = env
			if err := shot.Run(); err != nil {
				b.Fatal(err)
			}
			durs = append(durs, time.Since(start))
		}
		baselineP50 = report(b, durs, false)
	})

	ctx := context.Background()
	for _, c := range []struct {
		name   string
		format string
		have   bool
	}{{"not_modified", aci.FormatPNG, true}, {"raw", aci.FormatRaw, false}, {"png", aci.FormatPNG, false}, {"jpeg", aci.FormatJPEG, false}} {
		b.Run("guestd_"+c.name, func(b *testing.B) {
			obs := &wire.ObserveArgs{Observe: aci.Observe{Format: c.format}}
			if c.have {
				shot, err := d.cl.Screenshot(ctx, *obs)
				if err != nil {
					b.Fatal(err)
				}
				obs.IfNoneMatch = []string{shot.Hash}
			}
			durs := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := points[i%len(points)]
				start := time.Now()
				res, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Click, Target: aci.Px(p[0], p[1])}, Observe: obs})
				if err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(start))
				if c.have != res.Obs.NotModified {
					b.Fatalf("not_modified got %v; want %v", res.Obs.NotModified, c.have)
				}
			}
			report(b, durs, true)
		})
	}
}

func itoa(f float64) string { return formatInt(int(f)) }

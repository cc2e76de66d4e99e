package guest_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest"
	"github.com/shinken-rl/shinken/guest/wire"
)

// benchStep is one way of taking an agent step: do the action, return the
// frame's hash as it came back.
type benchStep func(b *testing.B, a aci.Action) string

// BenchmarkSettledStep measures a click step and a typing step on each
// shipped app three ways in the same run: guestd's settled step (act, then
// a capture once the screen settled on X DAMAGE), the OSWorld way (act, a
// fixed 2 s sleep, a screenshot) and xdotool + scrot as subprocesses. Each
// reports p50/p95 latency and how often the returned frame showed the
// action's whole effect (it equals the frame the screen settles on, among
// the steps where the app drew). Run with -benchtime=Nx (each iteration of
// the OSWorld way costs 2 s).
func BenchmarkSettledStep(b *testing.B) {
	for _, tool := range []string{"xdotool", "scrot"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not installed", tool)
		}
	}
	for _, app := range shippedApps() {
		b.Run(app.app, func(b *testing.B) {
			d := appDesk(b)
			win := launchApp(b, d, app)
			env := append(os.Environ(), "DISPLAY="+d.sess.Display())
			shotFile := filepath.Join(b.TempDir(), "shot.png")
			ctx := context.Background()
			ways := []struct {
				name string
				step benchStep
			}{
				{"guestd_settled", func(b *testing.B, a aci.Action) string {
					res, err := d.cl.Act(ctx, wire.ActArgs{Action: a, Observe: &wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, Settle: defaultSettle()}}})
					if err != nil {
						b.Fatal(err)
					}
					return res.Obs.Hash
				}},
				{"osworld_sleep2s", func(b *testing.B, a aci.Action) string {
					if _, err := d.cl.Act(ctx, wire.ActArgs{Action: a}); err != nil {
						b.Fatal(err)
					}
					time.Sleep(2 * time.Second) // the baseline's fixed wait
					shot, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG}})
					if err != nil {
						b.Fatal(err)
					}
					return shot.Hash
				}},
				{"xdotool_scrot", func(b *testing.B, a aci.Action) string {
					run(b, env, xdotoolArgs(a)...)
					run(b, env, "scrot", "-o", shotFile)
					return pngHash(b, shotFile)
				}},
			}
			for _, kind := range []string{"click", "type"} {
				var aa appAction
				for _, x := range app.acts {
					if x.name == kind {
						aa = x
					}
				}
				for _, w := range ways {
					b.Run(kind+"/"+w.name, func(b *testing.B) {
						var durs []time.Duration
						drew, shown := 0, 0
						for i := 0; i < b.N; i++ {
							pre := settled(b, d, &aci.Settle{QuietMS: 300, MaxMS: 5000})
							a := aa.act(win)
							if aa.alt != nil && i%2 == 1 {
								a = aa.alt(win)
							}
							if a.Verb == aci.TypeText {
								a.Text = string(rune('1' + i%9))
							}
							start := time.Now()
							got := w.step(b, a)
							durs = append(durs, time.Since(start))
							final := settled(b, d, &aci.Settle{FirstMS: 300, QuietMS: 500, MaxMS: 5000})
							if final.Hash != pre.Hash {
								drew++
								if got == final.Hash {
									shown++
								}
							}
							if aa.undo != nil {
								act(b, d, *aa.undo)
							}
						}
						slices.Sort(durs)
						b.ReportMetric(float64(durs[len(durs)/2].Microseconds())/1000, "p50_ms")
						b.ReportMetric(float64(durs[(len(durs)*95)/100].Microseconds())/1000, "p95_ms")
						if drew > 0 {
							b.ReportMetric(100*float64(shown)/float64(drew), "effect_shown_%")
						}
						b.ReportMetric(float64(drew), "steps_drawn")
					})
				}
			}
		})
	}
}

// xdotoolArgs is the xdotool command line doing a (clicks and typing).
func xdotoolArgs(a aci.Action) []string {
	switch a.Verb {
	case aci.Click, aci.DoubleClick:
		args := []string{"xdotool", "mousemove", strconv.Itoa(int(a.Target.X)), strconv.Itoa(int(a.Target.Y)), "click"}
		if a.Verb == aci.DoubleClick {
			args = append(args, "--repeat", "2")
		}
		return append(args, "1")
	case aci.TypeText:
		return []string{"xdotool", "type", "--", a.Text}
	}
	panic(fmt.Sprintf("xdotoolArgs: %s", a.Verb))
}

func run(b *testing.B, env []string, argv ...string) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v: %v: %s", argv, err, out)
	}
}

// pngHash is the frame hash of a PNG's pixels, comparable with a raw capture.
func pngHash(b *testing.B, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		b.Fatal(err)
	}
	r := img.Bounds()
	rgb := make([]byte, 0, r.Dx()*r.Dy()*3)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := img.At(x, y)
			if n, ok := img.(*image.NRGBA); ok {
				c = n.NRGBAAt(x, y)
			}
			cr, cg, cb, _ := c.RGBA()
			rgb = append(rgb, byte(cr>>8), byte(cg>>8), byte(cb>>8))
		}
	}
	return guest.FrameHash(rgb, r.Dx(), r.Dy())
}

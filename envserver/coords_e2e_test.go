package envserver_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/guest/wire"
)

// xrecd builds the recording X client (guest/internal/xrec/xrecd) and
// returns its bytes: a sandbox sees none of the host's tree, so tests put it
// inside with installXrecd.
func xrecd(t *testing.T) []byte {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "xrecd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/shinken-rl/shinken/guest/internal/xrec/xrecd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build xrecd: %v: %s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// installXrecd puts the recorder into env's sandbox and returns its path there.
func installXrecd(t *testing.T, s *servertest.Server, envID string, bin []byte) string {
	t.Helper()
	g, err := envserver.EnvGuest(s.Server, envID)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const path = "/tmp/xrecd"
	if err := g.PutFile(ctx, wire.PutFileArgs{Path: path, Data: bin, Mode: 0o755}); err != nil {
		t.Fatalf("put xrecd into the sandbox: %v", err)
	}
	return path
}

// oneStep runs one step on env and returns its result, failing on a
// request-level error.
func oneStep(t *testing.T, s *servertest.Server, obs *api.Observe, st api.StepEnv) api.Result {
	t.Helper()
	r := step(t, s, api.StepRequest{Steps: []api.StepEnv{st}, Observe: obs})
	if len(r.Results) != 1 || r.Results[0].Error != nil {
		t.Fatalf("step: %+v", r.Results)
	}
	return r.Results[0]
}

// presses reads the recorder's log inside the sandbox until it holds n
// presses (the recorder writes as the X server delivers them).
func pressesIn(t *testing.T, s *servertest.Server, envID string, n int) [][2]int {
	t.Helper()
	g, err := envserver.EnvGuest(s.Server, envID)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		res, err := g.Exec(ctx, wire.ExecArgs{Shell: "cat ~/xrec.log 2>/dev/null; true"})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var out [][2]int
		for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
			var b, x, y int
			if _, err := fmt.Sscanf(line, "press %d %d %d", &b, &x, &y); err == nil {
				out = append(out, [2]int{x, y})
			}
		}
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFrameCoordsLandOnTheScreenPixel: with a downscaled frame (max_long_edge
// 640) and with the active window's frame, a click given in frame pixels —
// as a typed point_px or point_norm target, or in pyautogui or xml model
// text — lands on the screen pixel the frame's display descriptor maps it
// to, read back by a recording X client inside the sandbox, over real HTTP.
func TestFrameCoordsLandOnTheScreenPixel(t *testing.T) {
	s := server(t)
	bin := xrecd(t)
	for _, sc := range []struct {
		name string
		obs  *api.Observe
	}{
		{"screen-640", &api.Observe{Format: aci.FormatPNG, MaxLongEdge: 640}},
		{"active-window-640", &api.Observe{Format: aci.FormatPNG, MaxLongEdge: 640, Scope: aci.ScopeActiveWindow}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}, Observe: sc.obs})
			env := r.Results[0].EnvID
			defer closeEnvs(s, env)
			// The recorder: a managed 900x600 window, activated by the WM.
			rec := installXrecd(t, s, env, bin)
			res := oneStep(t, s, sc.obs, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.LaunchApp, App: rec, Args: []string{"xrec.log", "900", "600"}}})
			if res.Info.Error != nil || len(res.Info.Results) != 1 || res.Info.Results[0].WindowID == 0 {
				t.Fatalf("launch recorder: %+v %+v", res.Info.Error, res.Info.Results)
			}
			win := res.Info.Results[0].WindowID
			res = oneStep(t, s, sc.obs, api.StepEnv{EnvID: env, Actions: []aci.Action{{Verb: aci.ActivateWindow, WindowID: win}, {Verb: aci.ListWindows}}})
			var rect aci.Rect
			for _, w := range res.Info.Results[1].Windows {
				if w.ID == win {
					rect = w.Geometry
				}
			}
			if rect.W != 900 || rect.H != 600 {
				t.Fatalf("recorder window geometry %+v; want 900x600 (windows %+v)", rect, res.Info.Results[1].Windows)
			}
			d := res.Obs.Display
			if sc.obs.Scope == aci.ScopeActiveWindow && d.SourceRect != rect {
				t.Fatalf("active_window frame shows %+v; want the recorder's %+v", d.SourceRect, rect)
			}
			if max(d.Delivered.W, d.Delivered.H) != 640 {
				t.Fatalf("delivered %dx%d; want a long edge of 640", d.Delivered.W, d.Delivered.H)
			}
			// Frame pixels inside the recorder: the frame maps pixel p to
			// source origin + floor(p * source / delivered).
			toFrame := func(sx, sy int) (float64, float64) {
				return math.Ceil(float64((sx-d.SourceRect.X)*d.Delivered.W) / float64(d.SourceRect.W)),
					math.Ceil(float64((sy-d.SourceRect.Y)*d.Delivered.H) / float64(d.SourceRect.H))
			}
			want := func(fx, fy float64) [2]int {
				return [2]int{d.SourceRect.X + int(math.Floor(fx*float64(d.SourceRect.W)/float64(d.Delivered.W))),
					d.SourceRect.Y + int(math.Floor(fy*float64(d.SourceRect.H)/float64(d.Delivered.H)))}
			}
			fx, fy := toFrame(rect.X+37, rect.Y+51)
			gx, gy := toFrame(rect.X+rect.W-41, rect.Y+rect.H-23)
			nx, ny := toFrame(rect.X+rect.W/2, rect.Y+rect.H/3)
			normX, normY := nx/float64(d.Delivered.W-1), ny/float64(d.Delivered.H-1)
			// UI-TARS text with no declared coords is read in its family's
			// default space, 0..1000 of the frame.
			kx, ky := math.Round(nx*1000/float64(d.Delivered.W-1)), math.Round(ny*1000/float64(d.Delivered.H-1))
			kfx, kfy := math.Round(kx/1000*float64(d.Delivered.W-1)), math.Round(ky/1000*float64(d.Delivered.H-1))
			cases := []struct {
				name string
				st   api.StepEnv
				want [2]int
				own  bool // the text's own space: no coords on the step
			}{
				{"typed-px", api.StepEnv{Action: &aci.Action{Verb: aci.Click, Target: aci.Px(fx, fy)}}, want(fx, fy), false},
				{"typed-norm", api.StepEnv{Action: &aci.Action{Verb: aci.Click, Target: aci.Norm(normX, normY)}},
					want(math.Round(normX*float64(d.Delivered.W-1)), math.Round(normY*float64(d.Delivered.H-1))), false},
				{"pyautogui", api.StepEnv{Text: ptr(fmt.Sprintf("pyautogui.click(%d, %d)", int(gx), int(gy))), Dialect: "pyautogui"}, want(gx, gy), false},
				{"xml", api.StepEnv{Text: ptr(fmt.Sprintf(`<click x="%d" y="%d"/>`, int(fx)+3, int(fy)+2)), Dialect: "xml"}, want(fx+3, fy+2), false},
				{"uitars-norm1000", api.StepEnv{Text: ptr(fmt.Sprintf("Thought: the middle.\nAction: click(start_box='(%d,%d)')", int(kx), int(ky))), Dialect: "uitars"}, want(kfx, kfy), true},
			}
			for i, c := range cases {
				c.st.EnvID = env
				if !c.own {
					c.st.Coords = aci.CoordsFrame
				}
				res := oneStep(t, s, sc.obs, c.st)
				if res.Info.Error != nil {
					t.Fatalf("%s: %v", c.name, res.Info.Error)
				}
				if c.st.Text != nil && (res.Info.Dialect != c.st.Dialect || len(res.Info.Actions) != 1 || res.Info.Actions[0].Target == nil ||
					[2]int{int(res.Info.Actions[0].Target.X), int(res.Info.Actions[0].Target.Y)} != c.want) {
					t.Errorf("%s: info dialect %q actions %+v; want %s and one click at %v", c.name, res.Info.Dialect, res.Info.Actions, c.st.Dialect, c.want)
				}
				if res.Obs.Display != d {
					t.Fatalf("%s: the frame's descriptor moved (%+v, was %+v)", c.name, res.Obs.Display, d)
				}
				got := pressesIn(t, s, env, i+1)
				if len(got) != i+1 || got[i] != c.want {
					t.Errorf("%s: presses %v; want press %d at %v", c.name, got, i+1, c.want)
				}
			}
			// A frame point outside the frame is refused, never clamped.
			res = oneStep(t, s, sc.obs, api.StepEnv{EnvID: env, Coords: aci.CoordsFrame,
				Action: &aci.Action{Verb: aci.Click, Target: aci.Px(float64(d.Delivered.W), 1)}})
			if res.Info.Error == nil || res.Info.Error.Code != aci.CodeInvalidAction || res.Info.Results[0].Status != string(aci.CodeInvalidAction) {
				t.Errorf("click off the frame: got %+v %+v; want invalid_action", res.Info.Error, res.Info.Results)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

package envserver_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// chromium finds a headless-capable Chromium; "" when none is installed.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// needChromium skips the test where no Chromium is installed.
func needChromium(t *testing.T) string {
	t.Helper()
	bin := chromium()
	if bin == "" {
		t.Skip("chromium not installed (make deps installs it)")
	}
	return bin
}

// newBrowser starts a headless Chromium for the test and ends it after.
func newBrowser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	bin := needChromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1400, 900),
		chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", bin, err)
	}
	return ctx
}

// shot saves a screenshot of the page as name under $SHINKEN_UI_SHOTS (the
// docs folder when refreshing the README's pictures), else the test's temp
// dir, and checks it is a real picture.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() < 800 {
		t.Fatalf("screenshot %s: not a page-sized PNG (%v)", name, err)
	}
	dir := os.Getenv("SHINKEN_UI_SHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// within runs actions with a deadline of their own, so a failed wait
// leaves the browser usable for a diagnosis.
func within(ctx context.Context, d time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// dump logs the page's text, for a failure's diagnosis.
func dump(t *testing.T, ctx context.Context) {
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 4000) + "\n" + document.getElementById('env-grid')?.innerHTML.slice(0, 3000)`))
	t.Logf("page (%v):\n%s", err, html)
}

// text reads an element's text content by selector.
func text(ctx context.Context, sel string) (string, error) {
	return chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
}

// TestWebUI drives the UI in a real headless browser against a real server
// with a token: the login, the pool view while an env steps (its thumbnail
// changes), an episode's replay stepped by keyboard, the episode list and
// the task view, with a screenshot of each view.
func TestWebUI(t *testing.T) {
	const token = "ui-test-token"
	needChromium(t)
	t0 := time.Now()
	s := servertest.Start(t, servertest.Options{Pool: 2, Token: token})
	t.Logf("server up in %s", time.Since(t0))
	ctx := newBrowser(t, 90*time.Second)
	t.Logf("browser up in %s", time.Since(t0))

	// Without the token the UI is refused: a login page with 401, and the
	// JSON API and frames answer 401 too.
	for _, p := range []string{"/ui/", "/ui/api/pool", "/ui/api/episodes", "/ui/static/app.js"} {
		r, err := http.Get(s.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: got %d; want 401", p, r.StatusCode)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("form#login"))); err != nil {
		t.Fatalf("login page: %v", err)
	}
	if n, _ := text(ctx, "body"); strings.Contains(n, "Envs") {
		t.Fatalf("the UI showed without a token")
	}

	// Env A steps on its own until the test ends; env B plays a task
	// through, once with model text and tokens.
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-count-lines"}, {Task: "xterm-hello-file"}}})
	envA, envB := r.Results[0].EnvID, r.Results[1].EnvID
	defer closeEnvs(s, envA, envB)
	stepper := startStepper(t, s, envA)
	defer stepper()

	text1 := "pyautogui.write(\"echo 'hello shinken' > ~/hello.txt\")\npyautogui.press('enter')"
	steps := []api.StepEnv{
		{EnvID: envB, Action: &aci.Action{Verb: aci.Click, Target: aci.Px(200, 200)}},
		{EnvID: envB, Text: &text1, Dialect: "pyautogui", Tokens: &api.Tokens{PromptIDs: []int{1, 2, 3, 4}, ResponseIDs: []int{5, 6, 7}, FinishReason: "stop"}},
		{EnvID: envB, Actions: []aci.Action{{Verb: aci.Wait, MS: 300}, {Verb: aci.Done}}},
	}
	var epB string
	for i, st := range steps {
		rr := step(t, s, api.StepRequest{Steps: []api.StepEnv{st}})
		res := rr.Results[0]
		if res.Error != nil || (res.Info != nil && res.Info.Error != nil) {
			t.Fatalf("env B step %d: %v %+v", i, res.Error, res.Info)
		}
		epB = res.EpisodeID
		if i == len(steps)-1 && (!res.Terminated || rv(res) != 1) {
			t.Fatalf("env B: got terminated=%v reward %v; want a passed episode", res.Terminated, rv(res))
		}
	}

	t.Logf("episodes played in %s", time.Since(t0))
	// Sign in through the form: the token never appears in a URL.
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token),
		chromedp.Submit(chromedp.CSS(`form#login`)),
		chromedp.WaitVisible(chromedp.CSS(`#pool-view`)),
	); err != nil {
		t.Fatalf("login: %v", err)
	}
	href, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(href, token) {
		t.Fatalf("the token is in the URL after login: %s", href)
	}

	// Pool view: env A's thumbnail shows a frame, then a newer one.
	cardA := fmt.Sprintf(`.env-card[data-env=%q]`, envA)
	if err := within(ctx, 15*time.Second, chromedp.WaitVisible(chromedp.CSS(cardA+` img.thumb[data-frame]`))); err != nil {
		dump(t, ctx)
		t.Fatalf("pool view: env A's thumbnail: %v", err)
	}
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(cardA+` img.thumb`), "data-frame"))
	if err != nil || !attr.Exists {
		t.Fatalf("pool view: env A's thumbnail has no frame: %v", err)
	}
	first := attr.Value
	js := fmt.Sprintf(`(() => { const i = document.querySelector(%q); return !!i && i.dataset.frame !== %q && i.naturalWidth > 0; })()`, cardA+" img.thumb", first)
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("env A's thumbnail never changed from %s while it stepped: %v", first, err)
	}
	// The gauges have samples and the sandboxes are listed.
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.querySelector('#gauges .gauge[data-name=leased] .val').textContent !== '–' && document.querySelectorAll('#sandboxes .badge').length > 0`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("gauges or sandboxes never filled: %v", err)
	}
	if st, _ := text(ctx, fmt.Sprintf(`.env-card[data-env=%q] .badge`, envB)); !strings.HasPrefix(st, "over") {
		t.Errorf("env B's state: got %q; want over", st)
	}
	shot(t, ctx, "ui-pool.png")

	// Episodes view lists env B's episode; its link opens the replay.
	row := fmt.Sprintf(`#episodes-table tr[data-episode=%q]`, epB)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/#/episodes?task=xterm-hello-file"),
		chromedp.WaitVisible(chromedp.CSS(row)),
	); err != nil {
		t.Fatalf("episodes view: %v", err)
	}
	if got, _ := text(ctx, row); !strings.Contains(got, "task_complete") || !strings.Contains(got, "xterm-hello-file") {
		t.Errorf("episode row: got %q; want task_complete on xterm-hello-file", got)
	}

	// Replay: step 1 shows the click marked on its frame; the keyboard
	// steps to the model's text and token counts, then to the end.
	imgLoaded := `(() => { const i = document.getElementById('replay-img'); return !!i && i.complete && i.naturalWidth > 0; })()`
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(row+" a")),
		chromedp.WaitVisible(chromedp.CSS(`#replay-view`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('pos-label').textContent === 'step 1 / 3'`, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.WaitVisible(chromedp.CSS(`#replay-overlay g.mark[data-verb=click] circle`)),
		chromedp.Poll[chromedp.Void](imgLoaded, chromedp.WithPollingTimeout(10*time.Second)),
	); err != nil {
		t.Fatalf("replay step 1: %v", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.KeyEvent(kb.ArrowRight),
		chromedp.Poll[chromedp.Void](`document.getElementById('pos-label').textContent === 'step 2 / 3'`, chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.WaitVisible(chromedp.CSS(`#model-text`)),
		chromedp.Poll[chromedp.Void](imgLoaded, chromedp.WithPollingTimeout(10*time.Second)),
	); err != nil {
		t.Fatalf("replay step 2: %v", err)
	}
	if got, _ := text(ctx, "#model-text"); !strings.Contains(got, "hello shinken") {
		t.Errorf("model text: got %q", got)
	}
	if got, _ := text(ctx, "#step-detail"); !strings.Contains(got, "response tokens3") || !strings.Contains(got, "prompt tokens4") {
		t.Errorf("step detail: got %q; want the token counts", got)
	}
	if got, _ := text(ctx, "#replay-overlay"); !strings.Contains(got, "hello shinken") {
		t.Errorf("overlay: got %q; want the typed text drawn", got)
	}
	shot(t, ctx, "ui-episode.png")
	// The head shows what the episode could do and what of it was used.
	if got, _ := text(ctx, "#episode-head"); !strings.Contains(got, "Capabilities") || !strings.Contains(got, "appsxterm") || !strings.Contains(got, "Audit (") {
		t.Errorf("episode head: got %q; want the capabilities (apps xterm) and the audit", got)
	}
	if err := chromedp.Do(ctx,
		chromedp.KeyEvent(kb.End),
		chromedp.Poll[chromedp.Void](`document.getElementById('pos-label').textContent === 'end (3 steps)'`, chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.KeyEvent(kb.ArrowLeft),
		chromedp.Poll[chromedp.Void](`document.getElementById('pos-label').textContent === 'step 3 / 3'`, chromedp.WithPollingTimeout(5*time.Second)),
	); err != nil {
		t.Fatalf("replay keyboard: %v", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`#raw-link`), "href"))
	if err != nil || !strings.HasSuffix(raw.Value, "/ui/api/episodes/"+epB) {
		t.Errorf("raw link: got %q (%v)", raw.Value, err)
	}

	// Tasks view: the played task passed its one recent episode.
	taskRow := `#tasks-table tr[data-task="xterm-hello-file"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/ui/#/tasks"),
		chromedp.WaitVisible(chromedp.CSS(taskRow)),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).textContent.includes('100%%')`, taskRow+" td.pass"), chromedp.WithPollingTimeout(10*time.Second)),
	); err != nil {
		t.Fatalf("tasks view: %v", err)
	}
	// A family shows what its seeds draw: sample instances beside the template.
	samples, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(`#tasks-table tr[data-task="xterm-count-lines"] td.instr`)))
	if err != nil ||
		!strings.Contains(samples, "{{.file}}") || !strings.Contains(samples, "train seed 1: Count the lines of ~/") ||
		!strings.Contains(samples, "test seed 0: Count the lines of ~/") {
		t.Errorf("tasks view: family cell %q (%v); want the template and sample instances", samples, err)
	}
	shot(t, ctx, "ui-tasks.png")

	// The GIF export of the replay is a real animated image.
	req, _ := http.NewRequest("GET", s.URL+"/ui/api/episodes/"+epB+"/replay.gif", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := servertest.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/gif" {
		t.Fatalf("replay.gif: got %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// startStepper steps env in the background (typing into its terminal,
// resetting when an episode ends) until the returned stop is called.
func startStepper(t *testing.T, s *servertest.Server, env string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			var r api.BatchReply
			_, _, err := s.Call("/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env,
				Actions: []aci.Action{{Verb: aci.TypeText, Text: fmt.Sprintf("echo %d", i)}, {Verb: aci.Key, Keys: "Return"}}}}}, &r)
			if err != nil {
				t.Errorf("stepper: %v", err)
				return
			}
			if res := r.Results[0]; res.Error != nil || res.Terminated || res.Truncated {
				var rr api.BatchReply
				if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: "xterm-count-lines"}}}, &rr); err != nil {
					t.Errorf("stepper reset: %v", err)
					return
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

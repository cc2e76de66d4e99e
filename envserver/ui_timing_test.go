package envserver_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// TestUICost measures what the web UI costs the server while 16 envs step:
// the server process's CPU seconds and the bytes it sends, per second, with
// the pool view open in a headless browser (with its thumbnails, and with
// full frames for comparison) and with it closed, alternating in one run so
// that every phase sees the same load.
// It runs only with SHINKEN_UI_BENCH=1 (SHINKEN_UI_BENCH_SECONDS sets each
// phase's length, default 20):
//
//	SHINKEN_UI_BENCH=1 go test -count=1 -run TestUICost -v ./envserver/
func TestUICost(t *testing.T) {
	if os.Getenv("SHINKEN_UI_BENCH") == "" {
		t.Skip("a measurement, not a check: set SHINKEN_UI_BENCH=1 to run it")
	}
	phase := 20 * time.Second
	if v, err := strconv.Atoi(os.Getenv("SHINKEN_UI_BENCH_SECONDS")); err == nil && v > 0 {
		phase = time.Duration(v) * time.Second
	}
	needChromium(t)
	const n = 16
	const task = "xterm-count-lines"
	s := servertest.Start(t, servertest.Options{Pool: n, Replicas: 2, Edit: nil})
	ctx := newBrowser(t, 10*time.Minute)
	var req api.ResetRequest
	for i := 0; i < n; i++ {
		req.Envs = append(req.Envs, api.ResetEnv{Task: task})
	}
	r := reset(t, s, req)
	envs := make([]string, n)
	for i, res := range r.Results {
		envs[i] = res.EnvID
	}
	defer closeEnvs(s, envs...)

	type totals struct {
		cpu            time.Duration
		sent, trainer  float64
		uiReqs, steps  float64
		metricsReplies float64
	}
	var trainerBytes, stepCount float64
	var metricsBody float64
	read := func() totals {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		sent, uiReqs := scrape(t, s.URL)
		tot := totals{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), sent: sent.bytes, uiReqs: uiReqs,
			trainer: trainerBytes, steps: stepCount, metricsReplies: metricsBody}
		metricsBody += sent.body
		return tot
	}
	stepFor := func(d time.Duration) {
		end := time.Now().Add(d)
		k := 0
		for time.Now().Before(end) {
			var sr api.StepRequest
			// Each env types its own text: every screen differs, so the
			// pool view has a new thumbnail per env per step to fetch.
			for i, id := range envs {
				sr.Steps = append(sr.Steps, api.StepEnv{EnvID: id, Actions: []aci.Action{
					{Verb: aci.TypeText, Text: fmt.Sprintf("echo env %d step %d", i, k)}, {Verb: aci.Key, Keys: "Return"}}})
			}
			k++
			var rep api.BatchReply
			_, size, err := s.Call("/v1/step", sr, &rep)
			if err != nil {
				t.Fatalf("step: %v", err)
			}
			trainerBytes += float64(size)
			stepCount += float64(len(sr.Steps))
			var again api.ResetRequest
			for _, res := range rep.Results {
				if res.Error != nil || res.Terminated || res.Truncated {
					again.Envs = append(again.Envs, api.ResetEnv{EnvID: res.EnvID, Task: task})
				}
			}
			if len(again.Envs) > 0 {
				var rr api.BatchReply
				_, size, err := s.Call("/v1/reset", again, &rr)
				if err != nil {
					t.Fatalf("reset: %v", err)
				}
				trainerBytes += float64(size)
			}
		}
	}
	type result struct {
		name                        string
		cpuPS, bytesPS, stepsPS, rq float64
	}
	var results []result
	views := []struct{ name, path string }{
		{"closed", ""},
		{"open", "/ui/#/pool"},              // thumbnails, as the UI ships
		{"open-full", "/ui/#/pool?thumb=0"}, // full frames, for comparison
	}
	for round := 0; round < 2; round++ {
		for _, v := range views {
			target, name, open := "about:blank", v.name, v.path != ""
			if open {
				target = s.URL + v.path
			}
			if err := chromedp.Do(ctx, chromedp.Navigate(target)); err != nil {
				t.Fatal(err)
			}
			if open {
				if err := within(ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS(`#env-grid .env-card img.thumb[data-frame]`))); err != nil {
					t.Fatalf("pool view: %v", err)
				}
			}
			if v.name == "open" && round == 1 && os.Getenv("SHINKEN_UI_SHOTS") != "" {
				// The README's picture of a busy pool.
				if err := within(ctx, 30*time.Second, chromedp.WaitVisible(chromedp.CSS(`#env-grid .env-card:nth-child(5) img.thumb[data-frame]`))); err == nil {
					shot(t, ctx, "ui-pool-16.png")
				}
			}
			a := read()
			t0 := time.Now()
			stepFor(phase)
			b := read()
			secs := time.Since(t0).Seconds()
			ui := (b.sent - a.sent) - (b.trainer - a.trainer) - (b.metricsReplies - a.metricsReplies)
			results = append(results, result{name: name, cpuPS: (b.cpu - a.cpu).Seconds() / secs, bytesPS: ui / secs,
				stepsPS: (b.steps - a.steps) / secs, rq: (b.uiReqs - a.uiReqs) / secs})
		}
	}
	t.Logf("UI cost, %d envs stepping, %s phases (server process CPU includes the in-process trainer client, the same in both):", n, phase)
	t.Logf("%-9s %12s %14s %10s %10s", "pool UI", "CPU s/s", "UI bytes/s", "steps/s", "UI req/s")
	for _, r := range results {
		t.Logf("%-9s %12.3f %14.0f %10.1f %10.1f", r.name, r.cpuPS, r.bytesPS, r.stepsPS, r.rq)
	}
}

// scraped is what TestUICost reads from /metrics.
type scraped struct{ bytes, body float64 }

// scrape reads the server's bytes-sent counter and its count of UI requests
// from /metrics; body is the size of that metrics reply, which the counter
// includes from the next scrape on.
func scrape(t *testing.T, url string) (scraped, float64) {
	t.Helper()
	// Uncompressed, so the body's length is what the server counted.
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	r, err := c.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out scraped
	out.body = float64(len(b))
	var ui float64
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch {
		case f[0] == "shinken_bytes_sent_total":
			out.bytes = v
		case strings.HasPrefix(f[0], `shinken_requests_total{`) && strings.Contains(f[0], `route="ui"`):
			ui += v
		}
	}
	return out, ui
}

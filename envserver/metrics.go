package envserver

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shinken-rl/shinken/pool"
)

// metrics are the server's Prometheus series. Labels are bounded: routes,
// outcomes (the closed set of error codes plus "ok") and fixed states.
type metrics struct {
	reg *prometheus.Registry

	requests     *prometheus.CounterVec   // route, code
	resets       *prometheus.CounterVec   // outcome
	steps        *prometheus.CounterVec   // outcome
	forks        *prometheus.CounterVec   // outcome
	checkpoints  *prometheus.CounterVec   // outcome
	stepSecs     prometheus.Histogram     // one env's step, server side
	reqSecs      *prometheus.HistogramVec // route
	frames       *prometheus.CounterVec   // result: encoded|not_modified|cache_hit|cache_miss
	framesSent   *prometheus.CounterVec   // result: sent|skipped_have
	bytesSent    prometheus.Counter
	episodes     *prometheus.CounterVec // exit_reason
	saveFailures prometheus.Counter
	inflight     prometheus.Gauge
}

func newMetrics(p poolSet, cache *frameCache, envCount func() int) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_requests_total", Help: "HTTP requests by route and status code."}, []string{"route", "code"})
	m.resets = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_resets_total", Help: "Env resets by outcome (ok or error code)."}, []string{"outcome"})
	m.steps = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_steps_total", Help: "Env steps by outcome (ok, an error code, or replayed: a resent step answered from storage)."}, []string{"outcome"})
	m.forks = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_forks_total", Help: "Forked envs by outcome (ok or error code)."}, []string{"outcome"})
	m.checkpoints = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_checkpoints_total", Help: "Checkpoints asked for by outcome (ok or error code)."}, []string{"outcome"})
	m.stepSecs = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shinken_step_seconds", Help: "Server-side latency of one env's step (actions + observation).",
		Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10}})
	m.reqSecs = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "shinken_request_seconds", Help: "HTTP request latency by route.",
		Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30}}, []string{"route"})
	m.frames = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_frames_total", Help: "Observations by how their bytes were obtained: encoded (guest encoded them), not_modified (guest skipped the encode), cache_hit / cache_miss (shared frame cache lookups)."}, []string{"result"})
	m.framesSent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_frames_sent_total", Help: "Frames per reply: sent, or skipped because the client listed them in have."}, []string{"result"})
	m.bytesSent = prometheus.NewCounter(prometheus.CounterOpts{Name: "shinken_bytes_sent_total", Help: "Response body bytes sent."})
	m.episodes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_episodes_total", Help: "Finished episodes by exit reason."}, []string{"exit_reason"})
	m.saveFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "shinken_episode_save_failures_total", Help: "Episodes that could not be written to disk (journal or final save); the reply's save_error and the log say why."})
	m.inflight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "shinken_inflight_requests", Help: "Reset, step, fork and close requests being served."})
	for _, c := range []prometheus.Collector{m.inflight, m.saveFailures, m.requests, m.resets, m.steps, m.forks, m.checkpoints, m.stepSecs, m.reqSecs, m.frames, m.framesSent, m.bytesSent, m.episodes} {
		f(c)
	}
	// Series with a closed label set exist from the start, so a reader
	// tells "none yet" (0) from "not exported".
	for _, r := range []string{"encoded", "not_modified", "cache_hit", "cache_miss"} {
		m.frames.WithLabelValues(r)
	}
	for _, r := range []string{"sent", "skipped_have"} {
		m.framesSent.WithLabelValues(r)
	}
	poolGauge := func(state string, v func(pool.Stats) int) {
		f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_pool_sandboxes", Help: "Sandboxes by state.", ConstLabels: prometheus.Labels{"state": state}},
			func() float64 { return float64(v(p.Stats())) }))
	}
	poolGauge("warm", func(s pool.Stats) int { return s.Warm })
	poolGauge("leased", func(s pool.Stats) int { return s.Leased })
	poolGauge("booting", func(s pool.Stats) int { return s.Booting })
	poolGauge("replica", func(s pool.Stats) int { return s.Replicas })
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_pool_queued", Help: "Callers queued for a sandbox or for room under max_sandboxes (served first come, first served)."},
		func() float64 { return float64(p.Stats().Queued) }))
	// Scaling signals (docs/kubernetes.md, "Scaling"): episodes this server
	// can still take now (warm, or booted on demand under max_sandboxes),
	// less the resets already queued; never below 0.
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_pool_max_sandboxes", Help: "The cap on live sandboxes (max_sandboxes)."},
		func() float64 { return float64(p.MaxSandboxes()) }))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_capacity_free", Help: "Episodes this server can still start: max_sandboxes minus leased sandboxes minus queued callers, at least 0."},
		func() float64 { s := p.Stats(); return float64(max(0, p.MaxSandboxes()-s.Leased-s.Queued)) }))
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shinken_sandbox_deaths_total", Help: "Sandboxes that died (Xvfb, WM or guestd gone)."},
		func() float64 { return float64(p.Stats().Deaths) }))
	for _, r := range pool.LimitReasons {
		f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shinken_sandbox_limit_kills_total", Help: "Sandboxes killed at one of their limits, by reason (oom: memory).",
			ConstLabels: prometheus.Labels{"reason": r}},
			func() float64 { return float64(p.Stats().LimitDeaths[r]) }))
	}
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shinken_sandbox_boots_total", Help: "Sandboxes booted (cold, restored or forked)."},
		func() float64 { return float64(p.Stats().Boots) }))
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shinken_sandbox_boot_failures_total", Help: "Failed sandbox boot attempts (each retried, or reported once retries are spent); the log has each cause."},
		func() float64 { return float64(p.Stats().BootFailures) }))
	poolGauge("resetting", func(s pool.Stats) int { return s.Resetting })
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shinken_sandbox_resets_in_place_total", Help: "Sandboxes reset in place to a checkpoint (docs/architecture.md, \"Sandbox lifecycle and reset in place\")."},
		func() float64 { return float64(p.Stats().Resets) }))
	f(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "shinken_sandbox_reset_failures_total", Help: "In-place resets that failed (the sandbox was retired and replaced by a boot); the log has each cause."},
		func() float64 { return float64(p.Stats().ResetFailures) }))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_envs", Help: "Open envs."}, func() float64 { return float64(envCount()) }))
	f(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_frame_cache_bytes", Help: "Bytes held by the shared frame cache."},
		func() float64 { _, b := cache.stats(); return float64(b) }))
	f(prometheus.NewGoCollector())
	return m
}

// outcome is the bounded label for a result: "ok" or its error code.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	return string(codeOf(err))
}

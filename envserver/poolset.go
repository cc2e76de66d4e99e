package envserver

import "github.com/shinken-rl/shinken/pool"

// poolSet is the server's pools, the default screen's and each extra
// size's (docs/api.md, "Per-env screens"), seen as one by the metrics and
// the spec: their sandboxes, queues and counters add up.
type poolSet []*pool.Pool

// Stats sums the pools' stats.
func (ps poolSet) Stats() pool.Stats {
	var t pool.Stats
	for _, p := range ps {
		s := p.Stats()
		t.Warm += s.Warm
		t.Leased += s.Leased
		t.Booting += s.Booting
		t.Goldens += s.Goldens
		t.Replicas += s.Replicas
		t.Queued += s.Queued
		t.Deaths += s.Deaths
		t.Boots += s.Boots
		t.BootFailures += s.BootFailures
		t.OnDemandRestores += s.OnDemandRestores
		t.Resetting += s.Resetting
		t.Resets += s.Resets
		t.ResetFailures += s.ResetFailures
		t.BootFailStreak = max(t.BootFailStreak, s.BootFailStreak)
		for r, n := range s.LimitDeaths {
			if t.LimitDeaths == nil {
				t.LimitDeaths = map[string]uint64{}
			}
			t.LimitDeaths[r] += n
		}
	}
	return t
}

// MaxSandboxes sums the pools' caps on live sandboxes.
func (ps poolSet) MaxSandboxes() int {
	n := 0
	for _, p := range ps {
		n += p.MaxSandboxes()
	}
	return n
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
)

func TestMeminfoField(t *testing.T) {
	b := []byte("MemTotal:       24589756 kB\nMemFree:        20000000 kB\nMemAvailable:   22000000 kB\nHugePages_Total:       4\n")
	if got := meminfoField(b, "MemAvailable"); got != 22000000<<10 {
		t.Errorf("MemAvailable = %d", got)
	}
	if got := meminfoField(b, "HugePages_Total"); got != 4 {
		t.Errorf("a count without a unit = %d", got)
	}
	if got := meminfoField(b, "Mem"); got != 0 {
		t.Errorf("a prefix matched: %d", got)
	}
	if got := meminfoField([]byte("MemAvailable: x kB\n"), "MemAvailable"); got != 0 {
		t.Errorf("garbage parsed as %d", got)
	}
	if memAvailable() <= 0 {
		t.Error("no MemAvailable on this host")
	}
}

func TestErrKind(t *testing.T) {
	wrapped := fmt.Errorf("env e1: %w", aci.Errorf(aci.CodePoolExhausted, "no room"))
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{wrapped, "pool_exhausted"},
		{fmt.Errorf("post: %w", context.DeadlineExceeded), "client_timeout"},
		{errors.New("connection reset by peer"), "transport"},
	} {
		if got := errKind(c.err); got != c.want {
			t.Errorf("errKind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
	if got := kinds(map[string]int{"timeout": 1, "pool_exhausted": 3}); got != "pool_exhausted 3, timeout 1" {
		t.Errorf("kinds = %q", got)
	}
	if kinds(nil) != "-" {
		t.Error("empty kinds")
	}
}

func TestDensityTablesRender(t *testing.T) {
	d := &Density{Task: "shop-buy-cheapest", N: 48, Pool: 48, Batch: 8, PeriodS: 3, HoldS: 60, ResetOK: 46, ResetFailed: 2,
		ResetErrors: map[string]int{"timeout": 2}, Steps: 900, Expected: 920, Step: Dist{P50: 80, P95: 400, Max: 1200},
		HoldCPU: 60, HoldHost: 90, PSSPerDesktop: 210.5, MemAvailStartMiB: 20480, MemAvailMinMiB: 10240, MemAvailMinAt: "hold"}
	md := densityMarkdown(d)
	for _, want := range []string{"## Density", "| 46 of 48 | 2 (timeout 2) |", "| 900 (920) | 0 (-) | 80 / 400 / 1200 |", "| 1.00 / 1.50 |", "| 210.5 (", "20.00 / 10.00 (hold)"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestExpectedSteps(t *testing.T) {
	for _, c := range []struct {
		envs         int
		hold, period time.Duration
		want         int
	}{
		{3, 10 * time.Second, 3 * time.Second, 10}, // offsets 0,1,2 s: 4+3+3
		{1, 60 * time.Second, 3 * time.Second, 20},
		{48, 60 * time.Second, 3 * time.Second, 960},
		{4, time.Second, 3 * time.Second, 2}, // offsets 0, 0.75 s start; 1.5, 2.25 s do not
		{0, time.Minute, 3 * time.Second, 0},
	} {
		if got := expectedSteps(c.envs, c.hold, c.period); got != c.want {
			t.Errorf("expectedSteps(%d, %s, %s) = %d, want %d", c.envs, c.hold, c.period, got, c.want)
		}
	}
}

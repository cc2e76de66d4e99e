package bench

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // 1..100 ms, unsorted
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	d := Summarize(ds)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", d.P50, 50}, {"p95", d.P95, 95}, {"p99", d.P99, 99},
		{"mean", d.Mean, 50.5}, {"min", d.Min, 1}, {"max", d.Max, 100},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v; want %v", c.name, c.got, c.want)
		}
	}
	if d.N != 100 {
		t.Errorf("n: got %d; want 100", d.N)
	}
	if got := Summarize(nil); got != (Dist{}) {
		t.Errorf("empty: got %+v; want zero", got)
	}
	one := Summarize([]time.Duration{7 * time.Millisecond})
	if one.P50 != 7 || one.P99 != 7 {
		t.Errorf("single sample: got p50 %v p99 %v; want 7 7", one.P50, one.P99)
	}
}

package bench

import (
	"math"
	"slices"
	"time"
)

// Dist summarizes a sample of durations in milliseconds.
type Dist struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P95  float64 `json:"p95_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
	Min  float64 `json:"min_ms"`
	Max  float64 `json:"max_ms"`
}

// Summarize computes a Dist over ds. Percentiles use the nearest-rank method
// on the sorted sample, so they are always observed values.
func Summarize(ds []time.Duration) Dist {
	if len(ds) == 0 {
		return Dist{}
	}
	ms := make([]float64, len(ds))
	sum := 0.0
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	slices.Sort(ms)
	return Dist{
		N: len(ms), P50: rank(ms, 0.50), P95: rank(ms, 0.95), P99: rank(ms, 0.99),
		Mean: sum / float64(len(ms)), Min: ms[0], Max: ms[len(ms)-1],
	}
}

// rank returns the nearest-rank p-quantile of a sorted, non-empty sample.
func rank(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ratio returns a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

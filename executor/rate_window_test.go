package executor

import (
	"testing"
	"time"
)

// TestRateWindowExtremes: a window longer than a time.Duration holds (a very slow rate) was
// converted from float64 out of range, which gives the most negative Duration on amd64, and so
// clamped to the shortest window: {PerSecond: 1e-9, Burst: 10}, meant as 10 calls per 10 min at
// most, allowed 10 calls per 100 ms.
func TestRateWindowExtremes(t *testing.T) {
	for _, c := range []struct {
		r     Rate
		n     int64
		w     time.Duration
		label string
	}{
		{Rate{PerSecond: 0.0001, Burst: 10}, 10, maxWindow, "documented slow rate"},
		{Rate{PerSecond: 1e-9, Burst: 10}, 10, maxWindow, "a window past time.Duration"},
		{Rate{PerSecond: 1e-300}, 1, maxWindow, "a window past float64"},
		{Rate{PerSecond: 1000, Burst: 1}, 1, minWindow, "documented fast rate"},
		{Rate{PerSecond: 5, Burst: 10}, 10, 2 * time.Second, "plain"},
		// A rate past int64 (no limit in practice) was converted out of range: the most
		// negative int64 on amd64, so 1 call per 100 ms.
		{Rate{PerSecond: 1e19}, maxWindowCalls, minWindow, "a rate past int64"},
		{Rate{PerSecond: 1e300}, maxWindowCalls, minWindow, "a rate past int64, far"},
		{Rate{PerSecond: 1e15}, 1e15, time.Second, "a fast rate within float64's integers"},
	} {
		if n, w := c.r.window(); n != c.n || w != c.w {
			t.Errorf("%s: %+v.window() = %d per %s, want %d per %s", c.label, c.r, n, w, c.n, c.w)
		}
	}
}

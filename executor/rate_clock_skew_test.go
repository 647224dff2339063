package executor

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRateWindowsAcrossSkewedClocks: every executor counted a call in the rate window of its
// own host's clock, so two executors whose clocks disagree by more than a window counted in
// different windows and never saw each other's calls: each allowed the whole rate (two
// executors, twice the limit; with windows of 100 ms, a skew of 100 ms sufficed). The rate
// windows follow the NATS server's clock (the limits stream's), whatever the hosts' clocks.
func TestRateWindowsAcrossSkewedClocks(t *testing.T) {
	rate := Rate{PerSecond: 1.0 / 600, Burst: 2} // 2 calls per 10 min
	limits := Limits{Tools: map[string]Rate{"fixture__echo": rate}}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ahead := func() time.Time { return time.Now().Add(time.Hour) } // six windows ahead
	r.startExecutor(r.managerConfig(Config{Limits: limits, Workers: 2, hooks: testHooks{hostClock: ahead}}), r.env.Connect(t))
	r.waitTool("fixture__echo")
	for i := range 2 {
		if res := r.call("local", "fixture__echo", `{"text":"ahead"}`); res.Status != subjects.CallOK {
			t.Fatalf("call %d of the rate's 2, on the executor whose clock is an hour ahead: %s %+v", i, res.Status, res.Error)
		}
	}
	// A second executor, on a clock that is right: the tool's 2 calls of the window are used.
	exact := r.startExecutor(r.managerConfig(Config{Limits: limits, Workers: 2}), r.env.Connect(t))
	r.waitTool("fixture__echo")
	for i := 0; exact.Stats().Handled == 0; i++ {
		if i == 50 {
			t.Fatal("the second executor handled none of 50 calls")
		}
		res := r.call("local", "fixture__echo", `{"text":"exact"}`)
		if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeRateLimited {
			t.Fatalf("call %d past the rate's 2 calls per 10 min (second executor handled %d): %s %+v, want rate_limited",
				i, exact.Stats().Handled, res.Status, res.Error)
		}
	}
}

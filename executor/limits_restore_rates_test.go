package executor

import (
	"context"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// loseLimits removes the limits stream and the slots bucket, as a NATS restart without its
// store loses them (memory storage).
func loseLimits(t *testing.T, env *natstest.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, subjects.LimitsStream); err != nil {
		t.Fatal(err)
	}
	loseSlots(t, env)
}

// TestOldRestoreFailureRefusesNoRatedCall is TestOldRestoreFailureRefusesNoCall for an
// executor with rate limits and no concurrency cap: no call of it takes a slot, and a call
// that took a slot was the only one to end a restore failure the state had come back from
// (declared by another executor). At the next loss, every call finding the (quick) try
// running was refused at once with a failure hours old. A counted call ends it too there.
func TestOldRestoreFailureRefusesNoRatedCall(t *testing.T) {
	env := natstest.Start(t)
	rated := []scopeLimit{{subjects.LimitScopeTool, "t", Rate{PerSecond: 1000}}}
	cfg := Config{Limits: Limits{Tools: map[string]Rate{"*": rated[0].rate}}}
	l := newTestLimiter(t, env, cfg)
	l.uncapped = !cfg.Limits.capped() // (as Run sets it)
	if !l.uncapped {
		t.Fatal("limits with no concurrency cap said capped")
	}
	oldFailureThenLoss(t, env, l, rated, loseLimits)
}

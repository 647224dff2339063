package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestClaimNotStoredRefusesAtOnce: when the claims bucket refuses a claim (JetStream out of
// storage, a bound on the bucket reached), a side-effecting call must not run — and it did not,
// but the call was handed back and delivered again and again (each delivery a new request in
// the audit, a human asked again for an approval given already), until the fifth ended it
// failed / internal, "delivered 5 times without an answer": a bug on mcpstream's side, saying
// nothing of what is full. The refusal is unavailable at once, naming the bucket: nothing ran.
func TestClaimNotStoredRefusesAtOnce(t *testing.T) {
	n := &counter{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Dispatcher: bigResults{n: n, size: 10}}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	// The bucket full: a bound of one claim, held by another call.
	s, err := r.env.JS.Stream(ctx, "KV_"+subjects.InflightBucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs = 1
	if _, err := r.env.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	kv, err := r.env.JS.KeyValue(ctx, subjects.InflightBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, claimKey("other", "c-0"), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}

	res := r.call("local", "fixture__exit", `{}`, func(req *subjects.CallRequest) { req.ID = "unclaimed" })
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable ||
		!strings.Contains(res.Error.Message, subjects.InflightBucket) {
		t.Errorf("got %s %+v, want refused unavailable naming %s", res.Status, res.Error, subjects.InflightBucket)
	}
	if got := n.get("exit"); got != 0 {
		t.Fatalf("dispatched %d times without a claim", got)
	}
	waitFor(t, "the audit result event", func() bool {
		for _, ev := range r.auditEvents("local", "unclaimed") {
			if ev.Type == "audit."+subjects.AuditResult {
				return true
			}
		}
		return false
	})
	requests := 0
	for _, ev := range r.auditEvents("local", "unclaimed") {
		if ev.Type == "audit."+subjects.AuditRequest {
			requests++
		}
	}
	if requests != 1 {
		t.Errorf("the call was delivered %d times, want once", requests)
	}
}

package registrysync

import (
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestReconnectBackoffStartsOver guards the reconnect backoff's design both ways: a server that
// crashes soon after each connection (a session shorter than BackoffMax) is reconnected after
// growing waits, not hammered; one whose session lasted BackoffMax or more and then was lost
// (a flap after a healthy spell) is reconnected after BackoffInitial again, not after the
// waits its earlier crashes had grown to.
func TestReconnectBackoffStartsOver(t *testing.T) {
	t.Parallel()
	cfg := fastConfig(stdioServer(t, "child", "fixture"))
	cfg.BackoffInitial, cfg.BackoffMax = 50*time.Millisecond, 3*time.Second
	h := run(t, nil, cfg)
	rec := record(t, h.env, subjects.RegistryServer("child"))
	ready := rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	crash := func(what string) *subjects.Status {
		t.Helper()
		if r := dispatch(t, h, "child", subjects.DispatchRequest{V: 1, Tool: "exit"}); r.Error == nil {
			t.Fatalf("exit answered %s", r.Result)
		}
		lost := rec.wait(ready.seq, what, isStatus(subjects.StatusUnavailable, subjects.CodeConnectionLost))
		ready = rec.wait(lost.seq, what+": ready again", isStatus(subjects.StatusReady, ""))
		return lost.ev.Status
	}
	// Jitter is 20%: 50 ms draws 40–60 ms, 100 ms 80–120 ms.
	first := crash("first crash")
	second := crash("second crash, soon after")
	if first.Attempt != 1 || second.Attempt != 2 || second.RetryInMs < 80 {
		t.Errorf("a crash loop: attempts %d then %d, waits %d then %d ms; want 1 then 2, the second wait at least 80 ms",
			first.Attempt, second.Attempt, first.RetryInMs, second.RetryInMs)
	}
	time.Sleep(cfg.BackoffMax + 200*time.Millisecond) // a healthy spell of BackoffMax
	third := crash("a crash after a healthy spell")
	if third.Attempt != 1 || third.RetryInMs > 60 {
		t.Errorf("a crash after a session of BackoffMax: attempt %d, wait %d ms; want 1 and at most 60 ms", third.Attempt, third.RetryInMs)
	}
}

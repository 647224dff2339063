package executor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/demoservers"
	"github.com/mcpstream/mcpstream/subjects"
)

// A tool removed from a demo server while calls stream in: after the first refusal, no call of it
// runs again, and every ticket belongs to a call answered ok.
func TestStaleWhileStreaming(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}})
	const callers, maxCalls = 4, 400
	type outcome struct {
		start, end time.Time
		res        subjects.CallResult
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		okCount  int
		refused  time.Time // when the first stale refusal arrived
		after    int       // calls started after it
	)
	hide := make(chan struct{})
	var hideOnce sync.Once
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range maxCalls / callers {
				start := time.Now()
				res := r.call("local", "ticketing__createIssue", fmt.Sprintf(`{"title":"c%d-%d","body":"","priority":"low"}`, c, i))
				end := time.Now()
				mu.Lock()
				outcomes = append(outcomes, outcome{start, end, res})
				if res.Status == subjects.CallOK {
					okCount++
				}
				if okCount >= 20 {
					hideOnce.Do(func() { close(hide) })
				}
				if res.Error != nil && res.Error.Code == subjects.CodeStale && refused.IsZero() {
					refused = end
				}
				if !refused.IsZero() && start.After(refused) {
					after++
				}
				enough := after >= 40
				mu.Unlock()
				if enough {
					return
				}
			}
		})
	}
	<-hide
	hiddenAt := time.Now()
	r.setControl("ticketing", demoservers.Control{Hide: []string{"createIssue"}})
	wg.Wait()

	if refused.IsZero() {
		t.Fatalf("no call was refused stale after createIssue was removed (%d calls)", len(outcomes))
	}
	codes := map[string]int{}
	for _, o := range outcomes {
		code := o.res.Status
		if o.res.Error != nil {
			code = o.res.Error.Code
		}
		codes[code]++
		if o.start.After(refused) && o.res.Status == subjects.CallOK {
			t.Errorf("call %s started %s after the first refusal and ran", o.res.ID, o.start.Sub(refused))
		}
		if o.start.After(refused) && (o.res.Error == nil || o.res.Error.Code != subjects.CodeStale) {
			t.Errorf("call %s after the first refusal: got %s %+v, want stale", o.res.ID, o.res.Status, o.res.Error)
		}
	}
	if got := r.ticketCount(); got != okCount {
		t.Errorf("got %d tickets, want %d (one per ok answer)", got, okCount)
	}
	t.Logf("outcomes %v; first refusal %s after the control file changed", codes, refused.Sub(hiddenAt))

	// The removal stays refused (removed, not merely stale), and so does a new id for it.
	res := r.call("local", "ticketing__createIssue", `{"title":"late","body":"","priority":"low"}`)
	if res.Error == nil || res.Error.Code != subjects.CodeStale {
		t.Errorf("got %s %+v, want stale", res.Status, res.Error)
	}
	// Restored: callable again.
	r.setControl("ticketing", demoservers.Control{})
	waitFor(t, "createIssue listed again", func() bool {
		return r.ex.reg.view.Tool("ticketing", "createIssue").State == "fresh"
	})
	if res := r.call("local", "ticketing__createIssue", `{"title":"back","body":"","priority":"low"}`); res.Status != subjects.CallOK {
		t.Errorf("after restore: got %s %+v, want ok", res.Status, res.Error)
	}
}

// A server that is not connected answers unavailable with the reason; a tool whose list's ttlMs
// ran out is re-listed before the call, not refused.
func TestUnavailableAndExpired(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, backoffInitial: time.Minute, noExecutor: true})
	relists := &counter{}
	r.startExecutor(Config{Dispatcher: r.mgr, Relister: countingRelister{inner: r.mgr, n: relists}}, r.env.NC)
	r.waitTool("fixture__echo")
	// The fixture's list has ttlMs 400: wait until it expired, then call: re-listed, then run.
	waitFor(t, "ttl expired", func() bool { return r.ex.reg.view.Tool("fixture", "echo").State == "expired" })
	if res := r.call("local", "fixture__echo", `{"text":"fresh again"}`); res.Status != subjects.CallOK {
		t.Fatalf("expired: got %s %+v, want ok after a re-list", res.Status, res.Error)
	}

	// The server process ends; its connector waits a minute before reconnecting.
	exit := r.call("local", "fixture__exit", `{}`)
	if exit.Status == subjects.CallOK {
		t.Fatalf("exit: got ok, want a failure")
	}
	waitFor(t, "fixture unavailable", func() bool { return r.ex.reg.view.Tool("fixture", "echo").State == "unavailable" })
	res := r.call("local", "fixture__echo", `{"text":"anyone?"}`)
	if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable || res.Error.Reason == "" {
		t.Fatalf("got %s %+v, want refused unavailable with a reason", res.Status, res.Error)
	}
	t.Logf("exit: %s %+v; then: %s", exit.Status, exit.Error, res.Error.Message)
	if got := relists.get("fixture"); got < 1 {
		t.Errorf("got %d re-lists of fixture, want at least 1 (for the expired list)", got)
	}
}

// countingRelister counts re-lists per server.
type countingRelister struct {
	inner Relister
	n     *counter
}

func (c countingRelister) Relist(ctx context.Context, server string, req subjects.RelistRequest) subjects.RelistReply {
	c.n.add(server)
	return c.inner.Relist(ctx, server, req)
}

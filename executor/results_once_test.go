package executor

import (
	"context"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestOneAnswerPastEveryDedupWindow: a call id keeps its one answer once the calls and the
// results streams' de-duplication windows (both 10 min by default) are past. A resend then
// stored a second answer on the call's results subject and got it: a resend of a side-effecting
// call that had run, refused before dispatch this time (arguments, revocation, policy), left the
// results stream saying it was refused (Await, the events, a watcher); a read-only call's resend
// got a new result instead of the stored one.
func TestOneAnswerPastEveryDedupWindow(t *testing.T) {
	t.Parallel()
	r := startRig(t, rigOptions{servers: []string{"ticketing", "fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const window = time.Second
	r.shortenDedup(ctx, window, subjects.CallsStream, subjects.ResultsStream)
	id := func(id string) func(*subjects.CallRequest) { return func(q *subjects.CallRequest) { q.ID = id } }

	created := r.call("local", "ticketing__createIssue", `{"title":"Once","body":"b","priority":"low"}`, id("ran"))
	if created.Status != subjects.CallOK {
		t.Fatalf("first: %s %+v", created.Status, created.Error)
	}
	echoed := r.call("local", "fixture__echo", `{"text":"once"}`, id("read-only"))
	if echoed.Status != subjects.CallOK {
		t.Fatalf("first: %s %+v", echoed.Status, echoed.Error)
	}
	time.Sleep(window + 200*time.Millisecond) // both streams forget the ids

	// The side-effecting call's resend is refused before dispatch (its arguments no longer
	// validate): the call ran, its answer stays the one it got.
	res := r.call("local", "ticketing__createIssue", `{"title":5}`, id("ran"))
	if res.Status != subjects.CallOK || !res.Duplicate || string(res.Result) != string(created.Result) {
		t.Errorf("resend of a call that ran: %s %+v duplicate %v, want the stored ok", res.Status, res.Error, res.Duplicate)
	}
	// A read-only call may run again; its answer is the stored one.
	res = r.call("local", "fixture__echo", `{"text":"twice"}`, id("read-only"))
	if res.Status != subjects.CallOK || !res.Duplicate || string(res.Result) != string(echoed.Result) {
		t.Errorf("resend of a read-only call: %s duplicate %v result %s, want the stored %s", res.Status, res.Duplicate, res.Result, echoed.Result)
	}
	if n := r.ticketCount(); n != 1 {
		t.Errorf("%d tickets, want 1", n)
	}

	for _, first := range []subjects.CallResult{created, echoed} {
		stored, err := r.client.Await(ctx, "local", first.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Status != first.Status || string(stored.Result) != string(first.Result) || stored.Duplicate {
			t.Errorf("%s: the results stream holds %s %+v %s (duplicate %v), want the first answer %s %s",
				first.ID, stored.Status, stored.Error, stored.Result, stored.Duplicate, first.Status, first.Result)
		}
	}
}

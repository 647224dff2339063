package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRefusalClaimHolderGoneNotOutcomeUnknown: an executor took a call's claim to store a
// refusal of it (refuseClaiming: a request delivered again, refused, or internal at its last
// delivery) and died before the refusal was stored. Nothing was dispatched under that claim: a
// request of the call id that finds it answers that the call did not run, not outcome_unknown
// ("an earlier attempt of this call was dispatched"), and does not run it.
func TestRefusalClaimHolderGoneNotOutcomeUnknown(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}})
	r.waitTool("ticketing__createIssue")

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const id = "refusal-claim-gone"
	at := time.Now().UTC()
	// As refuseClaiming writes it, by a process whose discovery service is gone (no responders).
	val := fmt.Sprintf(`{"tool":"ticketing__createIssue","server":"","by":"gone","at":%q,"until":%q,"seq":1,"instance":"gone0instance","refused":"unavailable"}`,
		at.Format(time.RFC3339Nano), at.Add(time.Hour).Format(time.RFC3339Nano))
	if _, err := r.ex.st.claims.Create(ctx, claimKey("local", id), []byte(val)); err != nil {
		t.Fatal(err)
	}

	res := r.call("local", "ticketing__createIssue", `{"title":"Never","body":"b","priority":"low"}`, func(q *subjects.CallRequest) { q.ID = id })
	if res.Error == nil || res.Error.Code == subjects.CodeOutcomeUnknown {
		t.Fatalf("got %s %+v, want an answer saying the call did not run (its claim was a refusal's)", res.Status, res.Error)
	}
	if res.Error.Code != subjects.CodeInternal || !strings.Contains(res.Error.Message, "not run") {
		t.Errorf("got %s %+v, want internal, not run", res.Status, res.Error)
	}
	if n := r.ticketCount(); n != 0 {
		t.Errorf("%d tickets, want 0", n)
	}
	if n := r.ex.Stats().Dispatched; n != 0 {
		t.Errorf("dispatched %d times, want 0", n)
	}
}

package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// seqMsg is a calls stream message of sequence seq as a worker of this process handles it.
type seqMsg struct {
	jetstream.Msg
	seq uint64
}

func (m seqMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}, NumDelivered: 2}, nil
}
func (m seqMsg) InProgress() error { return nil }

// TestRefusalClaimHeldHereNotGone: a delivery of this process took its call's claim to store a
// refusal (refuseClaiming) and is still storing it (a JetStream slow to answer) when another
// delivery of the call reaches this process (the same request delivered again, its heartbeats
// lost; or a resend). That one asks whether the claim's holder is gone: a holder of this
// process is gone when no worker here handles its delivery as a claimant. The refusal's
// delivery was no claimant (only claim marked one), so the holder read as gone at once, and the
// other delivery stored internal "that answer was never stored" over the refusal being stored.
func TestRefusalClaimHeldHereNotGone(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}})
	r.waitTool("ticketing__createIssue")

	const seq = 1 << 40 // (no request of the calls stream)
	a := r.ex.flight.add(seqMsg{seq: seq})
	defer r.ex.flight.remove(a)
	b := r.ex.flight.add(seqMsg{seq: seq})
	defer r.ex.flight.remove(b)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	newCall := func() *call {
		return &call{tenant: "local", started: time.Now(), redelivered: true, seq: seq,
			req: subjects.CallRequest{V: subjects.Version, ID: "refusal-claim-here", Tool: "ticketing__createIssue"}}
	}
	err := r.ex.refuseClaiming(context.WithValue(ctx, inflightKey{}, a), newCall(), subjects.CallRefused,
		&subjects.Error{Code: subjects.CodeUnavailable, Message: "refused"})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := r.ex.st.claims.Get(ctx, claimKey("local", "refusal-claim-here"))
	if err != nil {
		t.Fatal(err)
	}
	var cl claimValue
	if err := json.Unmarshal(entry.Value(), &cl); err != nil || cl.Refused == "" {
		t.Fatalf("precondition: a refusal's claim, got %s (%v)", entry.Value(), err)
	}
	// (a still handles the delivery that holds the claim: its answer may not be stored yet)
	if r.ex.holderGone(context.WithValue(ctx, inflightKey{}, b), newCall(), cl) {
		t.Errorf("the refusal's claim read as its holder's gone while its delivery is handled here")
	}
}

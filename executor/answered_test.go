package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// The executor refuses a tool stale from its server's ListChanged until a Confirmed event
// answers it (the fingerprint it holds, an afterSeq at least the ListChanged's sequence), and
// runs it after; a Confirmed whose re-list began before the ListChanged does not lift it.
func TestConfirmedAnswerLiftsStale(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	r.waitTool("fixture__echo")
	call := func(step, want string) {
		t.Helper()
		res := r.call("local", "fixture__echo", `{"text":"hi"}`)
		got := res.Status
		if res.Error != nil {
			got = res.Error.Code
		}
		if got != want {
			t.Errorf("%s: %s %+v, want %s", step, res.Status, res.Error, want)
		}
	}
	call("listed", subjects.CallOK)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	last, err := stream.GetLastMsgForSubject(ctx, subjects.RegistrySnapshot("fixture", subjects.KindTools))
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal(last.Data, &snap); err != nil {
		t.Fatal(err)
	}
	// Published by hand, as a connector would: the fixture's connector did not see a
	// notification, so nothing else answers this ListChanged.
	publish := func(subject string, data []byte) uint64 {
		t.Helper()
		ack, err := r.env.JS.Publish(ctx, subject, data)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("the executor applied #%d", ack.Sequence), func() bool { return r.ex.reg.applied.Load() >= ack.Sequence })
		return ack.Sequence
	}
	confirm := func(after uint64) {
		publish(subjects.RegistryConfirmed("fixture", subjects.KindTools), fmt.Appendf(nil,
			`{"v":1,"type":"confirmed","server":"fixture","kind":"tools","fingerprint":%q,"listedAt":%q,"afterSeq":%d}`,
			snap.Fingerprint, time.Now().UTC().Format(time.RFC3339Nano), after))
	}
	changed := publish(subjects.RegistryChanged("fixture", subjects.KindTools), fmt.Appendf(nil,
		`{"v":1,"type":"changed","server":"fixture","kind":"tools","at":%q}`, time.Now().UTC().Format(time.RFC3339Nano)))
	call("after list_changed", subjects.CodeStale)
	confirm(changed - 1)
	call("after a confirmation whose re-list predates the list_changed", subjects.CodeStale)
	confirm(changed)
	call("after the confirmation that answers the list_changed", subjects.CallOK)
}

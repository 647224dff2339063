package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// A server that announced list_changed before it ever listed (the notification came during its
// first listing, which then failed) has listed nothing: a call of one of its tools while it is
// not ready is refused unavailable (try again later), as without the list_changed, not
// not_found ("no tool ... is listed by any connected server").
func TestNeverListedAfterListChangedUnavailable(t *testing.T) {
	r := startRig(t, rigOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	publish := func(subject string, v any) uint64 {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := r.env.JS.Publish(ctx, subject, data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	const server = "late"
	now := time.Now().UTC()
	publish(subjects.RegistryStatus(server), subjects.Status{V: 1, Type: subjects.EventStatus, Server: server,
		Status: subjects.StatusConnecting, At: now})
	seq := publish(subjects.RegistryChanged(server, subjects.KindTools), subjects.ListChanged{V: 1, Type: subjects.EventChanged,
		Server: server, Kind: subjects.KindTools, At: now})
	if err := r.ex.reg.waitApplied(ctx, seq); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		res := r.call("local", server+"__lookup", `{}`)
		if res.Error == nil || res.Error.Code != subjects.CodeUnavailable {
			t.Errorf("%s: got %s %+v, want unavailable", when, res.Status, res.Error)
		}
	}
	check("connecting")
	seq = publish(subjects.RegistryStatus(server), subjects.Status{V: 1, Type: subjects.EventStatus, Server: server,
		Status: subjects.StatusUnavailable, Code: subjects.CodeListFailed, Reason: "tools/list failed", At: now})
	if err := r.ex.reg.waitApplied(ctx, seq); err != nil {
		t.Fatal(err)
	}
	check("list_failed")
}

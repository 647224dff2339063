package registrysync

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// jsAPIRequests is how many JetStream API requests the test's account has made so far.
func jsAPIRequests(t *testing.T, h *harness) uint64 {
	t.Helper()
	info, err := h.env.JS.AccountInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.API.Total
}

// TestListChangedFloodReadsBounded: while a ListChanged of the connector waits for its answer,
// a further notification stores none, but the notifier read the stream first (changedWaits: the
// kind's last snapshot and Confirmed, 2 JetStream API requests) at every one of its rounds: a
// server flooding list_changed made its connector send JetStream API requests as fast as NATS
// answered them (thousands a second, on the queue every client of the NATS server shares),
// for as long as it flooded. The watch set before the first read sees any answer stored
// after it, so that read is made once per ListChanged that waits, not once per notification.
func TestListChangedFloodReadsBounded(t *testing.T) {
	h := run(t, nil, fastConfig(rawServer(t, "flood", "flood")))
	var rounds atomic.Int64
	hook := func(string, subjects.Kind) { rounds.Add(1) }
	h.m.afterNotified.Store(&hook)
	rec := record(t, h.env, subjects.RegistryServer("flood"))
	rec.wait(0, "first ListChanged", isChanged(subjects.KindTools))

	const n = 1000
	r0, api0 := rounds.Load(), jsAPIRequests(t, h)
	waitUntil(t, "the notifier's rounds", func() bool { return rounds.Load()-r0 >= n })
	r, api := rounds.Load()-r0, jsAPIRequests(t, h)-api0
	t.Logf("%d notifier rounds: %d JetStream API requests", r, api)
	if api > uint64(r)/4 {
		t.Errorf("%d JetStream API requests for %d notifier rounds of a flooding server: want a few per stale period, not some per notification", api, r)
	}
}

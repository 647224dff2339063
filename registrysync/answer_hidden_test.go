package registrysync

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// While NATS is away a connector's watch for answers to the ListChanged it held a notification
// back for gets nothing, and once the connection is back recheck reads the stream. It read the
// last Confirmed of the kind only: another connector's answer (afterSeq reaching the
// ListChanged) followed by a third connector's Confirmed of a re-list that began before it
// (a lower afterSeq, answering nothing) hid the answer, and the notification held back had no
// ListChanged stored for it, though consumers had taken the answer and made the list fresh.
// Any Confirmed stored after the ListChanged that reaches it is an answer.
func TestRecheckFindsAnswerBehindLaterConfirmed(t *testing.T) {
	t.Parallel()
	h := run(t, nil, fastConfig(ServerConfig{Name: "hid", URL: httpFixture(t, newFixture(fixtureOptions{})), Kinds: []string{"tools"}}))
	waitUntil(t, "hid ready", h.m.Ready)
	h.m.mu.Lock()
	c := h.m.conns["hid"]
	h.m.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	publish := func(subject string, v any) uint64 {
		t.Helper()
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ack, err := h.env.JS.Publish(ctx, subject, data)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	now := time.Now().UTC()
	// The ListChanged that waited for an answer (the connector's own, say).
	waited := publish(subjects.RegistryChanged("hid", subjects.KindTools), subjects.ListChanged{
		V: subjects.Version, Type: subjects.EventChanged, Server: "hid", Kind: subjects.KindTools, At: now})
	confirmed := func(afterSeq uint64) subjects.Confirmed {
		return subjects.Confirmed{V: subjects.Version, Type: subjects.EventConfirmed, Server: "hid", Kind: subjects.KindTools,
			Fingerprint: "0123456789abcdef", ListedAt: now, AfterSeq: afterSeq}
	}
	publish(subjects.RegistryConfirmed("hid", subjects.KindTools), confirmed(waited))   // B's answer
	publish(subjects.RegistryConfirmed("hid", subjects.KindTools), confirmed(waited-1)) // C's: answers nothing

	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if c.held[subjects.KindTools] != nil {
		t.Fatal("a notification is held back already")
	}
	hb := &heldBack{gen: 1, after: waited}
	c.held[subjects.KindTools] = hb
	defer delete(c.held, subjects.KindTools)
	if !c.recheck(ctx, subjects.KindTools) {
		t.Fatal("recheck could not read the stream")
	}
	if !hb.seen.Load() {
		t.Error("the answer to the ListChanged that waited, behind a later Confirmed that answers nothing, was not found")
	}

	// A Confirmed after the ListChanged that does not reach it is no answer, however many.
	hb2 := &heldBack{gen: 1, after: publish(subjects.RegistryChanged("hid", subjects.KindTools), subjects.ListChanged{
		V: subjects.Version, Type: subjects.EventChanged, Server: "hid", Kind: subjects.KindTools, At: now})}
	for range 3 {
		publish(subjects.RegistryConfirmed("hid", subjects.KindTools), confirmed(waited))
	}
	c.held[subjects.KindTools] = hb2
	if !c.recheck(ctx, subjects.KindTools) {
		t.Fatal("recheck could not read the stream")
	}
	if hb2.seen.Load() {
		t.Error("Confirmed events whose afterSeq is below the ListChanged were taken for an answer")
	}
}

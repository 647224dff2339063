package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// Without --follow, a replay whose remaining events are removed before they reach it (expired by
// max_age, a per-message TTL or max_bytes, purged, deleted) ends: the last event it was sent said
// more were pending, and it waited for them for good.
func TestEventsReplayEndsWhenPendingEventsRemoved(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	publish(t, env.JS, subjects.Audit("acme", subjects.AuditRequest), []byte(`{"v":1,"type":"audit.request","callId":"c0"}`))
	// More than the consumer is sent at once: the later ones are pending on the server when the
	// first is read.
	const later = 1500
	futs := make([]jetstream.PubAckFuture, 0, later)
	for i := range later {
		f, err := env.JS.PublishAsync(subjects.Audit("other", subjects.AuditRequest), fmt.Appendf(nil, `{"v":1,"type":"audit.request","callId":"c%d"}`, i+1))
		if err != nil {
			t.Fatal(err)
		}
		futs = append(futs, f)
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatal("no PubAck")
		}
	}
	st, err := env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	done := make(chan error, 1)
	go func() {
		done <- readStream(ctx, env.JS, subjects.AuditStream, jetstream.OrderedConsumerConfig{}, false, func(jetstream.Msg) error {
			seen++
			if seen == 1 {
				// The events after the first removed while the replay reads it.
				return st.Purge(ctx, jetstream.WithPurgeSubject(subjects.Audit("other", subjects.AuditRequest)))
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil || seen < 1 || seen > later+1 {
			t.Fatalf("replay ended with %v after %d events", err, seen)
		}
	case <-ctx.Done():
		t.Fatal("the replay still waits for events that are gone")
	}
}

// TestEventsRawOfInvalidUTF8: "raw" holds the first 512 bytes of a payload that is not JSON,
// whatever they are: a payload of bytes no rune starts with (0x80…) printed an empty "raw",
// its cut backed up over every byte looking for a rune's start.
func TestEventsRawOfInvalidUTF8(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publish(t, env.JS, subjects.Audit("acme", subjects.AuditRequest), []byte(strings.Repeat("\x80", 600)))
	publish(t, env.JS, subjects.Audit("acme", subjects.AuditRequest), []byte(strings.Repeat("é", 300)))
	out, _, err := runCmd(t, ctx, "events", "--json", "--stream", "audit", "--nats", env.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines for 2 events: %q", len(lines), out)
	}
	for i, want := range []string{strings.Repeat("\ufffd", 512) + "…", strings.Repeat("é", 256) + "…"} {
		var ev struct{ Raw string }
		if err := json.Unmarshal([]byte(lines[i]), &ev); err != nil || ev.Raw != want {
			t.Errorf("event %d: raw %q (%v), want %q", i+1, ev.Raw, err, want)
		}
	}
}

// TestTruncateCut: a cut of valid UTF-8 stays valid, a prefix, at most utf8.UTFMax-1 bytes
// short of the cap; one of invalid bytes keeps the bytes up to the cap.
func TestTruncateCut(t *testing.T) {
	runes := []string{"a", "é", "€", "😀", "\x80", "\x80\x80\x80\x80\x80", "\xff"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for range 1 + rng.IntN(40) {
			b.WriteString(runes[rng.IntN(len(runes))])
		}
		s := b.String()
		for n := 1; n < len(s); n++ {
			got := strings.TrimSuffix(truncate(s, n), "…")
			if !strings.HasPrefix(s, got) || len(got) > n || len(got) < n-(utf8.UTFMax-1) || utf8.ValidString(s[:n+1]) && !utf8.ValidString(got) {
				t.Fatalf("truncate(%q, %d) = %q", s, n, got)
			}
		}
	}
}

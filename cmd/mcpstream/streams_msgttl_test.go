package main

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRegistryStreamMsgTTLEnabled: the registry stream takes per-message TTLs (registrysync
// stores the confirmations of unchanged lists with one, so that they do not pile up for good).
// A registry stream an earlier mcpstream declared without them gets them at the next start, by
// the same declaration, with --stream-replicas 0 too (the stream keeps its other settings), and
// in place: it is the same stream (its creation time, which watchStreams compares, unchanged).
func TestRegistryStreamMsgTTLEnabled(t *testing.T) {
	js := declareJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, s := earlierRegistryStream(ctx, t, js)
	created := s.CachedInfo().Created
	origins, err := ensureStreams(ctx, js, 0, &fileConfig{})
	if err != nil {
		t.Fatal(err)
	}
	s, err = js.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if !s.CachedInfo().Config.AllowMsgTTL {
		t.Error("registry stream declared again without allow_msg_ttl")
	}
	if !s.CachedInfo().Created.Equal(created) || !origins[subjects.RegistryStream].Equal(created) {
		t.Errorf("registry stream created %s (origin %s), want the same stream (created %s)", s.CachedInfo().Created,
			origins[subjects.RegistryStream], created)
	}
	// Declared again: still on (JetStream refuses to turn it off), and no error.
	if _, err := ensureStreams(ctx, js, 0, &fileConfig{}); err != nil {
		t.Fatal(err)
	}
	// The other streams are declared as before: without.
	for _, name := range []string{subjects.CallsStream, subjects.ResultsStream, subjects.AuditStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if s.CachedInfo().Config.AllowMsgTTL {
			t.Errorf("%s declared with allow_msg_ttl", name)
		}
	}
}

// earlierRegistryStream creates the registry stream as an earlier mcpstream declared it (and,
// before keepOperatorSettings, declares it again): without allow_msg_ttl.
func earlierRegistryStream(ctx context.Context, t *testing.T, js jetstream.JetStream) (jetstream.StreamConfig, jetstream.Stream) {
	t.Helper()
	old := subjects.Streams(subjects.StreamOptions{})[0]
	if old.Name != subjects.RegistryStream {
		t.Fatalf("first stream %s", old.Name)
	}
	old.AllowMsgTTL = false
	s, err := js.CreateStream(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	return old, s
}

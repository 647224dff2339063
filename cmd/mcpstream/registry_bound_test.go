package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRegistryStreamBoundRefusedAtStart: catalogs and executors rebuild from the registry
// stream's whole history, so a bound on it (`nats stream edit MCPSTREAM_REGISTRY --max-age 24h`,
// or max_msgs, max_bytes, max_msgs_per_subject) drops the snapshot of every server whose list did
// not change within it: a new replica (or one rebuilding after a purge check) then serves a
// catalog without that server's tools, and nothing says so. Only a max_age below the
// de-duplication window stopped the roles (JetStream refused the declaration); any other bound
// was kept by every start, silently. It must stop every role at start, naming the bound and
// what to do, before anything is trimmed further.
func TestRegistryStreamBoundRefusedAtStart(t *testing.T) {
	for _, c := range []struct {
		name  string
		bound func(*jetstream.StreamConfig)
		want  string
	}{
		{"max_age", func(s *jetstream.StreamConfig) { s.MaxAge = time.Hour }, "max_age 1h"},
		{"max_msgs", func(s *jetstream.StreamConfig) { s.MaxMsgs = 2 }, "max_msgs 2"},
		{"max_bytes", func(s *jetstream.StreamConfig) { s.MaxBytes = 1 << 20 }, "max_bytes 1MiB"},
		{"max_msgs_per_subject", func(s *jetstream.StreamConfig) { s.MaxMsgsPerSubject = 1 }, "max_msgs_per_subject 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			js := declareJS(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := ensureStreams(ctx, js, 0, &fileConfig{}); err != nil {
				t.Fatal(err)
			}
			s, err := js.Stream(ctx, subjects.RegistryStream)
			if err != nil {
				t.Fatal(err)
			}
			cfg := s.CachedInfo().Config
			c.bound(&cfg) // as `nats stream edit` does
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			_, err = ensureStreams(ctx, js, 0, &fileConfig{})
			if err == nil {
				t.Fatalf("a registry stream with %s was declared: its bound drops the events catalogs rebuild from", c.want)
			}
			for _, w := range []string{subjects.RegistryStream, c.want, "nats stream edit", "unbounded"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// declareJS is a JetStream context on a new embedded server of its own.
func declareJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	srv, err := natsembed.Start(natsembed.Config{StoreDir: t.TempDir(), Listen: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestResultsMaxAgeAcceptedIsDeclarable: a resultsMaxAge the configuration accepts is one the
// streams can be declared with. The section took any duration of at least 1m, but the results
// stream de-duplicates call ids over 10 minutes and JetStream refuses a de-duplication window
// longer than max age: with resultsMaxAge 5m every role stopped at start with NATS's bare
// "duplicates window can not be larger then max age", naming no setting.
func TestResultsMaxAgeAcceptedIsDeclarable(t *testing.T) {
	for _, age := range []string{"1m", "5m", "9m59s", "10m", "24h"} {
		t.Run(age, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "mcpstream.yaml")
			if err := os.WriteFile(path, []byte("servers: []\nstreams: {resultsMaxAge: "+age+"}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			fc, err := loadConfig(path, func(string) (string, bool) { return "", false })
			if err != nil {
				// Refused: then by name, saying what it takes.
				if !strings.Contains(err.Error(), "resultsMaxAge") || !strings.Contains(err.Error(), "10m") {
					t.Errorf("refused with %q: want the field and its 10m minimum named", err)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := ensureStreams(ctx, declareJS(t), 1, fc); err != nil {
				t.Errorf("resultsMaxAge %s accepted by the configuration, but the streams cannot be declared: %v", age, err)
			}
		})
	}
}

// TestExistingStreamDeclarationErrorsSayWhatToDo: a stream that exists with a setting JetStream
// cannot change in place (made by hand or by another tool before mcpstream declared it, or a
// max_age set with `nats stream edit` below the de-duplication window) stopped every role with
// NATS's bare "stream configuration update can not change storage type" (or retention policy,
// or "duplicates window can not be larger then max age"): the error says which setting is at
// odds and what to do about it.
func TestExistingStreamDeclarationErrorsSayWhatToDo(t *testing.T) {
	for _, c := range []struct {
		name     string
		existing jetstream.StreamConfig
		want     []string
	}{
		{
			name:     "storage",
			existing: jetstream.StreamConfig{Name: subjects.ResultsStream, Subjects: []string{subjects.ResultsAll}, Storage: jetstream.MemoryStorage},
			want:     []string{"memory storage", "file", "nats stream rm " + subjects.ResultsStream},
		},
		{
			name:     "retention",
			existing: jetstream.StreamConfig{Name: subjects.CallsStream, Subjects: []string{subjects.CallsAll}, Retention: jetstream.LimitsPolicy},
			want:     []string{"limits retention", "work queue", "nats stream rm " + subjects.CallsStream},
		},
		{
			name: "max age below the de-duplication window",
			existing: jetstream.StreamConfig{Name: subjects.ResultsStream, Subjects: []string{subjects.ResultsAll},
				MaxAge: 5 * time.Minute, Duplicates: time.Minute},
			want: []string{"max_age 5m", "10m", "streams.resultsMaxAge"},
		},
		{
			name: "max age of the registry stream",
			existing: jetstream.StreamConfig{Name: subjects.RegistryStream, Subjects: []string{subjects.RegistryAll},
				MaxAge: 5 * time.Minute, Duplicates: time.Minute},
			want: []string{"max_age 5m", "10m", "nats stream edit " + subjects.RegistryStream, "unbounded"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			js := declareJS(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := js.CreateStream(ctx, c.existing); err != nil {
				t.Fatal(err)
			}
			_, err := ensureStreams(ctx, js, 0, &fileConfig{})
			if err == nil {
				t.Fatal("declared")
			}
			for _, w := range append(c.want, c.existing.Name) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

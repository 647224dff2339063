package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestExistingStreamOperatorSettingsKept: what an operator set on a stream with `nats stream
// edit` that mcpstream does not rely on is kept at the next start, not undone. deny_delete and
// deny_purge (tamper protection of the audit stream) cannot be cancelled by JetStream at all:
// every role stopped at start with NATS's bare "stream configuration update can not cancel deny
// message deletes". Compression, user metadata and per-message TTLs were silently undone (the
// last stopped every role too: "message TTL status can not be disabled").
func TestExistingStreamOperatorSettingsKept(t *testing.T) {
	js := declareJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := ensureStreams(ctx, js, 0, &fileConfig{}); err != nil {
		t.Fatal(err)
	}
	edit := func(name string, f func(*jetstream.StreamConfig)) {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		f(&c)
		if _, err := js.UpdateStream(ctx, c); err != nil {
			t.Fatalf("edit %s: %v", name, err)
		}
	}
	edit(subjects.AuditStream, func(c *jetstream.StreamConfig) {
		c.DenyDelete, c.DenyPurge = true, true
		c.Compression = jetstream.S2Compression
		c.Metadata = map[string]string{"owner": "secops"}
	})
	edit(subjects.ResultsStream, func(c *jetstream.StreamConfig) { c.AllowMsgTTL = true })
	edit(subjects.RegistryStream, func(c *jetstream.StreamConfig) { c.DenyPurge = true })
	if _, err := ensureStreams(ctx, js, 0, &fileConfig{}); err != nil {
		t.Fatalf("declared again: %v", err)
	}
	s, err := js.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	if !c.DenyDelete || !c.DenyPurge || c.Compression != jetstream.S2Compression || c.Metadata["owner"] != "secops" {
		t.Errorf("audit stream after a declaration: deny_delete %v, deny_purge %v, compression %v, metadata %v: want the operator's settings kept",
			c.DenyDelete, c.DenyPurge, c.Compression, c.Metadata)
	}
	// What mcpstream relies on is still declared.
	if c.Discard != jetstream.DiscardOld || c.MaxMsgSize != subjects.MaxEventBytes {
		t.Errorf("audit stream: discard %v, max msg size %d", c.Discard, c.MaxMsgSize)
	}
}

// TestExistingStreamSealedOrMirrorSaysWhatToDo: a stream of mcpstream's name that is sealed, or
// a mirror (of a disaster-recovery site, say), is not mcpstream's to change. A sealed one
// stopped every role with NATS's bare "can not unseal a sealed stream"; a mirror was silently
// promoted to a stream of its own (its mirroring ended for good) by the declaration's update.
// Both are refused with an error naming what was found and what to do, and a mirror stays one.
func TestExistingStreamSealedOrMirrorSaysWhatToDo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("sealed", func(t *testing.T) {
		js := declareJS(t)
		s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: subjects.RegistryStream, Subjects: []string{subjects.RegistryAll}})
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		c.Sealed = true
		if _, err := js.UpdateStream(ctx, c); err != nil {
			t.Fatal(err)
		}
		_, err = ensureStreams(ctx, js, 0, &fileConfig{})
		if err == nil {
			t.Fatal("declared")
		}
		for _, w := range []string{subjects.RegistryStream, "sealed", "nats stream rm " + subjects.RegistryStream} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not say %q", err, w)
			}
		}
	})
	t.Run("mirror", func(t *testing.T) {
		js := declareJS(t)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PROD_RESULTS", Subjects: []string{"prod.results.>"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: subjects.ResultsStream, Mirror: &jetstream.StreamSource{Name: "PROD_RESULTS"}}); err != nil {
			t.Fatal(err)
		}
		_, err := ensureStreams(ctx, js, 0, &fileConfig{})
		if err == nil {
			t.Error("declared over a mirror")
		} else {
			for _, w := range []string{subjects.ResultsStream, "mirror", "PROD_RESULTS"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		}
		s, err := js.Stream(ctx, subjects.ResultsStream)
		if err != nil {
			t.Fatal(err)
		}
		if m := s.CachedInfo().Config.Mirror; m == nil || m.Name != "PROD_RESULTS" {
			t.Errorf("the mirror was changed: mirror %+v, subjects %v", m, s.CachedInfo().Config.Subjects)
		}
	})
}

// TestStreamSubjectsHeldByAnotherStream: a stream of another name that takes mcpstream's
// subjects (an archive of mcpstream.>, say) stopped every role with NATS's bare "subjects overlap
// with an existing stream", naming neither stream: the error names the one that holds them.
func TestStreamSubjectsHeldByAnotherStream(t *testing.T) {
	js := declareJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ARCHIVE", Subjects: []string{"mcpstream.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err := ensureStreams(ctx, js, 0, &fileConfig{})
	if err == nil {
		t.Fatal("declared")
	}
	for _, w := range []string{"ARCHIVE", subjects.RegistryAll} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// racingJS is a JetStream whose first stream declaration loses a race: another process creates
// the stream (with other settings) after ensureStreams found none, just before its create.
type racingJS struct {
	jetstream.JetStream
	once  sync.Once
	other func(jetstream.StreamConfig) jetstream.StreamConfig
}

func (r *racingJS) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	raced := false
	r.once.Do(func() {
		raced = true
		if _, err := r.JetStream.CreateStream(ctx, r.other(cfg)); err != nil {
			panic(err)
		}
	})
	if raced {
		// What nats.go's CreateOrUpdateStream does when its update found no stream and its
		// create came second.
		return r.JetStream.CreateStream(ctx, cfg)
	}
	return r.JetStream.CreateOrUpdateStream(ctx, cfg)
}

// TestEnsureStreamsRaceWithAnotherProcess: two processes starting at once on an empty server,
// with other streams settings (a rolling change of resultsMaxAge, another --stream-replicas):
// the one whose create comes second stopped at start with "stream name already in use with a
// different configuration"; it declares the stream again over the one just made.
func TestEnsureStreamsRaceWithAnotherProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js := &racingJS{JetStream: declareJS(t), other: func(c jetstream.StreamConfig) jetstream.StreamConfig {
		c.Description = "declared by another process"
		if c.Name == subjects.ResultsStream || c.Name == subjects.AuditStream {
			c.MaxAge = time.Hour // its streams section's (no process bounds the registry stream)
		}
		return c
	}}
	fc := &fileConfig{}
	fc.streams.ResultsMaxAge = 2 * time.Hour
	fc.streams.AuditMaxAge = 2 * time.Hour
	if _, err := ensureStreams(ctx, js, 0, fc); err != nil {
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			t.Fatalf("lost the race: %v", err)
		}
		t.Fatal(err)
	}
	for _, name := range []string{subjects.RegistryStream, subjects.ResultsStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if d := s.CachedInfo().Config.Description; strings.Contains(d, "another process") {
			t.Errorf("%s keeps the other process's declaration (%q)", name, d)
		}
	}
}

// TestExistingStreamOfAnotherApplication: a stream that has mcpstream's name but none of its
// subjects — another application's MCPSTREAM_AUDIT on a shared NATS account, say — had its
// subjects rewritten by the declaration: that application's publishes stopped being stored,
// silently. It is refused, naming the stream and the subjects found, and left as it was. A
// stream with mcpstream's subjects among others an operator added is refused too (the
// declaration would drop them); one with only mcpstream's own (an older declaration's) is
// still declared.
func TestExistingStreamOfAnotherApplication(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name     string
		subjects []string
	}{
		{"foreign", []string{"billing.audit.>"}},
		{"extra", []string{subjects.AuditAll, "ops.audit.>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := declareJS(t)
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: subjects.AuditStream, Subjects: tc.subjects}); err != nil {
				t.Fatal(err)
			}
			_, err := ensureStreams(ctx, js, 0, &fileConfig{})
			if err == nil {
				t.Fatal("declared over it")
			}
			for _, w := range []string{subjects.AuditStream, tc.subjects[len(tc.subjects)-1], "not mcpstream's"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			s, err := js.Stream(ctx, subjects.AuditStream)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.CachedInfo().Config.Subjects; strings.Join(got, " ") != strings.Join(tc.subjects, " ") {
				t.Errorf("subjects now %v, want %v kept", got, tc.subjects)
			}
		})
	}
	t.Run("ours", func(t *testing.T) {
		js := declareJS(t)
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: subjects.AuditStream, Subjects: []string{"mcpstream.v1.audit.acme.>"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := ensureStreams(ctx, js, 0, &fileConfig{}); err != nil {
			t.Fatalf("an older declaration of mcpstream's own: %v", err)
		}
	})
}

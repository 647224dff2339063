package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestExistingLimitsStreamSaysWhatToDo: a limits stream that exists with a setting JetStream
// cannot change in place stopped the executor at start with NATS's bare "stream configuration
// update can not change message counter setting" (or storage type). One without message
// counters is what a nats-server before 2.12 made (it ignores the setting): on a cluster its
// memory stream outlives a rolling upgrade to 2.12, and every executor, with rates or
// without, then failed to start. The error names the setting and the command: the stream
// holds only rate-window counters, which may start over. One holding subjects that are not
// mcpstream's is refused and left as it was.
func TestExistingLimitsStreamSaysWhatToDo(t *testing.T) {
	for _, c := range []struct {
		name     string
		existing jetstream.StreamConfig
		want     string
	}{
		{"not a counter stream", jetstream.StreamConfig{Name: subjects.LimitsStream, Subjects: []string{subjects.LimitsAll},
			Storage: jetstream.MemoryStorage, MaxMsgsPerSubject: 1}, "counter"},
		{"file storage", jetstream.StreamConfig{Name: subjects.LimitsStream, Subjects: []string{subjects.LimitsAll},
			Storage: jetstream.FileStorage, MaxMsgsPerSubject: 1, AllowMsgCounter: true, AllowDirect: true}, "file storage"},
		// Another application's stream of the same name: its subjects were replaced by ours.
		{"another application's", jetstream.StreamConfig{Name: subjects.LimitsStream, Subjects: []string{"billing.limits.>"},
			Storage: jetstream.MemoryStorage, AllowMsgCounter: true, AllowDirect: true}, "not mcpstream's (billing.limits.>)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := natstest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := env.JS.CreateStream(ctx, c.existing); err != nil {
				t.Fatal(err)
			}
			err := EnsureState(ctx, env.JS, Config{})
			if err == nil {
				t.Fatal("declared")
			}
			for _, w := range []string{subjects.LimitsStream, c.want, "nats stream rm " + subjects.LimitsStream} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestOtherConsumerOnCallsStreamNamed: a consumer of someone else on the calls stream (`nats
// consumer add MCPSTREAM_CALLS` to look at the waiting calls) takes the work queue's subjects:
// JetStream refuses the workers' consumer, and the executor stopped at start with its bare
// "filtered consumer not unique on workqueue stream". The error names the consumer in the way
// and what to do (a consumer on a work queue takes the calls it is given away from the workers).
func TestOtherConsumerOnCallsStreamNamed(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := env.JS.CreateConsumer(ctx, subjects.CallsStream, jetstream.ConsumerConfig{Durable: "peek",
		FilterSubject: subjects.CallsAll, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	err := EnsureState(ctx, env.JS, Config{})
	if err == nil {
		t.Fatal("declared")
	}
	for _, w := range []string{"peek", "nats consumer rm " + subjects.CallsStream + " peek"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// racingJS is a JetStream whose first declaration of the limits stream loses a race: another
// executor creates it (with other windows) after ensureState found none, just before its create.
type racingJS struct {
	jetstream.JetStream
	raced bool
}

func (r *racingJS) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if cfg.Name != subjects.LimitsStream || r.raced {
		return r.JetStream.CreateOrUpdateStream(ctx, cfg)
	}
	r.raced = true
	other := cfg
	other.MaxAge = cfg.MaxAge + time.Hour
	other.Description = "declared by another executor"
	if _, err := r.JetStream.CreateStream(ctx, other); err != nil {
		return nil, err
	}
	// What nats.go's CreateOrUpdateStream does when its update found no stream and its create
	// came second.
	return r.JetStream.CreateStream(ctx, cfg)
}

// TestLimitsStreamRaceWithAnotherExecutor: two executors declaring the limits stream at once
// with other windows (at start on an empty server, or again after a NATS restart emptied the
// memory stream) — the one whose create came second failed ("stream name already in use");
// it declares the stream again over the other's, keeping the longer windows.
func TestLimitsStreamRaceWithAnotherExecutor(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := EnsureState(ctx, &racingJS{JetStream: env.JS}, Config{}); err != nil {
		t.Fatalf("lost the race: %v", err)
	}
	s, err := env.JS.Stream(ctx, subjects.LimitsStream)
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	if strings.Contains(c.Description, "another executor") {
		t.Errorf("the stream keeps the other executor's declaration (%q)", c.Description)
	}
	if want := LimitsStreamConfig(Limits{}, 1).MaxAge + time.Hour; c.MaxAge != want {
		t.Errorf("max age %s, want the other's longer %s kept", c.MaxAge, want)
	}
}

// TestExistingBucketNotUsableRefused: a bucket of mcpstream's name whose stream does not take
// the bucket's subjects (made by hand) was taken as it was: every claim and slot write then
// found no responders, and each call needing one was refused at run time. A claims bucket in
// memory storage (made by a test run, or by hand) lost its claims at a NATS restart while the
// calls stream kept the requests: a redelivered side-effecting call ran again. Both are
// refused at start, naming the bucket and what to do.
func TestExistingBucketNotUsableRefused(t *testing.T) {
	for _, c := range []struct {
		name     string
		existing jetstream.StreamConfig
		want     string
	}{
		{"wrong subjects", jetstream.StreamConfig{Name: "KV_" + subjects.SlotsBucket, Subjects: []string{"slots.>"},
			MaxMsgsPerSubject: 1, Storage: jetstream.MemoryStorage}, "$KV." + subjects.SlotsBucket + ".>"},
		{"claims in memory", jetstream.StreamConfig{Name: "KV_" + subjects.InflightBucket, Subjects: []string{"$KV." + subjects.InflightBucket + ".>"},
			MaxMsgsPerSubject: 1, Storage: jetstream.MemoryStorage, MaxAge: 24 * time.Hour}, "memory storage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := natstest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := env.JS.CreateStream(ctx, c.existing); err != nil {
				t.Fatal(err)
			}
			err := EnsureState(ctx, env.JS, Config{})
			if err == nil {
				t.Fatal("declared")
			}
			for _, w := range []string{c.want, "nats kv rm "} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

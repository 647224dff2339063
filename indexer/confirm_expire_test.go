package indexer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// registrysync stores the confirmations of unchanged lists with a per-message TTL of twice the
// list's ttlMs (at least an hour), so the registry stream drops them: a replica rebuilt by replay
// after they expired shows every tool in the state of a replica that applied them as they came,
// ready although the stream's last sequence is one of them, and the list_changed lifted by the
// Confirmed that answered it (kept). Time is compressed: the TTL here is JetStream's shortest (a
// second), and the replicas' clock is moved to when a real TTL would have run out.
func TestExpiredConfirmationsReplay(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	ttl := int64(30_000)
	sn := snapshot("kb", "Knowledge base", tool("search", "Search articles."))
	sn.TTLMs = &ttl
	withTTL := func(at time.Time) uint64 { // a confirmation as confirmUnchanged stores it
		t.Helper()
		subject, data := eventMsg(t, confirmed("kb", sn.Fingerprint, at))
		msg := nats.NewMsg(subject)
		msg.Data = data
		ack, err := env.JS.PublishMsg(ctx, msg, jetstream.WithMsgTTL(time.Second))
		if err != nil {
			t.Fatalf("publish with a TTL: %v", err)
		}
		return ack.Sequence
	}
	// The live replica follows as the events come: started after them, it may find the
	// confirmations expired already on a loaded machine (a second's TTL), and not be the
	// replica that applied them.
	live := startReplicaConfig(t, env, Config{Now: now}, nil)
	publish(t, env.JS, status("kb", subjects.StatusReady), sn)
	withTTL(t0.Add(20 * time.Second))
	withTTL(t0.Add(40 * time.Second))
	chSeq := publish(t, env.JS, changed("kb"))
	answer := confirmed("kb", sn.Fingerprint, t0.Add(45*time.Second))
	answer.AfterSeq = chSeq
	answerSeq := publish(t, env.JS, answer)
	last := withTTL(t0.Add(60 * time.Second))
	waitSeq(t, live.Catalog, last)

	confSubject := subjects.RegistryConfirmed("kb", subjects.KindTools)
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the confirmations with a TTL to expire", func() bool {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(confSubject))
		return err == nil && info.State.Subjects[confSubject] == 1
	})

	rebuilt := startReplicaConfig(t, env, Config{Now: now}, nil)
	waitFor(t, "the rebuilt replica ready", func() bool { return rebuilt.Ready() && rebuilt.Seq() == answerSeq })
	for _, at := range []time.Duration{60*time.Second + 2*time.Duration(ttl)*time.Millisecond, time.Hour} {
		clock.Store(t0.Add(at).UnixNano())
		ls, _ := detail(t, live.Catalog, "kb__search")
		rs, _ := detail(t, rebuilt.Catalog, "kb__search")
		if ls != rs || rs != string(staleness.Expired) {
			t.Errorf("at t0+%s: live replica %s, rebuilt %s; want both expired", at, ls, rs)
		}
	}
}

// A confirmation stored with a TTL may be the first message a catalog applies (the first the
// stream holds after a purge, registrysync confirming a list it published before): when it
// expires, the stream's first sequence moves past it, and the catalog, which recorded it as the
// first message it was built from, took the stream for purged and rebuilt (a loop, while the
// stream's head is such confirmations). A confirmation applied to a catalog without a snapshot
// changes nothing, so the origin recorded is the first message that is not one.
func TestExpiredFirstConfirmationNotPurge(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ttl := int64(30_000)
	sn := snapshot("kb", "Knowledge base", tool("search", "Search articles."))
	sn.TTLMs = &ttl
	subject, data := eventMsg(t, confirmed("kb", sn.Fingerprint, t0))
	msg := nats.NewMsg(subject)
	msg.Data = data
	ack, err := env.JS.PublishMsg(ctx, msg, jetstream.WithMsgTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	statusSeq := publish(t, env.JS, status("kb", subjects.StatusReady))
	seq := publish(t, env.JS, sn)
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, seq)
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.StreamInfo
	waitFor(t, "the confirmation to expire", func() bool {
		info, err = st.Info(ctx)
		return err == nil && info.State.FirstSeq > ack.Sequence
	})
	stored, first, err := r.readOrigin()
	if err != nil {
		t.Fatal(err)
	}
	if first != statusSeq {
		t.Errorf("origin recorded at #%d, want #%d (the first message that is not a confirmation)", first, statusSeq)
	}
	if why := originLost(info, stored, first, r.Seq()); why != "" {
		t.Errorf("after the confirmation #%d expired: %s", ack.Sequence, why)
	}
}

// The lag of a replica started after the stream's last message, a confirmation with a TTL,
// expired is 0, not 1 for as long as the registry stays idle (an hour or more): nothing is
// left to apply. Before, mcpstream_catalog_lag said 1, and an alert on a lag above 0 fired.
func TestLagWithoutExpiredLastMessage(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sn := snapshot("kb", "Knowledge base", tool("search", "Search articles."))
	publish(t, env.JS, status("kb", subjects.StatusReady), sn)
	subject, data := eventMsg(t, confirmed("kb", sn.Fingerprint, t0.Add(time.Second)))
	msg := nats.NewMsg(subject)
	msg.Data = data
	ack, err := env.JS.PublishMsg(ctx, msg, jetstream.WithMsgTTL(time.Second))
	if err != nil {
		t.Fatalf("publish with a TTL: %v", err)
	}
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the confirmation to expire", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == ack.Sequence-1
	})
	r := startReplica(t, env, "", nil, nil)
	waitSeq(t, r.Catalog, ack.Sequence-1)
	waitFor(t, "the stream's last sequence seen", func() bool { return r.Stats().StreamLast == ack.Sequence })
	if s := r.Stats(); s.Lag != 0 {
		t.Errorf("lag %d (seq %d, stream last %d), want 0: the message after the replica's position expired", s.Lag, s.Seq, s.StreamLast)
	}
}

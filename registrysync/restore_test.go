package registrysync

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// What nats-server does with the Nats-Msg-Id of a purged message (the reason publishSnapshot
// passes over ids answered as duplicates of messages the stream no longer holds): a purge of
// the whole stream keeps the de-duplication table (a message published again under its id
// within the window is answered Duplicate and not stored); a stream deleted and created again
// starts with an empty one.
func TestMsgIDAfterPurgeAndRecreate(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	subject := subjects.RegistrySnapshot("dedupe", subjects.KindTools)
	pub := func() *jetstream.PubAck {
		t.Helper()
		msg := nats.NewMsg(subject)
		msg.Data = []byte(`{}`)
		msg.Header.Set(subjects.HeaderMsgID, "dedupe/tools/fp")
		ack, err := env.JS.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		return ack
	}
	if ack := pub(); ack.Duplicate {
		t.Fatal("first publish answered as a duplicate")
	}
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	if ack := pub(); !ack.Duplicate {
		t.Errorf("after a purge of the whole stream: stored at %d; nats-server used to answer a duplicate (its de-duplication table is kept)", ack.Sequence)
	}
	if err := env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	if err := subjects.EnsureStreams(ctx, env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if ack := pub(); ack.Duplicate {
		t.Error("after the stream was deleted and created again: answered as a duplicate")
	}
}

// A running registrysync whose registry stream is purged whole, or deleted and created again,
// publishes again its servers' statuses and lists within a few heartbeat periods, without a
// restart: catalog replicas and executors started after it would know none of its tools. The
// second purge within the de-duplication window finds the ids of the first copies taken too.
func TestRestoreAfterPurgeAndRecreate(t *testing.T) {
	env := natstest.Start(t)
	control := filepath.Join(t.TempDir(), "control.json")
	cfg := fastConfig(stdioServer(t, "ticketing", "demo:ticketing", "MCPSTREAM_TEST_CONTROL="+control))
	cfg.HeartbeatEvery = 100 * time.Millisecond
	h := run(t, env, cfg)
	waitUntil(t, "ready", h.m.Ready)
	snapshot := subjects.RegistrySnapshot("ticketing", subjects.KindTools)
	status := subjects.RegistryStatus("ticketing")
	waitUntil(t, "tools published", func() bool { return lastSeq(t, env, snapshot) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	// held waits until the stream holds a tools snapshot with the server's tools and a ready
	// status again, both stored after seq.
	held := func(what string, after uint64) {
		t.Helper()
		waitUntil(t, what, func() bool {
			msg, err := st.GetLastMsgForSubject(ctx, snapshot)
			if err != nil || msg.Sequence <= after {
				return false
			}
			ev, err := subjects.DecodeRegistryMsg(msg.Subject, msg.Data)
			if err != nil || ev.Snapshot == nil || len(ev.Snapshot.Items) == 0 {
				return false
			}
			msg, err = st.GetLastMsgForSubject(ctx, status)
			if err != nil || msg.Sequence <= after {
				return false
			}
			ev, err = subjects.DecodeRegistryMsg(msg.Subject, msg.Data)
			return err == nil && ev.Status != nil && ev.Status.Status == subjects.StatusReady
		})
	}
	for i := range 2 {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Purge(ctx); err != nil {
			t.Fatal(err)
		}
		held("status and tools published again after purge "+string(rune('1'+i)), info.State.LastSeq)
	}
	if err := env.JS.DeleteStream(ctx, subjects.RegistryStream); err != nil {
		t.Fatal(err)
	}
	// A moment without the stream (the connector's checks find none), then a new one.
	time.Sleep(300 * time.Millisecond)
	if err := subjects.EnsureStreams(ctx, env.JS, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	held("status and tools published again on the stream created again", 0)
}

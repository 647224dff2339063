package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// An executor starting on a registry stream that holds no message but has held some (its
// last sequence past 0: purged, or its last events were confirmations whose TTL ran out) is
// caught up at once, as a catalog replica is: no message will come to say so, and it waited
// for one until ReadyTimeout, then failed to start (ErrNotReady).
func TestExecutorReadyOnEmptiedRegistry(t *testing.T) {
	r := startRig(t, rigOptions{noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs != 0 || info.State.LastSeq == 0 {
		t.Fatalf("registry stream after the purge: %+v %v, want no message and a last sequence", info, err)
	}
	ex, err := New(r.env.NC, Config{Dispatcher: r.mgr, Relister: r.mgr, ReadyTimeout: 5 * time.Second, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	go func() { defer close(finished); runErr = ex.Run(rctx) }()
	defer func() {
		rcancel()
		<-finished
	}()
	for deadline := time.Now().Add(20 * time.Second); !ex.Ready(); time.Sleep(10 * time.Millisecond) {
		select {
		case <-finished:
			t.Fatalf("executor Run on an emptied registry stream: %v", runErr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("executor not ready within 20 s")
		}
	}
}

// The registry lag of an executor started after the stream's last message, a confirmation
// with a TTL, expired is 0, not 1 for as long as the registry stays idle: nothing is left to
// apply (mcpstream_executor_registry_lag said 1, and an alert on a lag above 0 fired).
func TestRegistryLagWithoutExpiredLastMessage(t *testing.T) {
	r := startRig(t, rigOptions{noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := json.Marshal(subjects.Confirmed{V: subjects.Version, Type: "confirmed", Server: "ticketing",
		Kind: subjects.KindTools, Fingerprint: "0000", ListedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(subjects.RegistryConfirmed("ticketing", subjects.KindTools))
	msg.Data = data
	ack, err := r.env.JS.PublishMsg(ctx, msg, jetstream.WithMsgTTL(time.Second))
	if err != nil {
		t.Fatalf("publish with a TTL: %v", err)
	}
	st, err := r.env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the confirmation to expire", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.LastSeq == ack.Sequence && info.State.Msgs == ack.Sequence-1
	})
	ex := r.startExecutor(Config{Dispatcher: r.mgr, Relister: r.mgr}, r.env.NC)
	s := ex.Stats()
	if s.RegistryLast != ack.Sequence || s.RegistrySeq >= ack.Sequence || s.RegistryLag != 0 {
		t.Errorf("registry seq %d, last %d, lag %d; want last %d, seq below it, lag 0: the message after the executor's position expired",
			s.RegistrySeq, s.RegistryLast, s.RegistryLag, ack.Sequence)
	}
}

package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// oldJetStream is a JetStream API as a nats-server before 2.12 serves it: a server without
// JetStream whose $JS.API requests are forwarded to a real one, with the stream settings an old
// server does not know (allow_msg_counter: counter streams came in 2.12) taken out of them, as
// the old server's JSON decoding drops them.
func oldJetStream(t *testing.T, real *natstest.Env) jetstream.JetStream {
	t.Helper()
	return oldJetStreamOf(t, real, false)
}

// oldJetStreamOf is oldJetStream, as a nats-server before 2.11 serves it with before211: nor
// per-message TTLs (allow_msg_ttl, subject_delete_marker_ttl), and API level 0.
func oldJetStreamOf(t *testing.T, real *natstest.Env, before211 bool) jetstream.JetStream {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("front server not ready")
	}
	front, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	if _, err := front.Subscribe("$JS.API.>", func(m *nats.Msg) {
		data := m.Data
		var req map[string]any
		if json.Unmarshal(data, &req) == nil {
			unknown := []string{"allow_msg_counter"}
			if before211 {
				unknown = append(unknown, "allow_msg_ttl", "subject_delete_marker_ttl")
			}
			for _, k := range unknown {
				if _, ok := req[k]; ok {
					delete(req, k)
					data, _ = json.Marshal(req)
				}
			}
		}
		rep, err := real.NC.Request(m.Subject, data, 5*time.Second)
		if err != nil {
			return
		}
		out := rep.Data
		var info map[string]any
		if before211 && m.Subject == "$JS.API.INFO" && json.Unmarshal(out, &info) == nil {
			if api, ok := info["api"].(map[string]any); ok {
				api["level"] = 0
				out, _ = json.Marshal(info)
			}
		}
		m.Respond(out)
	}); err != nil {
		t.Fatal(err)
	}
	// The subscription reaches the server asynchronously: a request before it got no responders.
	if err := front.Flush(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(ns.ClientURL())
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

// TestLimitsNeedCounterStreams: a nats-server before 2.12 ignores AllowMsgCounter and
// Nats-Incr; the executor declared its limits stream there as a plain stream, started, and
// refused every call with a rate as unavailable ("counter value \"\""). With rates configured
// it does not start on such a server, and says why; without rates it starts.
func TestLimitsNeedCounterStreams(t *testing.T) {
	env := natstest.Start(t)
	js := oldJetStream(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := ensureState(ctx, js, Config{Limits: Limits{Servers: map[string]Rate{"*": {Concurrency: 4}}}}.withDefaults(), false); err != nil {
		t.Fatalf("without rates: %v", err)
	}
	_, err := ensureState(ctx, js, Config{Limits: Limits{Tenant: Rate{PerSecond: 5}}}.withDefaults(), false)
	if !errors.Is(err, ErrLimits) || !strings.Contains(err.Error(), "2.12") {
		t.Fatalf("with a rate: got %v, want ErrLimits naming the nats-server version needed", err)
	}
}

// TestSlotsWithoutMsgTTL: on a nats-server before 2.11 (no per-key TTLs) the slots bucket is
// declared as before, its TTL the lease (a TTL raised to the longest call would keep a crashed
// executor's slots that long), and the executor knows its slots take no TTLs of their own.
func TestSlotsWithoutMsgTTL(t *testing.T) {
	env := natstest.Start(t)
	js := oldJetStreamOf(t, env, true)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for range 2 { // declared, then found
		st, err := ensureState(ctx, js, Config{Limits: Limits{Servers: map[string]Rate{"*": {Concurrency: 4}}}}.withDefaults(), false)
		if err != nil {
			t.Fatal(err)
		}
		if st.slotTTLs {
			t.Fatal("per-key TTLs taken for granted on a server without them")
		}
		if !strings.Contains(st.slotsNoTTLs, "before 2.11") {
			t.Fatalf("no per-key TTLs because %q, want a nats-server before 2.11", st.slotsNoTTLs)
		}
		s, err := env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket)
		if err != nil {
			t.Fatal(err)
		}
		if c := s.CachedInfo().Config; c.MaxAge != DefaultSlotLease || c.AllowMsgTTL {
			t.Fatalf("slots bucket TTL %s, allow_msg_ttl %v; want the lease %s and none", c.MaxAge, c.AllowMsgTTL, DefaultSlotLease)
		}
	}
}

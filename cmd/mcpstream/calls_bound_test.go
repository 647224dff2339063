package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/executor"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallsStreamBoundRefusesNewCalls: a bound an operator sets on the calls stream (`nats
// stream edit MCPSTREAM_CALLS --max-msgs`, or a per-tenant --max-msgs-per-subject), which every
// start keeps, made JetStream drop the oldest waiting call to store a new one (the stream's
// discard policy was the default, old): a call acknowledged to its caller vanished before any
// executor took it, and its caller waited for an answer that never came. At the bound a new
// call must be refused, and every call stored must stay.
func TestCallsStreamBoundRefusesNewCalls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound func(*jetstream.StreamConfig)
	}{
		{"max_msgs", func(c *jetstream.StreamConfig) { c.MaxMsgs = 2 }},
		{"max_bytes", func(c *jetstream.StreamConfig) { c.MaxBytes = 400 }}, // two requests of ~165 bytes
		{"max_msgs_per_subject", func(c *jetstream.StreamConfig) { c.MaxMsgsPerSubject = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := natstest.Start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := env.JS.Stream(ctx, subjects.CallsStream)
			if err != nil {
				t.Fatal(err)
			}
			cfg := s.CachedInfo().Config
			cfg.Discard = jetstream.DiscardOld // as an earlier mcpstream declared it
			tc.bound(&cfg)                     // as `nats stream edit` does
			if _, err := env.JS.UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			// The next start declares the streams (and keeps the operator's bound).
			if _, err := ensureStreams(ctx, env.JS, 0, &fileConfig{}); err != nil {
				t.Fatal(err)
			}
			var stored []string
			for i := range 2 {
				id := fmt.Sprintf("c-%d", i)
				data, _ := json.Marshal(subjects.CallRequest{V: 1, ID: id, Tool: "kb__get_document"})
				m := &nats.Msg{Subject: subjects.Calls("acme"), Data: data, Header: nats.Header{}}
				m.Header.Set(subjects.HeaderMsgID, subjects.CallMsgID("acme", id))
				if _, err := env.JS.PublishMsg(ctx, m); err != nil {
					t.Fatalf("call %s: %v", id, err)
				}
				stored = append(stored, id)
			}
			// The third: refused at once, saying what is full (no executor runs: a call stored
			// would wait).
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			res, err := executor.Client{NC: env.NC, JS: env.JS}.CallDirect(cctx, "acme", subjects.CallRequest{ID: "c-2", Tool: "kb__get_document"})
			ccancel()
			if err != nil {
				t.Errorf("a call past the calls stream's bound: %v, want it refused", err)
			} else if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeUnavailable ||
				!strings.Contains(res.Error.Message, subjects.CallsStream) {
				t.Errorf("a call past the calls stream's bound: %s %+v, want refused unavailable naming %s", res.Status, res.Error, subjects.CallsStream)
			}
			info, err := s.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.State.Msgs != uint64(len(stored)) {
				t.Fatalf("the calls stream holds %d requests; %d were acknowledged (%v)", info.State.Msgs, len(stored), stored)
			}
			for seq, id := range stored {
				m, err := s.GetMsg(ctx, uint64(seq+1))
				if err != nil {
					t.Fatalf("call %s (seq %d), acknowledged, is gone: %v", id, seq+1, err)
				}
				var req subjects.CallRequest
				if json.Unmarshal(m.Data, &req) != nil || req.ID != id {
					t.Errorf("seq %d holds %s, want call %s", seq+1, m.Data, id)
				}
			}
		})
	}
}

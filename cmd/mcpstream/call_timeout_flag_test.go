package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallSubMillisecondTimeout: --timeout is sent in whole milliseconds, and one under a
// millisecond (500us) was sent as 0 — the executor's default, 60 s — instead of the shortest
// bound there is (--approval-timeout already rounded up to 1 ms).
func TestCallSubMillisecondTimeout(t *testing.T) {
	env := natstest.Start(t)
	got := make(chan subjects.CallRequest, 1)
	if _, err := env.NC.Subscribe(subjects.ExecAll, func(m *nats.Msg) {
		var req subjects.CallRequest
		json.Unmarshal(m.Data, &req)
		got <- req
		b, _ := json.Marshal(subjects.CallResult{V: 1, ID: req.ID, Status: subjects.CallOK, Result: json.RawMessage(`{"content":[]}`)})
		m.Respond(b)
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		flag string
		want int64
	}{{"500us", 1}, {"1ms", 1}, {"1500us", 1}, {"2s", 2000}, {"0", 0}} {
		if _, errOut, err := runCmd(t, ctx, "call", "kb__x", "--timeout", tc.flag, "--nats", env.URL); err != nil {
			t.Fatalf("--timeout %s: %v %s", tc.flag, err, errOut)
		}
		if req := <-got; req.TimeoutMs != tc.want {
			t.Errorf("--timeout %s: timeoutMs %d, want %d", tc.flag, req.TimeoutMs, tc.want)
		}
	}
}

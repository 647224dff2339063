package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestCallJustUnderTheLimitWithHeadersIsTooLarge: the calls stream holds messages of at most
// MaxCallBytes, headers included (Nats-Msg-Id, Mcpstream-Reply-To). A request a few bytes under
// MaxCallBytes passed the size checks of the front end and of the client, then JetStream refused
// it ("message size exceeds maximum allowed", 10054), and the caller was told unavailable — a
// code that says retrying may work — instead of too_large.
func TestCallJustUnderTheLimitWithHeadersIsTooLarge(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	// A request of exactly n bytes as the client encodes it.
	request := func(id string, n int) (subjects.CallRequest, []byte) {
		req := subjects.CallRequest{V: subjects.Version, ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":""}`),
			RequestedAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
		empty, _ := json.Marshal(req)
		req.Arguments = json.RawMessage(`{"text":"` + strings.Repeat("x", n-len(empty)) + `"}`)
		data, _ := json.Marshal(req)
		if len(data) != n {
			t.Fatalf("request of %d bytes, want %d", len(data), n)
		}
		return req, data
	}
	const n = subjects.MaxCallBytes - 8 // under the limit; over it with the headers

	t.Run("exec", func(t *testing.T) {
		_, data := request("edge-exec", n)
		m, err := r.env.NC.Request(subjects.Exec("local"), data, waitLimit)
		if err != nil {
			t.Fatal(err)
		}
		var res subjects.CallResult
		if err := json.Unmarshal(m.Data, &res); err != nil {
			t.Fatal(err)
		}
		if res.Error == nil || res.Error.Code != subjects.CodeTooLarge {
			t.Errorf("got %s %+v, want too_large", res.Status, res.Error)
		}
	})
	t.Run("CallDirect", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		req, _ := request("edge-direct", n)
		res, err := r.client.CallDirect(ctx, "local", req)
		if err != nil || res.Error == nil || res.Error.Code != subjects.CodeTooLarge {
			t.Errorf("got %+v, %v; want too_large", res.Error, err)
		}
	})
	// The workers keep serving.
	if res := r.call("local", "fixture__echo", `{"text":"after"}`); res.Status != subjects.CallOK {
		t.Errorf("after: %+v", res)
	}
}

package registrysync

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestFastCallStdio: on stdio sessions tools/call goes straight to the transport (fastCall),
// with the _meta mcp-go declares on 2026-07-28 and none on 2025-11-25; results, tool errors,
// protocol errors and timeouts come back as through mcp-go, and the session stays usable.
func TestFastCallStdio(t *testing.T) {
	for _, pin := range []string{"", "2025-11-25"} {
		t.Run("protocol="+pin, func(t *testing.T) {
			sc := stdioServer(t, "fx", "fixture")
			sc.ProtocolVersion = pin
			h := run(t, nil, fastConfig(sc))
			rec := record(t, h.env, subjects.RegistryServer("fx"))
			rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
			ctx := context.Background()

			r := h.m.Dispatch(ctx, "fx", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"héllo \"q\""}`)})
			if r.Error != nil || !strings.Contains(string(r.Result), `"echo":"héllo \"q\""`) {
				t.Fatalf("echo: %+v %s", r.Error, r.Result)
			}
			h.m.mu.Lock()
			s := h.m.conns["fx"].session()
			h.m.mu.Unlock()
			if s == nil || s.fastID.Load() == 0 {
				t.Fatalf("the call did not take the fast path")
			}
			meta := s.stdio.meta.Load()
			if modern := pin == ""; modern != (meta != nil && strings.Contains(string(*meta), "protocolVersion")) {
				t.Errorf("protocol %q: captured _meta %v", s.protocol, meta)
			}
			if r := h.m.Dispatch(ctx, "fx", subjects.DispatchRequest{V: 1, Tool: "fail"}); r.Error != nil || !strings.Contains(string(r.Result), `"isError":true`) {
				t.Errorf("fail: %+v %s, want an isError result", r.Error, r.Result)
			}
			if r := h.m.Dispatch(ctx, "fx", subjects.DispatchRequest{V: 1, Tool: "no_such_tool"}); r.Error == nil || r.Error.Code != subjects.CodeProtocolError {
				t.Errorf("unknown tool: %+v %s, want protocol_error", r.Error, r.Result)
			}
			if r := h.m.Dispatch(ctx, "fx", subjects.DispatchRequest{V: 1, Tool: "slow", Arguments: json.RawMessage(`{"ms":20000}`), TimeoutMs: 200}); r.Error == nil || r.Error.Code != subjects.CodeTimeout {
				t.Errorf("slow: %+v, want timeout", r.Error)
			}
			if r := h.m.Dispatch(ctx, "fx", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"text":"after"}`)}); r.Error != nil || !strings.Contains(string(r.Result), "after") {
				t.Errorf("after the timeout: %+v %s", r.Error, r.Result)
			}
		})
	}
}

package registrysync

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventStreamTypeAsMCPGoReadsIt: an answer whose Content-Type mcp-go reads as an event
// stream goes through the filter (sseRequests) however it is written. The filter took only
// types starting "text/event-stream"; mcp-go takes what mime.ParseMediaType makes of it, which
// trims a leading no-break space: such a stream went to mcp-go unfiltered, and its first answer,
// to another request (a gateway's late answer), was taken for the call's, failing the call
// outcome_unknown (the filter drops it, and the call gets its own answer).
func TestEventStreamTypeAsMCPGoReadsIt(t *testing.T) {
	ts := httptest.NewServer(&scriptHTTP{next: server.NewStreamableHTTPServer(newFixture(fixtureOptions{}))})
	t.Cleanup(ts.Close)
	h := run(t, nil, fastConfig(ServerConfig{Name: "hh", URL: ts.URL + "/mcp", ProtocolVersion: "2025-11-25"}))
	rec := record(t, h.env, subjects.RegistryServer("hh"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	stream := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":987654,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"not yours\"}]}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"yours\"}]}}\n\n"
	for _, ct := range []string{"text/event-stream", "\u00a0text/event-stream", "TEXT/Event-Stream; charset=utf-8"} {
		args, _ := json.Marshal(map[string]any{"l": stream, "ct": ct})
		r := dispatch(t, h, "hh", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: args, TimeoutMs: 20000})
		if r.Error != nil {
			t.Errorf("Content-Type %q: error %+v; want the call's own answer", ct, r.Error)
		} else if got := resultText(t, r.Result); got != "yours" {
			t.Errorf("Content-Type %q: answered %q; want the call's own answer", ct, got)
		}
	}
}

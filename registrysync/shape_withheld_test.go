package registrysync

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestShapeRefusedResultWithheld: a result refused for its shape (content not an array) is
// answered protocol_error, and the dispatch reply carries the server's result, its secrets
// redacted, in withheld (for the executor's audit trail), never in result. One too large to
// go with the answer in a NATS message is left out: the answer stays protocol_error, not
// result_too_large.
func TestShapeRefusedResultWithheld(t *testing.T) {
	const secret = "s3cr3t-5a7e"
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 1 << 20})
	sc := stdioServer(t, "hw", "script")
	sc.Secrets = []string{secret}
	h := run(t, env, fastConfig(sc))
	record(t, env, subjects.RegistryServer("hw")).wait(0, "ready", isStatus(subjects.StatusReady, ""))

	answer := func(content string) json.RawMessage {
		args, _ := json.Marshal(map[string]any{"l": `{"jsonrpc":"2.0","id":$ID,"result":{"content":` + content + `,"structuredContent":{"k":"` + secret + `"}}}`})
		return args
	}
	r := dispatch(t, h, "hw", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: answer(`"done"`), TimeoutMs: 20000})
	if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || !strings.Contains(r.Error.Message, "content is not an array") || len(r.Result) != 0 {
		t.Fatalf("got error %+v, result %.200s; want protocol_error (content is not an array), no result", r.Error, r.Result)
	}
	if w := string(r.Withheld); !strings.Contains(w, `"content":"done"`) || strings.Contains(w, secret) || !strings.Contains(w, redact.Placeholder) {
		t.Errorf("withheld %.300s: want the server's result with its secret redacted", w)
	}

	// A result that fits in a NATS message as the answer's but not beside the error.
	pad := strings.Repeat("x", 1<<20-2000)
	r = dispatch(t, h, "hw", subjects.DispatchRequest{V: 1, Tool: "t", Arguments: answer(`"` + pad + `"`), TimeoutMs: 20000})
	if r.Error == nil || r.Error.Code != subjects.CodeProtocolError || len(r.Withheld) != 0 {
		t.Fatalf("large: got error %+v, withheld %d bytes; want protocol_error without it", r.Error, len(r.Withheld))
	}
}

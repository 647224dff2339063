package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestAnswerOverResultsBoundNotLost: an answer larger than the results stream's max_bytes
// (streams.resultsMaxBytes takes 1 MiB; `nats stream edit` any size) is acknowledged by
// JetStream and dropped at once (discard old: the stream drops its oldest messages, the new one
// among them, to stay within its bound). The caller waiting on its inbox got it, but an answer
// acknowledged as stored was not there: Await, a resend of the id (its request de-duplicated),
// the poll of a caller whose reply was lost and a redelivered request all found nothing, and
// waited until their deadline. An answer the results stream cannot keep must be answered
// result_too_large (the call ran, its result is dropped), stored and readable like any other.
func TestAnswerOverResultsBoundNotLost(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	s, err := r.env.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = 1 << 20 // streams: {resultsMaxBytes: 1MiB}
	if _, err := r.env.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	r.startExecutor(Config{}, r.env.NC)
	r.waitTool("fixture__echo")

	// echo's result holds the text twice (content and structuredContent): about 1.4 MiB, within
	// the 4 MiB result limit and the 8 MiB message size.
	text := strings.Repeat("a", 700<<10)
	args, _ := json.Marshal(map[string]string{"text": text})
	id := NewCallID()
	res, err := r.client.Call(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__echo", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	stored, ok, err := r.client.readStored(ctx, "local", id)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("answered %s %+v (%d bytes of result), but the results stream does not hold the answer", res.Status, res.Error, len(res.Result))
	}
	if res.Status != stored.Status {
		t.Errorf("answered %s, stored %s", res.Status, stored.Status)
	}
	if res.Error == nil || res.Error.Code != subjects.CodeResultTooLarge || !strings.Contains(res.Error.Message, subjects.ResultsStream) {
		t.Errorf("answered %s %+v, want result_too_large naming %s", res.Status, res.Error, subjects.ResultsStream)
	}
}

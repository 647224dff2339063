package executor

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestAnswerOverResultsBoundSetWhileRunning: the results stream's max_bytes set while the
// executor runs (`nats stream edit`, or another role process starting with
// streams.resultsMaxBytes) counts too. The executor sized answers by the bound it found at
// start (none): an answer over the new bound was acknowledged and dropped at once, as before
// the bound was counted at all.
func TestAnswerOverResultsBoundSetWhileRunning(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var cfgx Config
	cfgx.hooks.resultsInfoEvery = -1 // the stream's bound looked up at every answer (5 s apart in production)
	r.startExecutor(cfgx, r.env.NC)
	r.waitTool("fixture__echo")

	s, err := r.env.JS.Stream(ctx, subjects.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = 1 << 20 // streams: {resultsMaxBytes: 1MiB}, declared by another process
	if _, err := r.env.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	text := strings.Repeat("a", 700<<10) // a result of about 1.4 MiB (see TestAnswerOverResultsBoundNotLost)
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
	if res.Status != stored.Status || res.Error == nil || res.Error.Code != subjects.CodeResultTooLarge {
		t.Errorf("answered %s %+v, stored %s, want result_too_large", res.Status, res.Error, stored.Status)
	}
}

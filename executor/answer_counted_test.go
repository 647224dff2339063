package executor

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestAnswerStoredByLostAckCounted: an answer whose first publish was stored but whose PubAck
// was lost is found on its results subject by the retry (the very same bytes): it is this
// answer, stored, so it is counted (stored is called). The retry's refusal was taken for
// another answer's: the call went uncounted in Stats (answered, refused, failed, tool errors,
// time), the executor's Prometheus metrics.
func TestAnswerStoredByLostAckCounted(t *testing.T) {
	r := startRig(t, rigOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	now := time.Now().UTC()
	res := subjects.CallResult{V: subjects.Version, ID: "lost-ack", Tenant: "local", Tool: "ticketing__createIssue",
		Status: subjects.CallOK, Result: []byte(`{"content":[]}`), StartedAt: now, FinishedAt: now}
	data, err := encodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	// The first attempt's publish, stored; its PubAck never came back.
	msg := &nats.Msg{Subject: subjects.Result(res.Tenant, res.ID), Data: data, Header: nats.Header{}}
	msg.Header.Set(subjects.HeaderMsgID, subjects.ResultMsgID(res.Tenant, res.ID))
	if _, err := r.env.JS.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	counted := false
	if err := r.ex.answer(ctx, res, "", func() { counted = true }); err != nil {
		t.Fatal(err)
	}
	if !counted {
		t.Error("an answer stored by an attempt whose PubAck was lost is not counted")
	}
}

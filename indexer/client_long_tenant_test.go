package indexer

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestClientLongTenantRefusedBeforeSending: the catalog client put any tenant in its request's
// subject, where each byte that is not a letter, digit, '_' or '-' takes three: a tenant of
// 1500 '.' made a subject past the NATS server's max_control_line (4 KiB), and the server
// closed the caller's connection, every request in flight on it cut. No catalog replica serves
// a tenant over subjects.MaxUserBytes: the client answers bad_request without sending, and the
// connection stays up.
func TestClientLongTenantRefusedBeforeSending(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	var disconnects atomic.Int64
	nc, err := nats.Connect(env.URL, nats.DisconnectErrHandler(func(*nats.Conn, error) { disconnects.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl := Client{NC: nc}
	serviceUp(t, cl)
	tenant := strings.Repeat(".", 1500) // 4500 bytes in a subject
	ctx := context.Background()
	want := func(what string, e *subjects.Error, err error) {
		t.Helper()
		if err != nil || e == nil || e.Code != subjects.CodeBadRequest || !strings.Contains(e.Message, "at most 1024") {
			t.Errorf("%s: %v %+v, want bad_request naming the limit", what, err, e)
		}
		if n := disconnects.Load(); n > 0 {
			t.Fatalf("%s: the caller's connection was closed %d times", what, n)
		}
	}
	s, err := cl.Search(ctx, tenant, subjects.SearchRequest{V: 1, Query: "refund policy"})
	want("Search", s.Error, err)
	d, err := cl.Details(ctx, tenant, subjects.DetailsRequest{V: 1, Names: []string{"kb__search"}})
	want("Details", d.Error, err)
	sv, err := cl.Servers(ctx, tenant, subjects.ServersRequest{V: 1})
	want("Servers", sv.Error, err)

	// The empty tenant, none (token "~"), is refused unsent too, in the replicas' words.
	s, err = cl.Search(ctx, "", subjects.SearchRequest{V: 1, Query: "refund policy"})
	raw, rerr := nc.Request(subjects.CatalogSearch(""), []byte(`{"v":1,"query":"refund policy"}`), 30*time.Second)
	var rawRep subjects.SearchReply
	if rerr == nil {
		rerr = json.Unmarshal(raw.Data, &rawRep)
	}
	if err != nil || rerr != nil || s.Error == nil || rawRep.Error == nil || *s.Error != *rawRep.Error {
		t.Errorf("Search of the empty tenant: %v %+v; the replica's answer %v %+v", err, s.Error, rerr, rawRep.Error)
	}

	if rep, err := cl.Search(ctx, "local", subjects.SearchRequest{V: 1, Query: "refund policy"}); err != nil || rep.Error != nil || len(rep.Tools) == 0 {
		t.Errorf("a search after them: %v %+v", err, rep)
	}
	if n := disconnects.Load(); n > 0 {
		t.Errorf("the caller's connection was closed %d times", n)
	}
}

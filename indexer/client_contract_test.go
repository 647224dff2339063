package indexer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// within runs f and fails the test if it has not returned within a generous bound: what it
// checks is that a call ends (instead of waiting out an hour-long Timeout), not how fast.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still waiting after 30 s", what)
	}
}

// fakeCatalog answers the requests of every catalog subject of tenant "local" with answer (nil:
// never answers) and reports each request it got on the returned channel.
func fakeCatalog(t *testing.T, env *natstest.Env, answer func(m *nats.Msg) []byte) <-chan *nats.Msg {
	t.Helper()
	nc := env.Connect(t)
	got := make(chan *nats.Msg, 16)
	sub, err := nc.Subscribe("mcpstream.v1.catalog.local.*", func(m *nats.Msg) {
		select {
		case got <- m:
		default:
		}
		if answer != nil {
			_ = m.Respond(answer(m))
		}
	})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return got
}

// TestClientZeroAndNegativeTimeout: a Timeout of 0 is the default bound (5 s), and so is a
// negative one: it was used as is, so every call failed at once with a deadline already past.
// A Client without NC is an error, not a panic.
func TestClientZeroAndNegativeTimeout(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	nc := env.Connect(t)
	serviceUp(t, Client{NC: nc})
	for _, timeout := range []time.Duration{0, -1, -time.Hour} {
		rep, err := Client{NC: nc, Timeout: timeout}.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "refund policy"})
		if err != nil || rep.Error != nil || len(rep.Tools) == 0 {
			t.Errorf("Timeout %v: %v %+v", timeout, err, rep)
		}
	}
	var zero Client
	if _, err := zero.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "x"}); !errors.Is(err, ErrClientIncomplete) {
		t.Errorf("zero Client: err %v, want ErrClientIncomplete", err)
	}
	if _, err := zero.AllServers(context.Background(), "local", subjects.ServersRequest{V: 1}, 0); !errors.Is(err, ErrClientIncomplete) {
		t.Errorf("zero Client AllServers: err %v, want ErrClientIncomplete", err)
	}
}

// TestClientClosedConnection: a call on a closed connection, or whose connection closes while it
// waits for the reply, ends at once with nats.ErrConnectionClosed (the Timeout is an hour).
func TestClientClosedConnection(t *testing.T) {
	env := natstest.Start(t)
	got := fakeCatalog(t, env, nil) // takes the requests, never answers

	nc := env.Connect(t)
	cl := Client{NC: nc, Timeout: time.Hour}
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Details(context.Background(), "local", subjects.DetailsRequest{V: 1, Names: []string{"kb__x"}})
		errc <- err
	}()
	<-got // the request is in flight
	nc.Close()
	within(t, "call whose connection closed", func() {
		if err := <-errc; !errors.Is(err, nats.ErrConnectionClosed) {
			t.Errorf("closed while waiting: err %v, want nats.ErrConnectionClosed", err)
		}
	})
	within(t, "call on a closed connection", func() {
		if _, err := cl.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "x"}); !errors.Is(err, nats.ErrConnectionClosed) {
			t.Errorf("closed: err %v, want nats.ErrConnectionClosed", err)
		}
	})
}

// TestClientRequestOverMaxPayload: a request larger than a message of the connection may be
// (its server's max_payload) came back as a transport error (nats: maximum payload exceeded),
// which the CLI reports as unavailable. It is refused too_large in the reply, as the service
// refuses one over its own limit, without being sent.
func TestClientRequestOverMaxPayload(t *testing.T) {
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: 16 << 10})
	got := fakeCatalog(t, env, func(*nats.Msg) []byte { return []byte(`{"v":1,"tools":[]}`) })
	cl := Client{NC: env.Connect(t), Timeout: 5 * time.Second}
	big := strings.Repeat("x", 20<<10)
	ctx := context.Background()

	s, err := cl.Search(ctx, "local", subjects.SearchRequest{V: 1, Query: big})
	if err != nil || s.Error == nil || s.Error.Code != subjects.CodeTooLarge || s.Tools == nil {
		t.Errorf("search: %v %+v", err, s.Error)
	}
	d, err := cl.Details(ctx, "local", subjects.DetailsRequest{V: 1, Names: []string{big}})
	if err != nil || d.Error == nil || d.Error.Code != subjects.CodeTooLarge || d.Tools == nil {
		t.Errorf("details: %v %+v", err, d.Error)
	}
	sv, err := cl.Servers(ctx, "local", subjects.ServersRequest{V: 1, After: big})
	if err != nil || sv.Error == nil || sv.Error.Code != subjects.CodeTooLarge || sv.Servers == nil {
		t.Errorf("servers: %v %+v", err, sv.Error)
	}
	if s.Error != nil && !strings.Contains(s.Error.Message, "max_payload") {
		t.Errorf("message %q does not name the limit", s.Error.Message)
	}
	select {
	case m := <-got:
		t.Errorf("a request over max_payload was sent (%d bytes)", len(m.Data))
	default:
	}
	// One that fits is sent and answered.
	if rep, err := cl.Search(ctx, "local", subjects.SearchRequest{V: 1, Query: "x"}); err != nil || rep.Error != nil {
		t.Errorf("small search: %v %+v", err, rep.Error)
	}
}

// TestClientNoReplica: with nothing serving the subject (NATS answers 503, no responders) the
// error is ErrNoCatalog, told apart from a timeout.
func TestClientNoReplica(t *testing.T) {
	env := natstest.Start(t)
	cl := Client{NC: env.Connect(t), Timeout: time.Hour}
	within(t, "call with no replica", func() {
		if _, err := cl.Servers(context.Background(), "local", subjects.ServersRequest{V: 1}); !errors.Is(err, ErrNoCatalog) {
			t.Errorf("err %v, want ErrNoCatalog", err)
		}
	})
}

// TestClientMalformedReply: a reply that is not the endpoint's — not JSON, JSON null, an object
// without the version, or another endpoint's reply (a servers page to a search) — is an error,
// not an empty result the caller would take for "nothing found".
func TestClientMalformedReply(t *testing.T) {
	env := natstest.Start(t)
	var mu sync.Mutex
	answer := ""
	fakeCatalog(t, env, func(*nats.Msg) []byte {
		mu.Lock()
		defer mu.Unlock()
		return []byte(answer)
	})
	cl := Client{NC: env.Connect(t), Timeout: 5 * time.Second}
	for _, a := range []string{
		`not json`,
		`null`,
		`{}`,
		`{"v":2,"tools":[]}`,
		`{"v":1,"servers":[{"name":"kb"}]}`,
	} {
		mu.Lock()
		answer = a
		mu.Unlock()
		rep, err := cl.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "x"})
		if err == nil || !strings.Contains(err.Error(), "malformed reply") {
			t.Errorf("reply %s: err %v, rep %+v; want a malformed reply error", a, err, rep)
		}
	}
	// The endpoint's own error reply is a reply.
	mu.Lock()
	answer = `{"v":1,"tools":[],"error":{"code":"unavailable","message":"rebuilding"}}`
	mu.Unlock()
	rep, err := cl.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "x"})
	if err != nil || rep.Error == nil || rep.Error.Code != subjects.CodeUnavailable {
		t.Errorf("error reply: %v %+v", err, rep)
	}
	// So is an error reply without the list, as a replica before this version sent for some
	// errors (a request over 64 KiB, a bad tenant token): a rolling upgrade must not turn its
	// refusal into a malformed reply.
	mu.Lock()
	answer = `{"v":1,"error":{"code":"too_large","message":"request of 70000 bytes exceeds 65536"}}`
	mu.Unlock()
	rep, err = cl.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "x"})
	if err != nil || rep.Error == nil || rep.Error.Code != subjects.CodeTooLarge {
		t.Errorf("an older replica's error reply without tools: %v %+v", err, rep)
	}
}

// TestClientContextAndTimeout: ctx's cancellation ends a call waiting for its reply (with
// context.Canceled); ctx's deadline, when it has one, bounds the call instead of Timeout.
func TestClientContextAndTimeout(t *testing.T) {
	env := natstest.Start(t)
	got := fakeCatalog(t, env, nil)
	cl := Client{NC: env.Connect(t), Timeout: time.Hour}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cl.Search(ctx, "local", subjects.SearchRequest{V: 1, Query: "x"})
		errc <- err
	}()
	<-got
	cancel()
	within(t, "cancelled call", func() {
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled: err %v, want context.Canceled", err)
		}
	})
	dctx, dcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer dcancel()
	within(t, "call with a deadline", func() {
		if _, err := cl.Search(dctx, "local", subjects.SearchRequest{V: 1, Query: "x"}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("deadline: err %v, want context.DeadlineExceeded", err)
		}
	})
}

// TestClientConcurrentUse: one Client shared by many goroutines gets each its own reply.
func TestClientConcurrentUse(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: env.Connect(t)}
	serviceUp(t, cl)
	want := []string{"kb__search_knowledge_base", "kb__get_document", "ticketing__createIssue", "logging__getLogs"}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 10 {
				name := want[(g+i)%len(want)]
				rep, err := cl.Details(context.Background(), "local", subjects.DetailsRequest{V: 1, Names: []string{name}})
				if err != nil || rep.Error != nil || len(rep.Tools) != 1 || rep.Tools[0].Name != name {
					errs <- fmt.Errorf("details %s: %v %+v", name, err, rep.Error)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

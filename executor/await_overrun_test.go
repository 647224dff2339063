package executor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// gatedJS is a real JetStream context whose results stream holds Await after its first look
// for the answer (the answer not stored yet), until released: what arrives on the results
// subject meanwhile waits in Await's subscription.
type gatedJS struct {
	jetstream.JetStream
	once     sync.Once
	looked   chan struct{}
	released chan struct{}
}

func (g *gatedJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := g.JetStream.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return &gatedStream{Stream: s, g: g}, nil
}

type gatedStream struct {
	jetstream.Stream
	g *gatedJS
}

func (s *gatedStream) GetLastMsgForSubject(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	m, err := s.Stream.GetLastMsgForSubject(ctx, subject)
	s.g.once.Do(func() {
		close(s.g.looked)
		<-s.g.released
	})
	return m, err
}

// TestAwaitAnswerPastOverrunSubscription: Await's subscription to the results subject holds a
// few messages; a burst there (junk, the refused answers of resends) past them is dropped by
// the NATS client (slow consumer), the answer with it. Await read the results stream only
// before waiting, so it waited for an answer that was stored all along until ctx ended.
func TestAwaitAnswerPastOverrunSubscription(t *testing.T) {
	env := natstest.Start(t)
	g := &gatedJS{JetStream: env.JS, looked: make(chan struct{}), released: make(chan struct{})}
	c := Client{NC: env.NC, JS: g}
	const tenant, id = "local", "overrun"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type outcome struct {
		res subjects.CallResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.Await(ctx, tenant, id)
		done <- outcome{res, err}
	}()
	select {
	case <-g.looked: // subscribed, and the answer was not stored yet
	case o := <-done:
		t.Fatalf("Await returned before its first look was done: %+v %v", o.res, o.err)
	}
	// A burst on the results subject: more junk than Await's subscription holds, then the
	// answer (stored on the results stream).
	for i := range 64 {
		if err := env.NC.Publish(subjects.Result(tenant, id), []byte(`{"v":1,"id":"junk-`+string(rune('a'+i%26))+`"}`)); err != nil {
			t.Fatal(err)
		}
	}
	answer, _ := json.Marshal(subjects.CallResult{V: subjects.Version, ID: id, Tenant: tenant, Tool: "t", Status: subjects.CallOK})
	if _, err := env.JS.Publish(ctx, subjects.Result(tenant, id), answer); err != nil {
		t.Fatal(err)
	}
	// The round trip: every message above has reached Await's subscription (or was dropped).
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	close(g.released)
	o := <-done
	if o.err != nil {
		t.Fatalf("Await: %v (the answer is on the results stream)", o.err)
	}
	if o.res.ID != id || o.res.Status != subjects.CallOK {
		t.Fatalf("Await = %+v, want the answer of %s", o.res, id)
	}
}

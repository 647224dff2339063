package registrysync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// waitLimit bounds every wait for something to happen. It is generous: a test fails only if the
// thing never happens, never because the machine is slow.
const waitLimit = 30 * time.Second

// fastConfig shortens delays so that tests spend their time on work, not waiting.
func fastConfig(servers ...ServerConfig) Config {
	return Config{
		Servers:        servers,
		Debounce:       30 * time.Millisecond,
		BackoffInitial: 50 * time.Millisecond,
		BackoffMax:     400 * time.Millisecond,
		ResyncEvery:    -1,
		PingEvery:      -1,
		ListTimeout:    20 * time.Second,
		ConnectTimeout: 20 * time.Second,
		DrainTimeout:   2 * time.Second,
	}
}

// testLogger writes to the test log (debug with -v and MCPSTREAM_TEST_DEBUG=1).
func testLogger(t testing.TB) zerolog.Logger {
	level := zerolog.InfoLevel
	if os.Getenv("MCPSTREAM_TEST_DEBUG") != "" {
		level = zerolog.DebugLevel
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(level).With().Timestamp().Logger()
}

// harness is one running Manager on one test's JetStream.
type harness struct {
	env    *natstest.Env
	m      *Manager
	cancel context.CancelFunc
	done   chan error
}

// run starts a Manager with cfg on env (a new one if nil) and stops it at cleanup.
func run(t *testing.T, env *natstest.Env, cfg Config) *harness {
	t.Helper()
	return runWith(t, env, cfg, nil)
}

// runWith is run, with setup (if not nil) called on the Manager before Run starts.
func runWith(t *testing.T, env *natstest.Env, cfg Config, setup func(*Manager)) *harness {
	t.Helper()
	if env == nil {
		env = natstest.Start(t)
	}
	h := &harness{env: env, m: New(env.JS, env.NC, cfg, testLogger(t)), done: make(chan error, 1)}
	if setup != nil {
		setup(h.m)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// stop ends Run and waits for it.
func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		h.done <- nil // stop is idempotent
	case <-time.After(waitLimit):
		t.Errorf("Run did not return within %s", waitLimit)
	}
}

// event is one registry message.
type event struct {
	seq     uint64
	subject subjects.RegistrySubject
	msgID   string
	data    []byte
	ev      subjects.RegistryEvent
}

func (e event) String() string {
	switch {
	case e.ev.Status != nil:
		return fmt.Sprintf("#%d %s status %s %s %s", e.seq, e.subject.Server, e.ev.Status.Status, e.ev.Status.Code, e.ev.Status.Reason)
	case e.ev.Snapshot != nil:
		return fmt.Sprintf("#%d %s snapshot %s items=%d rejected=%d", e.seq, e.subject.Server, e.subject.Kind, len(e.ev.Snapshot.Items), len(e.ev.Snapshot.Rejected))
	case e.ev.ListChanged != nil:
		return fmt.Sprintf("#%d %s changed %s", e.seq, e.subject.Server, e.subject.Kind)
	}
	return fmt.Sprintf("#%d %v", e.seq, e.subject)
}

// recorder collects every registry event of a filter, in stream order.
type recorder struct {
	t   *testing.T
	mu  sync.Mutex
	evs []event
}

// record follows filter (e.g. subjects.RegistryServer(name)) on env's registry stream from its
// first message.
func record(t *testing.T, env *natstest.Env, filter string) *recorder {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := env.JS.OrderedConsumer(ctx, subjects.RegistryStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
	})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	r := &recorder{t: t}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		md, err := msg.Metadata()
		if err != nil {
			t.Errorf("metadata: %v", err)
			return
		}
		sub, err := subjects.ParseRegistry(msg.Subject())
		if err != nil {
			t.Errorf("subject %q: %v", msg.Subject(), err)
			return
		}
		ev, err := subjects.DecodeRegistry(msg.Data())
		if err != nil {
			t.Errorf("event on %s: %v", msg.Subject(), err)
			return
		}
		r.mu.Lock()
		r.evs = append(r.evs, event{seq: md.Sequence.Stream, subject: sub, msgID: msg.Headers().Get(subjects.HeaderMsgID),
			data: append([]byte(nil), msg.Data()...), ev: ev})
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	t.Cleanup(cc.Stop)
	return r
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.evs...)
}

// wait returns the first event after seq that matches pred, failing the test if none comes.
func (r *recorder) wait(after uint64, what string, pred func(event) bool) event {
	r.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		for _, e := range r.all() {
			if e.seq > after && pred(e) {
				return e
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var b strings.Builder
	for _, e := range r.all() {
		fmt.Fprintf(&b, "\n  %s", e)
	}
	r.t.Fatalf("no %s after #%d within %s; events:%s", what, after, waitLimit, b.String())
	return event{}
}

// Predicates.
func isStatus(status, code string) func(event) bool {
	return func(e event) bool {
		return e.ev.Status != nil && e.ev.Status.Status == status && (code == "*" || e.ev.Status.Code == code)
	}
}

func isSnapshot(kind subjects.Kind, pred func(*subjects.Snapshot) bool) func(event) bool {
	return func(e event) bool {
		return e.ev.Snapshot != nil && e.ev.Snapshot.Kind == kind && (pred == nil || pred(e.ev.Snapshot))
	}
}

func isChanged(kind subjects.Kind) func(event) bool {
	return func(e event) bool { return e.ev.ListChanged != nil && e.ev.ListChanged.Kind == kind }
}

// names returns the names of a snapshot's items.
func names(t *testing.T, s *subjects.Snapshot) []string {
	t.Helper()
	out := make([]string, 0, len(s.Items))
	for _, it := range s.Items {
		var v struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(it, &v); err != nil {
			t.Fatalf("item %s: %v", it, err)
		}
		out = append(out, v.Name)
	}
	return out
}

func hasName(t *testing.T, s *subjects.Snapshot, name string) bool {
	for _, n := range names(t, s) {
		if n == name {
			return true
		}
	}
	return false
}

// waitUntil polls cond until it holds, failing the test if it never does.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not happen within %s", what, waitLimit)
}

// httpFixture serves srv over streamable HTTP on 127.0.0.1 and returns its /mcp URL.
func httpFixture(t *testing.T, srv *server.MCPServer) string {
	t.Helper()
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// stdioServer configures the test binary as a stdio server in mode.
func stdioServer(t *testing.T, name, mode string, env ...string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("executable: %v", err)
	}
	sc := ServerConfig{
		Name: name, Transport: TransportStdio, Command: exe,
		Args: []string{"-test.run=^$"},
		// A -race child sleeps atexit_sleep_ms (1 s by default) before it exits: every stop
		// of a test's connector waited for it. Races it reports while it runs still show.
		Env: map[string]string{childEnv: mode, "GORACE": strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")},
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		sc.Env[k] = v
	}
	return sc
}

// dispatch sends a DispatchRequest over NATS.
func dispatch(t *testing.T, h *harness, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	t.Helper()
	data, _ := json.Marshal(req)
	msg, err := h.env.NC.Request(subjects.Dispatch(server), data, waitLimit)
	if err != nil {
		t.Fatalf("dispatch request: %v", err)
	}
	var r subjects.DispatchReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatalf("dispatch reply %s: %v", msg.Data, err)
	}
	return r
}

// relist sends a RelistRequest over NATS.
func relist(t *testing.T, h *harness, server string, req subjects.RelistRequest) subjects.RelistReply {
	t.Helper()
	data, _ := json.Marshal(req)
	msg, err := h.env.NC.Request(subjects.Relist(server), data, waitLimit)
	if err != nil {
		t.Fatalf("relist request: %v", err)
	}
	var r subjects.RelistReply
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatalf("relist reply %s: %v", msg.Data, err)
	}
	return r
}

// lastSeq is the sequence of the last message on subject (0 if none).
func lastSeq(t *testing.T, env *natstest.Env, subject string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	msg, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("last message on %s: %v", subject, err)
	}
	return msg.Sequence
}

func resultText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: no text content (%v)", raw, err)
	}
	return r.Content[0].Text
}

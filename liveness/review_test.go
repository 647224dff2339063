package liveness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// syncBuffer is a log destination the test reads while the watchdog writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// retries returns the retry_in (ms) of every "status consumer failed" line logged so far.
func (s *syncBuffer) retries(t *testing.T) []float64 {
	t.Helper()
	s.mu.Lock()
	text := s.b.String()
	s.mu.Unlock()
	var out []float64
	for line := range strings.Lines(text) {
		var l struct {
			Message string  `json:"message"`
			RetryIn float64 `json:"retry_in"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == "liveness: status consumer failed" {
			out = append(out, l.RetryIn)
		}
	}
	return out
}

// flakyJS is the watchdog's JetStream, whose status consumer fails when the test says: its
// creation the first failCreate times, its iterator's Next once after failNext is set. It
// counts the consumers made and the messages the one made last delivered.
type flakyJS struct {
	jetstream.JetStream
	failCreate atomic.Int32
	failNext   atomic.Bool
	made       atomic.Int32
	delivered  atomic.Int32 // by the consumer made last
}

func (f *flakyJS) OrderedConsumer(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	if f.failCreate.Add(-1) >= 0 {
		return nil, errors.New("test: no consumer")
	}
	c, err := f.JetStream.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, err
	}
	f.delivered.Store(0)
	f.made.Add(1)
	return &flakyConsumer{Consumer: c, f: f}, nil
}

type flakyConsumer struct {
	jetstream.Consumer
	f *flakyJS
}

func (c *flakyConsumer) Messages(opts ...jetstream.PullMessagesOpt) (jetstream.MessagesContext, error) {
	it, err := c.Consumer.Messages(opts...)
	if err != nil {
		return nil, err
	}
	return &flakyIter{MessagesContext: it, f: c.f}, nil
}

type flakyIter struct {
	jetstream.MessagesContext
	f *flakyJS
}

func (it *flakyIter) Next(opts ...jetstream.NextOpt) (jetstream.Msg, error) {
	if it.f.failNext.CompareAndSwap(true, false) {
		return nil, errors.New("test: the consumer failed")
	}
	m, err := it.MessagesContext.Next(opts...)
	if err == nil {
		it.f.delivered.Add(1)
	}
	return m, err
}

// A status consumer that failed several times in a row (NATS or the stream not there yet at
// start) and then worked waits the initial delay after its next failure, not the grown one:
// the backoff starts over once a consumer worked.
func TestStatusConsumerBackoffResetsAfterWorking(t *testing.T) {
	env := natstest.Start(t)
	nc := env.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	const failures = 4 // the next delay grows to 250ms·1.5⁴ ± 50%: at least 632ms
	fjs := &flakyJS{JetStream: js}
	fjs.failCreate.Store(failures)
	var logs syncBuffer
	w := &Watchdog{NC: nc, JS: fjs, Log: zerolog.New(&logs), CheckEvery: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	waitFor(t, "the consumer working after its failures", w.Ready)
	if n := len(logs.retries(t)); n != failures {
		t.Fatalf("%d failures logged, want %d", n, failures)
	}

	// The working consumer fails: its Next returns an error once a status wakes it up.
	fjs.failNext.Store(true)
	data, _ := json.Marshal(subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "s", Status: subjects.StatusReady, At: time.Now()})
	if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("s"), data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the working consumer's failure", func() bool { return len(logs.retries(t)) > failures })
	// The initial interval, 250ms, randomized by ±50%.
	if d := logs.retries(t)[failures]; d > 375 {
		t.Errorf("a consumer that worked fails: retry in %vms, want the initial delay (at most 375ms); delays %v", d, logs.retries(t))
	}
}

// startAuthServer runs a JetStream server with two users: "admin", allowed everything, and
// "watchdog", denied publishing on the status subjects of deny.
func startAuthServer(t *testing.T, deny ...string) (url string, admin jetstream.JetStream) {
	t.Helper()
	srv, _, js := startJetStream(t, []*server.User{{Username: "admin", Password: "admin"}, {Username: "watchdog", Password: "watchdog",
		Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: deny}}}})
	return srv.ClientURL(), js
}

// startJetStream runs a JetStream server on loopback with users (nil: no authorization) and the
// mcpstream streams declared, and returns it with a connection as "admin" (password "admin",
// when users are given) and its JetStream.
func startJetStream(t *testing.T, users []*server.User) (*server.Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true, Users: users})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	var opts []nats.Option
	if users != nil {
		opts = append(opts, nats.UserInfo("admin", "admin"))
	}
	admin, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := subjects.EnsureStreams(t.Context(), js, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return srv, admin, js
}

func (w *Watchdog) silenceFrom() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.since
}

// A declaration whose acknowledgement never comes (here: no permission to publish it, so the
// server drops it) holds the watchdog's loop for the 5 s of the acknowledgements' wait. The
// next check must not take that wait for a pause of the process and count every connector's
// silence from scratch again, which delays every other declaration by 3 periods.
func TestSlowAcksAreNoPause(t *testing.T) {
	url, admin := startAuthServer(t, subjects.RegistryStatus("denied"))
	nc, err := nats.Connect(url, nats.UserInfo("watchdog", "watchdog"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := runWatchdog(t, nc)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	start := w.silenceFrom()
	publish := func(server, connector string) {
		data, _ := json.Marshal(subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: server, Status: subjects.StatusReady,
			Connector: connector, HeartbeatMs: beat.Milliseconds(), At: time.Now()})
		if _, err := admin.Publish(t.Context(), subjects.RegistryStatus(server), data); err != nil {
			t.Fatal(err)
		}
	}
	publish("denied", "silent1")
	var failedAt time.Time
	waitFor(t, "the declaration of denied given up (no acknowledgement)", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		if s := w.servers["denied"]; s != nil && !s.retryAt.IsZero() {
			failedAt = s.retryAt.Add(-declareRetry)
			return true
		}
		return false
	})
	// Another silent connector: its declaration comes after checks that follow the slow one.
	publish("other", "silent2")
	waitFor(t, "other declared", func() bool { return w.Declared() == 1 })
	if since := w.silenceFrom(); since.After(failedAt) || !since.Equal(start) {
		t.Errorf("silence counted again from %s, %s after the slow declaration ended (the watchdog started at %s): a wait for acknowledgements taken for a pause",
			since.Format(time.StampMicro), since.Sub(failedAt), start.Format(time.StampMicro))
	}
}

// The statuses of a purged stream are gone: the watchdog forgets their servers (and does not
// declare them), rather than keeping them until it restarts.
func TestPurgedStatusesForgotten(t *testing.T) {
	env := natstest.Start(t)
	w := startWatchdog(t, env)
	waitFor(t, "the watchdog reading statuses", w.Ready)
	for _, st := range []subjects.Status{
		{V: 1, Type: subjects.EventStatus, Server: "unwatched", Status: subjects.StatusReady, At: time.Now()},
		{V: 1, Type: subjects.EventStatus, Server: "stopped", Status: subjects.StatusUnavailable, Code: subjects.CodeConnectorStopped, Connector: "x", At: time.Now()},
		// Watched, declared only after a while: the purge comes first (most likely).
		{V: 1, Type: subjects.EventStatus, Server: "watched", Status: subjects.StatusReady, Connector: "gone", HeartbeatMs: 1000, At: time.Now()},
	} {
		data, _ := json.Marshal(st)
		if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus(st.Server), data); err != nil {
			t.Fatal(err)
		}
	}
	known := func() (out []string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		for s := range w.servers {
			out = append(out, s)
		}
		return out
	}
	waitFor(t, "the watched server seen", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.servers["watched"] != nil
	})
	s, err := env.JS.Stream(t.Context(), subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for len(known()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if k := known(); len(k) > 0 {
		t.Errorf("servers whose statuses were purged still kept: %v", k)
	}
	for _, name := range []string{"unwatched", "stopped", "watched"} {
		if sts := statuses(t, env, name); len(sts) != 0 {
			t.Errorf("%s: published after the purge: %+v", name, sts)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.named) != 0 {
		t.Errorf("connectors still named: %v", w.named)
	}
}

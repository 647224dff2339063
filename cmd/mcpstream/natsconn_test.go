package main

import (
	"bufio"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natsembed"
)

// slowConsumer makes sub a slow consumer: with room for one pending message and nobody reading
// it, n messages published to it leave n-1 dropped by the NATS client.
func slowConsumer(t *testing.T, nc *nats.Conn, subject string, n int) *nats.Subscription {
	t.Helper()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(1, -1); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := nc.Publish(subject, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, subject+" dropping messages", 200, func() bool {
		d, err := sub.Dropped()
		return err == nil && d == n-1
	})
	return sub
}

// logLines are the JSON lines of log whose message starts with msg.
func logLines(t *testing.T, log *syncBuffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(log.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m, _ := line["message"].(string); strings.HasPrefix(m, msg) {
			out = append(out, line)
		}
	}
	return out
}

// A subscription of a role process's NATS connection that drops messages (a slow consumer)
// is logged with its subject and the connection's name, at most once per subject and window
// (the rest counted in a later line), and counted on /metrics by subject, per-call subjects and
// reply inboxes collapsed; a handler given before the process's own still runs.
func TestNATSSlowConsumerLoggedAndCounted(t *testing.T) {
	srv, err := natsembed.Start(natsembed.Config{Listen: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	var logBuf syncBuffer
	log, err := newLogger(&logBuf, "info", "json")
	if err != nil {
		t.Fatal(err)
	}

	// The process's set-up (as up.go), with the clock and the timer of the log's rate limit
	// in the test's hands.
	errs := newNATSErrors(log, "_INBOX")
	var mu sync.Mutex
	clock := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var flushes []func()
	errs.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	errs.after = func(_ time.Duration, f func()) { mu.Lock(); defer mu.Unlock(); flushes = append(flushes, f) }
	var earlier sync.WaitGroup
	earlier.Add(1)
	var once sync.Once
	opts := append([]nats.Option{nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { once.Do(earlier.Done) })},
		hostNATSOptions(log, "test", make(chan struct{}, 1), errs)...)
	nc, err := srv.Connect(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reg, metrics := newMetrics()
	reg.MustRegister(collectFunc(errs.collect))
	scrape := func() string {
		rec := httptest.NewRecorder()
		metrics.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		return rec.Body.String()
	}
	const (
		results = `mcpstream_nats_slow_consumer_events_total{subject="mcpstream.v1.results.*.*"}`
		inbox   = `mcpstream_nats_slow_consumer_events_total{subject="_INBOX"}`
	)
	const msg = "nats slow consumer"

	slowConsumer(t, nc, "mcpstream.v1.results.acme.call-1", 5)
	waitFor(t, "the slow consumer logged", 200, func() bool { return len(logLines(t, &logBuf, msg)) == 1 })
	line := logLines(t, &logBuf, msg)[0]
	// dropped is what the subscription had dropped when the client's error callback ran: the
	// first drop calls it, and the other three may come before or after it reads the count.
	if d, _ := line["dropped"].(float64); line["level"] != "warn" || line["conn"] != "mcpstream test" ||
		line["subject"] != "mcpstream.v1.results.acme.call-1" || line["events"] != 1.0 || d < 1 || d > 4 {
		t.Errorf("slow consumer line = %v; want level warn, conn mcpstream test, the subscription's subject, events 1, dropped 1 to 4", line)
	}
	waitFor(t, results+" 1", 200, func() bool { return strings.Contains(scrape(), results+" 1\n") })
	earlier.Wait() // the handler given before the process's own ran too (bounded: the test's timeout)

	// A reply inbox (nats.go's request mux, a JetStream consumer's delivery) is counted as
	// _INBOX, whatever its own tokens.
	slowConsumer(t, nc, nc.NewInbox()+".x", 3)
	waitFor(t, inbox+" 1", 200, func() bool { return strings.Contains(scrape(), inbox+" 1\n") })
	waitFor(t, "the inbox's line", 200, func() bool { return len(logLines(t, &logBuf, msg)) == 2 })

	// Another call's subscription within the window: counted, not logged yet.
	slowConsumer(t, nc, "mcpstream.v1.results.acme.call-2", 4)
	slowConsumer(t, nc, "mcpstream.v1.results.beta.call-3", 4)
	waitFor(t, results+" 3", 200, func() bool { return strings.Contains(scrape(), results+" 3\n") })
	if n := len(logLines(t, &logBuf, msg)); n != 2 {
		t.Fatalf("%d slow consumer lines after two more drops within the window, want 2 (rate limited):\n%s", n, logBuf.String())
	}
	mu.Lock()
	pending := flushes
	flushes = nil
	clock = clock.Add(10 * time.Second)
	mu.Unlock()
	if len(pending) != 1 {
		t.Fatalf("%d flushes scheduled for the suppressed lines, want 1", len(pending))
	}
	pending[0]() // the window is over: one line says what was left out
	lines := logLines(t, &logBuf, msg)
	if len(lines) != 3 {
		t.Fatalf("%d slow consumer lines after the window, want 3:\n%s", len(lines), logBuf.String())
	}
	if l := lines[2]; l["conn"] != "mcpstream test" || l["subject"] != "mcpstream.v1.results.beta.call-3" || l["events"] != 2.0 {
		t.Errorf("line after the window = %v; want conn mcpstream test, the last subject, events 2", l)
	}
	if m := scrape(); strings.Contains(m, "call-") || strings.Contains(m, "acme") {
		t.Errorf("/metrics labels a per-call subject:\n%s", m)
	}
}

// The subject label of /metrics has a value per kind of subscription, not per call, tenant,
// server or process.
func TestNATSSubjectLabel(t *testing.T) {
	for subject, want := range map[string]string{
		"_INBOX.abc.def":                      "_INBOX",
		"_INBOX.abc.*":                        "_INBOX",
		"_INBOX.acme.xyz.1":                   "_INBOX.acme",
		"mcpstream.v1.exec.*":                 "mcpstream.v1.exec.*",
		"mcpstream.v1.registry.*.status":      "mcpstream.v1.registry.*.status",
		"mcpstream.v1.results.acme.call-1":    "mcpstream.v1.results.*.*",
		"mcpstream.v1.approvals.acme.call-1":  "mcpstream.v1.approvals.*.*",
		"mcpstream.v1.dispatch.weather":       "mcpstream.v1.dispatch.*",
		"mcpstream.v1.control.relist.weather": "mcpstream.v1.control.*.*",
		"$SRV.PING.mcpstream-catalog.ID123":   "$SRV.PING.*.*",
		"$SRV.INFO":                           "$SRV.INFO",
	} {
		if got := subjectLabel(subject, "_INBOX.acme"); got != want {
			t.Errorf("subjectLabel(%q) = %q, want %q", subject, got, want)
		}
	}
}

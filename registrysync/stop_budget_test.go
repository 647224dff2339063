package registrysync

import (
	"bytes"
	"encoding/json"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// A silent subscriber on the relist subjects costs every probe of a stopping process its whole
// timeout (probeTimeout). Probed a bounded number at a time, a process with more servers than
// that number times the retire budget (64 × 5 s / 1 s = 320) spent the whole budget probing
// and published connector_stopped for none of them (all left "ready" until a watchdog declared
// them lost). Every server is probed at once, under the one budget: the probe of every server
// reaches the snooper while the first probe to end is held there (probed in batches, or one
// by one, the rest would only be sent once that one let go).
func TestStopWithRelistSnooperRetiresManyServers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close() // refused: the servers stay unavailable, cheaply (one attempt each)
	const n = 400
	var scs []ServerConfig
	for i := range n {
		scs = append(scs, ServerConfig{Name: "svc" + strconv.Itoa(i), URL: url})
	}
	cfg := fastConfig(scs...)
	cfg.BackoffInitial, cfg.BackoffMax = time.Hour, time.Hour
	h := runWith(t, nil, cfg, func(m *Manager) {
		// Publishing n statuses under -race on a loaded machine can take more than the 4 s
		// retireTimeout leaves after the probes: the budget is generous here, what is checked is
		// that the probes run at once (below), not how fast JetStream takes the publishes.
		m.retireBudget = waitLimit / 2
	})
	rec := record(t, h.env, subjects.RegistryAll)
	waitUntil(t, "every server tried once", func() bool {
		tried := map[string]bool{}
		for _, e := range rec.all() {
			if isStatus(subjects.StatusUnavailable, "*")(e) {
				tried[e.subject.Server] = true
			}
		}
		return len(tried) == n
	})
	from := lastSeq(t, h.env, subjects.RegistryAll)
	// The snooper: subscribed to every relist subject, it answers nothing.
	var seen atomic.Int64
	allProbed := make(chan struct{})
	nc := h.env.Connect(t)
	if _, err := nc.Subscribe(subjects.RelistAll, func(*nats.Msg) {
		if seen.Add(1) == n {
			close(allProbed)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The first probe to end waits there for every probe to reach the snooper (the others wait
	// for it): they all do at once, however slow the machine; probed in batches they never do,
	// and it gives up after a while.
	var (
		first      sync.Once
		atFirstEnd int64
	)
	hook := func(string) {
		first.Do(func() {
			select {
			case <-allProbed:
			case <-time.After(waitLimit / 4):
			}
			atFirstEnd = seen.Load()
		})
	}
	h.m.afterProbe.Store(&hook)
	h.stop(t)
	if atFirstEnd < n {
		t.Errorf("while the first probe to end was held, the snooper saw %d probes, want %d: the others were waiting for it", atFirstEnd, n)
	}
	if got := seen.Load(); got < n {
		t.Errorf("the snooper saw %d probes, want %d (one per server)", got, n)
	}
	// Run has returned: whatever it published is on the stream; wait for the recorder to catch up.
	last := lastSeq(t, h.env, subjects.RegistryAll)
	waitUntil(t, "the recorder caught up", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].seq >= last
	})
	stopped := map[string]bool{}
	for _, e := range rec.all() {
		if e.seq > from && isStatus(subjects.StatusUnavailable, subjects.CodeConnectorStopped)(e) {
			stopped[e.subject.Server] = true
		}
	}
	if len(stopped) != n {
		t.Errorf("%d of %d servers published connector_stopped with a silent relist subscriber", len(stopped), n)
	}
}

// The servers a stopping process had no time left to retire are named in its log, every one of
// them (it used to name only the first).
func TestRetireLogsEveryServerLeftWhenTimeIsUp(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	snoop(t, env)
	var scs []ServerConfig
	for _, name := range []string{"a", "b", "c"} {
		scs = append(scs, ServerConfig{Name: name, URL: "http://127.0.0.1:1/mcp"})
	}
	var buf bytes.Buffer
	m := New(env.JS, env.NC, Config{Servers: scs}, zerolog.New(zerolog.SyncWriter(&buf)))
	var conns []*connector
	for _, c := range m.conns {
		conns = append(conns, c)
	}
	m.retire(conns, 0) // the budget is spent before anything is asked
	var logged struct {
		Servers int      `json:"servers"`
		Names   []string `json:"names"`
		Message string   `json:"message"`
	}
	for line := range strings.Lines(buf.String()) {
		if err := json.Unmarshal([]byte(line), &logged); err == nil && strings.Contains(logged.Message, "time is up") {
			break
		}
		logged.Message = ""
	}
	if logged.Message == "" {
		t.Fatalf("no \"time is up\" warning in the log:\n%s", buf.String())
	}
	if logged.Servers != 3 || !slices.Equal(logged.Names, []string{"a", "b", "c"}) {
		t.Errorf("the warning names %d servers %v, want 3: [a b c]", logged.Servers, logged.Names)
	}
}

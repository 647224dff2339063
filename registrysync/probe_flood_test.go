package registrysync

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// A burst of served-elsewhere probes naming, in their from header, the process the server's
// last status names (anyone may read it from the stream) had each probe's handler read the
// stream and publish the server's status again: a goroutine, a stream read and a stream write
// per message. The claims of one server now run one at a time, each round for every probe
// that came meanwhile: one claim runs however many probes come, and the burst publishes the
// status once; every probe still gets its answer.
func TestProbeFloodClaimsCoalesced(t *testing.T) {
	url := httpFixture(t, newFixture(fixtureOptions{}))
	h := run(t, nil, fastConfig(ServerConfig{Name: "fx", URL: url}))
	env := h.env
	rec := record(t, env, subjects.RegistryServer("fx"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))

	// The last status names another process with heartbeats, as when one that ran the server
	// stops and probes.
	const other = "other-host:1/0"
	st := subjects.Status{V: subjects.Version, Type: subjects.EventStatus, Server: "fx", Status: subjects.StatusReady,
		Connector: other, HeartbeatMs: 5000, At: time.Now().UTC()}
	data, _ := json.Marshal(st)
	if _, err := env.JS.Publish(t.Context(), subjects.RegistryStatus("fx"), data); err != nil {
		t.Fatal(err)
	}
	fake := rec.wait(0, "the other process's status", func(e event) bool {
		return e.ev.Status != nil && e.ev.Status.Connector == other
	})

	var entered atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	hook := func(string) {
		entered.Add(1)
		<-release
	}
	h.m.beforeClaim.Store(&hook)
	t.Cleanup(func() { h.m.beforeClaim.Store(nil) })

	base := relistHandlers()
	const n = 100
	inbox := nats.NewInbox()
	var answered, badRequest atomic.Int64
	sub, err := env.NC.Subscribe(inbox, func(m *nats.Msg) {
		answered.Add(1)
		var r subjects.RelistReply
		if json.Unmarshal(m.Data, &r) == nil && r.Error != nil && r.Error.Code == subjects.CodeBadRequest {
			badRequest.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	body, _ := json.Marshal(subjects.RelistRequest{V: subjects.Version, Kind: probeKind})
	for range n {
		msg := nats.NewMsg(subjects.Relist("fx"))
		msg.Reply, msg.Data = inbox, body
		msg.Header.Set(probeFromHeader, other)
		if err := env.NC.PublishMsg(msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every probe answered", func() bool { return answered.Load() >= n })
	if got := badRequest.Load(); got != n {
		t.Errorf("%d of %d probes answered bad_request (the probe's answer), want all", got, n)
	}
	// Every handler left is a claim held in the hook.
	waitUntil(t, "the handlers settled", func() bool { return relistHandlers()-base == int(entered.Load()) })
	if got := entered.Load(); got > 1 {
		t.Errorf("%d claims of one server ran at once for a burst of %d probes, want 1", got, n)
	}
	free()
	waitUntil(t, "the claims done", func() bool { return relistHandlers() <= base })
	var statuses []event
	for _, e := range rec.all() {
		if e.seq > fake.seq && e.ev.Status != nil {
			statuses = append(statuses, e)
		}
	}
	if len(statuses) != 1 || statuses[0].ev.Status.Connector != h.m.id {
		t.Errorf("the burst published %d statuses (%v), want one, naming this process", len(statuses), statuses)
	}
}

// Two processes running the same server, probed in turn by a client naming, each time, the
// process the last status names: whichever answered published its status again, so the
// status changed hands at about every other probe, a stream write each. A claim that
// published is followed by the server's next one only after HeartbeatEvery.
func TestProbesInTurnClaimSpaced(t *testing.T) {
	url := httpFixture(t, newFixture(fixtureOptions{}))
	cfg := fastConfig(ServerConfig{Name: "pair", URL: url})
	cfg.HeartbeatEvery = time.Hour // the spacing of claims: the whole test
	a := run(t, nil, cfg)
	rec := record(t, a.env, subjects.RegistryServer("pair"))
	rec.wait(0, "a ready", isStatus(subjects.StatusReady, ""))
	b := run(t, a.env, cfg)
	bReady := rec.wait(0, "b ready", func(e event) bool {
		return isStatus(subjects.StatusReady, "")(e) && e.ev.Status.Connector == b.m.id
	})
	base := relistHandlers()
	body, _ := json.Marshal(subjects.RelistRequest{V: subjects.Version, Kind: probeKind})
	const rounds = 40
	for i := range rounds {
		from := b.m.id // the one the last status names, as a reader of the stream sees it
		if st, _ := statusOf(rec, bReady.seq); st != nil {
			from = st.Connector
		}
		msg := nats.NewMsg(subjects.Relist("pair"))
		msg.Data = body
		msg.Header.Set(probeFromHeader, from)
		if _, err := a.env.NC.RequestMsg(msg, 5*time.Second); err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
		// Its claim done (or waiting its turn: one per process at most).
		waitUntil(t, "the claims settled", func() bool { return relistHandlers()-base <= 2 })
	}
	n := 0
	for _, e := range rec.all() {
		if e.seq > bReady.seq && e.ev.Status != nil {
			n++
		}
	}
	if n > 2 {
		t.Errorf("%d status events published for %d probes sent in turn, want at most one per process", n, rounds)
	}
}

// statusOf is the last status recorded after seq (nil: none).
func statusOf(rec *recorder, after uint64) (*subjects.Status, uint64) {
	var st *subjects.Status
	var seq uint64
	for _, e := range rec.all() {
		if e.seq > after && e.ev.Status != nil {
			st, seq = e.ev.Status, e.seq
		}
	}
	return st, seq
}

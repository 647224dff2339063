package registrysync

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

func isConfirmed(server string) func(event) bool {
	return func(e event) bool { return e.ev.Confirmed != nil && e.subject.Server == server }
}

// An unchanged re-list of a list with a ttlMs publishes a Confirmed event (fingerprint and
// listedAt; no new snapshot), so that every consumer restarts the list's TTL — but at most once
// per confirmEvery (half the TTL, at least a second) per list, however many re-lists come, a
// restart of the connector included; a list without a ttlMs is never confirmed.
func TestConfirmedAfterUnchangedRelist(t *testing.T) {
	t.Parallel()
	ttl := int64(300)
	fx := ServerConfig{Name: "fx", Transport: TransportHTTP, Kinds: []string{"tools"},
		URL: httpFixture(t, newFixture(fixtureOptions{ttlMs: ttl}))}
	plain := ServerConfig{Name: "plain", Transport: TransportHTTP, Kinds: []string{"tools"},
		URL: httpFixture(t, newFixture(fixtureOptions{}))}
	env := natstest.Start(t)
	h := run(t, env, fastConfig(fx, plain))
	rec := record(t, env, subjects.RegistryAll)
	tools := subjects.KindTools
	snap := rec.wait(0, "fx tools snapshot", func(e event) bool { return e.subject.Server == "fx" && isSnapshot(tools, nil)(e) })
	rec.wait(0, "plain tools snapshot", func(e event) bool { return e.subject.Server == "plain" && isSnapshot(tools, nil)(e) })
	every := confirmEvery(&ttl)
	if every != minConfirmEvery {
		t.Fatalf("confirmEvery(%d ms) = %s, want %s", ttl, every, minConfirmEvery)
	}

	relists := 0
	relistFx := func(h *harness) {
		t.Helper()
		relists++
		rep := relist(t, h, "fx", subjects.RelistRequest{V: 1, Kind: tools})
		if rep.Error != nil || rep.Fingerprint != snap.ev.Snapshot.Fingerprint || rep.Sequence != 0 {
			t.Fatalf("re-list of an unchanged list: %+v, want fingerprint %s and no new snapshot", rep, snap.ev.Snapshot.Fingerprint)
		}
	}
	// Re-list until the first confirmation is on the stream (none before every has passed).
	var first event
	for i := 0; first.seq == 0; i++ {
		if i == 2000 {
			t.Fatal("no confirmation after 2000 re-lists")
		}
		relistFx(h)
		for _, e := range rec.all() {
			if isConfirmed("fx")(e) {
				first = e
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	cf := first.ev.Confirmed
	if cf.Fingerprint != snap.ev.Snapshot.Fingerprint || cf.Kind != tools || cf.ListedAt.Sub(snap.ev.Snapshot.ListedAt) < every {
		t.Errorf("confirmation %+v: want fingerprint %s, listed at least %s after the snapshot (%s)",
			cf, snap.ev.Snapshot.Fingerprint, every, snap.ev.Snapshot.ListedAt)
	}
	if want := "fx/tools/" + cf.Fingerprint + "/confirmed/"; !strings.HasPrefix(first.msgID, want) {
		t.Errorf("Nats-Msg-Id %q, want %s<period>", first.msgID, want)
	}
	for range 10 {
		if rep := relist(t, h, "plain", subjects.RelistRequest{V: 1, Kind: tools}); rep.Error != nil {
			t.Fatalf("re-list plain: %+v", rep.Error)
		}
	}
	// Many more re-lists, then a restart of the connector, which re-lists at once.
	for range 200 {
		relistFx(h)
		time.Sleep(5 * time.Millisecond)
	}
	h.stop(t)
	h2 := run(t, env, fastConfig(fx, plain))
	waitUntil(t, "restarted connectors ready", h2.m.Ready)
	for range 20 {
		relistFx(h2)
	}

	// Every event on the stream is in the recorder; count them.
	last := lastSeq(t, env, subjects.RegistryAll)
	waitUntil(t, "the recorder caught up", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].seq >= last
	})
	var confirmations []*subjects.Confirmed
	snapshots := 0
	for _, e := range rec.all() {
		switch {
		case isConfirmed("plain")(e):
			t.Errorf("a list without a ttlMs was confirmed: %s", e.data)
		case isConfirmed("fx")(e):
			confirmations = append(confirmations, e.ev.Confirmed)
		case e.subject.Server == "fx" && isSnapshot(tools, nil)(e):
			snapshots++
		}
	}
	if snapshots != 1 {
		t.Errorf("%d snapshots of fx, want 1 (the list never changed)", snapshots)
	}
	// Consecutive confirmations are at least every apart (by the connector's clock, which also
	// stamps them): a flood of re-lists, or a restart, does not publish more.
	for i := 1; i < len(confirmations); i++ {
		if gap := confirmations[i].ListedAt.Sub(confirmations[i-1].ListedAt); gap < every {
			t.Errorf("confirmations %d and %d are %s apart, want at least %s", i-1, i, gap, every)
		}
	}
	span := confirmations[len(confirmations)-1].ListedAt.Sub(confirmations[0].ListedAt)
	t.Logf("%d re-lists, %d confirmations over %s", relists, len(confirmations), span)
	if max := 1 + int(span/every); len(confirmations) > max {
		t.Errorf("%d confirmations over %s, want at most %d", len(confirmations), span, max)
	}
}

// The connector's decisions, step by step on a real stream (time moved by hand): a list with a
// ttlMs is confirmed once confirmEvery has passed since it was published or last confirmed, and
// not again before; a restarted connector reads the last confirmation back; a list without a
// ttlMs (or with 0) is never confirmed; while a ListChanged waits, an unchanged list that began
// after it answers it with a confirmation (never a snapshot), one that began before does not.
func TestConfirmUnchangedSteps(t *testing.T) {
	env := natstest.Start(t)
	ctx := context.Background()
	m := New(env.JS, env.NC, fastConfig(), testLogger(t))
	sc := ServerConfig{Name: "u.1", URL: "http://127.0.0.1:1/mcp", Transport: TransportHTTP}
	c := newConnector(m, sc)
	if err := c.loadState(ctx); err != nil {
		t.Fatal(err)
	}
	tools := subjects.KindTools
	confSubject := subjects.RegistryConfirmed(sc.Name, tools)
	ttl := int64(time.Hour / time.Millisecond) // confirmed every 30 minutes: time is moved by hand
	l := func(ttl *int64) *listing {
		return &listing{Kind: tools, Items: []json.RawMessage{json.RawMessage(`{"name":"a","inputSchema":{"type":"object"}}`)}, TTLMs: ttl}
	}
	publish := func(step string, l *listing) publishResult {
		t.Helper()
		res, err := c.publishSnapshot(ctx, l, nil)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return res
	}
	// age moves the connector's idea of when the list was last listed back by d.
	age := func(c *connector, d time.Duration) {
		c.mu.Lock()
		st := c.kstate[tools]
		st.listedAt = st.listedAt.Add(-d)
		c.kstate[tools] = st
		c.mu.Unlock()
	}
	every := confirmEvery(&ttl)
	if every != 30*time.Minute {
		t.Fatalf("confirmEvery(1 h) = %s, want 30m", every)
	}
	first := publish("first list", l(&ttl))
	if !first.published {
		t.Fatal("first list not published")
	}
	publish("unchanged at once", l(&ttl))
	if seq := lastSeq(t, env, confSubject); seq != 0 {
		t.Fatalf("confirmed right after the snapshot (seq %d)", seq)
	}
	age(c, every-time.Minute)
	publish("unchanged, a minute short of every", l(&ttl))
	if seq := lastSeq(t, env, confSubject); seq != 0 {
		t.Fatalf("confirmed before every had passed (seq %d)", seq)
	}
	age(c, time.Minute)
	if res := publish("unchanged after every", l(&ttl)); res.published || res.seq != first.seq {
		t.Errorf("unchanged list: %+v, want the first snapshot (%d), nothing published", res, first.seq)
	}
	confSeq := lastSeq(t, env, confSubject)
	if confSeq == 0 {
		t.Fatal("not confirmed after every")
	}
	last, err := m.lastMsg(ctx, confSubject)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := subjects.DecodeRegistryMsg(last.Subject, last.Data)
	if err != nil || ev.Confirmed.Fingerprint != l(&ttl).fingerprint() {
		t.Fatalf("confirmation %s: %v, want fingerprint %s", last.Data, err, l(&ttl).fingerprint())
	}
	publish("unchanged right after the confirmation", l(&ttl))
	if seq := lastSeq(t, env, confSubject); seq != confSeq {
		t.Errorf("confirmed twice within every (seq %d, then %d)", confSeq, seq)
	}

	// A restarted connector starts from the last confirmation, not from the snapshot.
	c = newConnector(m, sc)
	if err := c.loadState(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.kind(tools).listedAt; !got.Equal(ev.Confirmed.ListedAt) {
		t.Errorf("restarted connector: listed at %s, want the confirmation's %s", got, ev.Confirmed.ListedAt)
	}
	publish("unchanged after a restart", l(&ttl))
	if seq := lastSeq(t, env, confSubject); seq != confSeq {
		t.Errorf("a restart confirmed again within every (seq %d, then %d)", confSeq, seq)
	}

	// While a ListChanged waits, an unchanged list that began before it was stored does not
	// answer it (nothing is published: no confirmation, the ttl's was a moment ago, and no
	// copy of the snapshot); one that began after it answers it with a confirmation that
	// names its sequence, and still no snapshot.
	if err := c.publishChanged(ctx, tools); err != nil {
		t.Fatal(err)
	}
	changedSeq := c.kind(tools).changedSeq
	early := l(&ttl)
	early.AfterSeq = changedSeq - 1
	if res := publish("unchanged, listed before the list_changed", early); res.published || res.seq != first.seq {
		t.Errorf("list that predates the list_changed: %+v, want nothing published", res)
	}
	if seq := lastSeq(t, env, confSubject); seq != confSeq {
		t.Errorf("a list that predates the list_changed answered it (seq %d, then %d)", confSeq, seq)
	}
	if st := c.kind(tools); !st.needsConfirm() {
		t.Error("the list_changed counts as answered by a list that predates it")
	}
	late := l(&ttl)
	late.AfterSeq = changedSeq
	if res := publish("unchanged after list_changed", late); res.published || res.seq != first.seq {
		t.Errorf("unchanged list after a list_changed: %+v, want no snapshot", res)
	}
	answer, err := m.lastMsg(ctx, confSubject)
	if err != nil || answer == nil || answer.Sequence <= changedSeq {
		t.Fatalf("no confirmation after the list_changed (%v)", err)
	}
	ev, err = subjects.DecodeRegistryMsg(answer.Subject, answer.Data)
	if err != nil || ev.Confirmed.AfterSeq != changedSeq || ev.Confirmed.Fingerprint != late.fingerprint() {
		t.Fatalf("answer %s: %v, want afterSeq %d", answer.Data, err, changedSeq)
	}
	if st := c.kind(tools); st.needsConfirm() {
		t.Error("the list_changed still waits after its answer")
	}
	confSeq = answer.Sequence
	// A restarted connector reads the answer back: the list_changed does not wait.
	c = newConnector(m, sc)
	if err := c.loadState(ctx); err != nil {
		t.Fatal(err)
	}
	if st := c.kind(tools); st.needsConfirm() || st.answered != changedSeq {
		t.Errorf("restarted connector: answered %d, changed %d: the list_changed waits", st.answered, st.changedSeq)
	}

	// Without a ttlMs, or with one of 0, never.
	zero := int64(0)
	for _, ttl := range []*int64{nil, &zero} {
		publish("new ttl", l(ttl))
		age(c, time.Hour)
		publish("unchanged, an hour later", l(ttl))
		if seq := lastSeq(t, env, confSubject); seq != confSeq {
			t.Errorf("ttlMs %v: confirmed (seq %d)", ttl, seq)
		}
	}
}

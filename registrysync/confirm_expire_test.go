package registrysync

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// confirmedCount is the number of messages the registry stream holds on subject.
func confirmedCount(t *testing.T, env *natstest.Env, subject string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// The confirmations of an unchanged list (confirmUnchanged) are stored with a per-message TTL
// (Nats-TTL), so the registry stream no longer grows by one per list every half TTL, forever,
// while nothing changes: they expire, and the stream keeps the snapshot, the ListChanged and the
// Confirmed that answered it (answerChanged, no TTL). A consumer rebuilt by replay after they
// expired ends in the freshness states of one that applied every event as it came.
func TestUnchangedConfirmationsExpire(t *testing.T) {
	// Not parallel: it shortens minConfirmTTL for the package (parallel tests run after).
	defer func(d time.Duration) { minConfirmTTL = d }(minConfirmTTL)
	minConfirmTTL = time.Second // JetStream's shortest TTL
	ttl := int64(300)           // confirmed at most once a second, kept a second
	srv := newFixture(fixtureOptions{ttlMs: ttl})
	env := natstest.Start(t)
	h := run(t, env, fastConfig(ServerConfig{Name: "fx", Transport: TransportHTTP, Kinds: []string{"tools"}, URL: httpFixture(t, srv)}))
	tools := subjects.KindTools
	confSubject := subjects.RegistryConfirmed("fx", tools)
	rec := record(t, env, subjects.RegistryServer("fx"))
	var hmu sync.Mutex
	ttlHeaders := map[string]string{} // Nats-Msg-Id → Nats-TTL, as published
	_, err := env.NC.Subscribe(confSubject, func(m *nats.Msg) {
		hmu.Lock()
		defer hmu.Unlock()
		ttlHeaders[m.Header.Get(subjects.HeaderMsgID)] = m.Header.Get(jetstream.MsgTTLHeader)
	})
	if err != nil {
		t.Fatal(err)
	}
	snap := rec.wait(0, "tools snapshot", isSnapshot(tools, nil))
	fp := snap.ev.Snapshot.Fingerprint

	// TTL-driven confirmations: re-list until n more are on the stream.
	isTTLConfirmed := func(e event) bool {
		return e.ev.Confirmed != nil && strings.Contains(e.msgID, "/confirmed/")
	}
	confirmN := func(n int) {
		t.Helper()
		have := 0
		for _, e := range rec.all() {
			if isTTLConfirmed(e) {
				have++
			}
		}
		for i := 0; ; i++ {
			if i == 5000 {
				t.Fatalf("fewer than %d confirmations after 5000 re-lists", have+n)
			}
			if rep := relist(t, h, "fx", subjects.RelistRequest{V: 1, Kind: tools}); rep.Error != nil || rep.Fingerprint != fp {
				t.Fatalf("re-list: %+v", rep)
			}
			got := 0
			for _, e := range rec.all() {
				if isTTLConfirmed(e) {
					got++
				}
			}
			if got >= have+n {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	confirmN(2)
	// A spurious list_changed, answered by a Confirmed that must stay: a replay lifts the
	// ListChanged with it.
	srv.SendNotificationToAllClients(mcp.MethodNotificationToolsListChanged, nil)
	changed := rec.wait(snap.seq, "list_changed", isChanged(tools))
	answer := rec.wait(changed.seq, "its answer", func(e event) bool {
		return e.ev.Confirmed != nil && e.ev.Confirmed.AfterSeq >= changed.seq
	})
	if isTTLConfirmed(answer) {
		t.Fatalf("list_changed #%d answered by %s (Nats-Msg-Id %s), want answerChanged's", changed.seq, answer.data, answer.msgID)
	}
	confirmN(2)

	last := lastSeq(t, env, subjects.RegistryServer("fx"))
	waitUntil(t, "the recorder caught up", func() bool {
		evs := rec.all()
		return len(evs) > 0 && evs[len(evs)-1].seq >= last
	})
	live := rec.all()
	ttlConfirmed := 0
	for _, e := range live {
		if isTTLConfirmed(e) {
			ttlConfirmed++
		}
	}
	waitUntil(t, "every confirmation seen published", func() bool {
		hmu.Lock()
		defer hmu.Unlock()
		return len(ttlHeaders) >= ttlConfirmed+1
	})
	hmu.Lock()
	defer hmu.Unlock()
	for id, hdr := range ttlHeaders {
		want := ""
		if strings.Contains(id, "/confirmed/") {
			want = minConfirmTTL.String()
		}
		if hdr != want {
			t.Errorf("confirmation %s published with Nats-TTL %q, want %q", id, hdr, want)
		}
	}

	// They expire; the answer to the ListChanged stays.
	t.Logf("%d TTL-driven confirmations stored; waiting for them to expire", ttlConfirmed)
	deadline := time.Now().Add(waitLimit)
	for n := confirmedCount(t, env, confSubject); n != 1; n = confirmedCount(t, env, confSubject) {
		if time.Now().After(deadline) {
			t.Fatalf("the stream still holds %d confirmations of fx tools %s after they were stored with a TTL of %s; want 1 (the answer to the list_changed)",
				n, waitLimit, minConfirmTTL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := env.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{snap.seq, changed.seq, answer.seq} {
		if _, err := st.GetMsg(ctx, seq); err != nil {
			t.Errorf("message #%d (snapshot, list_changed or its answer) is gone: %v", seq, err)
		}
	}

	// Replay equality: a view that applied every event as it came and one rebuilt from what the
	// stream holds now agree on every tool's state, now and later.
	now := time.Now()
	clock := func() time.Time { return now }
	liveView, replayView := staleness.New(clock), staleness.New(clock)
	for _, e := range live {
		ev := e.ev
		ev.Seq = e.seq
		liveView.Apply(ev)
	}
	rec2 := record(t, env, subjects.RegistryServer("fx"))
	last = lastSeq(t, env, subjects.RegistryServer("fx")) // the last one kept
	waitUntil(t, "the replay caught up", func() bool {
		evs := rec2.all()
		return len(evs) > 0 && evs[len(evs)-1].seq >= last
	})
	replayed := rec2.all()
	if len(replayed) >= len(live) {
		t.Errorf("replay of %d events, live %d: nothing expired", len(replayed), len(live))
	}
	for _, e := range replayed {
		ev := e.ev
		ev.Seq = e.seq
		replayView.Apply(ev)
	}
	for _, at := range []time.Duration{0, time.Hour} {
		now = time.Now().Add(at)
		for _, name := range fixtureTools {
			lv, rv := liveView.Tool("fx", name), replayView.Tool("fx", name)
			if lv.State != rv.State || lv.Fingerprint != rv.Fingerprint {
				t.Errorf("%s at +%s: live %s (%s, fp %s), replayed %s (%s, fp %s)", name, at, lv.State, lv.Reason, lv.Fingerprint,
					rv.State, rv.Reason, rv.Fingerprint)
			}
			if at == 0 && rv.State != staleness.Expired {
				t.Errorf("%s replayed: %s (%s), want expired (the list_changed answered, its TTL run out)", name, rv.State, rv.Reason)
			}
		}
	}
}

// A registry stream declared without allow_msg_ttl (by an earlier mcpstream, on a server it could
// not update) refuses a message with a Nats-TTL: the confirmation is then stored without one, as
// before, never lost, under the same Nats-Msg-Id (the refused publish did not take it).
func TestConfirmationWithoutMsgTTLStream(t *testing.T) {
	t.Parallel()
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := subjects.Streams(subjects.StreamOptions{})[0]
	if cfg.Name != subjects.RegistryStream {
		t.Fatalf("first stream %s", cfg.Name)
	}
	cfg.AllowMsgTTL = false // JetStream cannot disable it: the stream is made again as an older mcpstream did
	if err := env.JS.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := env.JS.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	ttl := int64(300)
	h := run(t, env, fastConfig(ServerConfig{Name: "fx", Transport: TransportHTTP, Kinds: []string{"tools"},
		URL: httpFixture(t, newFixture(fixtureOptions{ttlMs: ttl}))}))
	rec := record(t, env, subjects.RegistryServer("fx"))
	rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil))
	confirmed := 0
	for i := 0; confirmed < 2; i++ {
		if i == 5000 {
			t.Fatalf("%d confirmations after 5000 re-lists, want 2", confirmed)
		}
		if rep := relist(t, h, "fx", subjects.RelistRequest{V: 1, Kind: subjects.KindTools}); rep.Error != nil {
			t.Fatalf("re-list: %+v", rep.Error)
		}
		confirmed = 0
		for _, e := range rec.all() {
			if e.ev.Confirmed != nil && strings.Contains(e.msgID, "/confirmed/") {
				confirmed++
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := h.m.msgTTLRefused.Load(); got == 0 {
		t.Error("the refusal of the per-message TTL was not noticed")
	}
}

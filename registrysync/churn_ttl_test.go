package registrysync

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/subjects"
)

// ttlRewriter serves inner, with the ttlMs of each tools/list answer replaced by ttl().
func ttlRewriter(t *testing.T, inner http.Handler, ttl func() int64) string {
	re := regexp.MustCompile(`"ttlMs":[0-9]+`)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"tools/list"`)) {
			inner.ServeHTTP(w, r)
			return
		}
		rw := httptest.NewRecorder()
		inner.ServeHTTP(rw, r)
		for k, v := range rw.Header() {
			w.Header()[k] = v
		}
		out := re.ReplaceAll(rw.Body.Bytes(), []byte(`"ttlMs":`+strconv.FormatInt(ttl(), 10)))
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.WriteHeader(rw.Code)
		w.Write(out)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// TestJitteredTTLStoresNoSnapshots: a server whose lists differ only in their ttlMs, jittered
// at each listing (as servers spread their clients' refreshes), stored a whole copy of its list
// at every re-list (each executor's re-list of an expired list, each resync), in a stream that
// keeps every snapshot. A list that differs from the stored one only by a longer ttlMs, up to
// twice it, is the stored list: consumers keep the shorter TTL (they re-list a little sooner
// than they must), nothing is stored but the confirmations of unchanged lists. A shorter TTL,
// or a much longer one, is published.
func TestJitteredTTLStoresNoSnapshots(t *testing.T) {
	var next atomic.Int64
	next.Store(60000)
	url := ttlRewriter(t, server.NewStreamableHTTPServer(newFixture(fixtureOptions{ttlMs: 60000})), next.Load)
	h := run(t, nil, fastConfig(ServerConfig{Name: "jit", URL: url, Kinds: []string{"tools"}}))
	rec := record(t, h.env, subjects.RegistryServer("jit"))
	first := rec.wait(0, "tools", isSnapshot(subjects.KindTools, nil))
	if ttl := first.ev.Snapshot.TTLMs; ttl == nil || *ttl != 60000 {
		t.Fatalf("first snapshot's ttlMs %v, want 60000", ttl)
	}
	relistJit := func() subjects.RelistReply {
		t.Helper()
		rep := relist(t, h, "jit", subjects.RelistRequest{V: 1, Kind: subjects.KindTools})
		if rep.Error != nil {
			t.Fatalf("re-list: %+v", rep.Error)
		}
		return rep
	}
	const n = 20
	for i := range n {
		next.Store(60000 + int64(i+1)*3000) // 63 s ... 120 s
		relistJit()
	}
	snaps := 0
	for _, e := range rec.all() {
		if e.seq > first.seq && e.ev.Snapshot != nil {
			snaps++
		}
	}
	if snaps > 0 {
		t.Errorf("%d re-lists whose lists differ only by a longer ttlMs stored %d snapshots, want none", n, snaps)
	}

	// Shorter: consumers must learn it at once.
	next.Store(30000)
	rep := relistJit()
	short := rec.wait(first.seq, "a snapshot of the shorter ttlMs", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
		return s.TTLMs != nil && *s.TTLMs == 30000
	}))
	if rep.Sequence != short.seq {
		t.Errorf("re-list answered sequence %d, want the new snapshot's %d", rep.Sequence, short.seq)
	}
	// Much longer (past twice the stored one): published, consumers are not held to a TTL far
	// below the server's.
	next.Store(600000)
	relistJit()
	rec.wait(short.seq, "a snapshot of the much longer ttlMs", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool {
		return s.TTLMs != nil && *s.TTLMs == 600000
	}))
	t.Logf("first #%d, shorter #%d", first.seq, short.seq)
}

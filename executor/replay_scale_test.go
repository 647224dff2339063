package executor

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestReplayOfServersSharingAToolNameIsLinear: an executor rebuilds its tool table at start by
// replaying the registry stream. Many MCP servers offer a tool of the same name (search, fetch,
// list_files), and the index of names for not_found suggestions kept, per name, one sorted
// slice of every public name holding it, copied whole by each server's first list: replaying
// n servers of one such tool copied n²/2 names (about 3 GB allocated for 20,000 servers,
// 300 KB per server by the last ones). The bytes a server's list costs must not grow with the
// servers replayed before it; the suggestions are the same.
func TestReplayOfServersSharingAToolNameIsLinear(t *testing.T) {
	r := newRegistry(zerolog.Nop())
	const n, block = 6000, 1000
	var seq uint64
	apply := func(i int) {
		name := fmt.Sprintf("s%05d", (i*7919)%n) // not in name order, as a stream holds them
		sn := subjects.Snapshot{V: 1, Type: subjects.EventSnapshot, Server: name, Kind: subjects.KindTools, Fingerprint: "f",
			Items: []json.RawMessage{json.RawMessage(`{"name":"search","inputSchema":{"type":"object"}}`)}, ListedAt: time.Now().UTC()}
		data, err := json.Marshal(sn)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		r.apply(subjects.RegistrySnapshot(name, subjects.KindTools), data, seq)
	}
	perServer := func(from int) uint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.TotalAlloc
		for i := from; i < from+block; i++ {
			apply(i)
		}
		runtime.ReadMemStats(&ms)
		return (ms.TotalAlloc - before) / block
	}
	first := perServer(0)
	for i := block; i < n-block; i++ {
		apply(i)
	}
	last := perServer(n - block)
	t.Logf("bytes allocated per server's list: %d for the first %d servers, %d for the last %d", first, block, last, block)
	if last > 2*first {
		t.Errorf("a server's list cost %d bytes after %d servers sharing its tool's name, %d for the first ones: quadratic in the servers", last, n-block, first)
	}

	// The index still answers: the same name on another server, in name order.
	var want []string
	for i := range n {
		want = append(want, subjects.PublicName(fmt.Sprintf("s%05d", i), "search"))
	}
	slices.Sort(want)
	got := r.suggestions("nowhere__search", func(*tool) bool { return true })
	if len(got) == 0 || got[0] != want[0] {
		t.Errorf("suggestions for nowhere__search: %v, want the first of %d search tools (%s) first", got, n, want[0])
	}
}

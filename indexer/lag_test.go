package indexer

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
)

// TestLagWhileStuck: Stats.StreamLast follows the registry stream's end even while the replica
// applies nothing (here: its catalog lock held, as by a stuck write), so StreamLast − Seq, the
// lag the metrics export, grows; it falls back to 0 once the replica catches up.
func TestLagWhileStuck(t *testing.T) {
	old := originCheckEvery
	originCheckEvery = 20 * time.Millisecond
	t.Cleanup(func() { originCheckEvery = old })
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, filepath.Join(t.TempDir(), "r"), nil, nil)
	waitSeq(t, r.Catalog, seq)
	if st := r.Stats(); st.StreamLast != seq || st.Seq != seq {
		t.Fatalf("caught up: seq %d, stream last %d; want both %d", st.Seq, st.StreamLast, seq)
	}

	r.mu.Lock() // a stuck replica: no message can be applied
	locked := true
	defer func() {
		if locked {
			r.mu.Unlock()
		}
	}()
	last := publish(t, env.JS, status("solo", "ready"), snapshot("solo", "", tool("only_tool", "the only tool")))
	waitFor(t, "the stuck replica to see the stream's end", func() bool { return r.streamLast.Load() == last })
	if got := r.Seq(); got >= last {
		t.Fatalf("applied up to %d while stuck", got)
	}
	r.mu.Unlock()
	locked = false
	waitSeq(t, r.Catalog, last)
	if st := r.Stats(); st.StreamLast != st.Seq {
		t.Fatalf("caught up again: seq %d, stream last %d", st.Seq, st.StreamLast)
	}
}

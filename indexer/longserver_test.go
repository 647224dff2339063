package indexer

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestOverlongServerNameSkipped: a server's name is in the keys of its records (with a tool's
// name, up to MaxToolNameBytes), and a Badger key may not exceed 65,000 bytes. A registry
// message of a server named with tens of kilobytes (a subject that long needs a nats-server
// whose max_control_line was raised; JetStream stores subjects up to 64 KiB) failed its commit
// with ErrStore: the replica stopped, and every restart replayed the same message and stopped
// again, every replica alike. Such a message must be skipped as malformed (counted in
// BadEvents), as one of a name no key can hold, and the replica go on.
func TestOverlongServerNameSkipped(t *testing.T) {
	c, err := Open(Config{Dir: filepath.Join(t.TempDir(), "r"), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := strings.Repeat("s", 62_000)
	seq := uint64(0)
	for _, ev := range []any{
		status(long, subjects.StatusReady),
		snapshot(long, "d", tool(strings.Repeat("t", 4_000), "a long name, under MaxToolNameBytes")),
		status("fine", subjects.StatusReady),
		snapshot("fine", "d", tool("ok", "a fine tool")),
	} {
		subject, data := eventMsg(t, ev)
		seq++
		if err := c.applyMsg(seq, subject, data); err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
	}
	if got := c.Seq(); got != seq {
		t.Errorf("seq %d, want %d", got, seq)
	}
	if st := c.Stats(); st.Tools != 1 || st.BadEvents != 2 {
		t.Errorf("tools %d, bad events %d; want 1 and 2", st.Tools, st.BadEvents)
	}
}

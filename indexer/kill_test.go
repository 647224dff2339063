package indexer

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// crashHistory is history with private lists and confirmations of lists with a TTL.
func crashHistory(seed uint64, n int) []any {
	var evs []any
	for i, ev := range history(seed, n) {
		evs = append(evs, ev)
		sn, ok := ev.(*subjects.Snapshot)
		if !ok || sn.TTLMs == nil {
			continue
		}
		if i%2 == 0 {
			sn.CacheScope, sn.AuthContext = subjects.ScopePrivate, "tenant:acme/user:carol"
		}
		evs = append(evs, confirmed(sn.Server, sn.Fingerprint, sn.ListedAt.Add(10*time.Second)),
			confirmed(sn.Server, sn.Fingerprint, sn.ListedAt.Add(5*time.Second))) // older: ignored
	}
	return evs
}

const envKilledChild = "INDEXER_KILLED_REPLICA_CHILD"

// TestReplicaKilledResumes: a replica process killed (SIGKILL) while it applies a replay, then
// started again on its directory, resumes from its stored sequence and ends with the content
// (Digest) and the answers of a replica rebuilt from scratch.
func TestReplicaKilledResumes(t *testing.T) {
	env := natstest.Start(t)
	evs := crashHistory(7, 1500)
	last := publish(t, env.JS, evs...)
	dir := filepath.Join(t.TempDir(), "r")
	for round, at := range []uint64{last / 4, last / 2, 3 * last / 4} {
		cmd := exec.Command(os.Args[0], "-test.run", "^$", "-test.bench", "^BenchmarkKilledReplicaChild$", "-test.benchtime", "1x")
		cmd.Env = append(os.Environ(), envKilledChild+"="+env.URL+","+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var seen uint64
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "seq "); ok {
				seen, _ = strconv.ParseUint(s, 10, 64)
				if seen >= at {
					break
				}
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		t.Logf("round %d: killed at seq %d or later (of %d)", round, seen, last)
		if seen < at {
			t.Fatalf("round %d: the child stopped at %d before %d", round, seen, at)
		}
	}
	restarted := startReplica(t, env, dir, nil, nil)
	fresh := startReplica(t, env, "", nil, nil)
	for _, r := range []*replica{restarted, fresh} {
		waitSeq(t, r.Catalog, last)
	}
	if got, want := digestOf(t, restarted.Catalog), digestOf(t, fresh.Catalog); got != want {
		t.Errorf("a replica killed and restarted differs from one rebuilt by replay")
	}
	if got, want := view(t, restarted.Catalog), view(t, fresh.Catalog); got != want {
		t.Errorf("answers differ:\n%s", firstDiff(got, want))
	}
	if got, all := restarted.Stats().Applied, fresh.Stats().Applied; got >= all {
		t.Errorf("the restarted replica applied %d messages, as many as a rebuild (%d): it did not resume", got, all)
	}
	if got, want := restarted.Stats().Tools, fresh.Stats().Tools; got != want || got == 0 {
		t.Errorf("tools %d, want %d", got, want)
	}
}

// BenchmarkKilledReplicaChild is the replica process of TestReplicaKilledResumes (a benchmark,
// so plain test runs never list it): it follows the stream and prints its sequence as it goes,
// until killed. Without its parent's environment it does nothing.
func BenchmarkKilledReplicaChild(b *testing.B) {
	spec := os.Getenv(envKilledChild)
	if spec == "" {
		b.Skip("runs only as TestReplicaKilledResumes's child")
	}
	url, dir, _ := strings.Cut(spec, ",")
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	c, err := Open(Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.Follow(context.Background(), js) }()
	var last uint64
	for range 600_000 { // until killed (10 min at most)
		if s := c.Seq(); s != last {
			last = s
			fmt.Printf("seq %d\n", s)
		}
		time.Sleep(time.Millisecond)
	}
}

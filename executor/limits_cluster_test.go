package executor

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// startCluster starts a 3-node JetStream cluster on loopback and returns its client URLs.
func startCluster(t *testing.T) []string {
	t.Helper()
	// Each node's cluster port is held by a listener of the test until that node starts: closed
	// at once, it could be taken by another package's tests while the nodes before it started
	// (seconds on a loaded machine), and the node was then never ready.
	ports := make([]int, 3)
	held := make([]net.Listener, 3)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i], held[i] = ln.Addr().(*net.TCPAddr).Port, ln
		t.Cleanup(func() { ln.Close() })
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var urls []string
	for i := range 3 {
		opts := &server.Options{
			ServerName: "n" + strconv.Itoa(i), Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			JetStream: true, StoreDir: t.TempDir(),
			Cluster: server.ClusterOpts{Name: "limits", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(routes[0] + "," + routes[1] + "," + routes[2]),
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		held[i].Close()
		go s.Start()
		t.Cleanup(s.Shutdown)
		if !s.ReadyForConnections(waitLimit) {
			t.Fatal("cluster node not ready")
		}
		urls = append(urls, s.ClientURL())
	}
	return urls
}

// TestSlotsReplicatedConflict: on a replicated slots bucket (a NATS cluster with
// --stream-replicas 3, as deploy/ runs it), two calls that take the same released slot at once
// collide on the slot's delete marker, and JetStream reports the loser's conflict as error 10164
// (not 10071, the code ErrKeyExists matches; nats.go's KV Create passes it on as it came). The
// loser was refused unavailable ("limits cannot be checked") instead of looking at the next slot
// or being refused rate_limited by the cap.
func TestSlotsReplicatedConflict(t *testing.T) {
	urls := startCluster(t)
	const callers = 6
	var kvs []*limiter
	for i := range callers {
		nc, err := nats.Connect(urls[i%len(urls)])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		var kv jetstream.KeyValue
		waitFor(t, "replicated slots bucket", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			kv, err = js.CreateOrUpdateKeyValue(ctx, SlotsConfig(30*time.Second, 11*time.Minute, 3))
			return err == nil
		})
		kvs = append(kvs, &limiter{js: js, slots: kv, now: time.Now, owner: "w" + strconv.Itoa(i), prev: map[string]prevWindow{}, lease: 30 * time.Second})
	}
	lim := []scopeLimit{{subjects.LimitScopeServer, "s", Rate{Concurrency: 1}}}
	ctx := context.Background()
	// Each round every caller tries the slot at once; the winner releases it (a delete marker),
	// so the next round's callers all find it released.
	for round := range 150 {
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for i, l := range kvs {
			wg.Go(func() {
				ls, refusal, err := l.acquire(ctx, fmt.Sprintf("c%d-%d", round, i), lim)
				if err != nil {
					errs <- err
					return
				}
				if refusal == nil {
					ls.release(ctx)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: a call racing for a released slot failed: %v (want it to run or be refused rate_limited)", round, err)
		}
	}
}

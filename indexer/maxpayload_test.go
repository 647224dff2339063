package indexer

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// restartNATS stops env's server and starts another on the same address and JetStream store,
// whose messages hold maxPayload bytes: the clients connected to it reconnect to a server with
// another max_payload.
func restartNATS(t *testing.T, env *natstest.Env, maxPayload int32) {
	t.Helper()
	u, err := url.Parse(env.URL)
	if err != nil {
		t.Fatalf("url %q: %v", env.URL, err)
	}
	env.Server.Shutdown()
	srv, err := natsembed.Start(natsembed.Config{StoreDir: env.Dir, Listen: u.Host, MaxPayload: maxPayload})
	if err != nil {
		t.Fatalf("restart nats on %s: %v", u.Host, err)
	}
	t.Cleanup(srv.Shutdown)
	env.Server = srv
}

// TestReplyRoomFollowsReconnect: the room of a reply (what a servers page may take, where a
// details or full search answer stops reading definitions) was set once, from the max_payload
// of the server the replica first connected to. After a reconnect to a server with a larger
// limit, a reply that now fits was still refused too_large; with a smaller one, a servers page
// was not ended early but refused too_large, so nobody could list the servers. Both follow the
// server the connection is on now, and a reply that fit the old limit but not the new one is
// too_large, not a timeout.
func TestReplyRoomFollowsReconnect(t *testing.T) {
	const small, large = 16 << 10, 64 << 10
	for _, limits := range [][]int32{{small, large, small}, {large, small, large}} {
		t.Run(fmt.Sprintf("%d-%d-%d", limits[0]>>10, limits[1]>>10, limits[2]>>10), func(t *testing.T) {
			replyRoomAcrossRestarts(t, limits, small)
		})
	}
}

// replyRoomAcrossRestarts starts a NATS server whose messages hold limits[0] bytes, and
// restarts it with each of the next limits; at each, a replica serving on a connection that
// reconnects answers as the limit says (small: too_large details, servers in several pages).
func replyRoomAcrossRestarts(t *testing.T, limits []int32, small int32) {
	env := natstest.StartWith(t, natsembed.Config{MaxPayload: limits[0]})
	// A tool whose details (description, input schema and the definition itself) take about
	// 20 KiB: more than a 16 KiB message holds, less than a 64 KiB one. Its snapshot (10 KiB)
	// fits either. The whole stream stays under 64 KiB: the embedded server's max_pending is 4
	// times its max_payload, and a replay past it is a slow consumer, disconnected.
	big := snapshot("big", "a server", tool("huge", strings.Repeat("x", 10<<10)))
	seq := publish(t, env.JS, append([]any{status("big", subjects.StatusReady), big}, manyServers(40, 400)...)...)
	connect := func() *nats.Conn {
		nc, err := nats.Connect(env.URL, nats.ReconnectWait(10*time.Millisecond), nats.ReconnectJitter(0, 0), nats.MaxReconnects(-1))
		if err != nil {
			t.Fatalf("connect: %v", err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	serving, asking := connect(), connect()
	r := startReplica(t, env, "", nil, serving)
	waitSeq(t, r.Catalog, seq)
	cl := Client{NC: asking, Timeout: 5 * time.Second}
	serviceUp(t, cl)

	for i, limit := range limits {
		if i > 0 {
			restartNATS(t, env, limit)
			// Both connections on the new server, and the replica answering there.
			waitFor(t, "reconnect", func() bool {
				return serving.IsConnected() && asking.IsConnected() &&
					serving.MaxPayload() == int64(limit) && asking.MaxPayload() == int64(limit)
			})
			serviceUp(t, cl)
		}
		at := fmt.Sprintf("at max_payload %d KiB (server %d)", limit>>10, i+1)
		rep, err := cl.Details(context.Background(), "local", subjects.DetailsRequest{V: 1, Names: []string{"big__huge"}})
		if err != nil {
			t.Fatalf("details %s: %v (want a reply, not a transport error)", at, err)
		}
		sr, err := cl.Search(context.Background(), "local", subjects.SearchRequest{V: 1, Query: "huge", Detail: subjects.DetailFull})
		if err != nil {
			t.Fatalf("search %s: %v (want a reply, not a transport error)", at, err)
		}
		if limit == small {
			if rep.Error == nil || rep.Error.Code != subjects.CodeTooLarge {
				t.Errorf("details %s: %+v, want too_large", at, rep.Error)
			}
			if sr.Error == nil || sr.Error.Code != subjects.CodeTooLarge {
				t.Errorf("full search %s: %+v, want too_large", at, sr.Error)
			}
		} else {
			if rep.Error != nil || len(rep.Tools) != 1 || !bytes.Equal(rep.Tools[0].Definition, big.Items[0]) {
				t.Errorf("details %s: %d tools, error %+v; want the tool as listed", at, len(rep.Tools), rep.Error)
			}
			if sr.Error != nil || len(sr.Tools) != 1 {
				t.Errorf("full search %s: %d tools, error %+v; want the tool", at, len(sr.Tools), sr.Error)
			}
		}
		got, pages := serversPages(t, cl, "local", subjects.ServersRequest{V: 1, Limit: MaxServers}, 200)
		if len(got) != 41 {
			t.Errorf("servers %s: %d over %d pages, want 41", at, len(got), pages)
		}
		if limit == small && pages < 2 {
			t.Errorf("servers %s: 41 servers of ~500 bytes (20 KiB) in one page", at)
		}
	}
	if st := r.Stats().Endpoints["servers"]; st.Errors != 0 {
		t.Errorf("servers endpoint errors %d, want none", st.Errors)
	}
	// Stopped here, while its server runs: at cleanup the server stops first.
	r.stop(t)
}

package registrysync

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestRemoveWhileNATSAwayEndsEndpoints: a server removed while the NATS connection is away
// (reconnecting) has no endpoints once it is back. A subscription drained while reconnecting
// sends no UNSUB (nats.go leaves it to the reconnection), and was still there when the
// reconnection subscribed again: the server kept a member in the queue group that the client
// had dropped, and the requests it got there were never answered (timeouts, not no responders,
// once another process ran the server).
func TestRemoveWhileNATSAwayEndsEndpoints(t *testing.T) {
	store := t.TempDir()
	srv, err := natsembed.Start(natsembed.Config{StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	url := srv.ClientURL()
	defer func() { srv.Shutdown() }()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := subjects.EnsureStreams(ctx, js, subjects.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	env := &natstest.Env{Server: srv, URL: url, NC: nc, JS: js, Dir: store}

	fx := httpFixture(t, newFixture(fixtureOptions{}))
	a := run(t, env, fastConfig(ServerConfig{Name: "mv", URL: fx}))
	waitUntil(t, "mv ready", func() bool { return a.m.Statuses()["mv"].Status == subjects.StatusReady })

	srv.Shutdown()
	waitUntil(t, "nats reconnecting", nc.IsReconnecting)
	rctx, rcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_ = a.m.Remove(rctx, "mv") // its status cannot be published now: the endpoints end all the same
	rcancel()

	for i := 0; ; i++ { // the port may take a moment to be free again
		srv, err = natsembed.Start(natsembed.Config{StoreDir: store, Listen: strings.TrimPrefix(url, "nats://")})
		if err == nil {
			break
		}
		if i == 50 {
			t.Fatalf("restart nats: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitUntil(t, "nats reconnected", nc.IsConnected)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	other, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, subj := range []string{subjects.Dispatch("mv"), subjects.Relist("mv")} {
		if _, err := other.Request(subj, []byte(`{"v":1,"tool":"echo"}`), 2*time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("%s after Remove while NATS was away: %v, want no responders", subj, err)
		}
	}
}

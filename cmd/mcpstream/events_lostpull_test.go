package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventsReplayAfterLostPull: a replay whose pull request is lost without a word (one sent
// at a reconnect to a cluster node just restarted is answered "no responders", which nats.go
// ignores) asks again once it misses the request's heartbeats. The replay's wait for an event
// ended every 2 s to ask the server whether one was still to come, and ended with it nats.go's
// watch of the heartbeats: the replay waited for good for events the server was never asked for.
func TestEventsReplayAfterLostPull(t *testing.T) {
	env := natstest.Start(t)
	for i := range 3 {
		publish(t, env.JS, subjects.Audit("acme", subjects.AuditRequest), fmt.Appendf(nil, `{"v":1,"type":"audit.request","callId":"c%d"}`, i))
	}
	px := startFirstPullLoser(t, strings.TrimPrefix(env.URL, "nats://"), "$JS.API.CONSUMER.MSG.NEXT."+subjects.AuditStream+".")
	nc, err := nats.Connect("nats://" + px.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A deadline that only a hang reaches: nats.go asks again after two missed heartbeats (10 s).
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	seen := 0
	err = readStream(ctx, js, subjects.AuditStream, jetstream.OrderedConsumerConfig{}, false, func(jetstream.Msg) error {
		seen++
		return nil
	})
	if err != nil || seen != 3 || px.lost.Load() != 1 {
		t.Fatalf("replay after a lost pull request: %v, %d of 3 events (%d pull requests lost; ctx %v)", err, seen, px.lost.Load(), ctx.Err())
	}
}

// firstPullLoser is a TCP proxy to a NATS server that loses the client's first pull request
// (a PUB or HPUB to a subject starting with prefix) and passes everything else on.
type firstPullLoser struct {
	ln   net.Listener
	lost atomic.Int64
}

func startFirstPullLoser(t *testing.T, target, prefix string) *firstPullLoser {
	t.Helper()
	p := &firstPullLoser{}
	p.ln = natstest.Forward(t, target,
		func(client, srv net.Conn) { io.Copy(client, srv) },
		func(client, srv net.Conn) { p.forward(client, srv, prefix) })
	return p
}

// forward copies the client's protocol to the server frame by frame, leaving out the first
// pull request.
func (p *firstPullLoser) forward(client, srv net.Conn, prefix string) {
	in := bufio.NewReader(client)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		frame := line
		f := strings.Fields(string(line))
		if len(f) > 1 && (strings.EqualFold(f[0], "PUB") || strings.EqualFold(f[0], "HPUB")) {
			size, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return
			}
			payload := make([]byte, size+2)
			if _, err := io.ReadFull(in, payload); err != nil {
				return
			}
			if strings.HasPrefix(f[1], prefix) && p.lost.CompareAndSwap(0, 1) {
				continue
			}
			frame = append(line, payload...)
		}
		if _, err := srv.Write(frame); err != nil {
			return
		}
	}
}

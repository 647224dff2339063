package executor

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestWorkersPullAgainAfterLostPull: a worker's pull request can be lost without a word — one
// sent at a reconnect to a cluster node just restarted, its JetStream not caught up, is
// answered "no responders", which nats.go ignores, still counting the request as pending (see
// TestClusterNodeFailover). The iterator asked again only once it missed two idle heartbeats:
// with the default heartbeat (half the 30 s pull expiry), every worker of the executor stayed
// idle for 30 s while it said it was ready and connected. Here a proxy loses the workers'
// first pull requests; a call must still be taken within a few heartbeats (workerHeartbeat),
// far less than 30 s.
func TestWorkersPullAgainAfterLostPull(t *testing.T) {
	t.Parallel() // waits, mostly, on a rig of its own (see parallel, harness_test.go)
	const workers = 2
	r := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
	// The executor reaches NATS through a proxy that can lose its pull requests.
	px := startPullDropper(t, strings.TrimPrefix(r.env.URL, "nats://"))
	nc, err := nats.Connect("nats://"+px.addr(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// The workers' first pull requests are lost.
	px.drop.Store(true)
	r.startExecutor(r.managerConfig(Config{Workers: workers}), nc)
	r.waitTool("fixture__echo")
	waitFor(t, "the workers' pull requests, lost", func() bool { return px.dropped.Load() >= workers })
	px.drop.Store(false)
	lostAt := time.Now()

	// The workers ask again once they miss the heartbeats of their lost requests: the call
	// runs long before nats.go's default 2 × 15 s.
	const bound = 12 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	res, err := r.client.CallDirect(ctx, "local", subjects.CallRequest{Tool: "fixture__echo", Arguments: []byte(`{"text":"after"}`),
		Principal: subjects.Principal{User: "local"}})
	if err != nil || res.Status != subjects.CallOK {
		t.Fatalf("a call after the workers' pull requests were lost: %v %s %+v after %s (the workers did not ask again)",
			err, res.Status, res.Error, time.Since(lostAt).Round(time.Millisecond))
	}
}

// callsPull is the subject of the workers' pull requests.
const callsPull = "$JS.API.CONSUMER.MSG.NEXT." + subjects.CallsStream + "." + subjects.ExecutorConsumer

// pullDropper is a TCP proxy to a NATS server that, while drop is set, loses the client's pull
// requests on the calls consumer (callsPull) and passes everything else on.
type pullDropper struct {
	// match, when set, picks the frames to lose instead of the pull requests: a PUB or HPUB
	// to subject whose payload (its CRLF included) is payload.
	match func(subject string, payload []byte) bool
	// rename, when set, sends a PUB or HPUB frame to another subject while drop is set: to the
	// one it returns, when it returns true (the frame is not lost).
	rename func(subject string) (string, bool)
	// dropSub, when set, loses the client's SUB frames to the subjects it picks while drop is
	// set (a NATS user that may not subscribe to them, as far as the client can tell).
	dropSub func(subject string) bool
	ln      net.Listener
	drop    atomic.Bool
	dropped atomic.Int64
	// pulls counts the client's pull requests on the calls consumer passed on to the server.
	pulls atomic.Int64
	// unsubs counts the client's UNSUB frames.
	unsubs atomic.Int64
	// hold, while locked, holds back what the server sends the client (late heartbeats, as
	// from a starved connection).
	hold sync.Mutex
}

func startPullDropper(t *testing.T, target string) *pullDropper {
	return startDropper(t, target, nil)
}

// startDropper is startPullDropper losing, while drop is set, the frames match picks (nil: the
// pull requests).
func startDropper(t *testing.T, target string, match func(subject string, payload []byte) bool) *pullDropper {
	t.Helper()
	p := &pullDropper{match: match}
	p.ln = natstest.Forward(t, target, p.back, p.forward)
	return p
}

func (p *pullDropper) addr() string { return p.ln.Addr().String() }

// back copies what the server sends to the client, waiting while hold is locked.
func (p *pullDropper) back(client, srv net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := srv.Read(buf)
		if n > 0 {
			p.hold.Lock()
			p.hold.Unlock()
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forward copies the client's protocol to the server frame by frame, leaving out pull requests
// while drop is set.
func (p *pullDropper) forward(client, srv net.Conn) {
	in := bufio.NewReader(client)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		frame := line
		f := strings.Fields(string(line))
		if len(f) > 0 && strings.EqualFold(f[0], "UNSUB") {
			p.unsubs.Add(1)
		}
		if len(f) > 1 && strings.EqualFold(f[0], "SUB") && p.dropSub != nil && p.drop.Load() && p.dropSub(f[1]) {
			p.dropped.Add(1)
			continue
		}
		if len(f) > 0 && (strings.EqualFold(f[0], "PUB") || strings.EqualFold(f[0], "HPUB")) {
			size, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return
			}
			payload := make([]byte, size+2)
			if _, err := io.ReadFull(in, payload); err != nil {
				return
			}
			if p.drop.Load() && (p.match == nil && f[1] == callsPull || p.match != nil && p.match(f[1], payload)) {
				p.dropped.Add(1)
				continue
			}
			if p.rename != nil && p.drop.Load() {
				if to, ok := p.rename(f[1]); ok {
					f[1] = to
					line = []byte(strings.Join(f, " ") + "\r\n")
				}
			}
			if f[1] == callsPull {
				p.pulls.Add(1)
			}
			frame = append(line, payload...)
		}
		if _, err := srv.Write(frame); err != nil {
			return
		}
	}
}

// clientVia arms p and returns a Client (with a JetStream context and pubAckWait) whose
// connection goes through it.
func clientVia(t *testing.T, p *pullDropper, pubAckWait time.Duration) Client {
	t.Helper()
	p.drop.Store(true)
	nc, err := nats.Connect("nats://" + p.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return Client{NC: nc, JS: js, PubAckWait: pubAckWait}
}

// connectLosingHeartbeats connects to r's NATS through a proxy that loses the progress
// heartbeats (+WPI acks) sent through it, from the start: an executor on that connection keeps
// its calls only until AckWait, and JetStream delivers them again elsewhere. px.drop.Store(false)
// lets them through again.
func connectLosingHeartbeats(t *testing.T, r *rig) (*pullDropper, *nats.Conn) {
	t.Helper()
	px := startDropper(t, strings.TrimPrefix(r.env.URL, "nats://"), func(subject string, payload []byte) bool {
		return strings.HasPrefix(subject, "$JS.ACK.") && bytes.HasPrefix(payload, []byte("+WPI"))
	})
	px.drop.Store(true)
	nc, err := nats.Connect("nats://"+px.addr(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return px, nc
}

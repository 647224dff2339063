package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// freezableProxy forwards loopback TCP connections to a target; frozen, it stops forwarding in
// both directions but keeps every connection open, as a half-open connection to a vanished host
// or a partition looks to the client.
type freezableProxy struct {
	ln     net.Listener
	frozen atomic.Bool
	mu     sync.Mutex
	thaw   *sync.Cond
}

func startFreezableProxy(t *testing.T, target string) *freezableProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezableProxy{ln: ln}
	p.thaw = sync.NewCond(&p.mu)
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		p.setFrozen(false)
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, in, out)
			cmu.Unlock()
			go p.pipe(out, in)
			go p.pipe(in, out)
		}
	}()
	return p
}

// pipe copies src to dst, holding every chunk while the proxy is frozen.
func (p *freezableProxy) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen.Load() {
				p.thaw.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezableProxy) setFrozen(v bool) {
	p.mu.Lock()
	p.frozen.Store(v)
	p.mu.Unlock()
	p.thaw.Broadcast()
}

// A connection to NATS that stays open while NATS no longer answers (half-open TCP: the host
// vanished, a partition) answered /healthz 200 "ok" for minutes — nats.go reports CONNECTED
// until its own pings fail — while the process served nothing. /healthz now PINGs NATS and
// answers 503 nats_unresponsive, and 200 again once NATS answers.
func TestHealthzHalfOpenNATS(t *testing.T) {
	n := startRestartableNATS(t)
	proxy := startFreezableProxy(t, strings.TrimPrefix(n.url, "nats://"))
	p := startRole(t, "indexer", "--nats", "nats://"+proxy.ln.Addr().String(), "--data", t.TempDir())
	waitFor(t, "/healthz 200", 600, func() bool { code, _, _ := p.healthz(); return code == http.StatusOK })

	proxy.setFrozen(true)
	code, status, st := p.healthz()
	if code != http.StatusServiceUnavailable || status != "nats_unresponsive" || st != "unresponsive" {
		t.Errorf("/healthz with NATS not answering: %d status %q nats %q, want 503 nats_unresponsive / unresponsive", code, status, st)
	}

	proxy.setFrozen(false)
	waitFor(t, "/healthz 200 once NATS answers again", 600, func() bool { code, _, _ := p.healthz(); return code == http.StatusOK })
}

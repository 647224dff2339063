package natsembed

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// A listener nats-server cannot open is reported by it only in its log (Fatalf, after
// JetStream recovered its store), and the server never gets ready: StartContext says so at
// once, naming the port, instead of waiting out ReadyWait (10 minutes under up, saying every
// 10 s that JetStream is recovering its store).
func TestStartContextPortInUseFailsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	waited := 0
	done := make(chan error, 1)
	go func() {
		srv, err := StartContext(t.Context(), Config{StoreDir: t.TempDir(), Listen: ln.Addr().String(), ReadyWait: time.Hour,
			Waiting: func(time.Duration) { waited++ }})
		if srv != nil {
			srv.Shutdown()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), ln.Addr().String()) {
			t.Fatalf("got %v, want ErrNotReady naming the port in use", err)
		}
		// The remedy, not a question: nats-server's reason already says the address is in
		// use ("is 127.0.0.1:4222 in use?" only asked it back).
		if msg := err.Error(); strings.Contains(msg, "in use?") || !strings.Contains(msg, "--nats-listen") ||
			!strings.Contains(msg, "stop the process listening on "+ln.Addr().String()) {
			t.Errorf("got %v, want the remedy: stop the process listening there, or another --nats-listen", err)
		}
		if waited > 0 {
			t.Errorf("Waiting called %d times for a server that cannot listen", waited)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("StartContext still waiting 60s after the port it should listen on turned out taken")
	}
}

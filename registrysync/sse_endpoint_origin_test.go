package registrysync

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// wireRecorder records every byte a listener's connections receive, as they come off the
// wire (before TLS).
type wireRecorder struct {
	net.Listener
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *wireRecorder) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recordedConn{Conn: c, l: l}, nil
}

func (l *wireRecorder) received() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type recordedConn struct {
	net.Conn
	l *wireRecorder
}

func (c *recordedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.mu.Lock()
	c.l.buf.Write(p[:n])
	c.l.mu.Unlock()
	return n, err
}

// TestSSEEndpointSchemeDowngradeRefused: a legacy SSE server's endpoint event names the URL
// every message is POSTed to, with the configured headers. mcp-go checks only that its host
// (and port) are the SSE URL's, not its scheme: an https server whose endpoint event says
// http://same-host/... had the connector send its credentials in clear text, which every
// request going to the configured URL's origin (scheme, host, port) only now prevents, as for
// redirects.
//
// Not parallel: the TLS test server's certificate is made trusted by swapping
// http.DefaultTransport, which sessions clone, while no other test runs.
func TestSSEEndpointSchemeDowngradeRefused(t *testing.T) {
	var port string
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		// The same host and port, over plain HTTP.
		fmt.Fprintf(w, "event: endpoint\ndata: http://127.0.0.1:%s/message?sessionId=1\n\n", port)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	wire := &wireRecorder{Listener: ts.Listener}
	ts.Listener = wire
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // (the clear-text request is refused)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	_, port, _ = net.SplitHostPort(ts.Listener.Addr().String())

	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	prev := http.DefaultTransport
	tr := prev.(*http.Transport).Clone()
	tr.TLSClientConfig.RootCAs = roots
	http.DefaultTransport = tr
	t.Cleanup(func() { http.DefaultTransport = prev })

	sc := ServerConfig{Name: "downgrade", Transport: TransportSSE, URL: ts.URL + "/sse",
		Headers: map[string]string{"X-Api-Key": "key-downgrade"}}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("downgrade"))
	e := rec.wait(0, "ready or unavailable", settled)
	h.stop(t)
	if strings.Contains(wire.received(), "key-downgrade") {
		t.Errorf("the credentials went out in clear text (status %s %s %q)", e.ev.Status.Status, e.ev.Status.Code, e.ev.Status.Reason)
	}
	if st := e.ev.Status; st.Status != subjects.StatusUnavailable || !strings.Contains(st.Reason, "origin") {
		t.Errorf("status %s %s %q, want unavailable saying the endpoint's origin was refused", st.Status, st.Code, st.Reason)
	}
}

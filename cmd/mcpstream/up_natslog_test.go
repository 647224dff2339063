package main

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestUpLogsEmbeddedNATSErrors: the embedded nats-server's errors reach up's log at the default
// level. They were dropped unless --log-level trace: a JetStream store on a full disk ("no
// space left on device" on every write: calls never stored, answers and registry events lost)
// left /healthz at 200 and the log silent. Here a client over the payload limit, which
// nats-server reports as an error, stands for it.
func TestUpLogsEmbeddedNATSErrors(t *testing.T) {
	p := startUp(t)
	u, err := url.Parse(p.nats)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	c.Read(buf) // INFO
	c.Write([]byte("CONNECT {\"verbose\":false}\r\nPUB x 999999999\r\n"))
	c.Read(buf) // -ERR 'Maximum Payload Violation'
	waitFor(t, "the embedded server's error in up's log", 200, func() bool {
		return strings.Contains(p.errOut.String(), "maximum payload exceeded")
	})
	if s := p.errOut.String(); !strings.Contains(s, "nats-server") {
		t.Errorf("the error is not said to be the embedded nats-server's:\n%s", s)
	}
}

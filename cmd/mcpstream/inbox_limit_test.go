package main

import (
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestNATSInboxLimit: a --nats-inbox over subjects.MaxInboxPrefix bytes is refused before
// connecting, saying the limit; one at it is taken. A longer one was taken, and the longest
// requests (the executor's read of a long tenant's approval record) passed the NATS server's
// max_control_line: the server closed the whole connection, again at each redelivery.
func TestNATSInboxLimit(t *testing.T) {
	at := "_INBOX." + strings.Repeat("a", subjects.MaxInboxPrefix-len("_INBOX."))
	n := natsFlags{URL: "nats://127.0.0.1:1", Inbox: at}
	if err := n.check(); err != nil {
		t.Errorf("a %d-byte --nats-inbox: %v", len(at), err)
	}
	n.Inbox = at + "b"
	err := n.check()
	if err == nil || !strings.Contains(err.Error(), "--nats-inbox") || !strings.Contains(err.Error(), "at most 120") {
		t.Errorf("a %d-byte --nats-inbox: %v, want a refusal naming the limit", len(n.Inbox), err)
	}
}

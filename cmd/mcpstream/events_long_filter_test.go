package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventsFilterTooLong: a --subject filter longer than any subject mcpstream stores matches
// none, whatever token makes it long (a call id, an event name, a server; the tenant token has
// its own check, TestEventsFilterOfNoTenant). It was taken: the consumer's create request
// carries the filter in its subject, past the NATS server's max_control_line, and the server
// closed the connection: events ended "consumer on MCPSTREAM_RESULTS: nats: connection
// closed", not saying why. It is refused as a usage error before connecting; the longest
// results subject is still read.
func TestEventsFilterTooLong(t *testing.T) {
	env := seedRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	long := strings.Repeat("a", 5000)
	for _, f := range []string{"results.local." + long, "audit.local." + long, "registry." + long + ".status", "results.*." + long} {
		_, _, err := runCmd(t, ctx, "events", "--subject", f, "--nats", env.URL)
		var bad *badUsage
		if !errors.Is(err, ErrBadFilter) || !errors.As(err, &bad) || !strings.Contains(err.Error(), "matches no") ||
			!strings.Contains(err.Error(), "longer than any subject") {
			t.Errorf("events --subject %.40q…: %.300v; want a usage error: matches no subject, longer than any", f, err)
		}
	}
	dots := func(n int) string { return subjects.EncodeToken(strings.Repeat(".", n)) }
	longest := subjects.Result(strings.Repeat(".", subjects.MaxUserBytes), strings.Repeat(".", subjects.MaxCallIDBytes))
	if len(longest) != maxStoredSubject {
		t.Errorf("the longest results subject is %d bytes, maxStoredSubject %d", len(longest), maxStoredSubject)
	}
	for _, f := range []string{longest, "results." + dots(subjects.MaxUserBytes) + ".*"} {
		if _, _, err := runCmd(t, ctx, "events", "--subject", f, "--nats", env.URL); err != nil {
			t.Errorf("events --subject %.60q…: %.300v", f, err)
		}
	}
}

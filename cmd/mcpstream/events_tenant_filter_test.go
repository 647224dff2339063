package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventsFilterOfNoTenant: a results or audit --subject filter whose tenant token is no
// tenant's — over subjects.MaxUserBytes decoded, empty ("~"), or not as EncodeToken makes it —
// was taken: one whose token did not fit the consumer's request subject put it past the NATS
// server's max_control_line, the server closed the connection, and events ended "consumer on
// MCPSTREAM_RESULTS: nats: connection closed", not saying why; a shorter one replayed nothing,
// as if nothing had happened. No call has such a tenant (the clients and the executor refuse
// it, subjects.CheckTenant): the filter is refused as one matching no subject, before
// connecting, naming the limit; a tenant at the limit, and the audit token of no tenant ("~~"),
// are still read.
func TestEventsFilterOfNoTenant(t *testing.T) {
	env := seedRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	long := strings.Repeat("a", 5000)
	for _, c := range []struct{ filter, want string }{
		{"results." + long + ".>", "at most 1024"},
		{"audit." + long + ".decision", "at most 1024"},
		{"results." + subjects.EncodeToken(strings.Repeat(".", subjects.MaxUserBytes+1)) + ".*", "at most 1024"},
		{"results.~.>", "the tenant is empty"},
		{"audit.acme~2e.>", "not a tenant token"},
	} {
		_, _, err := runCmd(t, ctx, "events", "--subject", c.filter, "--nats", env.URL)
		var bad *badUsage
		if !errors.Is(err, ErrBadFilter) || !errors.As(err, &bad) || !strings.Contains(err.Error(), "matches no") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("events --subject %.60q…: %.300v; want a usage error: matches no subject, %s", c.filter, err, c.want)
		}
	}
	for _, f := range []string{
		"results." + subjects.EncodeToken(strings.Repeat(".", subjects.MaxUserBytes)) + ".>",
		"audit." + subjects.NoTenantToken + ".>", "audit.*.decision", "results.local.*", "audit.my~2Etenant.>",
	} {
		if _, _, err := runCmd(t, ctx, "events", "--subject", f, "--nats", env.URL); err != nil {
			t.Errorf("events --subject %.60q…: %.300v", f, err)
		}
	}
}

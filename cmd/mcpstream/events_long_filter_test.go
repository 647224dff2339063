package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestEventsFilterPastControlLine: a --subject filter with a literal token longer than any
// stored subject's (a call id over 256 bytes, a server name over registrysync's 128, a kind of
// thousands of bytes), or a --server name over 128 bytes, was taken: with one filter the
// consumer's create request carries it in its subject, which passed the NATS server's
// max_control_line (4 KiB), the server closed the connection, and events ended "nats:
// connection closed", not saying why. Each is refused before connecting, a usage error naming
// the limit; the longest filters that can match stored subjects (a tenant of 1024 bytes and a
// call id of 256, every byte escaped; a server name of 128 bytes, escaped) are still read.
func TestEventsFilterPastControlLine(t *testing.T) {
	env := seedRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	long := strings.Repeat("a", 5000)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--subject", "results.local." + long + ".>"}, "matches no"},
		{[]string{"--subject", "results.local." + long}, "at most 256"},
		{[]string{"--subject", "results.local." + subjects.EncodeToken(strings.Repeat(".", 257))}, "at most 256"},
		{[]string{"--subject", "results.*." + strings.Repeat("~", 769)}, "at most 256 bytes (768 escaped)"},
		{[]string{"--subject", "registry." + long + ".>"}, "at most 128"},
		{[]string{"--subject", "registry." + subjects.EncodeToken(strings.Repeat(".", 129)) + ".status"}, "at most 128"},
		{[]string{"--subject", "registry.*.snapshot." + long}, "max_control_line"},
		{[]string{"--subject", "audit.*." + long}, "max_control_line"},
		{[]string{"--server", long}, "at most 128"},
		{[]string{"--server", strings.Repeat("a", 129), "--subject", "registry.*.status"}, "at most 128"},
	} {
		args := append([]string{"events", "--nats", env.URL}, c.args...)
		_, _, err := runCmd(t, ctx, args...)
		var bad *badUsage
		if !errors.Is(err, ErrBadFilter) || !errors.As(err, &bad) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("events %.80q…: %.300v; want a usage error naming the limit (%s)", c.args, err, c.want)
		}
	}
	maxTenant := subjects.EncodeToken(strings.Repeat(".", subjects.MaxUserBytes))
	maxID := subjects.EncodeToken(strings.Repeat(".", 256))
	maxServer := strings.Repeat(".", registrysync.MaxServerNameBytes)
	for _, args := range [][]string{
		{"--subject", "results." + maxTenant + "." + maxID},
		{"--subject", "audit." + maxTenant + "." + maxID},
		// The longest reply inbox too (its requests' lines are that much longer).
		{"--nats-inbox", strings.Repeat("i", subjects.MaxInboxPrefix), "--subject", "results." + maxTenant + "." + maxID},
		{"--subject", "registry." + subjects.EncodeToken(maxServer) + ".>"},
		{"--server", maxServer},
		{"--server", maxServer, "--subject", "registry.*.snapshot.tools"},
	} {
		if _, _, err := runCmd(t, ctx, append([]string{"events", "--nats", env.URL}, args...)...); err != nil {
			t.Errorf("events %.80q…: %.300v", args, err)
		}
	}
}

// TestServersRemoveNamePastLimit: servers remove of a name longer than any server's (over
// registrysync's 128 bytes) was sent on: its relist probe's subject, then its stream look-up's,
// passed the NATS server's max_control_line and the server closed the connection ("nats:
// connection closed", not why). Refused before connecting, a usage error naming the limit.
func TestServersRemoveNamePastLimit(t *testing.T) {
	env := seedRegistry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, stderr, err := runCmd(t, ctx, "servers", "remove", "logging", strings.Repeat("a", 5000), "--nats", env.URL)
	if code, ok := err.(exitCode); !ok || code != 2 || !strings.Contains(stderr, "at most 128") {
		t.Errorf("servers remove of a 5000-byte name: %v, stderr %.300q; want exit 2 naming the limit", err, stderr)
	}
	// Nothing was removed: the usage error comes before anything is done.
	out, _, err := runCmd(t, ctx, "servers", "--json", "--nats", env.URL)
	var rows []struct{ Name, Status string }
	if err != nil || json.Unmarshal([]byte(out), &rows) != nil || !slices.Contains(rows, struct{ Name, Status string }{"logging", "ready"}) {
		t.Errorf("servers after the refused remove: %v\n%s", err, out)
	}
}

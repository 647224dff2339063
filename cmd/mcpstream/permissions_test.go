package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestCatalogAndApprovalNATSPermissionsFailFast: like call (TestCallNATSPermissionsFailFast),
// search, inspect, approve and deny send a request and wait for its answer; NATS answers a
// publish or a subscription the user may not make with an asynchronous error only. A tenant's
// user without --nats-inbox (its permissions allow only _INBOX.<tenant>.>) waited for the whole
// --timeout and got "context deadline exceeded"; an approver the permissions did not allow was
// told, after --wait, that no call with that id was waiting — as if the call were gone. Each
// fails at once with what NATS refused.
func TestCatalogAndApprovalNATSPermissionsFailFast(t *testing.T) {
	all := &server.SubjectPermission{Allow: []string{">"}}
	ns := startNATS(t, &server.Options{Users: []*server.User{
		{Username: "service", Password: "x", Permissions: &server.Permissions{Publish: all, Subscribe: all}},
		{Username: "nopub", Password: "x", Permissions: &server.Permissions{Subscribe: all,
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"mcpstream.v1.catalog.>", "mcpstream.v1.approvals.>"}}}},
		{Username: "nosub", Password: "x", Permissions: &server.Permissions{Publish: all,
			Subscribe: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"_INBOX.>"}}}},
	}})
	url := func(user string) string { return fmt.Sprintf("nats://%s:x@%s", user, ns.Addr()) }
	// A catalog and an executor that answer at once: only NATS stands in the way.
	nc, err := nats.Connect(url("service"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for subj, answer := range map[string]string{
		"mcpstream.v1.catalog.*.search":  `{"v":1,"tools":[]}`,
		"mcpstream.v1.catalog.*.details": `{"v":1,"tools":[],"error":{"code":"not_found","message":"reached the catalog"}}`,
		"mcpstream.v1.approvals.*.*":     `{"v":1,"ok":false,"error":{"code":"bad_request","message":"reached the executor"}}`,
	} {
		if _, err := nc.Subscribe(subj, func(m *nats.Msg) { m.Respond([]byte(answer)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	commands := []struct {
		args    []string
		subject string
	}{
		{[]string{"search", "refund", "--timeout", "10s"}, "mcpstream.v1.catalog.local.search"},
		{[]string{"inspect", "kb__get_document", "--timeout", "10s"}, "mcpstream.v1.catalog.local.details"},
		{[]string{"approve", "c-1", "--wait", "10s"}, "mcpstream.v1.approvals.local.c-1"},
		{[]string{"deny", "c-1", "--wait", "10s"}, "mcpstream.v1.approvals.local.c-1"},
	}
	for _, c := range commands {
		for _, tt := range []struct{ user, denied string }{
			{"nopub", `Publish to "` + c.subject + `"`},
			{"nosub", `Subscription to "_INBOX.`},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			_, errOut, err := runCmd(t, ctx, append(c.args, "--nats", url(tt.user))...)
			cancel()
			if err == nil || !strings.Contains(err.Error(), "permissions violation") || !strings.Contains(err.Error(), tt.denied) {
				t.Errorf("%s as %s: %v (stderr %q), want the permissions violation for %s", c.args[0], tt.user, err, lastLines(errOut, 2), tt.denied)
			}
			if err != nil && strings.Contains(err.Error(), "x@") {
				t.Errorf("%s as %s: the error shows the URL's password: %v", c.args[0], tt.user, err)
			}
		}
	}
}

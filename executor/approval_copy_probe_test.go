package executor

import (
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestApprovalCopyProbeUnansweredWarned: an executor whose NATS user may not publish on the
// approvals subjects (approvers only, as the README's multi-tenant advice reads) gets no answer
// to copyWaits' probe: NATS drops it, and no "no responders" comes. A call delivered again that
// finds no approval place free then waits without one, whether or not a copy waits (after a
// rolling restart, every call a stopped executor handed back): more calls wait than
// --max-approval-waits, and that went unsaid. The executor now says so in a warning.
func TestApprovalCopyProbeUnansweredWarned(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true,
		Users: []*server.User{{Username: "exec", Password: "exec",
			Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"},
				Deny: []string{subjects.Root + ".approvals.>"}}}}}}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(waitLimit) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("exec", "exec"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var logs lockedBuffer
	ex, err := New(nc, Config{NoWorkers: true, FrontEnd: new(bool), Log: zerolog.New(&logs).Level(zerolog.InfoLevel)})
	if err != nil {
		t.Fatal(err)
	}
	c := &call{tenant: "acme", req: subjects.CallRequest{ID: "probe-denied"}, redelivered: true}
	if !ex.copyWaits(c) {
		t.Fatal("an unanswered probe said that no copy waits (a copy whose connection stalls may)")
	}
	got := logs.String()
	if !strings.Contains(got, `"level":"warn"`) || !strings.Contains(got, "probe-denied") || !strings.Contains(got, subjects.Approvals("acme", "probe-denied")) {
		t.Errorf("no warning naming the call and the approvals subject; logs:\n%s", got)
	}
}

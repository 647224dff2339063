package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A call handed back for redelivery (a transient JetStream failure: here its results stream,
// where an earlier answer is looked up, is gone) is logged with its subject redacted of the
// configured secret values, as a dropped one is: its tenant token is the caller's words.
func TestLogRedactsSecretInRedeliveredSubject(t *testing.T) {
	const secret = "Zq9s3cr3tV4lue"
	logs := &lockedBuffer{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}}, logTo: logs})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.env.JS.DeleteStream(ctx, subjects.ResultsStream); err != nil {
		t.Fatal(err)
	}
	if _, err := r.env.JS.Publish(ctx, subjects.Calls(secret), []byte(`{"id":"x","tool":"fixture__echo","principal":{"user":"u"}}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redelivered call's log line", func() bool {
		return strings.Contains(logs.String(), "call will be redelivered")
	})
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds the secret: %s", logs.String())
	}
}

// An audit event whose publish failed (its stream is gone) is logged with its subject redacted
// of the configured secret values: the subject's tenant token is the caller's words.
func TestLogRedactsSecretInAuditRetrySubject(t *testing.T) {
	const secret = "Zq9s3cr3tV4lue"
	logs := &lockedBuffer{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}}, logTo: logs})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.env.JS.DeleteStream(ctx, subjects.AuditStream); err != nil {
		t.Fatal(err)
	}
	if _, err := r.env.JS.Publish(ctx, subjects.Calls(secret), []byte(`{"id":"x","tool":"fixture__echo","principal":{"user":"u"}}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the audit retry's log line", func() bool {
		return strings.Contains(logs.String(), "audit event not stored yet")
	})
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds the secret: %s", logs.String())
	}
}

// secretPanicDispatcher panics with a value quoting the call's arguments (a connector's bug).
type secretPanicDispatcher struct{}

func (secretPanicDispatcher) Dispatch(_ context.Context, _ string, req subjects.DispatchRequest) subjects.DispatchReply {
	panic("connector bug on " + string(req.Arguments))
}

// A call whose handler panicked is logged with the panic's value and the subject redacted of
// the configured secret values: the value may quote the arguments, the subject the caller's
// words.
func TestLogRedactsSecretInPanic(t *testing.T) {
	const secret = "Zq9s3cr3tV4lue"
	logs := &lockedBuffer{}
	r := startRig(t, rigOptions{noExecutor: true, logTo: logs})
	r.startExecutor(r.managerConfig(Config{Dispatcher: secretPanicDispatcher{}, Secrets: []string{secret}}), r.env.NC)
	r.waitTool("ticketing__createIssue")
	r.call("local", "ticketing__createIssue", `{"title":"`+secret+`","body":"b","priority":"low"}`)
	waitFor(t, "the panic's log line", func() bool {
		return strings.Contains(logs.String(), "call handler panicked")
	})
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds the secret: %s", logs.String())
	}
}

// A rate counter's publish that failed (the limits stream is gone) is logged with its subject
// redacted of the configured secret values: the counter's subject holds the tenant token, the
// caller's words, as the audit retry's does.
func TestLogRedactsSecretInAsyncPublishSubject(t *testing.T) {
	const secret = "Zq9s3cr3tV4lue"
	logs := &lockedBuffer{}
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{secret}, Limits: Limits{Tenant: Rate{PerSecond: 100}}}, logTo: logs})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := r.env.JS.DeleteStream(ctx, subjects.LimitsStream); err != nil {
		t.Fatal(err)
	}
	if _, err := r.env.JS.Publish(ctx, subjects.Calls(secret), []byte(`{"id":"x","tool":"fixture__echo","arguments":{"text":"x"},"principal":{"user":"u"}}`)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed rate counter publish's log line", func() bool {
		return strings.Contains(logs.String(), "async publish failed")
	})
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds the secret: %s", logs.String())
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestRegistryMsgTTLOneWayWarned: turning allow_msg_ttl on, in place, on a registry stream an
// earlier mcpstream declared is a change JetStream cannot undo, and mcpstream builds from before
// the declaration kept it (before keepOperatorSettings) declare the stream without it: once
// it is on, every process of such a build that starts (a rollback, a role not yet upgraded that
// restarts during a rolling upgrade) stops with "message TTL status can not be disabled". Seen
// with the binaries of 150f7ea and 9a724df against a --data directory and a NATS server this
// version had declared the streams on. The declaration that turns it on says so in the log, once,
// naming the stream and what it means for earlier builds; a declaration that finds it on already,
// or creates the stream, says nothing.
func TestRegistryMsgTTLOneWayWarned(t *testing.T) {
	js := declareJS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old, _ := earlierRegistryStream(ctx, t, js)
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	if _, err := declareStreams(ctx, js, 0, &fileConfig{}, log); err != nil {
		t.Fatal(err)
	}
	// What such an earlier build's declaration now meets (it does not keep the setting).
	_, err := js.UpdateStream(ctx, old)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jsErrCodeStreamInvalidConfig {
		t.Fatalf("an earlier build's declaration after the change: %v, want JetStream's refusal (10052)", err)
	}
	got := logs.String()
	if strings.Count(got, "allow_msg_ttl") != 1 || !strings.Contains(got, `"level":"warn"`) ||
		!strings.Contains(got, subjects.RegistryStream) || !strings.Contains(got, "message TTL status can not be disabled") {
		t.Errorf("declaration that turned allow_msg_ttl on logged %q; want one warning naming the stream and what earlier builds then say", got)
	}
	// Declared again: it is on already, nothing more to say.
	logs.Reset()
	if _, err := declareStreams(ctx, js, 0, &fileConfig{}, log); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Errorf("second declaration logged %q, want nothing", logs.String())
	}
}

package executor

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestNoTenantFloodOneSubjectPair: requests on subjects with many distinct invalid tenant tokens
// (through the front end and straight on the calls stream) are each recorded by two audit
// events, request and decision, on the same two subjects (audit.~~.request, audit.~~.decision),
// whatever the token: a client cycling through bad tokens adds no subject to the audit stream
// (nor to the server's per-subject index). What bounds the events' volume is the audit stream's
// auditMaxBytes, as for any other request, refused or not (README, "Sizing the streams").
func TestNoTenantFloodOneSubjectPair(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	const n = 30
	for i := range n {
		var tok string
		switch i % 3 {
		case 0:
			tok = fmt.Sprintf("t~Z%d", i) // not an EncodeToken token
		case 1:
			tok = strings.Repeat("x", subjects.MaxUserBytes+1+i) // a tenant over its limit
		default:
			tok = fmt.Sprintf("a~%02X~", i) // an escape cut short
		}
		body := []byte(fmt.Sprintf(`{"id":"flood-%d","tool":"fixture__echo"}`, i))
		if i%2 == 0 {
			if err := r.env.NC.Publish(subjects.Root+".exec."+tok, body); err != nil {
				t.Fatal(err)
			}
		} else if _, err := r.env.JS.Publish(ctx, subjects.Root+".calls."+tok, body); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := r.env.JS.Stream(ctx, subjects.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	var info *jetstream.StreamInfo
	waitFor(t, "the flood's audit events", func() bool {
		info, err = stream.Info(ctx, jetstream.WithSubjectFilter(subjects.Root+".audit.>"))
		return err == nil && info.State.Msgs >= 2*n
	})
	if info.State.Msgs != 2*n {
		t.Errorf("got %d audit events, want %d (request and decision of each)", info.State.Msgs, 2*n)
	}
	want := map[string]uint64{subjects.AuditNoTenant(subjects.AuditRequest): n, subjects.AuditNoTenant(subjects.AuditDecision): n}
	if len(info.State.Subjects) != len(want) {
		t.Errorf("got %d audit subjects, want %d: %v", len(info.State.Subjects), len(want), info.State.Subjects)
	}
	for s, c := range want {
		if info.State.Subjects[s] != c {
			t.Errorf("subject %s holds %d events, want %d", s, info.State.Subjects[s], c)
		}
	}
}

package executor

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

func TestRedactJSON(t *testing.T) {
	r := newRedactor([]string{"hunter22", "ab"})
	cases := []struct {
		name, in, want string
		max            int
		truncated      bool
	}{
		{"sensitive keys", `{"user":"al","password":"p","nested":{"API_KEY":"k","list":[{"authToken":"t"}]}}`,
			`{"nested":{"API_KEY":"[redacted]","list":[{"authToken":"[redacted]"}]},"password":"[redacted]","user":"al"}`, 4096, false},
		{"secret values anywhere", `{"note":"pw is hunter22!","n":1.50}`, `{"n":1.50,"note":"pw is [redacted]!"}`, 4096, false},
		{"short values are not secrets", `{"note":"ab"}`, `{"note":"ab"}`, 4096, false},
		{"an object under a sensitive key is walked", `{"credentials":{"user":"u","secret":"s"}}`, `{"credentials":{"secret":"[redacted]","user":"u"}}`, 4096, false},
		{"a sensitive key spelled with escapes", `{"\u0074oken":"t0k","note":"x"}`, `{"note":"x","token":"[redacted]"}`, 4096, false},
		{"a sensitive key with a Kelvin sign", "{\"api_\u212aey\":\"k\"}", "{\"api_\u212aey\":\"[redacted]\"}", 4096, false},
		{"escaped text that spells no letter stays as it is", `{"text":"\u4e2d\u6587 \u003cok\u003e"}`, `{"text":"\u4e2d\u6587 \u003cok\u003e"}`, 4096, false},
		{"capped: a JSON string", `{"text":"aaaaaaaaaaaaaaaaaaaa"}`, `"{\"text\":\"aaaaaaa"`, 16, true},
		{"not JSON: a redacted string", `hunter22 {`, `"[redacted] {"`, 4096, true},
		{"empty", ``, ``, 4096, false},
		// Read only as far as needed; a value cut short is not shown at all.
		{"large: the kept start is redacted as it is read", `{"token":"t0k","note":"hunter22","password":"cut-here-and-more` + strings.Repeat(" ", 300),
			`"{\"token\":\"[redacted]\",\"note\":\"[redacted]\",\"password\":"`, 60, true},
		{"large: cut at the cap", `{"a":"` + strings.Repeat("x", 100) + `","token":"t0k"}`, `"{\"a\":\"` + strings.Repeat("x", 44) + `"`, 50, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, trunc := r.JSON([]byte(tc.in), tc.max)
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
			if tc.name != "not JSON: a redacted string" && trunc != tc.truncated {
				t.Errorf("got truncated=%v, want %v", trunc, tc.truncated)
			}
			if len(got) > 0 && !json.Valid(got) {
				t.Errorf("not valid JSON: %s", got)
			}
		})
	}
}

// Audit events carry redacted, capped arguments and results.
func TestAuditRedaction(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}, exec: Config{Secrets: []string{"s3cr3t-host"}, AuditBytes: 512}})
	res := r.call("local", "fixture__legacy", `{"host":"s3cr3t-host","port":5432,"api_key":"k-123456"}`)
	if res.Status != subjects.CallOK {
		t.Fatalf("got %s %+v", res.Status, res.Error)
	}
	var evs []subjects.AuditEvent
	waitFor(t, "audit events", func() bool { evs = r.auditEvents("local", res.ID); return hasResultEvent(evs) })
	all, _ := json.Marshal(evs)
	for _, secret := range []string{"s3cr3t-host", "k-123456"} {
		if strings.Contains(string(all), secret) {
			t.Errorf("audit events hold %q: %s", secret, all)
		}
	}
	if !strings.Contains(string(evs[0].Arguments), `"port":5432`) {
		t.Errorf("request event lost the arguments: %s", evs[0].Arguments)
	}
	// A large argument is capped.
	long := r.call("local", "fixture__echo", `{"text":"`+strings.Repeat("z", 5000)+`"}`)
	waitFor(t, "audit events", func() bool { evs = r.auditEvents("local", long.ID); return hasResultEvent(evs) })
	if !evs[0].Truncated || evs[0].ArgBytes < 5000 || len(evs[0].Arguments) > 600 {
		t.Errorf("got truncated=%v argBytes=%d len=%d, want a capped request event", evs[0].Truncated, evs[0].ArgBytes, len(evs[0].Arguments))
	}
	last := evs[len(evs)-1]
	if last.Type != "audit.result" || !last.Truncated || last.ResBytes < 5000 {
		t.Errorf("got %s truncated=%v resultBytes=%d, want a capped result event", last.Type, last.Truncated, last.ResBytes)
	}
}

func hasResultEvent(evs []subjects.AuditEvent) bool {
	return len(evs) > 0 && evs[len(evs)-1].Type == "audit."+subjects.AuditResult
}

// An audit event that cannot be stored is published again until it is: with the audit stream
// gone, a call still gets its answer at once, and once the stream is back every event of the
// call is there.
func TestAuditSurvivesStreamOutage(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var auditCfg jetstream.StreamConfig
	for _, c := range subjects.Streams(subjects.StreamOptions{}) {
		if c.Name == subjects.AuditStream {
			auditCfg = c
		}
	}
	if err := r.env.JS.DeleteStream(ctx, subjects.AuditStream); err != nil {
		t.Fatal(err)
	}
	res := r.call("local", "fixture__echo", `{"text":"while the audit stream is away"}`)
	if res.Status != subjects.CallOK {
		t.Fatalf("got %s %+v, want ok: audit never holds up a call", res.Status, res.Error)
	}
	// request, decision and result.
	waitFor(t, "failed audit publishes queued again", func() bool { return r.ex.Stats().AuditFailed >= 3 })
	if _, err := r.env.JS.CreateStream(ctx, auditCfg); err != nil {
		t.Fatal(err)
	}
	var evs []subjects.AuditEvent
	has := func(name string) bool {
		return slices.ContainsFunc(evs, func(ev subjects.AuditEvent) bool { return ev.Type == "audit."+name })
	}
	waitFor(t, "the call's audit events", func() bool {
		evs = r.auditEvents("local", res.ID)
		return has(subjects.AuditRequest) && has(subjects.AuditDecision) && has(subjects.AuditResult)
	})
	seen := map[string]int{}
	for _, ev := range evs {
		seen[ev.Type]++
	}
	if len(evs) != 3 {
		t.Errorf("got events %v, want one request, one decision and one result", seen)
	}
	if st := r.ex.Stats(); st.AuditDropped != 0 {
		t.Errorf("got %d audit events dropped, want 0", st.AuditDropped)
	}
}

// The auditor drops events only when its retry queue is full or when it stops before it can
// store them, and counts both.
func TestAuditDrops(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := env.JS.DeleteStream(ctx, subjects.AuditStream); err != nil {
		t.Fatal(err)
	}
	a, err := newAuditor(env.NC, newRedactor(nil), 4096, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	a.retry = make(chan *nats.Msg, 2)
	a.flushWait = 100 * time.Millisecond
	for range 3 {
		a.emit(subjects.AuditRequest, subjects.AuditEvent{Tenant: "local", CallID: "c1"})
	}
	waitFor(t, "three failed publishes", func() bool { return a.failed.Load() == 3 })
	if got := a.dropped.Load(); got != 1 {
		t.Fatalf("got %d dropped with the queue full, want 1", got)
	}
	// Stopping with the stream still away: the two queued events are given up after flushWait.
	stopped, stop := context.WithCancel(context.Background())
	stop()
	a.republish(stopped)
	if got := a.dropped.Load(); got != 3 {
		t.Errorf("got %d dropped after the stop, want 3", got)
	}
	if len(a.retry) != 0 {
		t.Errorf("%d events left in the queue", len(a.retry))
	}
}

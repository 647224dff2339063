package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// termClean reports the first rune of s (one terminal line or several) a terminal could act on:
// invalid UTF-8, a control character other than the line's newline, a format character.
func termClean(s string) (rune, bool) {
	if !utf8.ValidString(s) {
		return utf8.RuneError, false
	}
	for _, r := range s {
		if r != '\n' && termUnsafe(r) {
			return r, false
		}
	}
	return 0, true
}

// TestEventsHostileRegistryMessages: whatever is stored on a registry subject (not JSON, huge,
// invalid UTF-8, escape sequences, C1 and bidi characters, another version, a payload of another
// event than its subject's, a subject no event has), `events` prints one line for it, marks what
// mcpstream's consumers refuse as a bad payload, and puts nothing a terminal acts on on the
// screen; --json lines are valid UTF-8 JSON objects of the documented shape.
func TestEventsHostileRegistryMessages(t *testing.T) {
	env := natstest.Start(t)
	js := env.JS
	const esc = "\x1b[2J\x1b]0;pwned\x07"
	at := `"at":"2026-03-01T12:00:00Z"`
	msgs := []struct {
		subject string
		data    string
		bad     bool // consumers refuse it: shown as a bad payload
	}{
		{subjects.RegistryStatus("a"), "not json " + esc + "\u009b2J\u202e", true},
		{subjects.RegistryStatus("b"), `{"v":1,"type":"status","server":"b","status":"re` + "\xff" + `ady","reason":"` + "\u009b31m\u202egnp.exe \x7f" + `",` + at + `}`, false},
		{subjects.RegistryStatus("c"), `{"v":2,"type":"status","server":"c","status":"ready",` + at + `}`, true},
		// A status payload stored on a snapshot subject: the catalog and the executor refuse it
		// (DecodeRegistryMsg); it must not read as kb's status.
		{subjects.RegistrySnapshot("d", subjects.KindTools), `{"v":1,"type":"status","server":"d","status":"ready",` + at + `}`, true},
		// A snapshot of prompts on the tools subject.
		{subjects.RegistrySnapshot("d", subjects.KindTools), `{"v":1,"type":"snapshot","server":"d","kind":"prompts","fingerprint":"f","pages":1,"items":[]}`, true},
		{subjects.Root + ".registry.e.bogus", `{"v":1,"type":"status","server":"e","status":"ready",` + at + `}`, true},
		{subjects.RegistryStatus("f"), strings.Repeat("\x1b[A", 200_000), true},
		{subjects.RegistryStatus("g"), `{"v":1,"type":"status","server":"g","status":"ready","reason":"` + strings.Repeat("y\\u001b", 100_000) + `",` + at + `}`, false},
		{subjects.RegistryStatus("h"), `null`, true},
		// Another server, whose name the refusal quotes: C1 and bidi characters in it.
		{subjects.RegistryStatus("i"), `{"v":1,"type":"status","server":"` + "\u009b2J\u202e" + `","status":"ready",` + at + `}`, true},
	}
	for _, m := range msgs {
		publish(t, js, m.subject, []byte(m.data))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	out, _, err := runCmd(t, ctx, "events", "--nats", env.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := eventLines(t, out, len(msgs))
	for i, l := range lines {
		if bad := strings.Contains(l, "bad payload"); bad != msgs[i].bad {
			t.Errorf("message %d (%s): bad payload shown %v, want %v: %.300s", i+1, msgs[i].subject, bad, msgs[i].bad, l)
		}
		if len(l) > 1024 {
			t.Errorf("message %d: a %d-byte line", i+1, len(l))
		}
	}

	out, _, err = runCmd(t, ctx, "events", "--json", "--nats", env.URL)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := termClean(out); !ok {
		t.Errorf("--json output carries %U to the terminal", r)
	}
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(msgs) {
		t.Fatalf("--json: %d lines for %d messages", len(lines), len(msgs))
	}
	for i, l := range lines {
		var ev struct {
			Seq     uint64          `json:"seq"`
			Subject string          `json:"subject"`
			Time    string          `json:"time"`
			Event   json.RawMessage `json:"event"`
			Error   string          `json:"error"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Seq != uint64(i+1) || ev.Subject != msgs[i].subject || ev.Time == "" || len(ev.Event) == 0 {
			t.Errorf("--json line %d: %v: %.300q", i+1, err, l)
		}
		if bad := ev.Error != ""; bad != msgs[i].bad {
			t.Errorf("--json line %d (%s): error %q, want one: %v", i+1, msgs[i].subject, ev.Error, msgs[i].bad)
		}
	}
	// The payload keeps its JSON value: the reason of b, its C1 and bidi characters escaped.
	var b struct {
		Event struct{ Status, Reason string }
	}
	if err := json.Unmarshal([]byte(lines[1]), &b); err != nil || b.Event.Status != "re\ufffdady" || b.Event.Reason != "\u009b31m\u202egnp.exe \x7f" {
		t.Errorf("--json payload of b = %+v, %v", b.Event, err)
	}
}

// TestEventsHostileResults: results and audit payloads that are not JSON objects are shown as
// bad payloads, and a huge error message does not fill the screen.
func TestEventsHostileResults(t *testing.T) {
	env := natstest.Start(t)
	msgs := []struct {
		data string
		bad  bool
	}{
		{`null`, true},
		{`[1,2]`, true},
		{`"done"`, true},
		{`{"v":1,"id":"c3","status":"failed","error":{"code":"x","message":"` + strings.Repeat("m\\u001b", 50_000) + `"}}`, false},
		{"\xff\xfe\x1b[2J", true},
		{`{"v":1,"id":"c6","status":"done"}`, false},
	}
	for _, m := range msgs {
		publish(t, env.JS, subjects.Result("acme", "c1"), []byte(m.data))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := runCmd(t, ctx, "events", "--stream", "results", "--nats", env.URL)
	if err != nil {
		t.Fatal(err)
	}
	lines := eventLines(t, out, len(msgs))
	for i, l := range lines {
		if bad := strings.Contains(l, "bad payload"); bad != msgs[i].bad {
			t.Errorf("message %d: bad payload shown %v, want %v: %.300s", i+1, bad, msgs[i].bad, l)
		}
		if len(l) > 1024 || strings.Contains(l, "Go value") {
			t.Errorf("message %d: %.300s (%d bytes)", i+1, l, len(l))
		}
	}
}

// TestServersIgnoresMismatchedPayload: `servers` reads a registry message as its consumers do: a
// status payload stored on a snapshot subject does not become the server's status.
func TestServersIgnoresMismatchedPayload(t *testing.T) {
	env := natstest.Start(t)
	publish(t, env.JS, subjects.RegistryStatus("kb"), status("kb", subjects.StatusUnavailable, t0))
	publish(t, env.JS, subjects.RegistrySnapshot("kb", subjects.KindTools), status("kb", subjects.StatusReady, t0.Add(time.Minute)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := runCmd(t, ctx, "servers", "--json", "--nats", env.URL)
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct{ Name, Status string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].Status != subjects.StatusUnavailable {
		t.Errorf("servers --json = %s (%v); want kb unavailable", out, err)
	}
}

// eventLines is out's lines, which must be n and carry nothing a terminal acts on.
func eventLines(t *testing.T, out string, n int) []string {
	t.Helper()
	if r, ok := termClean(out); !ok {
		t.Errorf("text output carries %U to the terminal:\n%q", r, out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines for %d messages:\n%s", len(lines), n, out)
	}
	return lines
}

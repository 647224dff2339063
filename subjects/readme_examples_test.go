package subjects

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReadmePayloadExamples: the payload examples of README's NATS API section decode as the
// consumers decode them: registry events with DecodeRegistry, a CallRequest with Decode, a
// CallResult strictly (no member the type does not have).
func TestReadmePayloadExamples(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "Payload examples")
	_, block, ok2 := strings.Cut(sec, "```json\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no json block under Payload examples")
	}
	dec := json.NewDecoder(strings.NewReader(block))
	n := 0
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("example %d: %v", n+1, err)
		}
		n++
		var head struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		}
		_ = json.Unmarshal(raw, &head)
		switch {
		case head.Type != "":
			if _, err := DecodeRegistry(raw); err != nil {
				t.Errorf("registry example %s: %v", raw, err)
			}
		case head.Status != "":
			var r CallResult
			d := json.NewDecoder(bytes.NewReader(raw))
			d.DisallowUnknownFields()
			if err := d.Decode(&r); err != nil || r.V != Version {
				t.Errorf("CallResult example %s: %v (v %d)", raw, err, r.V)
			}
		default:
			var r CallRequest
			if err := Decode(raw, &r); err != nil || r.V != Version || r.ID == "" || r.Tool == "" {
				t.Errorf("CallRequest example %s: %v", raw, err)
			}
		}
	}
	if n < 8 {
		t.Errorf("%d payload examples decoded, fewer than README shows", n)
	}
}

// TestReadmeReplyFieldLists: the member lists README gives of a CallResult and of an AuditEvent
// (Calling tools), of an ApprovalReply and of a RelistReply (NATS API) name every member of the
// type, "v" included, and no other.
func TestReadmeReplyFieldLists(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	members := func(v any) []string {
		var m map[string]json.RawMessage
		data, _ := json.Marshal(v)
		_ = json.Unmarshal(data, &m)
		var names []string
		for n := range m {
			names = append(names, n)
		}
		slices.Sort(names)
		return names
	}
	named := regexp.MustCompile(`"([A-Za-z]+)"(?::|[,}])`)
	listed := func(text string) []string {
		var names []string
		for _, m := range named.FindAllStringSubmatch(text, -1) {
			if !slices.Contains(names, m[1]) {
				names = append(names, m[1])
			}
		}
		slices.Sort(names)
		return names
	}
	full := &Error{Code: "c", Message: "m"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		what, after, from, until string // the list: after after, from from, until until
		v                        any
	}{
		{"CallResult", "the one\nterminal CallResult ", "`", "`", CallResult{V: 1, ID: "i", Tenant: "t", Tool: "t", Status: "ok", Result: json.RawMessage(`{}`),
			Error: full, Attempts: 1, Duplicate: true, StartedAt: at, FinishedAt: at}},
		{"ApprovalReply", "`Approval` `{", "→ ", "; no responders", ApprovalReply{V: 1, OK: true, Error: full}},
		{"RelistReply", "`RelistRequest` `{", "→ ", " (re-list now", RelistReply{V: 1, Fingerprint: "f", Sequence: 1, ListedAt: at, Error: full}},
		{"AuditEvent", "Each is an `AuditEvent` `", "{", "` (a member", AuditEvent{V: 1, Type: "audit.result", CallID: "c", Tenant: "t", User: "u",
			Roles: []string{"r"}, Tool: "t", Server: "s", Decision: "ok", Code: "c", Message: "m", Arguments: json.RawMessage(`{}`),
			Result: json.RawMessage(`{}`), Truncated: true, ArgBytes: 1, ResBytes: 1, IsError: true, At: at}},
	} {
		_, text, ok := strings.Cut(readme, tc.after)
		_, text, ok1 := strings.Cut(text, tc.from)
		text, _, ok2 := strings.Cut(text, tc.until)
		if !ok || !ok1 || !ok2 {
			t.Fatalf("README has no %s member list", tc.what)
		}
		text = strings.ReplaceAll(text, `"error":{...}`, `"error"}`) // the error's own members are Error's
		if got, want := listed(text), members(tc.v); !slices.Equal(got, want) {
			t.Errorf("README lists the members of a %s as %q: %v, want %v", tc.what, text, got, want)
		}
	}
}

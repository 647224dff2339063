package subjects

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeRefusesAmbiguousMembers(t *testing.T) {
	for _, tc := range []struct {
		name, data, wantErr string
	}{
		{"plain", `{"v":1,"id":"a","tool":"s__t","arguments":{"Tool":1,"tool":2},"principal":{"user":"u"}}`, ""},
		{"unknown members pass", `{"id":"a","tool":"s__t","future":{"tool":1}}`, ""},
		{"escaped exact name", `{"id":"a","t\u006fol":"s__t"}`, ""},
		{"case variant", `{"id":"a","Tool":"s__t"}`, `member "Tool" is not a field (member names are case-sensitive): did you mean "tool"?`},
		{"case variant after the field", `{"id":"a","tool":"s__t","TOOL":"x__y"}`, `"TOOL"`},
		{"folded kelvin", "{\"id\":\"a\",\"tool\":\"s__t\",\"\u212Aey\":1,\"principal\":{\"u\u017Fer\":\"x\"}}", `"principal.uſer"`},
		{"duplicate", `{"id":"a","tool":"s__t","tool":"x__y"}`, `member "tool" appears twice`},
		{"nested duplicate", `{"id":"a","tool":"s__t","principal":{"user":"a","user":"b"}}`, `member "principal.user" appears twice`},
		{"nested case", `{"id":"a","tool":"s__t","principal":{"User":"b"}}`, `did you mean "principal.user"?`},
		{"null principal", `{"id":"a","tool":"s__t","principal":null}`, ""},
		{"time is not looked into", `{"id":"a","tool":"s__t","requestedAt":"2026-01-02T03:04:05Z"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var req CallRequest
			err := Decode([]byte(tc.data), &req)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted %s as %+v", tc.data, req)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
	// Not JSON at all: encoding/json's error.
	var a Approval
	if err := Decode([]byte(`{"approve":`), &a); err == nil {
		t.Fatal("truncated JSON accepted")
	}
	if err := Decode([]byte(`{"approve":false,"Approve":true}`), &a); err == nil {
		t.Fatal("approval with a case-variant member accepted")
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"id":"a","tool":"s__t","principal":{"user":"u","roles":["r"]}}`, `{"ID":1}`, `{"principal":{"Roles":[]}}`, `[]`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req CallRequest
		if Decode(data, &req) != nil {
			return
		}
		// Accepted: a case-sensitive reader takes the same tool and user.
		var tool *string
		var members map[string]json.RawMessage
		if json.Unmarshal(data, &members) != nil {
			t.Fatalf("accepted %q, which is no object", data)
		}
		_ = json.Unmarshal(members["tool"], &tool)
		if got := deref(tool); got != req.Tool {
			t.Fatalf("%q: tool %q, a case-sensitive reader takes %q", data, req.Tool, got)
		}
		var pm map[string]json.RawMessage
		if json.Unmarshal(members["principal"], &pm) == nil {
			var user *string
			_ = json.Unmarshal(pm["user"], &user)
			if got := deref(user); got != req.Principal.User {
				t.Fatalf("%q: user %q, a case-sensitive reader takes %q", data, req.Principal.User, got)
			}
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

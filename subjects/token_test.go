package subjects

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestEncodeToken(t *testing.T) {
	tests := []struct{ in, want string }{
		{"github", "github"},
		{"my-server_1", "my-server_1"},
		{"", "~"},
		{"a.b", "a~2Eb"},
		{"x*y>z", "x~2Ay~3Ez"},
		{"two words", "two~20words"},
		{"~", "~7E"},
		{"ü", "~C3~BC"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got := EncodeToken(tt.in)
			if got != tt.want {
				t.Fatalf("EncodeToken(%q) = %q, want %q", tt.in, got, tt.want)
			}
			back, err := DecodeToken(got)
			if err != nil || back != tt.in {
				t.Fatalf("DecodeToken(%q) = %q, %v; want %q", got, back, err, tt.in)
			}
		})
	}
}

func TestDecodeTokenRejects(t *testing.T) {
	for _, tok := range []string{"", "~2", "~ZZ", "a~", "~41" /* 'A' needs no escape */, "my~2eserver" /* hex digits are upper-case (README) */, "a.b", "a b"} {
		if _, err := DecodeToken(tok); !errors.Is(err, ErrBadToken) {
			t.Errorf("DecodeToken(%q) error = %v, want ErrBadToken", tok, err)
		}
	}
}

func TestTokenRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcXYZ019_-.*> ~/\\\t\u00e9\u4e2d\U0001F600")
	seen := map[string]string{}
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for j := r.IntN(12); j > 0; j-- {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		tok := EncodeToken(s)
		if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n") {
			t.Fatalf("EncodeToken(%q) = %q is not a valid token", s, tok)
		}
		if prev, ok := seen[tok]; ok && prev != s {
			t.Fatalf("collision: %q and %q both encode to %q", prev, s, tok)
		}
		seen[tok] = s
		back, err := DecodeToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip %q → %q → %q, %v", s, tok, back, err)
		}
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "a.b", "ü", "~7E"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := EncodeToken(s)
		back, err := DecodeToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip %q → %q → %q, %v", s, tok, back, err)
		}
		// Decoding arbitrary input never panics, and what decodes re-encodes to itself.
		if d, err := DecodeToken(s); err == nil && EncodeToken(d) != s {
			t.Fatalf("DecodeToken(%q) = %q re-encodes to %q", s, d, EncodeToken(d))
		}
	})
}

func TestAnswerable(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  bool
	}{
		{"_INBOX.acme.abc.1", true},
		{"_CUSTOM.inbox.x", true},
		{"mcpstreamer.x", true},
		{"", false},
		{Calls("globex"), false},
		{Result("globex", "c-1"), false},
		{RegistryStatus("kb"), false},
		{"mcpstream.v2.calls.globex", false},
		{"mcpstream", false},
		{"$KV.MCPSTREAM_SLOTS.tenant.globex.0", false},
		{"$JS.API.STREAM.DELETE.MCPSTREAM_AUDIT", false},
		{"$SYS.REQ.SERVER.PING", false},
	} {
		if got := Answerable(tc.reply); got != tc.want {
			t.Errorf("Answerable(%q) = %v, want %v", tc.reply, got, tc.want)
		}
	}
}

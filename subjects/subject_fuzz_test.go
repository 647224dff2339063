package subjects

import (
	"errors"
	"strings"
	"testing"
)

// tokenByte reports whether c may appear in a token EncodeToken makes: never '.', '*', '>',
// white space or any other byte a NATS subject token or a header value could mistake.
func tokenByte(c byte) bool { return safe(c) || c == '~' }

// checkTokens fails unless subject is a literal NATS subject with no empty token, each made of
// the bytes EncodeToken writes (mcpstream's fixed tokens are made of them too).
func checkTokens(t *testing.T, subject string) {
	t.Helper()
	if len(subject) == 0 || strings.HasPrefix(subject, ".") || strings.HasSuffix(subject, ".") || strings.Contains(subject, "..") {
		t.Fatalf("subject %q has an empty token", subject)
	}
	for _, tok := range strings.Split(subject, ".") {
		for i := 0; i < len(tok); i++ {
			if !tokenByte(tok[i]) {
				t.Fatalf("subject %q: token %q holds %q", subject, tok, tok[i])
			}
		}
	}
}

// FuzzSubjects: for any names, the subjects built from them are valid NATS subjects of the
// expected number of tokens, the parsers give the names back, and two different names never
// give one token.
func FuzzSubjects(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""}, {"kb", "c-1"}, {"a.b", "a~2Eb"}, {"~", "~7E"}, {"%2E", "."}, {"*", ">"}, {" ", "\t"},
		{"ü", "\xc3"}, {"\xff", "\uFFFD"}, {"a\x00b", "a"}, {"~~", "~"}, {"~2E", "."}, {"acme", "acme.x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, tb := EncodeToken(a), EncodeToken(b)
		if (ta == tb) != (a == b) {
			t.Fatalf("EncodeToken(%q) = %q, EncodeToken(%q) = %q", a, ta, b, tb)
		}
		for _, s := range []string{RegistrySnapshot(a, KindTools), RegistryChanged(a, KindPrompts), RegistryConfirmed(a, KindResources),
			RegistryStatus(a), RegistryRevoked(a), Calls(a), Exec(a), Result(a, b), Audit(a, b), AuditNoTenant(b),
			Approvals(a, b), Relist(a), Dispatch(a), HeartbeatSubject(a), CatalogSearch(a), CatalogDetails(a),
			CatalogServers(a), LimitWindow(a, b, -1)} {
			checkTokens(t, s)
		}
		for _, k := range Kinds {
			for ev, s := range map[string]string{EventSnapshot: RegistrySnapshot(a, k), EventChanged: RegistryChanged(a, k), EventConfirmed: RegistryConfirmed(a, k)} {
				if rs, err := ParseRegistry(s); err != nil || rs != (RegistrySubject{Server: a, Event: ev, Kind: k}) {
					t.Fatalf("ParseRegistry(%q) = %+v, %v", s, rs, err)
				}
			}
		}
		for ev, s := range map[string]string{EventStatus: RegistryStatus(a), EventRevoked: RegistryRevoked(a)} {
			if rs, err := ParseRegistry(s); err != nil || rs != (RegistrySubject{Server: a, Event: ev}) {
				t.Fatalf("ParseRegistry(%q) = %+v, %v", s, rs, err)
			}
		}
		for _, s := range []string{Calls(a), Exec(a), Result(a, b), Audit(a, b), CatalogSearch(a), CatalogDetails(a), CatalogServers(a)} {
			tn, err := TenantOf(s)
			switch {
			case a == "" || len(a) > MaxUserBytes:
				if !errors.Is(err, ErrBadSubject) {
					t.Fatalf("TenantOf(%q) = %q, %v; want ErrBadSubject", s, tn, err)
				}
			case err != nil || tn != a:
				t.Fatalf("TenantOf(%q) = %q, %v; want %q", s, tn, err, a)
			}
		}
		if tn, err := TenantOf(AuditNoTenant(b)); err == nil {
			t.Fatalf("TenantOf(%q) = %q: the no-tenant token is some tenant's", AuditNoTenant(b), tn)
		}
		for want, s := range map[string]string{b: Approvals(a, b), a: Relist(a)} {
			if got, err := LastToken(s); err != nil || got != want {
				t.Fatalf("LastToken(%q) = %q, %v; want %q", s, got, err, want)
			}
		}
		if got, err := LastToken(Dispatch(a)); err != nil || got != a {
			t.Fatalf("LastToken(%q) = %q, %v; want %q", Dispatch(a), got, err, a)
		}
		// Message ids: the tenant and the id never run into each other.
		if (CallMsgID(a, b) == CallMsgID(b, a)) != (a == b) || (ResultMsgID(a, b) == ResultMsgID(b, a)) != (a == b) {
			t.Fatalf("CallMsgID(%q, %q) and its swap: %q, %q", a, b, CallMsgID(a, b), CallMsgID(b, a))
		}
	})
}

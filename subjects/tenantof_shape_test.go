package subjects

import (
	"errors"
	"testing"
)

// TestTenantOfShape: TenantOf takes only the documented shapes — calls.<tenant>,
// exec.<tenant>, results.<tenant>.<callID>, audit.<tenant>.<event>, catalog.<tenant>.<op> — and
// refuses any other token count (ErrBadSubject and ErrSubjectTokens): the calls stream captures
// calls.>, so a call on calls.<tenant>.x would otherwise run as that tenant's.
func TestTenantOfShape(t *testing.T) {
	for _, s := range []string{Calls("a.b"), Exec("a.b"), Result("a.b", "id"), Audit("a.b", AuditRequest),
		CatalogSearch("a.b"), CatalogDetails("a.b"), CatalogServers("a.b")} {
		if tn, err := TenantOf(s); err != nil || tn != "a.b" {
			t.Errorf("TenantOf(%q) = %q, %v; want %q", s, tn, err, "a.b")
		}
	}
	for _, s := range []string{
		Calls("acme") + ".x", Calls("acme") + ".x.y", Calls("acme") + ".",
		Exec("acme") + ".x",
		Root + ".results.acme", Result("acme", "id") + ".x",
		Root + ".audit.acme", Audit("acme", AuditRequest) + ".x",
		Root + ".catalog.acme", CatalogSearch("acme") + ".x",
	} {
		if tn, err := TenantOf(s); !errors.Is(err, ErrBadSubject) || !errors.Is(err, ErrSubjectTokens) {
			t.Errorf("TenantOf(%q) = %q, %v; want ErrBadSubject and ErrSubjectTokens", s, tn, err)
		}
	}
	// A bad tenant token is still that (not a token count).
	if _, err := TenantOf(Root + ".calls.a~ZZ"); !errors.Is(err, ErrBadSubject) || errors.Is(err, ErrSubjectTokens) {
		t.Errorf("TenantOf of a bad token: %v; want ErrBadSubject alone", err)
	}
}

package subjects

import (
	"strings"
	"testing"
)

// TestCheckTenantAgreesWithTenantOf: the clients' bound on a tenant (CheckTenant) is the one
// the services read subjects with (TenantOf), at every length around it and escaped or not, the
// empty tenant (no tenant: token "~") refused by both, and
// the refusal the clients give in the services' words (TenantRefusal) is bounded (the subject is
// cut in it) and says why.
func TestCheckTenantAgreesWithTenantOf(t *testing.T) {
	for _, c := range []string{"t", "."} {
		for _, n := range []int{0, 1, MaxUserBytes - 1, MaxUserBytes, MaxUserBytes + 1, 3 * MaxUserBytes} {
			tenant := strings.Repeat(c, n)
			_, err := TenantOf(Exec(tenant))
			checked := CheckTenant(tenant)
			if (err == nil) != (checked == nil) {
				t.Errorf("%d × %q: TenantOf %v, CheckTenant %v; want both to accept it or both to refuse it", n, c, err, checked)
			}
			e := TenantRefusal(CatalogSearch(tenant))
			if (e == nil) != (checked == nil) {
				t.Errorf("%d × %q: TenantRefusal %v, CheckTenant %v", n, c, e, checked)
			}
			if e != nil && checked != nil && (e.Code != CodeBadRequest || len(e.Message) > 1200 || !strings.Contains(e.Message, checked.Message)) {
				t.Errorf("%d × %q: TenantRefusal %s (%d bytes); want bad_request, cut, saying why as CheckTenant does", n, c, e.Code, len(e.Message))
			}
		}
	}
}

package subjects

import (
	"strings"
	"testing"
)

func TestPrincipalCheck(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	roles := func(n int) []string { return make([]string, n) }
	for _, tc := range []struct {
		name string
		p    Principal
		ok   bool
	}{
		{"empty", Principal{}, true},
		{"at the limits", Principal{Tenant: long(MaxUserBytes), User: long(MaxUserBytes), Roles: append(roles(MaxRoles-1), long(MaxRoleBytes))}, true},
		{"tenant too long", Principal{Tenant: long(MaxUserBytes + 1)}, false},
		{"user too long", Principal{User: long(MaxUserBytes + 1)}, false},
		{"too many roles", Principal{User: "u", Roles: roles(MaxRoles + 1)}, false},
		{"a role too long", Principal{User: "u", Roles: []string{"a", long(MaxRoleBytes + 1)}}, false},
	} {
		err := tc.p.Check()
		if (err == nil) != tc.ok {
			t.Errorf("%s: got %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && (err.Code != CodeBadRequest || len(err.Message) > 200) {
			t.Errorf("%s: got %+v, want a short bad_request", tc.name, err)
		}
	}
}

package executor

import "testing"

func TestDuplicateMember(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		dup      bool
	}{
		{`{}`, "", false},
		{`{"path":"/safe","PATH":"/etc/passwd"}`, "", false}, // distinct members (JSON Schema, MCP)
		{`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, "", false},
		{`{"path":"/safe","path":"/etc/passwd"}`, "/path", true},
		{`{"p\u0061th":"/safe","path":"/etc/passwd"}`, "/path", true}, // one name, two spellings
		{`{"a":{"b":[0,{"c":1,"c":2}]}}`, "/a/b/1/c", true},
		{`{"x/y~z":{"k":1,"k":1}}`, "/x~1y~0z/k", true},
		{`[{"a":1},{"a":1,"a":1}]`, "/1/a", true},
		{`"s"`, "", false},
	} {
		got, dup := duplicateMember([]byte(tc.in))
		if got != tc.want || dup != tc.dup {
			t.Errorf("%s: got %q %v, want %q %v", tc.in, got, dup, tc.want, tc.dup)
		}
	}
}

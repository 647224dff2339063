package main

import (
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/natstest"
)

// TestPolicyEncodedPublicNameWarns: a rule whose pattern is an encoded public name copied from
// `mcpstream search` (patterns match the ORIGINAL server and tool names) matched nothing, and
// nothing said so: a deny that denied nothing. The role starts all the same (an original name
// may have that shape) and warns at load, naming the rule and pointing to mcpstream inspect.
func TestPolicyEncodedPublicNameWarns(t *testing.T) {
	y := "servers: []\npolicy:\n  rules:\n    - name: no deletes\n      allow: [\"*\"]\n      deny: [\"my_server___delete_all_1a2b3c4d5e\", \"files__rm*\"]\n"
	p := startExecutorRole(t, natstest.Start(t), y)
	waitFor(t, "the warning about the encoded public name", 600, func() bool {
		out := p.errOut.String()
		return strings.Contains(out, "rule 1 (no deletes)") && strings.Contains(out, "my_server___delete_all_1a2b3c4d5e") &&
			strings.Contains(out, "ORIGINAL server and tool names") && strings.Contains(out, "mcpstream inspect my_server___delete_all_1a2b3c4d5e")
	})
	if strings.Contains(p.errOut.String(), "files__rm*") {
		t.Errorf("warned about a pattern of original names:\n%s", p.errOut.String())
	}
}

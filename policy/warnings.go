package policy

import (
	"fmt"

	"github.com/mcpstream/mcpstream/subjects"
)

// Warning is a pattern of a configuration that New accepts but that likely does not do what
// was meant. The configuration is not refused: the pattern may be meant as written.
type Warning struct {
	Rule    string // "rule 2 (no deletes)", or "rule 2" for a rule without a name
	Field   string // allow, deny or approve
	Pattern string
	Msg     string // what is wrong and what to do
}

// String is the warning as one line: "rule 2 (no deletes): deny pattern "...": Msg".
func (w Warning) String() string {
	return fmt.Sprintf("%s: %s pattern %q: %s", w.Rule, w.Field, w.Pattern, w.Msg)
}

// Warnings lists the patterns of cfg that have the exact shape of an encoded public name
// (subjects.LooksEncoded: what `mcpstream search` prints for a server or tool name too long or
// with other characters, "srv___tool_1a2b3c4d5e"). Patterns match the ORIGINAL server and tool
// names, so such a pattern copied from search output matches no tool: a deny that denies
// nothing. An original name may have that shape, so it is only warned of. A nil cfg (the open
// policy) has none.
func Warnings(cfg *Config) []Warning {
	if cfg == nil {
		return nil
	}
	var ws []Warning
	for i, r := range cfg.Rules {
		rule := fmt.Sprintf("rule %d", i+1)
		if r.Name != "" {
			rule += " (" + r.Name + ")"
		}
		for _, list := range []struct {
			field    string
			patterns []string
		}{{"allow", r.Allow}, {"deny", r.Deny}, {"approve", r.Approve}} {
			for _, pat := range list.patterns {
				if !subjects.LooksEncoded(pat) {
					continue
				}
				ws = append(ws, Warning{Rule: rule, Field: list.field, Pattern: pat, Msg: fmt.Sprintf(
					"has the shape of an encoded public name (as search prints a server or tool name too long or with other characters), "+
						"but patterns match the ORIGINAL server and tool names: as an encoded name it matches no tool. "+
						"`mcpstream inspect %s` shows its original server and tool: write the pattern as server__tool with those",
					pat)})
			}
		}
	}
	return ws
}

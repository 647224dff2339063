package policy

import (
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// TestWarningsEncodedPublicName: patterns match the ORIGINAL server and tool names. An operator
// who copied an encoded public name from search output into a rule got a rule that matches
// nothing (a deny that denies nothing), silently. The configuration is still accepted (an
// original name may have that shape), but Warnings names the rule and the pattern, says that
// patterns match original names and points to mcpstream inspect.
func TestWarningsEncodedPublicName(t *testing.T) {
	enc := subjects.PublicName("my server", "delete everything")
	cfg := &Config{Rules: []Rule{
		{Name: "reads", Allow: []string{"files__*", "github__search*"}},
		{Name: "no deletes", Allow: []string{"*"}, Deny: []string{"files__rm", enc}},
		{Approve: []string{"srv___tool_1a2b3c4d5e", "srv___tool_*"}},
	}}
	if _, err := New(cfg); err != nil {
		t.Fatalf("New: %v (a pattern of that shape may be an original name: kept)", err)
	}
	ws := Warnings(cfg)
	if len(ws) != 2 {
		t.Fatalf("warnings %q: want two (the deny of rule 2, the approve of rule 3)", ws)
	}
	for i, want := range []struct{ rule, field, pattern string }{
		{"rule 2 (no deletes)", "deny", enc}, {"rule 3", "approve", "srv___tool_1a2b3c4d5e"},
	} {
		w := ws[i]
		if w.Rule != want.rule || w.Field != want.field || w.Pattern != want.pattern {
			t.Errorf("warning %d = %+v, want %+v", i, w, want)
		}
		s := w.String()
		for _, part := range []string{want.rule, want.field, `"` + want.pattern + `"`, "ORIGINAL server and tool names", "mcpstream inspect " + want.pattern} {
			if !strings.Contains(s, part) {
				t.Errorf("warning %q does not say %q", s, part)
			}
		}
	}
	if ws := Warnings(nil); ws != nil {
		t.Errorf("open policy: warnings %q", ws)
	}
}

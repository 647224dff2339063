package policy

import (
	"fmt"
	"slices"
	"strings"

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

// Warnings lists the patterns of cfg that New accepts but that likely do not do what was meant:
//
//   - a pattern with the exact shape of an encoded public name (subjects.LooksEncoded: what
//     `mcpstream search` prints for a server or tool name too long or with other characters,
//     "srv___tool_1a2b3c4d5e"). Patterns match the ORIGINAL server and tool names, so such a
//     pattern copied from search output matches no tool: a deny that denies nothing. An
//     original name may have that shape, so it is only warned of;
//   - a glob without "__" that can match no server__tool name ("github?", "gith[u]b"), which
//     NoToolPart lets through for its glob character (see noServerTool);
//   - a class "[!...]", the shell's negation, which here is a class holding '!' (see bangClass).
//
// The last two were accepted in silence (a deny written so denied nothing, or not what was
// meant); they are warned of, not refused, so that a configuration that loaded still loads.
// A nil cfg (the open policy) has none.
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
				warn := func(msg string) {
					ws = append(ws, Warning{Rule: rule, Field: list.field, Pattern: pat, Msg: msg})
				}
				if subjects.LooksEncoded(pat) {
					warn(fmt.Sprintf(
						"has the shape of an encoded public name (as search prints a server or tool name too long or with other characters), "+
							"but patterns match the ORIGINAL server and tool names: as an encoded name it matches no tool. "+
							"`mcpstream inspect %s` shows its original server and tool: write the pattern as server__tool with those",
						pat))
				}
				if !ValidPattern(pat) {
					continue // (refused by New)
				}
				if noServerTool(pat) {
					warn(`matches no tool: it has no "__" and cannot match the one every server__tool name holds ` +
						`between a server and a tool (each of its characters, classes and '?' matches one character): ` +
						`patterns are server__tool globs ("github__*": every tool of server github)`)
				}
				if bangClass(pat) {
					warn(`holds a class "[!...]", which matches '!' or the other characters listed: ` +
						`the negation of a class is "[^...]" ("[^r]*": any name not starting with r)`)
				}
			}
		}
	}
	return ws
}

// noServerTool reports whether pat, a valid pattern without "__", can match no server__tool
// name: MatchTool compares such a pattern with the whole name, which holds "__" with at least
// one character before it (a server is never empty) and one after (nor is a tool). Without '*'
// each element of pat (a byte, an escaped byte, '?', a class) matches one character, so it
// matches such a name only if two elements next to each other, neither the first nor the last,
// can both match '_'. Any '*' can stand for "x__y": such a pattern is not reported, nor one
// with "__" (matched part by part; see emptyPart for the empty parts New refuses).
func noServerTool(pat string) bool {
	if strings.Contains(pat, "__") {
		return false
	}
	elems := globElements(pat)
	if slices.Contains(elems, "*") {
		return false
	}
	for i := 1; i+2 < len(elems); i++ {
		if Match(elems[i], "_") && Match(elems[i+1], "_") {
			return false
		}
	}
	return true
}

// bangClass reports whether pat holds a class opening with '!' ("[!r]"): in a shell that is
// "anything but r", here the class of '!' and 'r' (the negation is '^', as path.Match has it).
func bangClass(pat string) bool {
	for _, e := range globElements(pat) {
		if strings.HasPrefix(e, "[!") {
			return true
		}
	}
	return false
}

// globElements splits a valid glob (see ValidPattern) into the elements glob matches one at a
// time: "*" for a run of stars, a class "[...]" whole, '?', an escaped byte `\x`, any other
// byte alone.
func globElements(pat string) []string {
	var elems []string
	for i := 0; i < len(pat); {
		n := 1
		switch pat[i] {
		case '*':
			for i+n < len(pat) && pat[i+n] == '*' {
				n++
			}
		case '\\':
			n = min(2, len(pat)-i)
		case '[':
			n = classLen(pat[i:])
		}
		elems = append(elems, pat[i:i+n])
		i += n
	}
	return elems
}

// classLen is the length of the class at the start of pat ("[^a-z]x": 6), as matchChunk reads
// it: its first item is never its end (a ']' there is a bad pattern), a backslash escapes a byte, and
// the first ']' after that ends it. All of pat when it never ends (not a valid pattern).
func classLen(pat string) int {
	i := 1
	if i < len(pat) && pat[i] == '^' {
		i++
	}
	for first := true; i < len(pat); i++ {
		switch {
		case pat[i] == '\\':
			i++
		case pat[i] == ']' && !first:
			return i + 1
		}
		first = false
	}
	return len(pat)
}

package executor

import (
	"slices"
	"strconv"

	"github.com/mcpstream/mcpstream/jsonscan"
)

// duplicateMember returns the JSON pointer of the first member of v (valid JSON, nesting
// bounded by the caller) named twice in its object, and true; false when no object of v names
// a member twice.
//
// Readers of such an object disagree: the validator (like encoding/json, JavaScript and Python)
// takes the last value, a first-wins reader (gjson and other streaming parsers) the first. As
// the arguments go to the server as they came, a value the inputSchema never saw could reach a
// tool. RFC 8259 asks names to be unique (I-JSON requires it), so such arguments are refused
// rather than guessed at. Names that differ only in case are distinct members, as for JSON
// Schema and MCP.
func duplicateMember(v []byte) (string, bool) {
	var rev []string // the pointer's tokens, innermost first, built once a duplicate is found
	if !duplicateIn(v, &rev) {
		return "", false
	}
	slices.Reverse(rev)
	return pointer(rev), true
}

func duplicateIn(v []byte, rev *[]string) bool {
	if len(v) == 0 {
		return false
	}
	found := false
	switch v[0] {
	case '{':
		var seen map[string]bool
		jsonscan.Members(v, func(raw, value []byte) {
			if found {
				return
			}
			name, ok := jsonscan.Name(raw)
			if !ok {
				return
			}
			if seen == nil {
				seen = map[string]bool{}
			}
			if seen[name] || duplicateIn(value, rev) {
				*rev = append(*rev, name)
				found = true
				return
			}
			seen[name] = true
		})
	case '[':
		i := 0
		jsonscan.Elements(v, func(value []byte) {
			if !found && duplicateIn(value, rev) {
				*rev = append(*rev, strconv.Itoa(i))
				found = true
			}
			i++
		})
	}
	return found
}

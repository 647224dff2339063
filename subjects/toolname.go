package subjects

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
)

// MaxPublicName is the longest public tool name (the limit of model providers' tool names).
const MaxPublicName = 64

// Reserved meta-tool names: no public tool name can equal them (public names always hold "__").
var Reserved = []string{"search_tools", "get_tool_details", "call_tool", "run_code"}

var (
	publicNameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	plainServer  = regexp.MustCompile(`^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$`)
	plainTool    = regexp.MustCompile(`^[A-Za-z0-9-][A-Za-z0-9_-]*$`)
)

// ValidPublicName reports whether s has the form every public name has: ^[a-zA-Z0-9_-]{1,64}$.
func ValidPublicName(s string) bool { return publicNameRe.MatchString(s) }

// PublicName is the namespaced name a model sees for tool on server: always "server__tool".
//
// When the server name is made of [A-Za-z0-9-] words joined by single '_', the tool name is made
// of [A-Za-z0-9_-] and does not start with '_', and the whole fits in 64 characters, the name is
// plain: server + "__" + tool. Otherwise it is encoded: the sanitized server (at most 20
// characters), "___", the sanitized tool (shortened to fit), "_" and 10 hex digits of a SHA-256
// of the exact pair. A plain name's tool part never starts with '_', so encoded and plain names
// never meet, and distinct pairs give distinct names (up to a 40-bit hash collision among
// encoded names, which the catalog detects). The catalog keeps the way back to the exact pair.
func PublicName(server, tool string) string {
	if len(server)+2+len(tool) <= MaxPublicName && plainServer.MatchString(server) && plainTool.MatchString(tool) {
		return server + "__" + tool
	}
	// Length-prefixed, so no two pairs hash the same input (a NUL inside a name is no separator).
	sum := sha256.Sum256([]byte(strconv.Itoa(len(server)) + ":" + server + tool))
	h := hex.EncodeToString(sum[:5])
	s := sanitize(server, 20)
	room := MaxPublicName - len(s) - 3 - 1 - len(h)
	t := sanitize(tool, room)
	return s + "___" + t + "_" + h
}

// sanitize maps s to [A-Za-z0-9-] words joined by single '_', at most max bytes, never ending
// in '_'.
func sanitize(s string, max int) string {
	var b strings.Builder
	under := true // suppress leading '_'
	for _, r := range s {
		if b.Len() >= max {
			break
		}
		switch {
		case r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'):
			b.WriteRune(r)
			under = false
		default:
			if !under {
				b.WriteByte('_')
				under = true
			}
		}
	}
	return strings.TrimRight(b.String(), "_")
}

// encodedShape is the shape of an encoded public name (see PublicName): a sanitized server,
// "___", a sanitized tool, "_" and 10 lowercase hex digits.
var encodedShape = regexp.MustCompile(`^((?:[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*)?)___(?:[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*)?_[0-9a-f]{10}$`)

// LooksEncoded reports whether name has the exact shape of an encoded public name (one that
// PublicName had to encode: a pair too long or with other characters), whose server and tool are
// not the original ones. Plain public names never have it; an original name may.
func LooksEncoded(name string) bool {
	if len(name) > MaxPublicName {
		return false
	}
	m := encodedShape.FindStringSubmatch(name)
	return m != nil && len(m[1]) <= 20
}

// SplitPlain splits a plain public name at its first "__". It reports false for encoded names,
// whose way back is only in the catalog.
func SplitPlain(name string) (server, tool string, ok bool) {
	server, tool, ok = strings.Cut(name, "__")
	if !ok || !plainServer.MatchString(server) || !plainTool.MatchString(tool) {
		return "", "", false
	}
	return server, tool, true
}

package subjects

import (
	"fmt"
	"strings"
)

const hexDigits = "0123456789ABCDEF"

// EncodeToken makes any string safe as one NATS subject token, reversibly: ASCII letters, digits,
// '_' and '-' pass through; every other byte (including '.', '*', '>', spaces, '~' and the bytes
// of non-ASCII characters) becomes '~' followed by two upper-case hex digits. The empty string
// encodes as "~" alone. The encoding is injective, so distinct names give distinct tokens.
func EncodeToken(s string) string {
	if s == "" {
		return "~"
	}
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safe(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('~')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// DecodeToken reverses EncodeToken. It rejects tokens EncodeToken never produces.
func DecodeToken(tok string) (string, error) {
	if tok == "~" {
		return "", nil
	}
	if tok == "" {
		return "", fmt.Errorf("%w: empty", ErrBadToken)
	}
	if plain(tok) {
		return tok, nil
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if safe(c) {
			b.WriteByte(c)
			continue
		}
		if c != '~' || i+2 >= len(tok) {
			return "", fmt.Errorf("%w: %q", ErrBadToken, tok)
		}
		h, l := unhex(tok[i+1]), unhex(tok[i+2])
		if h < 0 || l < 0 {
			return "", fmt.Errorf("%w: %q", ErrBadToken, tok)
		}
		v := byte(h<<4 | l)
		if safe(v) {
			return "", fmt.Errorf("%w: %q: needless escape", ErrBadToken, tok)
		}
		b.WriteByte(v)
		i += 2
	}
	// Names are UTF-8 in MCP, but the encoding is of bytes: invalid UTF-8 round-trips too.
	return b.String(), nil
}

func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if !safe(s[i]) {
			return false
		}
	}
	return true
}

func safe(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

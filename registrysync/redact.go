package registrysync

import (
	"bytes"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// redacted replaces a secret in anything published or logged.
const redacted = "[redacted]"

// redactor removes a server's secrets from text: every ServerConfig.Secrets value, the values of
// credential-looking headers (Authorization, Cookie, *token*, *key*, *secret*...) and the
// password of a URL's user info. Longer secrets are replaced first so that one secret containing
// another is removed whole.
type redactor struct {
	r *strings.Replacer
	// forms are the byte sequences that reveal a secret in JSON text: each value as is and
	// as JSON escapes it.
	forms [][]byte
}

func newRedactor(sc ServerConfig) redactor {
	var secrets []string
	add := func(s string) {
		if len(s) >= 3 { // shorter values would shred ordinary text
			secrets = append(secrets, s)
		}
	}
	for _, s := range sc.Secrets {
		add(s)
	}
	for k, v := range sc.Headers {
		if sensitiveName(k) {
			add(v)
			// "Bearer xyz": the token alone may appear in errors too.
			if _, tok, ok := strings.Cut(v, " "); ok {
				add(strings.TrimSpace(tok))
			}
		}
	}
	for k, v := range sc.Env {
		if sensitiveName(k) {
			add(v)
		}
	}
	if u, err := url.Parse(sc.URL); err == nil {
		if u.User != nil {
			if p, ok := u.User.Password(); ok {
				add(p)
			}
		}
		// ?api_key=...: the URL appears in transport errors, raw or decoded.
		for _, kv := range strings.Split(u.RawQuery, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if dk, err := url.QueryUnescape(k); err == nil {
				k = dk
			}
			if !sensitiveName(k) {
				continue
			}
			add(v)
			if dv, err := url.QueryUnescape(v); err == nil {
				add(dv)
			}
		}
	}
	if len(secrets) == 0 {
		return redactor{}
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, redacted)
	}
	red := redactor{r: strings.NewReplacer(pairs...)}
	for _, s := range secrets {
		red.forms = append(red.forms, []byte(s))
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(s) == nil {
			if esc := bytes.TrimSuffix(bytes.TrimSpace(b.Bytes()), []byte(`"`)); len(esc) > 1 && !bytes.Equal(esc[1:], []byte(s)) {
				red.forms = append(red.forms, esc[1:])
			}
		}
		if esc, err := json.Marshal(s); err == nil && !bytes.Equal(esc[1:len(esc)-1], []byte(s)) {
			red.forms = append(red.forms, esc[1:len(esc)-1])
		}
	}
	return red
}

// JSON returns raw (valid JSON: a result or a definition a server sent) with every secret
// value in its strings and keys replaced by [redacted]; raw itself, unchanged, when it holds
// none (the common case, checked without decoding). A server that echoes its own credential
// (in an error text, a debug tool, a description) never hands it to a caller or the catalog.
// changed reports a replacement; the document is then re-encoded (same values, keys sorted).
func (r redactor) JSON(raw []byte) (out []byte, changed bool) {
	found := false
	for _, f := range r.forms {
		if bytes.Contains(raw, f) {
			found = true
			break
		}
	}
	if !found {
		return raw, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		// Not JSON after all: text, redacted as text.
		return []byte(r.String(string(raw))), true
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r.walk(v)); err != nil {
		return []byte(r.String(string(raw))), true
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), true
}

func (r redactor) walk(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[r.String(k)] = r.walk(val)
		}
		return out
	case []any:
		for i := range x {
			x[i] = r.walk(x[i])
		}
		return x
	case string:
		return r.String(x)
	}
	return v
}

func sensitiveName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"authorization", "cookie", "token", "secret", "password", "passwd", "key", "credential", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// String redacts s.
func (r redactor) String(s string) string {
	if r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

// Err redacts an error's text ("" for nil).
func (r redactor) Err(err error) string {
	if err == nil {
		return ""
	}
	return r.String(err.Error())
}

// truncate shortens s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// printable replaces control characters (terminal escapes included) with '?': text that came
// from a server goes into logs and status reasons.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

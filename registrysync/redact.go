package registrysync

import (
	"encoding/base64"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/redact"
)

// redactor removes a server's secrets (redact.Values): every ServerConfig.Secrets value, the
// values of credential-looking headers (Authorization, Cookie, *token*, *key*, *secret*...) and
// environment variables, and the password and credential-like query parameters of its URL.
type redactor struct{ redact.Values }

func newRedactor(sc ServerConfig) redactor { return redactor{redact.New(SecretValues(sc)...)} }

// SecretValues returns the secret values of a server's configuration, as its connector redacts
// them: ServerConfig.Secrets, the values of credential-looking headers (and the credential of
// "Bearer TOKEN", the value of each cookie of a Cookie header) and environment variables, the
// password and credential-like query parameters of its URL (raw and decoded) and the Basic
// credential of its user info. The executor redacts the same values from audit events.
func SecretValues(sc ServerConfig) []string {
	var secrets []string // redact.New drops values too short to redact
	add := func(s string) { secrets = append(secrets, s) }
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
			// "sid=xyz; lang=en": a server that echoes its session quotes xyz alone. The value
			// of a cookie named like a credential or a session, or long enough to be a token,
			// is a secret; "theme=dark" or "tz=UTC" are not (redacting "dark" everywhere, and
			// refusing every tool named with it, would break the server for nothing).
			if strings.EqualFold(k, "Cookie") {
				for _, kv := range strings.Split(v, ";") {
					name, val, ok := strings.Cut(kv, "=")
					val = strings.Trim(strings.TrimSpace(val), `"`)
					if ok && (sessionCookie(name) || len(val) >= minTokenCookie) {
						add(val)
					}
				}
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
			p, ok := u.User.Password()
			if ok {
				add(p)
			}
			// net/http sends the user info as "Authorization: Basic base64(user:password)": a
			// server that echoes its request headers spells the credential so (with or
			// without the padding).
			if basic := u.User.Username() + ":" + p; basic != ":" {
				add(base64.StdEncoding.EncodeToString([]byte(basic)))
				add(base64.RawStdEncoding.EncodeToString([]byte(basic)))
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
	return secrets
}

// jsonSample returns s, JSON text that cannot be decoded (a line cut short), with every value
// replaced as is and as encoding/json escapes it ("\u0026" for '&'). Text that may still spell
// a value with other escapes ("\/", "\u0061") cannot be checked without decoding it: it is
// not quoted at all.
func (r redactor) jsonSample(s string) string {
	out := r.Text(s)
	if r.In([]byte(out)) {
		return "(not quoted: it may spell a configured secret with JSON escapes)"
	}
	return out
}

// minTokenCookie is the length from which a cookie's value is taken for a credential whatever
// its name: session ids and tokens are long and random.
const minTokenCookie = 16

// sessionCookie reports whether a cookie's name says it holds a credential or a session
// (sid, PHPSESSID, connect.sid, _session_id, auth_token...).
func sessionCookie(name string) bool {
	n := strings.ToLower(strings.TrimSpace(name))
	return sensitiveName(n) || strings.Contains(n, "sess") || strings.Contains(n, "sid") || strings.Contains(n, "jwt")
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

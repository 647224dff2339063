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
	urlSecrets(sc.URL, add)
	argSecrets(sc.Command, sc.Args, add)
	return secrets
}

// urlSecrets adds the password and credential-like query parameters of the URL raw (raw and
// decoded) and the Basic credential of its user info.
func urlSecrets(raw string, add func(string)) {
	if u, err := url.Parse(raw); err == nil {
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
}

// argSecrets adds the literal credentials of a stdio server's command-line arguments, which a
// server may print (a usage error, a debug banner) and so send to the log and the status
// reason: the value of a credential flag (--token=X, --password X, -client_secret=X, --key X;
// see argSecretName), the password of a --basic-auth user:password, the value of a NAME=VALUE
// argument named like a credential (env API_KEY=X server, docker -e/--env=API_KEY=X), the
// password and credential query parameters of a URL, and the value of a credential header
// (-H "Authorization: Bearer X"). A flag's value is the next argument unless that one starts
// with '-'. A container runtime's --user (docker, podman: user:group) is no credential.
func argSecrets(command string, args []string, add func(string)) {
	value := func(v string) {
		if strings.Contains(v, "://") {
			urlSecrets(v, add)
		}
	}
	cmd := strings.ToLower(command[strings.LastIndexAny(command, `/\`)+1:])
	cmd = strings.TrimSuffix(cmd, ".exe")
	container := cmd == "docker" || cmd == "podman" || cmd == "nerdctl"
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		if !strings.HasPrefix(a, "-") {
			if hasVal && envRefName(name) && argSecretName(name) {
				add(val)
			}
			value(a)
			continue
		}
		name = strings.TrimLeft(name, "-")
		if hasVal && (name == "e" || strings.EqualFold(name, "env")) {
			// --env=API_TOKEN=X: the NAME=VALUE argument it sets.
			if n, v, ok := strings.Cut(val, "="); ok && envRefName(n) && argSecretName(n) {
				add(v)
			}
			continue
		}
		header := name == "H" || strings.EqualFold(name, "header") || strings.EqualFold(name, "headers")
		secret, auth := argSecretName(name), argAuthName(name) && !(container && strings.EqualFold(name, "user"))
		if !hasVal && (secret || auth || header) && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			i++
			val, hasVal = args[i], true
		}
		if !hasVal {
			continue
		}
		switch {
		case header:
			if k, v, ok := strings.Cut(val, ":"); ok && sensitiveName(k) && !strings.ContainsAny(k, " \t") {
				v = strings.TrimSpace(v)
				add(v)
				if _, tok, ok := strings.Cut(v, " "); ok {
					add(strings.TrimSpace(tok)) // "Bearer TOKEN": TOKEN alone
				}
			}
		case secret:
			add(val)
		case auth:
			// user:password; not a URL (value below), nor uid:gid.
			if user, pw, ok := strings.Cut(val, ":"); ok && !strings.Contains(val, "://") && !(digits(user) && digits(pw)) {
				add(val)
				add(pw)
			}
		}
		value(val)
	}
}

// digits reports whether s is made of decimal digits (and not empty).
func digits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// argSecretName reports whether a command-line flag or NAME=VALUE argument named name holds a
// credential: the last of its words (split at '-', '_', '.'; letters lower-cased, so camelCase
// is one word) ends with token, secret, password, passwd, passphrase, credential(s),
// authorization or cookie(s), or with api/access/private/client/auth/session/signing/master/
// license/secret key (also as its last two words: --api-key), or is pass, pw, pwd or pat; or
// name is just key. The credential must be what the flag names: --token-file /run/tok,
// --api-key-env MY_KEY, --max-tokens 4096, --token-limit 8000, --tokenizer x are not, nor are
// negated or switch-like flags (--no-token, --disable-auth, --use-token), which take no value
// (the next argument is a positional one: the served directory, say), nor flags that merely
// mention auth (--auth oauth) or a key (--sort-key name).
func argSecretName(name string) bool {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	if len(words) == 0 || len(words) > 1 && switchWord(words[0]) {
		return false
	}
	last := words[len(words)-1]
	switch last {
	case "pass", "pw", "pwd", "pat":
		return true
	case "key":
		if len(words) == 1 {
			return true
		}
	}
	tail := last
	if len(words) > 1 {
		tail = words[len(words)-2] + last
	}
	for _, w := range []string{"token", "secret", "password", "passwd", "passphrase", "credential", "credentials",
		"authorization", "cookie", "cookies", "apikey", "accesskey", "privatekey", "clientkey", "authkey", "sessionkey",
		"signingkey", "masterkey", "licensekey", "secretkey"} {
		if strings.HasSuffix(tail, w) {
			return true
		}
	}
	return false
}

// switchWord reports whether a flag that starts with word turns something on or off (--no-token,
// --disable-auth, --use-token, --prompt-password): it takes no credential.
func switchWord(word string) bool {
	switch word {
	case "no", "disable", "disallow", "skip", "without", "ignore", "enable", "allow", "use", "require", "prompt", "ask":
		return true
	}
	return false
}

// argAuthName reports whether a flag named name may take user:password (--basic-auth,
// --auth, --proxy-auth, --user): its value is a secret when it has a colon. --oauth and
// switches (--no-auth) take none.
func argAuthName(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, "oauth") {
		return false
	}
	if w, _, ok := strings.Cut(strings.ReplaceAll(n, "_", "-"), "-"); ok && switchWord(w) {
		return false
	}
	return strings.HasSuffix(n, "auth") || strings.HasSuffix(n, "auth-user") || strings.HasSuffix(n, "user")
}

// envRefName reports whether s is an environment variable's name.
func envRefName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// jsonSample returns s, JSON text that cannot be decoded (a line cut short), with every value
// replaced in every spelling redact.Values.Text finds ("\u0026" for '&', "\/", "\u0061").
// Text that may still spell a value with escapes once redacted (a value cut short by the cut
// line, the rest of it escaped) cannot be checked: it is not quoted at all.
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

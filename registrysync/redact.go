package registrysync

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/redact"
)

// redactor removes a server's secrets (redact.Values): every ServerConfig.Secrets value, the
// values of headers and environment variables named like credentials (Authorization, Cookie,
// X-Api-Key, *_TOKEN, *_SECRET...: see sensitiveName), and the password and credential-like query parameters of its URL.
// Its String and Err also remove the byte dumps of text that holds one (see byteDumps).
type redactor struct{ redact.Values }

func newRedactor(sc ServerConfig) redactor { return redactor{redact.New(SecretValues(sc)...)} }

// String returns s with every value replaced (redact.Values.String), and every Go byte dump
// in it ("[123 34 ...]", as %v prints a []byte) whose bytes hold a value replaced whole. The
// start of a value just before a cut (cutMark, which truncate appends) is replaced too: the
// server's words are quoted cut to size in places (a cursor, a schema's type, an id, a long
// stderr line), and the message is redacted only as it leaves, when a value that straddled
// the cut is no longer whole (redact.Values.StringCut).
func (r redactor) String(s string) string { return r.Values.StringCut(r.byteDumps(s), cutMark) }

// Text is String without the byte dumps: for text that cannot hold one (a rejected definition's
// name and message; JSON text cut short).
func (r redactor) Text(s string) string { return r.Values.StringCut(s, cutMark) }

// Err returns an error's text redacted as String does ("" for nil).
func (r redactor) Err(err error) string {
	if err == nil {
		return ""
	}
	return r.String(err.Error())
}

// byteDumps returns s with every byte dump in it whose bytes may hold a value (redact.Values.In)
// replaced by redact.Placeholder. A byte dump is what Go's %v prints for a []byte, such as a
// json.RawMessage: its bytes in decimal, space-separated, between brackets. mcp-go's streamable
// HTTP transport quotes an answer without an id so ("response should contain RPC id: {2.0
// <nil> [123 34 ...] <nil>}"): a server that echoes its request's headers there would have
// had the Authorization header reach the caller and the log in decimal, which a search for
// the value does not find. Other brackets ("[1 2 3]" holding no value, "[redacted]") are left
// as they are.
func (r redactor) byteDumps(s string) string {
	if r.Empty() || !strings.Contains(s, "[") {
		return s
	}
	var b strings.Builder
	at := 0 // s[:at] is written to b
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '[')
		if j < 0 {
			break
		}
		i += j
		// (a dump holds no '[': each scan ends at the next one at the latest, so s is read
		// about once whatever it holds)
		if end, dump, cut := parseByteDump(s[i:]); end > 0 && len(dump) >= redact.MinLen && (r.In(dump) || cut && r.PartialEnd(string(dump)) < len(dump)) {
			b.WriteString(s[at:i])
			b.WriteString(redact.Placeholder)
			i += end
			at = i
			continue
		}
		i++
	}
	if at == 0 {
		return s
	}
	b.WriteString(s[at:])
	return b.String()
}

// parseByteDump reads a byte dump at the start of s ("[1 2 3]": decimal numbers of 0 to 255,
// one space between them), returning its length in s and its bytes; end is 0 when s does not
// start with one. A dump cut short (cutMark where a number or the space after one goes: a text
// quoted cut to size, see quote) is one too, cut true, up to the mark: its bytes read whole,
// without the number the cut may have shortened, may end with the start of a value.
func parseByteDump(s string) (end int, dump []byte, cut bool) {
	if len(s) < 3 || s[0] != '[' {
		return 0, nil, false
	}
	for i := 1; i < len(s); {
		n, j := 0, i
		for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '9' {
			n = n*10 + int(s[j]-'0')
			j++
		}
		if strings.HasPrefix(s[j:], cutMark) {
			return j, dump, true
		}
		if j == i || n > 255 || j < len(s) && s[j] >= '0' && s[j] <= '9' {
			return 0, nil, false
		}
		dump = append(dump, byte(n))
		switch {
		case j < len(s) && s[j] == ']':
			return j + 1, dump, false
		case j+1 < len(s) && s[j] == ' ':
			i = j + 1
		default:
			return 0, nil, false
		}
	}
	return 0, nil, false
}

// SecretValues returns the secret values of a server's configuration, as its connector redacts
// them: ServerConfig.Secrets, the values of credential-looking headers (and the credential of
// "Bearer TOKEN", the value of each cookie of a Cookie header) and environment variables, the
// password and credential-like query parameters of its URL (raw and decoded), the Basic
// credential of its user info and its user name when that is the credential (see urlSecrets). The executor redacts the same values from audit events.
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
			if scheme, tok, ok := strings.Cut(v, " "); ok {
				tok = strings.TrimSpace(tok)
				add(tok)
				// "Basic base64(user:password)": a server that decodes the credential and
				// quotes it (in an error: "user alice:PASSWORD unknown") spells it decoded.
				if strings.EqualFold(scheme, "Basic") {
					basicSecrets(tok, add)
				}
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
		if strings.Contains(v, "://") {
			// DATABASE_URL=postgres://user:PASSWORD@host, TOKEN_URL=https://...?token=X: the
			// password and credential parameters of a URL, whatever the variable's name.
			urlSecrets(v, add)
		}
		if strings.HasPrefix(strings.TrimSpace(v), "{") {
			// OPENAPI_MCP_HEADERS={"Authorization":"Bearer X"} (the Notion server), a service
			// account's JSON: its members named like credentials, whatever the variable's name.
			var doc any
			if json.Unmarshal([]byte(v), &doc) == nil {
				jsonSecrets(doc, add)
			}
		}
	}
	urlSecrets(sc.URL, add)
	argSecrets(sc.Command, sc.Args, add)
	return secrets
}

// jsonSecrets adds the string values of the members of doc (at any depth) named like
// credentials, and the credential of "Bearer X", as for a header; and the password and
// credential parameters of a URL anywhere in it.
func jsonSecrets(doc any, add func(string)) {
	switch d := doc.(type) {
	case map[string]any:
		for k, v := range d {
			if s, ok := v.(string); ok && sensitiveName(k) {
				add(s)
				if _, tok, ok := strings.Cut(s, " "); ok {
					add(strings.TrimSpace(tok))
				}
			}
			jsonSecrets(v, add)
		}
	case []any:
		for _, v := range d {
			jsonSecrets(v, add)
		}
	case string:
		if strings.Contains(d, "://") {
			urlSecrets(d, add)
		}
	}
}

// basicSecrets adds the decoded credential of a Basic authorization ("user:password", from
// standard base64 with or without padding) and its password.
func basicSecrets(tok string, add func(string)) {
	dec, err := base64.StdEncoding.DecodeString(tok)
	if err != nil {
		if dec, err = base64.RawStdEncoding.DecodeString(tok); err != nil {
			return
		}
	}
	cred := string(dec)
	if !utf8.ValidString(cred) {
		return
	}
	add(cred)
	if _, pw, ok := strings.Cut(cred, ":"); ok {
		add(pw)
	}
}

// urlSecrets adds the password and credential-like query parameters of the URL raw (raw and
// decoded), the Basic credential of its user info, its user name when it has no password and
// looks like a token (pathToken), and the path segments that look like tokens
// (pathToken: a capability URL's secret, https://mcp.zapier.com/api/mcp/s/SECRET/mcp,
// https://hooks.slack.com/services/T0/B0/SECRET), which Go's transport errors quote whole
// (Post "URL": dial tcp ...).
func urlSecrets(raw string, add func(string)) {
	if u, err := url.Parse(raw); err == nil {
		for _, seg := range strings.Split(u.EscapedPath(), "/") {
			if pathToken(seg) {
				add(seg)
				if d, err := url.PathUnescape(seg); err == nil && d != seg {
					add(d)
				}
			}
		}
		if u.User != nil {
			p, ok := u.User.Password()
			if ok {
				add(p)
			}
			// https://TOKEN@host, https://sk_live_KEY:@host: without a password the user name
			// is the credential (an API key sent as Basic's user, a token as git takes one),
			// and net/http's errors quote it (Post "https://TOKEN@host/mcp": they hide a
			// password only). One that looks like a generated token (pathToken): "admin" or
			// "deploy" redacted everywhere would break the server for nothing.
			if user := u.User.Username(); p == "" && pathToken(user) {
				add(user)
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

// pathToken reports whether seg, a URL path segment, looks like a generated token rather than a
// word of an API's path: at least 16 bytes of letters, digits and -_.~=+% with upper and lower
// case letters and digits (base64: ZXhhbXBsZQ0123456789), or at least 24 of hex digits and dashes
// with six digits or more (a hex token, a UUID), or at least 20 letters and digits without any
// separator, both present (base 36). "v1", "mcp", "github-enterprise-2024" or "2025-06-18" are
// no tokens: redacting them from every result, and refusing every tool named with them, would
// break the server for nothing.
func pathToken(seg string) bool {
	if len(seg) < 16 {
		return false
	}
	var upper, lower, digits, seps int
	hex := true
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c >= 'A' && c <= 'Z':
			upper++
			hex = hex && c <= 'F'
		case c >= 'a' && c <= 'z':
			lower++
			hex = hex && c <= 'f'
		case c >= '0' && c <= '9':
			digits++
		case c == '-':
			seps++
		case c == '_', c == '.', c == '~', c == '=', c == '+', c == '%':
			seps++
			hex = false
		default:
			return false
		}
	}
	switch {
	case upper > 0 && lower > 0 && digits > 0:
		return true
	case hex && len(seg) >= 24 && digits >= 6:
		return true
	}
	return seps == 0 && len(seg) >= 20 && digits > 0 && upper+lower > 0
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
			if hasVal && envRefName(name) && envSecretName(name) {
				add(val)
			}
			value(a)
			continue
		}
		name = strings.TrimLeft(name, "-")
		if hasVal && (name == "e" || strings.EqualFold(name, "env")) {
			// --env=API_TOKEN=X: the NAME=VALUE argument it sets.
			if n, v, ok := strings.Cut(val, "="); ok && envRefName(n) && envSecretName(n) {
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

// envSecretName reports whether name, the variable of a NAME=VALUE argument (env API_KEY=X cmd,
// docker -e GITHUB_PAT=X), names a credential: as a flag would (argSecretName), or as an
// environment variable of the configuration would (sensitiveName: SEED_PHRASE, SENTRY_DSN).
func envSecretName(name string) bool { return argSecretName(name) || sensitiveName(name) }

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

// sensitiveName reports whether a header, environment variable, URL query parameter or cookie
// named name holds a credential. The name is split into words (at every character that is not a
// letter or a digit, at camelCase boundaries and between letters and digits: "X-Api-Key",
// "apiKey", "APIKey", "API_KEY2"), lower-cased, and it is a credential's name when:
//
//   - a word is, or ends with, token(s), secret(s), password(s), passwd, passphrase,
//     credential(s), authorization (authorisation), authentication, cookie(s), signature, auth
//     or mnemonic (so lower-case compounds count: accesstoken, clientsecret, pgpassword,
//     csrftoken, oauth, basicauth); or is pass, sig, or ends with pwd (MYSQL_PWD; but not PWD
//     alone, the working directory); unless every word after it is about the credential, not
//     the credential (TOKEN_URL, AUTH_ENABLED, AUTH_SCOPE, PASSWORD_FILE: see keyAbout), or the
//     word is tokens after a count's word (MAX_TOKENS, max_new_tokens; token after max, min,
//     num or total only: INPUT_TOKEN is a credential; see tokenCount);
//   - a word is or ends with key or keys (key, apikey, xapikey, X-Goog-Api-Key, STRIPE_KEY,
//     AWS_ACCESS_KEY_ID, PRIVATE_KEY_PEM, KEY_2, AZURE_SEARCH_KEY), unless what qualifies the
//     key names no credential (sortKey, sort_key, sortkey, primary_key, Idempotency-Key,
//     cache_key: see plainKey) or every word after it is about the key, not the key (keyName,
//     KEY_FILE, keys_only: see keyAbout);
//   - the name ends with pat, jwt, pw, dsn, connection string, webhook (url), seed phrase or
//     session string (GITHUB_PAT, PINATA_JWT, DB_PW, SENTRY_DSN, AZURE_STORAGE_CONNECTION_STRING,
//     SLACK_WEBHOOK_URL, SEED_PHRASE: see credentialEnd), these words naming something else
//     when other words follow (JWT_ISSUER, WEBHOOK_EVENTS, PW_TEST_...);
//   - the name is just code (?code=: an Azure Functions key; COUNTRY_CODE is not).
//
// Words are matched, not substrings: author, authority, keyword, keys_only, keyName, tokenizer,
// secretary, bypass are not credentials' names. A compound that merely ends with key is one
// (monkey, turkey: taken for unknown-vendor keys such as stripekey), which errs on the safe side.
func sensitiveName(name string) bool {
	words := nameWords(name)
	if len(words) == 1 && words[0] == "pwd" {
		return false
	}
	if len(words) == 1 && words[0] == "code" {
		return true // ?code=FUNCTION_KEY: Azure Functions' key (COUNTRY_CODE, lang_code are not)
	}
	for _, end := range credentialEnd {
		if len(words) >= len(end) && slices.Equal(words[len(words)-len(end):], end) {
			return true
		}
	}
	// about: every word after the i-th says the name is about the credential, not the
	// credential (TOKEN_URL, AUTH_ENABLED, PASSWORD_FILE, keyName: see keyAbout).
	// A number among them says nothing either way (AUTH0_DOMAIN is about Auth0's domain; TOKEN_2,
	// with no word about it, is a second token).
	about := func(i int) bool {
		rest := words[i+1:]
		return slices.ContainsFunc(rest, func(r string) bool { return keyAbout[r] }) &&
			!slices.ContainsFunc(rest, func(r string) bool { return !keyAbout[r] && !digits(r) })
	}
	for i, w := range words {
		credential := w == "pass" || w == "sig" || strings.HasSuffix(w, "pwd")
		for _, c := range []string{"token", "tokens", "secret", "secrets", "password", "passwords", "passwd", "passphrase",
			"credential", "credentials", "authorization", "authorisation", "authentication", "cookie", "cookies", "signature",
			"auth", "mnemonic"} {
			credential = credential || strings.HasSuffix(w, c)
		}
		if !credential || about(i) {
			continue
		}
		if i > 0 && (w == "token" && tokenCount[words[i-1]] || w == "tokens" && (tokenCount[words[i-1]] || tokenKind[words[i-1]])) {
			continue // MAX_TOKENS, max_output_tokens, max_new_tokens: a count of a model's tokens
		}
		return true
	}
	// key or keys, as a word or a word's end, unless what qualifies it names a key that is no
	// credential (plainKey: sortKey) or the words after it say the name is about the key, not
	// the key itself (keyName, KEY_FILE, keys_only: keyAbout). PRIVATE_KEY_PEM, SSH_KEY_DATA,
	// GOOGLE_API_KEY_BASE64, AWS_ACCESS_KEY_ID and KEY_2 are credentials' names.
	for i, w := range words {
		var qualifier string
		switch {
		case w == "key" || w == "keys":
			if i > 0 {
				qualifier = words[i-1]
			}
		case strings.HasSuffix(w, "keys"):
			qualifier = strings.TrimSuffix(w, "keys")
		case strings.HasSuffix(w, "key"):
			qualifier = strings.TrimSuffix(w, "key")
		default:
			continue
		}
		if plainKey[qualifier] {
			continue
		}
		if about(i) {
			continue
		}
		return true
	}
	return false
}

// keyAbout holds the words that, after a credential's word (key, token, auth, password...),
// make a name about the credential rather than the credential: its name, file, endpoint, type,
// size, lifetime, or whether it is on (KEY_FILE, TOKEN_URL, token_type, AUTH_ENABLED,
// PASSWORD_FILE, SECRET_NAME, TOKEN_TTL). Not header, value, data, hash or user: AUTH_HEADER and
// PASSWORD_HASH hold what must not be shown.
var keyAbout = map[string]bool{
	"name": true, "names": true, "file": true, "files": true, "path": true, "paths": true,
	"dir": true, "directory": true, "location": true, "url": true, "uri": true, "endpoint": true,
	"type": true, "types": true, "format": true, "size": true, "length": true, "len": true,
	"count": true, "limit": true, "limits": true, "field": true, "fields": true, "only": true,
	"mode": true, "method": true, "scheme": true, "provider": true, "strategy": true,
	"algorithm": true, "alg": true, "version": true, "prefix": true, "enabled": true,
	"disabled": true, "enable": true, "disable": true, "required": true, "ttl": true,
	"expiry": true, "expires": true, "expiration": true, "lifetime": true, "timeout": true,
	"scope": true, "scopes": true, "issuer": true, "audience": true, "realm": true, "domain": true,
	"server": true, "host": true, "port": true, "redirect": true, "callback": true,
	"per": true, "second": true, "minute": true, "hour": true, "day": true, "rate": true,
}

// credentialEnd holds the words that name a credential when they end the name, and only then:
// a personal access token (GITHUB_PAT), a JWT (PINATA_JWT), a password (DB_PW), a connection
// string or DSN that carries the database's password (SENTRY_DSN, MYSQL_DSN=app:PW@tcp(db)/app,
// AZURE_STORAGE_CONNECTION_STRING), a webhook's URL, whose path is its credential
// (SLACK_WEBHOOK_URL), a wallet's seed phrase, a logged-in session (TELEGRAM_SESSION_STRING).
// Followed by other words they are about one: JWT_ISSUER, WEBHOOK_EVENTS, PW_TEST_... (the
// Playwright server's settings).
var credentialEnd = [][]string{
	{"pat"}, {"jwt"}, {"pw"}, {"dsn"}, {"connection", "string"}, {"connectionstring"}, {"conn", "str"}, {"connstr"},
	{"webhook"}, {"webhook", "url"}, {"webhook", "uri"}, {"webhookurl"}, {"seed", "phrase"}, {"seedphrase"},
	{"session", "string"},
}

// tokenCount holds the words that, before token or tokens, make the name a count of a language
// model's tokens (MAX_TOKENS=4096: "4096" taken for a secret was redacted from every result);
// tokenKind those that do so before tokens only (input_tokens, max_new_tokens): a token of a
// kind, singular, is a credential (INPUT_TOKEN: a GitHub Action's token input).
var tokenCount = map[string]bool{"max": true, "min": true, "num": true, "total": true}

var tokenKind = map[string]bool{
	"input": true, "output": true, "prompt": true, "completion": true, "context": true,
	"reasoning": true, "response": true, "new": true,
}

// plainKey holds the words that, before key, name a key that is no credential: one that sorts,
// identifies or looks up data, or deduplicates requests. Not search, map or routing: a
// service's name comes before those keys too (AZURE_SEARCH_KEY, GOOGLE_MAP_KEY, PagerDuty's
// routing_key are credentials).
var plainKey = map[string]bool{
	"sort": true, "primary": true, "foreign": true, "partition": true, "range": true, "unique": true,
	"composite": true, "natural": true, "surrogate": true, "row": true, "column": true, "index": true,
	"lookup": true, "order": true, "group": true, "shard": true,
	"cache": true, "idempotency": true, "dedup": true, "deduplication": true, "object": true,
	"hot": true, "field": true, "message": true, "translation": true,
}

// nameWords splits name into lower-case words: at characters that are neither letters nor
// digits, where a lower-case letter is followed by an upper-case one (apiKey), before the last
// upper-case letter of a run followed by a lower-case one (APIKey: API, Key) and between letters
// and digits (key2: key, 2).
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if len(cur) > 0 {
			p := cur[len(cur)-1]
			switch {
			case unicode.IsDigit(p) != unicode.IsDigit(r):
				flush()
			case unicode.IsLower(p) && unicode.IsUpper(r):
				flush()
			case unicode.IsUpper(p) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// cutMark marks where truncate cut a text (see redactor.String).
const cutMark = "…"

// truncate shortens s to at most n bytes on a rune boundary, marking the cut; s may be a line
// as read (only the bytes kept are copied).
func truncate[T ~string | ~[]byte](s T, n int) string {
	if len(s) <= n {
		return string(s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return string(s[:n]) + cutMark
}

// quoteRoom is how many times the bytes of a quote of a server's text (quote, quoteSample) are
// redacted of it: redact searches text decoded several ways, an offset (8 bytes) a decoded
// byte each, tens of bytes of memory a byte, and a server's text may be of megabytes (a stdio
// line of 64 MiB, an HTTP error's body, an error message). What is kept is the same as when the
// whole text is redacted unless its values, replaced, shrink quoteRoom times n bytes of it to
// fewer than n: then less is kept.
const quoteRoom = 64

// maxServerInfoBytes bounds the serverInfo name and version a server reports, as they are
// published in every snapshot (subjects.ServerInfo) and logged: a server's words, of any size.
const maxServerInfoBytes = 256

// quote returns s, a server's text or one that may quote it, redacted (redactor.String) and cut
// to n bytes. Only its start is redacted, cut as truncate cuts it (quoteRoom times n bytes): the
// mark of that cut after it, String replaces the start of a value that straddled it.
func quote[T ~string | ~[]byte](r redactor, s T, n int) string {
	return truncate(r.String(truncate(s, quoteRoom*n)), n)
}

// quoteSample is quote for JSON text that cannot be decoded (redactor.jsonSample).
func quoteSample[T ~string | ~[]byte](r redactor, s T, n int) string {
	return truncate(r.jsonSample(truncate(s, quoteRoom*n)), n)
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

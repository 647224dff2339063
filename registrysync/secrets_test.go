package registrysync

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// logBuffer collects log lines from every goroutine.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// runLogged starts a Manager with cfg whose debug log goes to the returned buffer.
func runLogged(t *testing.T, cfg Config) (*harness, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	env := natstest.Start(t)
	h := &harness{env: env, m: New(env.JS, env.NC, cfg, zerolog.New(logs).Level(zerolog.DebugLevel)), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.m.Run(ctx) }()
	t.Cleanup(func() { h.stop(t) })
	return h, logs
}

// A server that puts a configured secret in its serverInfo (its name or version, as a debug
// build stamping its configuration could): the value is redacted from the "connected" log line
// as it is from the published serverInfo.
func TestServerInfoRedactedInLog(t *testing.T) {
	t.Parallel()
	const secret = "hdr-Secret-42"
	srv := server.NewMCPServer("srv-"+secret, "v-"+secret, server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("noop"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	sc := ServerConfig{Name: "info", Transport: TransportHTTP, URL: httpFixture(t, srv),
		Headers: map[string]string{"X-Api-Key": secret}}
	h, logs := runLogged(t, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("info"))
	rec.wait(0, "tools", isSnapshot(subjects.KindTools, func(*subjects.Snapshot) bool { return true }))
	waitUntil(t, "the connected log line", func() bool { return strings.Contains(logs.String(), `"message":"connected"`) })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, secret) {
			t.Errorf("log line holds the secret: %s", line)
		}
	}
}

// A URL with user info is sent as "Authorization: Basic base64(user:password)" (net/http does
// that): a server that echoes its request headers hands the credential back in that spelling,
// and it is redacted like the password itself.
func TestURLUserInfoBasicRedacted(t *testing.T) {
	t.Parallel()
	const pw = "pw-Secret-31"
	srv := server.NewMCPServer("echoheaders", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("headers"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		h, _ := json.Marshal(req.Header)
		return mcp.NewToolResultText(string(h)), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(srv))
	t.Cleanup(ts.Close)
	u, err := url.Parse(ts.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("user", pw)
	h := run(t, nil, fastConfig(ServerConfig{Name: "basic", Transport: TransportHTTP, URL: u.String()}))
	rec := record(t, h.env, subjects.RegistryServer("basic"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := dispatch(t, h, "basic", subjects.DispatchRequest{V: 1, Tool: "headers", Arguments: json.RawMessage(`{}`)})
	if r.Error != nil {
		t.Fatalf("dispatch: %+v", r.Error)
	}
	text := resultText(t, r.Result)
	if !strings.Contains(text, "Authorization") {
		t.Fatalf("the server did not echo its headers: %s", text)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("user:" + pw))
	if strings.Contains(text, strings.TrimRight(basic, "=")) {
		t.Errorf("the Basic credential of the URL's user info reached the caller: %s", text)
	}
}

// A server that answers a call with an HTTP error whose JSON body echoes the request's key,
// escaped as JSON encoders other than Go's escape it ("\/" for '/', "\u0061" for 'a'): the
// key is redacted from the dispatch error in every spelling.
func TestHTTPErrorBodyEscapedSecretRedacted(t *testing.T) {
	t.Parallel()
	const secret = "ab/cd-Secret-77"
	srv := server.NewMCPServer("errbody", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("fail"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("unreachable"), nil
	})
	inner := server.NewStreamableHTTPServer(srv)
	bodies := []string{
		`{"error":"invalid key ab\/cd-Secret-77"}`,
		`{"error":"invalid key \u0061b/cd-Secret-77"}`,
	}
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, bodies[int(n.Add(1)-1)%len(bodies)])
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h, logs := runLogged(t, fastConfig(ServerConfig{Name: "errbody", Transport: TransportHTTP, URL: ts.URL + "/mcp",
		Headers: map[string]string{"X-Api-Key": secret}}))
	rec := record(t, h.env, subjects.RegistryServer("errbody"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	for i := range bodies {
		r := dispatch(t, h, "errbody", subjects.DispatchRequest{V: 1, Tool: "fail", Arguments: json.RawMessage(`{}`)})
		if r.Error == nil {
			t.Fatalf("body %d: dispatch answered %s, want an error", i, r.Result)
		}
		t.Logf("body %d: %+v", i, r.Error)
		if strings.Contains(r.Error.Message, "cd-Secret-77") {
			t.Errorf("body %d: the error holds the secret: %s", i, r.Error.Message)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "cd-Secret-77") {
			t.Errorf("log line holds the secret: %s", line)
		}
	}
}

// A stdio server that writes a broken JSON-RPC line holding its own token: the sample of the
// line quoted in the list failure (status reason, log) has the token redacted also where the
// line spells it with JSON escapes ("\u0026" for '&', as encoding/json writes it).
func TestMalformedLineSampleEscapedSecretRedacted(t *testing.T) {
	t.Parallel()
	const secret = "p&ss-Secret-9"
	sc := stdioServer(t, "broken", "raw:brokensecret", "SERVICE_TOKEN="+secret)
	h, logs := runLogged(t, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("broken"))
	e := rec.wait(0, "a failure naming the broken line", func(e event) bool {
		return strings.Contains(string(e.data), "not JSON")
	})
	for _, ev := range append(rec.all(), e) {
		if strings.Contains(string(ev.data), "ss-Secret-9") {
			t.Errorf("event holds the secret: %s", ev.data)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "ss-Secret-9") {
			t.Errorf("log line holds the secret: %s", line)
		}
	}
}

// A tool whose name holds a configured secret value cannot be published under its name, and
// under the redacted one ("get_[redacted]") it could never be called: the server knows no such
// tool. Two such names may even become one. It is rejected (secret_in_name, its name
// redacted: the catalog's servers listing shows it); the server's other tools are listed as
// usual.
func TestDefinitionNamedWithSecretRejected(t *testing.T) {
	t.Parallel()
	const secret = "k9Zq-Secret"
	srv := server.NewMCPServer("named", "1", server.WithToolCapabilities(true))
	for _, name := range []string{"get_" + secret, "ok"} {
		srv.AddTool(mcp.NewTool(name), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	}
	sc := ServerConfig{Name: "named", Transport: TransportHTTP, URL: httpFixture(t, srv),
		Headers: map[string]string{"X-Api-Key": secret}}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("named"))
	e := rec.wait(0, "tools", isSnapshot(subjects.KindTools, func(*subjects.Snapshot) bool { return true }))
	if strings.Contains(string(e.data), secret) {
		t.Fatalf("snapshot holds the secret: %s", e.data)
	}
	if got := names(t, e.ev.Snapshot); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("tools %q, want [ok]", got)
	}
	rej := e.ev.Snapshot.Rejected
	if len(rej) != 1 || rej[0].Code != subjects.CodeSecretInName || rej[0].Name != "get_[redacted]" {
		t.Errorf("rejected %+v, want get_[redacted] secret_in_name", rej)
	}
}

// A Cookie header's credential is the value of its cookie: a server that echoes the session
// it was handed ("unknown session ...") hands it back without the "sid=" the header spells.
func TestCookieValueRedacted(t *testing.T) {
	t.Parallel()
	const secret = "ck-Secret-61"
	srv := server.NewMCPServer("cookies", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("whoami"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, err := (&http.Request{Header: req.Header}).Cookie("sid")
		if err != nil {
			return mcp.NewToolResultError("no session"), nil
		}
		return mcp.NewToolResultError("unknown session " + c.Value), nil
	})
	sc := ServerConfig{Name: "cookies", Transport: TransportHTTP, URL: httpFixture(t, srv),
		Headers: map[string]string{"Cookie": "sid=" + secret + "; lang=en-GB"}}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("cookies"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := dispatch(t, h, "cookies", subjects.DispatchRequest{V: 1, Tool: "whoami", Arguments: json.RawMessage(`{}`)})
	if r.Error != nil {
		t.Fatalf("dispatch: %+v", r.Error)
	}
	if text := resultText(t, r.Result); text != "unknown session [redacted]" {
		t.Errorf("result %q, want the session redacted", text)
	}
}

// jsonSample: broken JSON text is quoted with a value redacted in encoding/json's spellings and
// in other escapes (the text is searched decoded too), and not quoted at all when escapes are
// left that may spell one (a value cut short, say).
func TestJSONSample(t *testing.T) {
	red := newRedactor(ServerConfig{Secrets: []string{"a/b&c-Secret"}})
	for in, want := range map[string]string{
		`{"x":"a/b\u0026c-Secret`:   `{"x":"[redacted]`,
		`{"x":"a\/b&c-Secret`:       `{"x":"[redacted]`,
		`{"x":"\u0061/b&c-Secret"`:  `{"x":"[redacted]"`,
		`{"x":"\u0061/b&c-Secr`:     "(not quoted: it may spell a configured secret with JSON escapes)",
		`{"x":"nothing secret here`: `{"x":"nothing secret here`,
	} {
		if got := red.jsonSample(in); got != want {
			t.Errorf("jsonSample(%s) = %s, want %s", in, got, want)
		}
	}
	if got := (redactor{}).jsonSample(`{"x":"\/`); got != `{"x":"\/` {
		t.Errorf("without secrets: %s", got)
	}
}

// A dispatch handler's panic value may quote what the server sent (a secret it echoed): it is
// logged redacted, as everything else the connector logs.
func TestPanicValueRedactedInLog(t *testing.T) {
	t.Parallel()
	const secret = "pnc-Secret-77"
	srv := server.NewMCPServer("panicky", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("noop"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	sc := ServerConfig{Name: "panicky", Transport: TransportHTTP, URL: httpFixture(t, srv),
		Headers: map[string]string{"X-Api-Key": secret}}
	h, logs := runLogged(t, fastConfig(sc))
	waitUntil(t, "endpoints up", h.m.Ready)
	boom := func(string) { panic("the server said: key " + secret + " is wrong") }
	h.m.beforeDispatch.Store(&boom)
	dispatch(t, h, "panicky", subjects.DispatchRequest{V: 1, CallID: "p1", Tool: "noop", Arguments: json.RawMessage(`{}`)})
	h.m.beforeDispatch.Store(nil)
	waitUntil(t, "the panic logged", func() bool { return strings.Contains(logs.String(), "handler panicked") })
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, secret) {
			t.Errorf("log line holds the secret: %.300s", line)
		}
	}
}

// The value of a session or credential cookie, or of a long one, is a secret; "theme=dark"
// is not: redacting "dark" from every result, and refusing every tool named with it, would
// break the server for nothing.
func TestCookieSecretValues(t *testing.T) {
	sc := ServerConfig{Headers: map[string]string{"Cookie": `theme=dark; tz=UTC; PHPSESSID=abc; connect.sid=s%3Axyz; auth_token=tok; pref="0123456789abcdef"`}}
	got := map[string]bool{}
	for _, v := range SecretValues(sc) {
		got[v] = true
	}
	for _, want := range []string{"abc", "s%3Axyz", "tok", "0123456789abcdef"} {
		if !got[want] {
			t.Errorf("cookie value %q is not a secret", want)
		}
	}
	for _, not := range []string{"dark", "UTC"} {
		if got[not] {
			t.Errorf("cookie value %q is a secret", not)
		}
	}
}

// TestEnvSecretValues: a variable named like a credential gives its value; a count, an endpoint
// or a switch named after one does not (MAX_TOKENS=4096 made "4096" a secret, redacted from every
// result); a URL in any variable gives its password and credential parameters
// (DATABASE_URL=postgres://user:PASSWORD@host was not redacted: the name holds no credential's
// word).
func TestEnvSecretValues(t *testing.T) {
	sc := ServerConfig{Env: map[string]string{
		"GITHUB_TOKEN": "ghp_tokenvalue", "MAX_TOKENS": "4096", "AUTH_ENABLED": "true", "TOKEN_URL": "https://auth.example.com/token",
		"DATABASE_URL": "postgres://app:Db-Pass-77@db.internal:5432/app", "HOOK_URL": "https://h.example.com/x?api_key=Hook-Key-9&lang=en",
	}}
	got := map[string]bool{}
	for _, v := range SecretValues(sc) {
		got[v] = true
	}
	for _, want := range []string{"ghp_tokenvalue", "Db-Pass-77", "Hook-Key-9"} {
		if !got[want] {
			t.Errorf("%q is not a secret", want)
		}
	}
	for _, not := range []string{"4096", "true", "https://auth.example.com/token", "en"} {
		if got[not] {
			t.Errorf("%q is a secret", not)
		}
	}
}

// Literal credentials in a stdio server's command-line arguments (--token=XYZ, --password XYZ,
// a URL with a password or an api_key, a -H "Authorization: Bearer XYZ" header) are secrets:
// a server that prints its command line (a usage error, a debug banner) sends them to the log
// and the status reason. Flags that name a file, a mode or a variable holding the credential,
// and flags that merely mention auth, are not.
func TestArgsSecretValues(t *testing.T) {
	sc := ServerConfig{Command: "srv", Args: []string{
		"--api-token=tokA-123", "--password", "pwB-456", "-client_secret=secC-789", "--key", "keyD-012",
		"API_KEY=envE-345", "-e", "GITHUB_PAT=patK-123", "--env=SENTRY_DSN=https://dsnL-456@o1.ingest.sentry.io/1", "--url", "https://u:pwF-678@example.com/mcp?api_key=qG-901&x=plain1",
		"-H", "Authorization: Bearer tokH-234", "--header=X-Api-Key: keyI-567", "--basic-auth", "admin:pwJ-890",
		// Not secrets:
		"--token-file", "/run/tok.txt", "--password-stdin", "--auth", "oauth", "--auth-type=basic",
		"--sort-key", "name", "--api-key-env", "MY_KEY", "--verbose", "--token", "--port", "8080",
		"positional", "--header", "Accept: text/plain",
	}}
	got := map[string]bool{}
	for _, v := range SecretValues(sc) {
		got[v] = true
	}
	for _, want := range []string{"tokA-123", "pwB-456", "secC-789", "keyD-012", "envE-345", "pwF-678", "qG-901", "tokH-234", "Bearer tokH-234", "keyI-567", "admin:pwJ-890", "pwJ-890", "patK-123", "https://dsnL-456@o1.ingest.sentry.io/1"} {
		if !got[want] {
			t.Errorf("argument value %q is not a secret (secrets: %q)", want, SecretValues(sc))
		}
	}
	for _, not := range []string{"/run/tok.txt", "oauth", "basic", "name", "MY_KEY", "--port", "8080", "positional", "text/plain", "plain1", "srv"} {
		if got[not] {
			t.Errorf("argument %q is a secret", not)
		}
	}
}

// A stdio server that prints its command line when it fails (a usage error) does not publish
// the literal credentials in it: the status reason has them redacted.
func TestArgsSecretRedactedFromStatus(t *testing.T) {
	t.Parallel()
	sc := rogueServer(t, "argsecho", "echoargs")
	sc.Args = append(sc.Args, "--api-token=lit3ral-t0ken-1", "--password", "hunter2-literal")
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("argsecho"))
	e := rec.wait(0, "unavailable", isStatus(subjects.StatusUnavailable, "*"))
	if !strings.Contains(e.ev.Status.Reason, "bad arguments") {
		t.Fatalf("status reason %q does not carry the server's stderr", e.ev.Status.Reason)
	}
	for _, s := range []string{"lit3ral-t0ken-1", "hunter2-literal"} {
		if strings.Contains(string(e.data), s) {
			t.Errorf("%q reached the published status: %s", s, e.data)
		}
	}
}

// Ordinary arguments of real stdio servers are not secrets: a quantity named after tokens
// (--max-tokens 4096), a container's --user uid:gid, a negated flag followed by a positional
// argument (--no-token /srv/docs), an --oauth issuer URL. Taken for secrets, they would be
// redacted from every result (every number holding 4096 or 1000, the served directory's path)
// and tools named with them left out of the catalog.
func TestArgsOrdinaryNotSecrets(t *testing.T) {
	for _, c := range []struct {
		command string
		args    []string
	}{
		{"npx", []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/shared-docs"}},
		{"docker", []string{"run", "-i", "--rm", "--user", "1000:1000", "-v", "/srv/shared-docs:/data", "mcp/filesystem", "/data"}},
		{"podman", []string{"run", "-i", "--user", "node:node", "mcp/x"}},
		{"llm-mcp", []string{"--max-tokens", "4096", "--model", "gpt-4o"}},
		{"llm-mcp", []string{"--token-limit", "8000", "--tokens-per-minute", "30000", "--tokenizer", "cl100k_base", "--maxTokens", "2048"}},
		{"srv", []string{"--refresh-token-interval", "300", "--read-only-token-scope", "repo"}},
		{"srv", []string{"--no-token", "/srv/shared-docs"}},
		{"srv", []string{"--no-auth", "localhost:8080"}},
		{"srv", []string{"--oauth", "https://issuer.example.com:8443/realms/x"}},
		{"srv", []string{"--passwordfile", "/run/pw", "--tokenFile", "/run/tok"}},
		{"uvx", []string{"mcp-server-fetch", "--user-agent", "Mozilla/5.0", "--port", "8080"}},
	} {
		if got := SecretValues(ServerConfig{Command: c.command, Args: c.args}); len(got) > 0 {
			t.Errorf("%s %q: secrets %q", c.command, c.args, got)
		}
	}
	// What the false secrets did to a result.
	sc := ServerConfig{Command: "docker", Args: []string{"run", "-i", "--user", "1000:1000", "mcp/llm", "--max-tokens", "4096", "--no-token", "/srv/shared-docs"}}
	raw := []byte(`{"content":[{"type":"text","text":"/srv/shared-docs/a.txt: 10000 bytes, 4096 tokens"}],"structuredContent":{"size":10000,"n":1e4}}`)
	if out, changed := newRedactor(sc).JSON(raw); changed {
		t.Errorf("an ordinary result was redacted: %s", out)
	}
	// Still secrets: the credentials of the same kinds of flags.
	got := map[string]bool{}
	for _, v := range SecretValues(ServerConfig{Command: "srv", Args: []string{
		"--db-pass", "pwK-123", "--githubToken", "tokL-456", "--secret-key=skM-789", "--user", "admin:pwN-012",
		"--refresh-token", "rtO-345", "--env=API_TOKEN=tokP-678",
	}}) {
		got[v] = true
	}
	for _, want := range []string{"pwK-123", "tokL-456", "skM-789", "pwN-012", "rtO-345", "tokP-678"} {
		if !got[want] {
			t.Errorf("argument value %q is not a secret", want)
		}
	}
}

// Names are credentials by their words (split at non-alphanumerics, camelCase and digits), not
// by substrings: ?author=john, ?keyword=database or ?sortKey=name hold no credential, and taking
// their values for secrets redacts "john" or "database" from every result the server answers
// (and leaves its tools named with them out of the catalog).
func TestSensitiveName(t *testing.T) {
	for _, name := range []string{
		"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key", "X-API-KEY", "x-api-key",
		"api_key", "apiKey", "APIKey", "XAPIKey", "apikey", "xapikey", "key", "Key", "keys", "KEY_2",
		"X-Goog-Api-Key", "Ocp-Apim-Subscription-Key", "STRIPE_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"secret_key", "SECRET_KEY_BASE", "token", "access_token", "accessToken", "accesstoken", "authtoken",
		"authToken", "X-Auth-Token", "X-Amz-Security-Token", "refresh_tokens", "GITHUB_TOKEN",
		"GITHUB_PERSONAL_ACCESS_TOKEN", "csrftoken", "secret", "client_secret", "clientSecret", "clientsecret",
		"secrets", "password", "DB_PASSWORD", "PGPASSWORD", "passwd", "MYSQL_PWD", "db_pwd", "db_pass",
		"passphrase", "credential", "credentials", "X-Amz-Credential", "auth", "AUTH", "basic_auth",
		"proxyAuth", "oauth", "auth_user", "Authentication", "X-Amz-Signature", "signature", "sig",
		"auth_token", "private_key", "privateKey", "Api-Key2", "monkey", // "monkey" ends with "key": see sensitiveName
		// key followed by words that do not say the name is about the key: the key itself
		"PRIVATE_KEY_PEM", "SSH_KEY_DATA", "GOOGLE_API_KEY_BASE64", "apiKeyValue", "X-API-KEY-V2", "GCP_SA_KEY_JSON",
		"turnkey_x", "AUTH_HEADER", "PASSWORD_HASH", "TOKEN_VALUE", "SECRET_DATA", "auth_user_password", "token_max",
	} {
		if !sensitiveName(name) {
			t.Errorf("%q is not taken for a credential's name", name)
		}
	}
	for _, name := range []string{
		"author", "Author", "authors", "authority", "Authority", "authored_by", "keyword", "keywords", "Keyword",
		"sortKey", "sort_key", "sortkey", "keys_only", "keyName", "key_field", "primary_key", "partition_key",
		"Idempotency-Key", "cache_key", "tokenizer", "signed", "design", "compass", "bypass", "passage",
		"pwd", "PWD", "secretary", "keystone", "lang", "q", "page", "KEY_FILE", "key_path", "keyType", "SSH_KEY_PATH",
		"MAX_TOKENS", "max_output_tokens", "maxTokens", "num_tokens", "completion_tokens", "token_type", "TOKEN_URL",
		"AUTH_ENABLED", "auth_type", "PASSWORD_FILE", "SECRET_NAME", "TOKEN_TTL", "AUTH_PROVIDER", "authMode",
		"Accept", "Content-Type", "X-Trace", "HOME", "MODE", "sid", "session",
	} {
		if sensitiveName(name) {
			t.Errorf("%q is taken for a credential's name", name)
		}
	}
}

// A server reached at .../mcp?author=john&api_key=S3cr3t-Value has the key redacted from what
// it answers, but not "john": author is no credential's name. Before, every "john" in its
// results became "[redacted]" and its tools named with "john" were left out of the catalog.
func TestURLQueryOrdinaryParamNotSecret(t *testing.T) {
	t.Parallel()
	const secret, author = "S3cr3t-Value", "john"
	srv := server.NewMCPServer("books", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("books_by_john"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("books by john (debug: key " + secret + ")"), nil
	})
	u := httpFixture(t, srv) + "?author=" + author + "&api_key=" + secret
	if !strings.HasPrefix(u, "http://127.0.0.1:") {
		t.Fatalf("fixture URL %q is not on loopback", u)
	}
	h := run(t, nil, fastConfig(ServerConfig{Name: "books", Transport: TransportHTTP, URL: u}))
	rec := record(t, h.env, subjects.RegistryServer("books"))
	snap := rec.wait(0, "tools snapshot", isSnapshot(subjects.KindTools, nil)).ev.Snapshot
	if got := names(t, snap); !slices.Equal(got, []string{"books_by_john"}) || len(snap.Rejected) > 0 {
		t.Errorf("tools %v, rejected %+v: want books_by_john published", got, snap.Rejected)
	}
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := dispatch(t, h, "books", subjects.DispatchRequest{V: 1, Tool: "books_by_john", Arguments: json.RawMessage(`{}`)})
	if r.Error != nil {
		t.Fatalf("dispatch of a tool named with an ordinary query value: %+v", r.Error)
	}
	text := resultText(t, r.Result)
	if strings.Contains(text, secret) {
		t.Errorf("the api_key value reached the caller: %s", text)
	}
	if want := "books by john (debug: key [redacted])"; text != want {
		t.Errorf("result %q, want %q", text, want)
	}
}

// Credentials' names that real servers, SDKs and APIs document, and everyday names beside them.
// Each true name held a credential that the word rule (or the substring rule before it) left
// unredacted; each false one would make an everyday value ("4096", "read", "8080", "never") a
// secret, redacted from every result of the server.
func TestSensitiveNameRealWorld(t *testing.T) {
	for _, c := range []struct {
		name string
		want bool
	}{
		// a key qualified by a product or a service, not by what sorts or looks up data
		{"AZURE_SEARCH_KEY", true}, {"AZURE_SEARCH_ADMIN_KEY", true}, {"BING_SEARCH_KEY", true}, // Azure AI Search, Bing
		{"ALGOLIA_SEARCH_KEY", true}, {"GOOGLE_MAP_KEY", true}, {"BAIDU_MAP_KEY", true}, {"MAP_KEY", true}, // NASA FIRMS
		{"PAGERDUTY_ROUTING_KEY", true}, {"routing_key", true}, // PagerDuty Events v2: the integration key
		{"sort_key", false}, {"cache_key", false}, {"partition_key", false}, {"Idempotency-Key", false},
		// a token of a kind, singular, is a credential; a count of a model's tokens is plural
		{"INPUT_TOKEN", true}, {"INPUT_GITHUB_TOKEN", true}, {"OUTPUT_TOKEN", true}, {"CONTEXT_TOKEN", true}, // GitHub Actions inputs
		{"MAX_TOKEN", false}, {"max_new_tokens", false}, {"MAX_NEW_TOKENS", false}, {"min_new_tokens", false},
		// a rate of tokens, Auth0's domain: about a credential; a numbered token is one
		{"TOKENS_PER_MINUTE", false}, {"token_rate", false}, {"AUTH0_DOMAIN", false}, {"TOKEN_2", true}, {"API_KEY_2", true},
		{"input_tokens", false}, {"max_completion_tokens", false}, {"NEW_TOKEN", true},
		// British spelling (the substring rule caught it through "auth")
		{"Authorisation", true}, {"X-Authorisation", true},
		// names that end with what holds a credential
		{"GITHUB_PAT", true}, {"GITLAB_PAT", true}, {"AZURE_DEVOPS_EXT_PAT", true}, {"pat", true},
		{"PINATA_JWT", true}, {"SUPABASE_JWT", true}, {"X-JWT", true}, {"jwt", true},
		{"DB_PW", true}, {"SMTP_PW", true},
		{"SENTRY_DSN", true}, {"MYSQL_DSN", true}, {"DATABASE_DSN", true},
		{"AZURE_STORAGE_CONNECTION_STRING", true}, {"MDB_MCP_CONNECTION_STRING", true}, {"DB_CONN_STR", true}, {"ConnectionString", true},
		{"SLACK_WEBHOOK_URL", true}, {"DISCORD_WEBHOOK_URL", true}, {"SLACK_WEBHOOK", true},
		{"SEED_PHRASE", true}, {"WALLET_SEED_PHRASE", true}, {"TELEGRAM_SESSION_STRING", true},
		{"MNEMONIC", true}, {"TON_MNEMONIC", true}, {"MNEMONIC_PHRASE", true},
		{"code", true}, // Azure Functions: ?code=FUNCTION_KEY
		// ... and not when other words follow that are about it, or it is not the name's end
		{"JWT_ISSUER", false}, {"JWT_AUDIENCE", false}, {"JWT_EXPIRES_IN", false}, {"JWT_ALGORITHM", false},
		{"WEBHOOK_EVENTS", false}, {"WEBHOOK_PATH", false}, {"WEBHOOK_ENABLED", false}, {"DSN_TIMEOUT", false},
		{"MNEMONIC_FILE", false}, {"PW_TEST_HTML_REPORT_OPEN", false}, {"PW_TEST_CONNECT_WS_ENDPOINT", false},
		{"COUNTRY_CODE", false}, {"lang_code", false}, {"phrase", false}, {"search_phrase", false},
		{"SEED", false}, {"RANDOM_SEED", false}, {"PATTERN", false}, {"session", false}, {"XDG_SESSION_ID", false},
		// where an auth server is, and what it grants, is no credential
		{"AUTH_SCOPE", false}, {"OAUTH_SCOPES", false}, {"AUTH_HOST", false}, {"AUTH_PORT", false},
		{"AUTH_ISSUER", false}, {"TOKEN_AUDIENCE", false}, {"AUTH_DOMAIN", false}, {"AUTH_REALM", false},
		{"AUTH_SERVER_URL", false}, {"OAUTH_REDIRECT_URI", false}, {"OAUTH_CALLBACK_URL", false},
		// documented credentials the rule already caught: they must stay
		{"GITHUB_PERSONAL_ACCESS_TOKEN", true}, {"SLACK_BOT_TOKEN", true}, {"SLACK_SIGNING_SECRET", true},
		{"NOTION_API_KEY", true}, {"STRIPE_SECRET_KEY", true}, {"AWS_SESSION_TOKEN", true}, {"AZURE_CLIENT_SECRET", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", true}, {"HF_TOKEN", true}, {"PGPASSWORD", true}, {"MYSQL_PWD", true},
		{"JIRA_API_TOKEN", true}, {"LINEAR_API_KEY", true}, {"SENTRY_AUTH_TOKEN", true}, {"DD_APP_KEY", true},
		{"TWILIO_AUTH_TOKEN", true}, {"SENDGRID_API_KEY", true}, {"BRAVE_API_KEY", true}, {"TAVILY_API_KEY", true},
		{"EXA_API_KEY", true}, {"FIRECRAWL_API_KEY", true}, {"GOOGLE_MAPS_API_KEY", true}, {"SUPABASE_SERVICE_ROLE_KEY", true},
		{"X-Auth-Token", true}, {"Ocp-Apim-Subscription-Key", true}, {"apikey", true}, {"X-Goog-Api-Key", true},
		{"Private-Token", true}, {"X-Shopify-Access-Token", true}, {"X-Figma-Token", true}, {"x-functions-key", true},
		{"X-Hasura-Admin-Secret", true}, {"X-RapidAPI-Key", true}, {"X-Vault-Token", true}, {"XRP_SECRET", true},
		{"AUTH_HEADER", true}, {"auth_user", true}, {"KEY_2", true},
	} {
		if got := sensitiveName(c.name); got != c.want {
			t.Errorf("sensitiveName(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

// An environment variable whose value is a JSON object gives its members named like
// credentials: the official Notion server takes its token only so
// (OPENAPI_MCP_HEADERS={"Authorization":"Bearer ntn_..."}), and a service account's JSON holds
// its private key. Its other members ("Notion-Version") are no secrets.
func TestEnvJSONSecretValues(t *testing.T) {
	sc := ServerConfig{Env: map[string]string{
		"OPENAPI_MCP_HEADERS": `{"Authorization": "Bearer ntn_Notion-Tok-31", "Notion-Version": "2022-06-28"}`,
		"GCP_SERVICE_ACCOUNT": `{"type": "service_account", "client_email": "a@p.iam.example", "private_key": "-----BEGIN PRIVATE KEY-----\nMIIE-Key-42\n-----END PRIVATE KEY-----\n", "nested": {"client_secret": "Nested-Sec-53"}, "list": [{"password": "List-Pw-64"}]}`,
		"LIMITS":              `{"max_tokens": 4096}`,
	}}
	got := map[string]bool{}
	for _, v := range SecretValues(sc) {
		got[v] = true
	}
	for _, want := range []string{"Bearer ntn_Notion-Tok-31", "ntn_Notion-Tok-31", "-----BEGIN PRIVATE KEY-----\nMIIE-Key-42\n-----END PRIVATE KEY-----\n", "Nested-Sec-53", "List-Pw-64"} {
		if !got[want] {
			t.Errorf("%q is not a secret", want)
		}
	}
	for _, not := range []string{"2022-06-28", "service_account", "a@p.iam.example", "4096"} {
		if got[not] {
			t.Errorf("%q is a secret", not)
		}
	}
}

// A capability URL carries its secret in its path (Zapier's MCP URL, a Slack webhook): Go's
// transport errors quote the URL whole ("Post \"URL\": dial tcp ..."), and the status reason
// took it to the registry stream, which every NATS client may read. A path segment that looks
// like a generated token is a secret; the words of an API's path are not.
func TestURLPathTokenSecretValues(t *testing.T) {
	for _, c := range []struct {
		url    string
		secret []string
	}{
		{"https://mcp.zapier.com/api/mcp/s/ZXhhbXBsZXNlY3JldHRva2VuMTIzNDU2Nzg5MA/mcp", []string{"ZXhhbXBsZXNlY3JldHRva2VuMTIzNDU2Nzg5MA"}},
		{"https://hooks.slack.com/services/T00000000/B00000000/aBcDeFgHiJkLmNoPqRsTuVwX1", []string{"aBcDeFgHiJkLmNoPqRsTuVwX1"}},
		{"https://mcp.example.com/t/550e8400-e29b-41d4-a716-446655440000/sse", []string{"550e8400-e29b-41d4-a716-446655440000"}},
		{"https://mcp.example.com/k/4f9c2a7e1b3d5f6a8c0e2b4d6f8a0c1e/mcp", []string{"4f9c2a7e1b3d5f6a8c0e2b4d6f8a0c1e"}},
		{"https://mcp.example.com/k/k7x2m9q4w8e1r5t3y6u0/mcp", []string{"k7x2m9q4w8e1r5t3y6u0"}},
		{"https://mcp.example.com/s/Ab1%2BcdEFgh23ijKLmn/mcp", []string{"Ab1%2BcdEFgh23ijKLmn", "Ab1+cdEFgh23ijKLmn"}},
		{"https://api.example.com/v1/mcp", nil},
		{"https://api.example.com/servers/github-enterprise-2024/mcp", nil},
		{"https://api.example.com/2025-06-18/sse", nil},
		{"https://api.example.com/workspaces/marketing-analytics/mcp", nil},
		{"https://api.example.com/MyCompanyWorkspace/mcp", nil},
	} {
		got := SecretValues(ServerConfig{URL: c.url})
		if !slices.Equal(got, c.secret) {
			t.Errorf("%s: secrets %q, want %q", c.url, got, c.secret)
		}
	}
	// Redacted from a transport error as the connector reports it.
	const u = "http://127.0.0.1:9/api/mcp/s/ZXhhbXBsZXNlY3JldHRva2VuMTIzNDU2Nzg5MA/mcp"
	msg := newRedactor(ServerConfig{URL: u}).String(`initialize: failed to send request: Post "` + u + `": dial tcp 127.0.0.1:9: connect: connection refused`)
	if strings.Contains(msg, "ZXhhbXBs") || !strings.Contains(msg, "127.0.0.1:9/api/mcp/s/") {
		t.Errorf("redacted: %s", msg)
	}
}

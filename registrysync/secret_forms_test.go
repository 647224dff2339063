package registrysync

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcpstream/mcpstream/redact"
	"github.com/mcpstream/mcpstream/subjects"
)

// secretSpellings returns the spellings of secret that text reaching a NATS client or a log
// must not hold: as is, JSON-escaped, base64 (standard and URL alphabets, unpadded: a prefix
// of every padded form), percent-escaped, and as Go's %v prints a []byte ("[115 107 ...]"),
// decimal bytes joined by spaces.
func secretSpellings(secret string) map[string]string {
	j, _ := json.Marshal(secret)
	dec := make([]string, len(secret))
	for i := 0; i < len(secret); i++ {
		dec[i] = strconv.Itoa(int(secret[i]))
	}
	return map[string]string{
		"raw":          secret,
		"json":         string(j[1 : len(j)-1]),
		"base64":       base64.RawStdEncoding.EncodeToString([]byte(secret)),
		"base64url":    base64.RawURLEncoding.EncodeToString([]byte(secret)),
		"urlencoded":   url.QueryEscape(secret),
		"decimalBytes": strings.Join(dec, " "),
	}
}

// assertNoSecret fails the test for every spelling of secret found in text.
func assertNoSecret(t *testing.T, what, text, secret string) {
	t.Helper()
	for form, s := range secretSpellings(secret) {
		if strings.Contains(text, s) {
			t.Errorf("%s holds the secret (%s): %s", what, form, text)
		}
	}
}

// echoHeadersServer serves an MCP server over streamable HTTP, except that its answer to
// tools/call is answer(request headers as JSON), sent as application/json.
func echoHeadersServer(t *testing.T, answer func(headers string) string) string {
	t.Helper()
	srv := server.NewMCPServer("echo", "1", server.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("echo"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("unreachable"), nil
	})
	inner := server.NewStreamableHTTPServer(srv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			hdr, _ := json.Marshal(r.Header)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, answer(string(hdr)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// A server that answers a tools/call with a JSON-RPC response without an id, its result
// echoing the request's headers (Authorization among them): the answer is unusable, and the
// error the caller gets must not quote the credential in any spelling — Go's %v of the
// response prints its result as decimal bytes, which a search for the value does not find.
func TestAnswerWithoutIDEchoingAuthorizationRedacted(t *testing.T) {
	t.Parallel()
	const secret = "tok-Secret-5150-xyz"
	u := echoHeadersServer(t, func(h string) string {
		return `{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":` + strconv.Quote(h) + `}]}}`
	})
	h, logs := runLogged(t, fastConfig(ServerConfig{Name: "noid", Transport: TransportHTTP, URL: u,
		Headers: map[string]string{"Authorization": "Bearer " + secret}}))
	rec := record(t, h.env, subjects.RegistryServer("noid"))
	rec.wait(0, "ready", isStatus(subjects.StatusReady, ""))
	r := dispatch(t, h, "noid", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{}`)})
	t.Logf("reply: error %+v result %s", r.Error, r.Result)
	raw, _ := json.Marshal(r)
	assertNoSecret(t, "the dispatch reply", string(raw), secret)
	for _, ev := range rec.all() {
		assertNoSecret(t, "registry event", string(ev.data), secret)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		assertNoSecret(t, "log line", line, secret)
	}
}

// A server that answers tools/list without an id, echoing the request's headers: the list
// fails, and neither its status reason nor the log quotes the credential (in decimal bytes).
func TestListAnswerWithoutIDEchoingAuthorizationRedacted(t *testing.T) {
	t.Parallel()
	const secret = "lst-Secret-8086-abc"
	srv := server.NewMCPServer("echo", "1", server.WithToolCapabilities(true))
	inner := server.NewStreamableHTTPServer(srv)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			hdr, _ := json.Marshal(r.Header)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","result":{"tools":[],"headers":`+string(hdr)+`}}`)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h, logs := runLogged(t, fastConfig(ServerConfig{Name: "noidlist", Transport: TransportHTTP, URL: ts.URL + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer " + secret}}))
	rec := record(t, h.env, subjects.RegistryServer("noidlist"))
	e := rec.wait(0, "the list's failure", func(e event) bool { return strings.Contains(string(e.data), "RPC id") })
	t.Logf("status: %s", e.data)
	for _, ev := range rec.all() {
		assertNoSecret(t, "registry event", string(ev.data), secret)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		assertNoSecret(t, "log line", line, secret)
	}
}

func TestByteDumps(t *testing.T) {
	t.Parallel()
	const secret = "Dump-Secret-1"
	dump := func(s string) string { return strings.ReplaceAll(fmt.Sprint([]byte(s)), "\n", "") }
	r := redactor{redact.New(secret)}
	for _, c := range []struct{ in, want string }{
		{"no brackets", "no brackets"},
		{"[1 2 3] [] [redacted] [256 1 2] [1  2] [1 2", "[1 2 3] [] [redacted] [256 1 2] [1  2] [1 2"},
		{"id: {2.0 <nil> " + dump(`{"a":"`+secret+`"}`) + " <nil>}", "id: {2.0 <nil> [redacted] <nil>}"},
		{dump(secret) + dump("ok ok") + "[" + dump(secret), "[redacted]" + dump("ok ok") + "[[redacted]"},
		{dump(base64.StdEncoding.EncodeToString([]byte(secret))), "[redacted]"},
		{"[[" + dump(secret) + "]]", "[[[redacted]]]"},
		{"Bearer " + secret, "Bearer [redacted]"},
	} {
		if got := r.String(c.in); got != c.want {
			t.Errorf("String(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := r.Err(errors.New(dump(secret))); got != "[redacted]" {
		t.Errorf("Err = %q", got)
	}
	if (redactor{}).String(dump(secret)) != dump(secret) {
		t.Error("a redactor without values changed a dump")
	}
}

// A URL whose user info is a token without a password (https://TOKEN@host/mcp, as git takes
// a token; an API key as Basic's user name with an empty password): net/http's errors quote
// the URL hiding a password only, so the connect failure's reason quoted the token.
func TestURLUserNameTokenRedacted(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every connection is refused
	const secret = "sk_live_User5150Token"
	for _, u := range []string{"http://" + secret + "@" + addr + "/mcp", "http://" + secret + ":@" + addr + "/mcp"} {
		if !slices.Contains(SecretValues(ServerConfig{URL: u}), secret) {
			t.Errorf("SecretValues(%s) lacks the user name", u)
		}
	}
	for _, u := range []string{"http://admin@host/mcp", "http://" + secret + ":pw-Secret@host/mcp"} {
		if slices.ContainsFunc(SecretValues(ServerConfig{URL: u}), func(v string) bool { return v == "admin" || v == secret }) {
			t.Errorf("SecretValues(%s) holds a user name that is no credential", u)
		}
	}
	h, logs := runLogged(t, fastConfig(ServerConfig{Name: "userinfo", Transport: TransportHTTP, URL: "http://" + secret + "@" + addr + "/mcp"}))
	rec := record(t, h.env, subjects.RegistryServer("userinfo"))
	e := rec.wait(0, "the connect failure", isStatus(subjects.StatusUnavailable, subjects.CodeConnectFailed))
	t.Logf("status: %s", e.data)
	for _, ev := range rec.all() {
		assertNoSecret(t, "registry event", string(ev.data), secret)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		assertNoSecret(t, "log line", line, secret)
	}
}

// A configured "Authorization: Basic base64(user:password)" header: a server that decodes the
// credential and quotes it (an error naming the user:password it refused) spells it decoded,
// which only the base64 form was redacted in.
func TestBasicHeaderCredentialDecoded(t *testing.T) {
	const cred = "alice:s3cr3t-Passw0rd-xyz"
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		sc := ServerConfig{Name: "b", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Basic " + enc.EncodeToString([]byte(cred))}}
		got := SecretValues(sc)
		for _, want := range []string{cred, "s3cr3t-Passw0rd-xyz"} {
			if !slices.Contains(got, want) {
				t.Errorf("SecretValues %v: %q missing", got, want)
			}
		}
		red := newRedactor(sc)
		if s := red.String("401: unknown credential " + cred); strings.Contains(s, "s3cr3t") {
			t.Errorf("redacted text still holds the password: %s", s)
		}
	}
}

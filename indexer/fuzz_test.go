package indexer

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// FuzzToolDef: any definition a server lists becomes a search document and a one-line summary
// without a panic; the summary is one valid UTF-8 line of at most maxLineBytes, free of control
// characters.
func FuzzToolDef(f *testing.F) {
	f.Add(`{"name":"get_document","title":"Get","description":"Reads one.\nMore.","inputSchema":{"type":"object","properties":{"id":{"type":"string"}}},"annotations":{"readOnlyHint":true,"destructiveHint":true}}`)
	f.Add(`{"name":1,"description":["x"],"inputSchema":"nope","annotations":{"title":"T","idempotentHint":"true"}}`)
	f.Add(`{"description":"\u0000\u001b[31mred\r\nsecond","annotations":null}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		d := parseDef(json.RawMessage(raw))
		if d.Hints.Destructive && d.Hints.ReadOnly {
			t.Fatalf("a read-only tool is labelled destructive: %s", raw)
		}
		_ = searchDoc("s__t", "s", "server", d)
		line := oneLine(d.Description)
		if len(line) > maxLineBytes || !utf8.ValidString(line) || strings.ContainsAny(line, "\r\n") {
			t.Fatalf("summary %q of %q", line, d.Description)
		}
		for _, r := range line {
			if unicode.IsControl(r) {
				t.Fatalf("control character %U in summary %q", r, line)
			}
		}
	})
}

// FuzzCatalogRequests sends arbitrary request bodies, as any NATS client may, to the catalog's
// search, details and servers handlers (a replica holding two servers' tools, a closed policy):
// no body may panic; an error has a stable code; every reply encodes as JSON.
func FuzzCatalogRequests(f *testing.F) {
	env := natstest.Start(f)
	pol, err := policy.New(&policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Tenant: "acme", Roles: []string{"support"}}},
		Rules:      []policy.Rule{{Name: "support", Roles: []string{"support"}, Allow: []string{"kb__*"}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	seq := publish(f, env.JS,
		snapshot("kb", "Knowledge base", tool("search_docs", "Search the documents."), tool("get_doc", "Read one document.")),
		snapshot("tickets", "Tickets", tool("create_ticket", "Open a ticket.", "destructive")))
	r := startReplica(f, env, "", pol, nil)
	waitSeq(f, r.Catalog, seq)
	codes := map[string]bool{subjects.CodeBadRequest: true, subjects.CodeNotFound: true, subjects.CodeUnknownPrincipal: true,
		subjects.CodeTooLarge: true, subjects.CodeInternal: true, subjects.CodeForbidden: true}
	f.Add("acme", `{"v":1,"query":"search documents","k":5,"detail":"full","principal":{"user":"alice"}}`)
	f.Add("acme", `{"query":"select:kb__get_doc,tickets__create_ticket","principal":{"user":"alice"},"servers":["kb"],"tags":["read-only"]}`)
	f.Add("acme", `{"names":["kb__get_doc","nope"],"principal":{"user":"alice"}}`)
	f.Add("acme", `{"k":-1,"detail":"everything","principal":{"tenant":"other","user":"alice"}}`)
	f.Add("local", `{"query":"","principal":{}}`)
	f.Add("acme", `[]`)
	f.Add("acme", `{"query":7}`)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, tenant, body string) {
		for _, h := range []handlerFunc{r.handleSearch, r.handleDetails, r.handleServers} {
			reply, apiErr := h(ctx, tenant, []byte(body))
			if apiErr != nil && (!codes[apiErr.Code] || apiErr.Message == "") {
				t.Fatalf("error %+v: want a known code and a message", apiErr)
			}
			if _, err := json.Marshal(reply); err != nil {
				t.Fatalf("reply does not encode: %v", err)
			}
		}
	})
}

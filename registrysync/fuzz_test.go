package registrysync

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// FuzzListing feeds arbitrary list results, as a hostile server could send them, through the
// parsing and validation of a listing: no input may panic, every rejection has a code, and every
// accepted item is valid, compact JSON with a distinct name.
func FuzzListing(f *testing.F) {
	f.Add(`{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"x","ttlMs":5,"cacheScope":"private"}`)
	f.Add(`{"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"a","inputSchema":{"type":"object"}}]}`)
	f.Add(`{"tools":[{"name":"","inputSchema":{"type":"string"}},{"name":1},null,[]]}`)
	f.Add(`{"resources":[{"uri":"file:///a","name":"a"}],"ttlMs":-1}`)
	f.Add(`{"prompts":[{"name":"p","arguments":[{"name":"x"}]}]}`)
	f.Add(`{"tools":[],"ttlMs":-1e400,"cacheScope":"Private"}`)
	f.Add(`{"tools":{"name":"a"}}`)
	f.Add(`null`)
	f.Add(`[1,2]`)
	f.Add(`{"tools":[{"name":"a\u0000b","inputSchema":{"type":"object","properties":{"x":{"type":"string"}},"required":"x"}}]}`)
	kinds := []subjects.Kind{subjects.KindTools, subjects.KindResources, subjects.KindPrompts}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, kind := range kinds {
			p, err := parsePage(kind, []byte(raw), 1<<30)
			if err != nil {
				if !strings.HasPrefix(err.Error(), subjects.CodeMalformedResponse+": ") {
					t.Fatalf("error without its code: %v", err)
				}
				continue
			}
			// Cache hints are read by their rules whatever the server sent: a ttlMs of 0 or
			// more, or none; a scope consumers know, or none.
			if p.ttlMs != nil && *p.ttlMs < 0 {
				t.Fatalf("ttlMs %d", *p.ttlMs)
			}
			if p.scope != "" && p.scope != subjects.ScopePublic && p.scope != subjects.ScopePrivate {
				t.Fatalf("cacheScope %q", p.scope)
			}
			// Items are counted before they are decoded: the count is the number decoded.
			if _, err := parsePage(kind, []byte(raw), len(p.items)); err != nil {
				t.Fatalf("a page of %d items refused with a limit of %d: %v", len(p.items), len(p.items), err)
			}
			if n := len(p.items); n > 0 {
				if _, err := parsePage(kind, []byte(raw), n-1); err == nil || !strings.HasPrefix(err.Error(), subjects.CodeSnapshotTooLarge+": ") {
					t.Fatalf("a page of %d items taken with a limit of %d: %v", n, n-1, err)
				}
			}
			acc := newAccumulator(kind, 1<<16)
			acc.addPage(p)
			acc.addPage(p) // the same items again: all duplicates
			for _, rej := range acc.l.Rejected {
				if rej.Code == "" {
					t.Fatalf("rejection without a code: %+v", rej)
				}
			}
			names := map[string]bool{}
			for _, item := range acc.l.Items {
				if !json.Valid(item) {
					t.Fatalf("accepted item is not valid JSON: %q", item)
				}
				name, key, rej := validateItem(kind, item, 1<<16)
				if rej != nil {
					t.Fatalf("accepted item %q fails validation again: %+v", item, rej)
				}
				if names[key] {
					t.Fatalf("name %q accepted twice", name)
				}
				names[key] = true
			}
			if len(acc.l.Items) > len(p.items) {
				t.Fatalf("%d items accepted out of %d", len(acc.l.Items), len(p.items))
			}
		}
	})
}

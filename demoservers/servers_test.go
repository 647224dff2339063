package demoservers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestNames(t *testing.T) {
	got := Names()
	want := []string{"kb", "logging", "ticketing"}
	if !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
}

func TestUnknownServer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	checks := []struct {
		name string
		err  error
	}{
		{"New", func() error { _, err := New("nope", Options{}); return err }()},
		{"NewWatched", func() error { _, err := NewWatched(ctx, "nope", Options{}); return err }()},
		{"Handler", func() error { _, err := Handler(ctx, "nope", Options{}); return err }()},
		{"ServeStdio", ServeStdio(ctx, "nope", Options{}, bytes.NewReader(nil), &bytes.Buffer{})},
		{"ServeHTTP", ServeHTTP(ctx, "nope", Options{}, "127.0.0.1:0")},
		{"ExtraTools", func() error { _, err := ExtraTools("nope"); return err }()},
	}
	for _, c := range checks {
		if !errors.Is(c.err, ErrUnknownServer) {
			t.Errorf("%s: err = %v, want ErrUnknownServer", c.name, c.err)
		}
	}
}

type wantHints struct {
	readOnly, destructive, idempotent, openWorld bool
}

var (
	readOnlyHints = wantHints{readOnly: true, idempotent: true}
	defaultTools  = map[string]map[string]wantHints{
		"logging": {
			"getLogs":     readOnlyHints,
			"getLogStats": readOnlyHints,
		},
		"ticketing": {
			"createIssue": {},
			"listIssues":  readOnlyHints,
			"closeIssue":  {destructive: true, idempotent: true},
		},
		"kb": {
			"search_knowledge_base": readOnlyHints,
			"get_document":          readOnlyHints,
		},
	}
	extraTools = map[string]map[string]wantHints{
		"logging":   {"tailLogs": readOnlyHints},
		"ticketing": {"assignIssue": {idempotent: true}},
		"kb":        {"summarize_document": readOnlyHints},
	}
)

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

func TestExtraTools(t *testing.T) {
	for _, name := range Names() {
		got, err := ExtraTools(name)
		if err != nil {
			t.Fatal(err)
		}
		if want := sortedKeys(extraTools[name]); !slices.Equal(got, want) {
			t.Errorf("ExtraTools(%q) = %v, want %v", name, got, want)
		}
	}
}

func boolOf(p *bool) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// checkToolDefinition checks what every demo tool must declare.
func checkToolDefinition(t *testing.T, tool mcp.Tool, want wantHints) {
	t.Helper()
	a := tool.Annotations
	for _, h := range []struct {
		name string
		got  *bool
		want bool
	}{
		{"readOnlyHint", a.ReadOnlyHint, want.readOnly},
		{"destructiveHint", a.DestructiveHint, want.destructive},
		{"idempotentHint", a.IdempotentHint, want.idempotent},
		{"openWorldHint", a.OpenWorldHint, want.openWorld},
	} {
		if h.got == nil || *h.got != h.want {
			t.Errorf("%s: %s = %s, want %v", tool.Name, h.name, boolOf(h.got), h.want)
		}
	}
	if a.Title == "" || tool.Title == "" {
		t.Errorf("%s: title %q, annotations.title %q: want both set", tool.Name, tool.Title, a.Title)
	}
	if len(tool.Description) < 20 {
		t.Errorf("%s: description %q too short", tool.Name, tool.Description)
	}
	if tool.InputSchema.Type != "object" {
		t.Errorf("%s: inputSchema.type = %q, want object", tool.Name, tool.InputSchema.Type)
	}
	if len(tool.InputSchema.Properties) == 0 {
		t.Errorf("%s: inputSchema has no properties", tool.Name)
	}
	for prop, v := range tool.InputSchema.Properties {
		m, _ := v.(map[string]any)
		if d, _ := m["description"].(string); d == "" {
			t.Errorf("%s: input property %q has no description", tool.Name, prop)
		}
	}
	if tool.OutputSchema.Type != "object" || len(tool.OutputSchema.Properties) == 0 {
		t.Errorf("%s: outputSchema = %+v, want an object schema with properties", tool.Name, tool.OutputSchema)
	}
}

func TestListTools(t *testing.T) {
	for _, kind := range transports {
		for _, name := range Names() {
			t.Run(kind+"/"+name, func(t *testing.T) {
				t.Parallel()
				c := connect(t, kind, name, testOptions(t))
				tools := listTools(t, c)
				want := defaultTools[name]
				if got := toolNamesOf(tools); !slices.Equal(got, sortedKeys(want)) {
					t.Fatalf("tools = %v, want %v", got, sortedKeys(want))
				}
				for _, tool := range tools {
					checkToolDefinition(t, tool, want[tool.Name])
				}
				if name == "logging" {
					i := slices.IndexFunc(tools, func(tool mcp.Tool) bool { return tool.Name == "getLogs" })
					if _, ok := tools[i].OutputSchema.Properties["entries"]; !ok {
						t.Errorf("getLogs outputSchema lacks entries: %+v", tools[i].OutputSchema)
					}
				}
			})
		}
	}
}

func TestServerInfo(t *testing.T) {
	descriptions := map[string]string{
		"logging":   "Application logs: query recent log entries by level and time",
		"ticketing": "Issue tracker: create and list tickets",
		"kb":        "Company knowledge base: policies, handbooks and FAQs",
	}
	versions := map[string]string{
		"stdio":        mcp.ProtocolVersion20260728,
		"http":         mcp.ProtocolVersion20260728,
		"stdio-legacy": mcp.ProtocolVersion20251125,
		"http-legacy":  mcp.ProtocolVersion20251125,
		"sse":          mcp.ProtocolVersion20251125,
	}
	for _, kind := range transports {
		for _, name := range Names() {
			t.Run(kind+"/"+name, func(t *testing.T) {
				t.Parallel()
				_, res := connectInit(t, kind, name, testOptions(t))
				if res.ServerInfo.Name != name {
					t.Errorf("serverInfo.name = %q, want %q", res.ServerInfo.Name, name)
				}
				if res.ServerInfo.Description != descriptions[name] {
					t.Errorf("serverInfo.description = %q, want %q", res.ServerInfo.Description, descriptions[name])
				}
				if res.Capabilities.Tools == nil || !res.Capabilities.Tools.ListChanged {
					t.Errorf("capabilities.tools = %+v, want listChanged", res.Capabilities.Tools)
				}
				if want, ok := versions[kind]; ok && res.ProtocolVersion != want {
					t.Errorf("protocolVersion = %q, want %q", res.ProtocolVersion, want)
				}
			})
		}
	}
}

// TestGoldenToolsList pins the exact tools/list JSON of each server, as a
// connector receives it. Run with -update after an intended change.
func TestGoldenToolsList(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			srv, err := New(name, testOptions(t))
			if err != nil {
				t.Fatal(err)
			}
			resp := srv.HandleMessage(context.Background(), json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			raw, err := json.Marshal(resp)
			if err != nil {
				t.Fatal(err)
			}
			var envelope struct {
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(raw, &envelope); err != nil || envelope.Result == nil {
				t.Fatalf("tools/list response %s: %v", raw, err)
			}
			var got bytes.Buffer
			if err := json.Indent(&got, envelope.Result, "", "  "); err != nil {
				t.Fatal(err)
			}
			got.WriteByte('\n')
			path := filepath.Join("testdata", "tools_"+name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("tools/list of %s differs from %s (run go test -update after an intended change):\n%s", name, path, got.String())
			}
		})
	}
}

package search_test

import (
	"encoding/json"
	"fmt"

	"github.com/mcpstream/mcpstream/search"
)

func Example() {
	ix := search.New(search.Config{})
	schema := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"File path"},"content":{"type":"string"}}}`)
	ix.Upsert(search.Doc{
		ID: "fs__write_file", Server: "fs", ServerDescription: "Local filesystem access.",
		Name: "write_file", Description: "Create a new file or overwrite an existing one.",
		Params: search.ParamsFromSchema(schema),
	})
	ix.Upsert(search.Doc{
		ID: "fs__read_file", Server: "fs", ServerDescription: "Local filesystem access.",
		Name: "read_file", Description: "Read the complete contents of a file.",
		Tags: []string{"read-only"},
	})
	ix.Upsert(search.Doc{
		ID: "github__create_issue", Server: "github", ServerDescription: "GitHub repositories and issues.",
		Name: "create_issue", Description: "Open a new issue in a repository.",
	})

	for _, q := range []string{"save the summary to /tmp/notes.md", "open a ticket on github", "quantum chromodynamics"} {
		fmt.Printf("%q:", q)
		for _, h := range ix.Search(search.Query{Text: q, K: 2}) {
			fmt.Printf(" %s", h.ID)
		}
		fmt.Println()
	}
	// Only read-only tools, say for a principal that may not write:
	readOnly := func(id string) bool { return id == "fs__read_file" }
	for _, h := range ix.Search(search.Query{Text: "read or write a file", Allow: readOnly}) {
		fmt.Println("allowed:", h.ID)
	}
	// Output:
	// "save the summary to /tmp/notes.md": fs__write_file
	// "open a ticket on github": github__create_issue
	// "quantum chromodynamics":
	// allowed: fs__read_file
}

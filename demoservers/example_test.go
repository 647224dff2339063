package demoservers_test

import (
	"context"
	"fmt"
	"log"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcpstream/mcpstream/demoservers"
)

func ExampleNames() {
	fmt.Println(demoservers.Names())
	// Output: [kb logging ticketing]
}

func ExampleExtraTools() {
	for _, name := range demoservers.Names() {
		extras, _ := demoservers.ExtraTools(name)
		fmt.Println(name, extras)
	}
	// Output:
	// kb [summarize_document]
	// logging [tailLogs]
	// ticketing [assignIssue]
}

func ExampleParseControl() {
	c, err := demoservers.ParseControl([]byte(`{"hide": ["closeIssue"], "add": ["assignIssue"]}`))
	fmt.Println(c.Hide, c.Add, err)
	_, err = demoservers.ParseControl([]byte(`{"hdie": ["closeIssue"]}`))
	fmt.Println(err)
	// Output:
	// [closeIssue] [assignIssue] <nil>
	// decode control file: json: unknown field "hdie"
}

// Connect to a demo server in the same process and call a tool.
func ExampleNew() {
	ctx := context.Background()
	srv, err := demoservers.New("kb", demoservers.Options{})
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		log.Fatal(err)
	}

	req := mcp.CallToolRequest{}
	req.Params.Name = "search_knowledge_base"
	req.Params.Arguments = map[string]any{"query": "软件退款期限", "topK": 1}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	top := res.StructuredContent.(map[string]any)["results"].([]any)[0].(map[string]any)
	fmt.Println(top["id"], "-", top["title"])
	// Output: POL-REFUND-SW - Refund policy: software licenses and subscriptions
}

package registrysync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

// Wiring a Manager: the registry stream must exist (subjects.EnsureStreams), then Run keeps
// every server in sync until the context ends. Dispatch runs tools/call in-process.
func ExampleManager() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := subjects.EnsureStreams(ctx, js, subjects.StreamOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	m := registrysync.New(js, nc, registrysync.Config{
		Servers: []registrysync.ServerConfig{
			{Name: "fs", Transport: registrysync.TransportStdio, Command: "npx",
				Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/tmp"}},
			{Name: "github", Transport: registrysync.TransportHTTP, URL: "https://api.example.com/mcp",
				Headers: map[string]string{"Authorization": "Bearer " + os.Getenv("GITHUB_TOKEN")},
				Secrets: []string{os.Getenv("GITHUB_TOKEN")}},
		},
	}, zerolog.New(os.Stderr))
	go func() { _ = m.Run(ctx) }()

	for !m.Ready() {
		time.Sleep(100 * time.Millisecond)
	}
	reply := m.Dispatch(ctx, "fs", subjects.DispatchRequest{
		V: 1, CallID: "c-1", Tool: "list_directory", Arguments: json.RawMessage(`{"path":"/tmp"}`),
	})
	if reply.Error != nil {
		fmt.Println(reply.Error.Code)
		return
	}
	fmt.Println(string(reply.Result))
}

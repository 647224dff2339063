package indexer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// A replica follows the registry stream and answers permission-filtered searches.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	srv, _ := natsembed.Start(natsembed.Config{StoreDir: dir, Listen: "none"})
	defer srv.Shutdown()
	nc, _ := srv.Connect()
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	subjects.EnsureStreams(ctx, js, subjects.StreamOptions{})

	// What registrysync publishes for a server: its status and its tools.
	status, _ := json.Marshal(subjects.Status{V: 1, Type: "status", Server: "github", Status: subjects.StatusReady})
	js.Publish(ctx, subjects.RegistryStatus("github"), status)
	snap, _ := json.Marshal(subjects.Snapshot{V: 1, Type: "snapshot", Server: "github", Kind: subjects.KindTools,
		Items: []json.RawMessage{
			json.RawMessage(`{"name":"create_issue","description":"Create an issue in a repository","inputSchema":{"type":"object"}}`),
			json.RawMessage(`{"name":"merge_pull_request","description":"Merge a pull request","annotations":{"destructiveHint":true}}`),
		}})
	ack, _ := js.Publish(ctx, subjects.RegistrySnapshot("github", subjects.KindTools), snap)

	cat, _ := indexer.Open(indexer.Config{InMemory: true})
	defer cat.Close()
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cat.Follow(fctx, js) }()
	for i := 0; i < 1000 && cat.Seq() < ack.Sequence; i++ {
		time.Sleep(5 * time.Millisecond)
	}

	rep := cat.Search(ctx, subjects.SearchRequest{V: 1, Query: "merge the pull request"})
	for _, t := range rep.Tools {
		fmt.Println(t.Name, t.Labels)
	}
	server, tool, _ := cat.Lookup("github__create_issue")
	fmt.Println(server, tool)
	cancel()
	<-done
	// Output:
	// github__merge_pull_request [destructive needs-approval]
	// github create_issue
}

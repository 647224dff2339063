package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natsembed"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestStreamBoundOverStoreNamesTheSetting: JetStream reserves a stream's max bytes from the
// server's file store limit when the stream is declared. A streams section asking for more
// (README's complete example asked for 200GiB of audit, more than deploy/'s NATS nodes and most
// disks hold) stopped every role with NATS's bare "insufficient storage resources available",
// which names neither the setting to lower nor the limit it ran into.
func TestStreamBoundOverStoreNamesTheSetting(t *testing.T) {
	srv, err := natsembed.Start(natsembed.Config{StoreDir: t.TempDir(), Listen: "none", MaxStore: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	fc := &fileConfig{}
	fc.streams.AuditMaxBytes = 2 << 30
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = ensureStreams(ctx, js, 1, fc)
	if err == nil {
		t.Fatal("a 2 GiB audit stream on a 1 GiB store was declared")
	}
	for _, want := range []string{subjects.AuditStream, "streams.auditMaxBytes", "2GiB", "max_file_store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestDeployStreamsFitTheNATSNodes: the streams section of deploy/mcpstream.yaml (README's
// complete example) must fit the JetStream store of deploy/'s NATS nodes, or the documented
// cluster cannot declare its streams: every role stops at start.
func TestDeployStreamsFitTheNATSNodes(t *testing.T) {
	cfg, err := loadConfig(filepath.Join("..", "..", "deploy", "mcpstream.yaml"), func(string) (string, bool) { return "x", true })
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.streamOptions(3)
	nodes, _ := filepath.Glob(filepath.Join("..", "..", "deploy", "nats-*.conf"))
	if len(nodes) == 0 {
		t.Fatal("no deploy/nats-*.conf")
	}
	re := regexp.MustCompile(`(?m)^\s*max_file_store:\s*(\d+)\s*(GB|G|TB|T)\s*$`)
	for _, node := range nodes {
		b, err := os.ReadFile(node)
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no max_file_store in GB or TB", node)
		}
		n, _ := parseSize(string(m[1]) + "GiB")
		if m[2][0] == 'T' {
			n <<= 10
		}
		// Read as GiB, the larger unit: whatever nats-server makes of "GB", this errs on the
		// side of the store being bigger, so a failure here is a real overbooking.
		if need := o.ResultsMaxBytes + o.AuditMaxBytes; need > n {
			t.Errorf("%s: max_file_store %s%s, but deploy/mcpstream.yaml reserves %d GiB for results and audit",
				filepath.Base(node), m[1], m[2], need>>30)
		}
	}
}

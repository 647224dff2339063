package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalEmbeddingsFlagsUsage: the embeddings flags of eval retrieval that cannot be used are
// usage errors (exit status 2, README CLI: "a flag's value out of its range"), found before
// the files are read, as --k's: --embeddings-dimensions -1 ended with exit status 1 and an
// embeddings_config error naming "Dimensions", --embeddings-url or --embeddings-model alone
// with exit status 1, and --embeddings-dimensions or --embeddings-key-env without
// --embeddings-url were ignored: the evaluation ran lexical, as if they had not been given.
func TestEvalEmbeddingsFlagsUsage(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "eval", "retrieval")
	files := []string{"--tools", filepath.Join(root, "tools.jsonl"), "--queries", filepath.Join(root, "queries-dev.jsonl")}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--embeddings-dimensions", "-1", "--embeddings-url", "http://127.0.0.1:1", "--embeddings-model", "m"}, "--embeddings-dimensions -1"},
		{[]string{"--embeddings-dimensions", "16385", "--embeddings-url", "http://127.0.0.1:1", "--embeddings-model", "m"}, "--embeddings-dimensions 16385"},
		{[]string{"--embeddings-model", "m"}, "--embeddings-url"},
		{[]string{"--embeddings-url", "http://127.0.0.1:1"}, "--embeddings-model"},
		{[]string{"--embeddings-dimensions", "512"}, "--embeddings-url"},
		{[]string{"--embeddings-key-env", "OPENAI_API_KEY"}, "--embeddings-url"},
	} {
		args := append(append([]string{"eval", "retrieval"}, files...), tc.args...)
		out, errOut, err := runCmd(t, context.Background(), args...)
		var code exitCode
		if !errors.As(err, &code) || code != 2 || !strings.Contains(errOut, tc.flag) {
			t.Errorf("%v: err %v, stderr %q, stdout %q; want exit status 2 naming %s", tc.args, err, firstLine(errOut), firstLine(out), tc.flag)
		}
	}
}

// TestDemoServerNegativeControlInterval: --control-interval documents 0 as the default (200ms);
// a negative one was taken as 0 too, silently, where --logs -1 is a usage error.
func TestDemoServerNegativeControlInterval(t *testing.T) {
	_, errOut, err := runCmd(t, context.Background(), "demo-server", "logging", "--control-interval", "-1s")
	var code exitCode
	if !errors.As(err, &code) || code != 2 || !strings.Contains(errOut, "--control-interval -1s") {
		t.Errorf("demo-server --control-interval -1s: err %v, stderr %q; want exit status 2 naming the flag", err, firstLine(errOut))
	}
}

//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUpDataDanglingSymlink: a --data through a symbolic link to nothing (a volume not mounted,
// a directory moved) said "mkdir DIR: file exists", about a path that does not seem to exist.
// It says the link points nowhere.
func TestUpDataDanglingSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "data")
	if err := os.Symlink(filepath.Join(dir, "gone", "volume"), link); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
	err := run(ctx, []string{"up", "--data", filepath.Join(link, "mcpstream"), "--nats-listen", "127.0.0.1:0", "--http-listen", ""}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("up --data through a dangling link: %v, want it said the link points nowhere", err)
	}
}

// TestMkdirAllSymlinkLoop: a --data through a symbolic link that points to itself (or round a
// loop) is no link to nothing: it said "which does not exist" of a link whose target is the
// link itself. It says the link cannot be followed, and why.
func TestMkdirAllSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "data")
	if err := os.Symlink("data", link); err != nil {
		t.Fatal(err)
	}
	err := mkdirAll(filepath.Join(link, "mcpstream"))
	if err == nil || strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("mkdirAll through a link to itself: %v, want it said the link loops", err)
	}
	// A relative path ends too (filepath.Dir stops at ".").
	t.Chdir(dir)
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "rel")); err != nil {
		t.Fatal(err)
	}
	if err := mkdirAll(filepath.Join("rel", "a", "b")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("mkdirAll through a relative dangling link: %v, want it said the link points nowhere", err)
	}
}

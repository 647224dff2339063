//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestConfigNamedPipeWithoutWriter: --config naming a FIFO nobody writes to blocked in open(2)
// for good, before anything was logged, and SIGTERM did not end it (only SIGKILL). It is refused
// at once.
func TestConfigNamedPipeWithoutWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := loadConfig(path, noEnv)
		done <- err
	}()
	err := <-done // a hang here is the bug (the test binary's -timeout ends it)
	if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), path+": ") ||
		!strings.Contains(err.Error(), "named pipe") {
		t.Errorf("%v: want an ErrConfig naming %s as a named pipe with nothing to read", err, path)
	}
}

// TestConfigPipe: a pipe with a writer (--config <(envsubst < tmpl.yaml), --config /dev/stdin)
// is read as before.
func TestConfigPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.WriteString("servers: [{name: a, command: x}]\n")
		w.Close()
	}()
	cfg, err := loadConfig("/dev/fd/"+strconv.Itoa(int(r.Fd())), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ServerConfigs(); len(got) != 1 || got[0].Name != "a" {
		t.Errorf("servers %+v", got)
	}
}

// TestConfigNotAFile: a directory is refused with a message that names it once and says why.
func TestConfigNotAFile(t *testing.T) {
	dir := t.TempDir()
	_, err := loadConfig(dir, noEnv)
	if err == nil || !errors.Is(err, ErrConfig) {
		t.Fatalf("%v: want ErrConfig", err)
	}
	if got := err.Error(); got != dir+": a directory, not a configuration file" {
		t.Errorf("got %q", got)
	}
}

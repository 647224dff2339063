package natsembed

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnusableStore: a store that cannot be made fails at once with its cause; it used to fail
// after ReadyWait as "not ready (is <address> in use?)".
func TestUnusableStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := Start(Config{StoreDir: filepath.Join(file, "nats"), Listen: "none", ReadyWait: time.Minute})
	if err == nil {
		srv.Shutdown()
		t.Fatal("started on a store under a regular file")
	}
	if errors.Is(err, ErrNotReady) || strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("got %v, want the store's cause", err)
	}
}

func TestStartAndConnect(t *testing.T) {
	srv, err := Start(Config{StoreDir: t.TempDir(), Listen: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	nc, err := srv.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Error("not connected")
	}
}

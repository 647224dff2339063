package natsembed

import (
	"strings"
	"sync"
	"testing"
)

// TestProblemsReported: without Logging, nats-server's warnings and errors reach
// Config.Problems. They were dropped: a store on a full disk ("no space left on device"),
// which fails every write while the server still looks well, was said nowhere unless
// nats-server's whole log was on (up --log-level trace). Its notices are not passed on.
func TestProblemsReported(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv, err := Start(Config{StoreDir: t.TempDir(), Listen: "none", Problems: func(level, msg string) {
		mu.Lock()
		got = append(got, level+" "+msg)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	srv.Inner().Errorf("store write: %s", "no space left on device")
	srv.Inner().Warnf("store state outdated")
	srv.Inner().Noticef("just a notice")
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(got, "\n")
	if !strings.Contains(all, "error store write: no space left on device") || !strings.Contains(all, "warn store state outdated") {
		t.Errorf("Problems got %q; want the error and the warning", got)
	}
	if strings.Contains(all, "just a notice") {
		t.Errorf("Problems got a notice: %q", got)
	}
}

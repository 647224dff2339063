package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
)

// A second `up --nats` on the data directory of a running one is refused before any role
// starts: its indexer would take the same catalog (replica 0), and its registrysync — started
// first — would run the same servers a second time and publish their statuses meanwhile.
func TestUpExternalNATSDataDirInUse(t *testing.T) {
	env := natstest.Start(t)
	p := startUp(t, "--nats", env.URL)
	waitFor(t, "/healthz 200", 1200, func() bool { code, _ := p.healthz(t); return code == http.StatusOK })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, errOut, err := runCmd(t, ctx, "up", "--nats", env.URL, "--data", p.data, "--http-listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "is in use by another mcpstream process") {
		t.Errorf("a second up --nats on the same data directory: %v", err)
	}
	if strings.Contains(errOut, "role started") {
		t.Errorf("the second up started roles before failing:\n%s", errOut)
	}
}

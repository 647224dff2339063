package registrysync

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// A status stored while the stream's info is read (its sequence past the info's last) is no
// purge: checkStream restored the connector, publishing its status and every list again into
// a healthy stream (a copy of each kept for good, once the de-duplication window has passed).
func TestCheckStreamStoreWhileInfoRead(t *testing.T) {
	env := natstest.Start(t)
	control := filepath.Join(t.TempDir(), "control.json")
	cfg := fastConfig(stdioServer(t, "ticketing", "demo:ticketing", "MCPSTREAM_TEST_CONTROL="+control))
	cfg.HeartbeatEvery = time.Hour // checkStream is called below
	h := run(t, env, cfg)
	waitUntil(t, "ready", h.m.Ready)
	status := subjects.RegistryStatus("ticketing")
	waitUntil(t, "tools published", func() bool { return lastSeq(t, env, subjects.RegistrySnapshot("ticketing", subjects.KindTools)) > 0 })
	waitUntil(t, "a status published", func() bool { return lastSeq(t, env, status) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	c := h.m.connector("ticketing")
	st, err := h.m.registryStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var raced uint64
	h.m.streamMu.Lock()
	h.m.stream = natstest.InfoThen{Stream: st, Then: func() {
		if !h.m.republishStatus(ctx, c, "a status stored while the stream's info is read") {
			t.Error("status not published")
		}
		raced = lastSeq(t, env, status)
	}}
	h.m.streamMu.Unlock()
	var restores sync.WaitGroup
	h.m.checkStream(ctx, &restores)
	restores.Wait()
	h.m.streamMu.Lock()
	h.m.stream = st
	h.m.streamMu.Unlock()
	h.m.checkStream(ctx, &restores)
	restores.Wait()
	if got := lastSeq(t, env, status); got != raced {
		t.Fatalf("the status was published again at %d, after the one stored at %d while the stream's info was read: a healthy stream taken for purged", got, raced)
	}
	if c.restoring.Load() {
		t.Fatal("a restore still runs")
	}
}

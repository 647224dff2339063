package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestInboxPrefixLimitFitsApprovalRead: the executor's longest request, the direct get of an
// approval record of a call whose tenant (MaxUserBytes) and id (maxCallID) are all escaped bytes,
// at the highest sequence, fits the NATS server's max_control_line with a reply inbox prefix of
// subjects.MaxInboxPrefix bytes (the most --nats-inbox takes): the connection stays open. A key
// made longer (or a lower limit) fails here rather than closing executors' connections.
func TestInboxPrefixLimitFitsApprovalRead(t *testing.T) {
	env := natstest.Start(t)
	key := approvalKey(strings.Repeat(".", subjects.MaxUserBytes), strings.Repeat(".", maxCallID), ^uint64(0))
	prefix := "_INBOX." + strings.Repeat("a", subjects.MaxInboxPrefix-len("_INBOX."))
	nc, err := nats.Connect(env.URL, nats.CustomInboxPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang fails, not a bound on speed
	defer cancel()
	kv, err := js.CreateOrUpdateKeyValue(ctx, ClaimsConfig(0, true, 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, key); err != jetstream.ErrKeyNotFound {
		t.Fatalf("get of a %d-byte key with a %d-byte inbox prefix: %v (connection closed: %v, last error: %v), want not found",
			len(key), len(prefix), err, nc.IsClosed(), nc.LastError())
	}
}

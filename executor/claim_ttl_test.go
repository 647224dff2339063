package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// Claims must outlive every way a call can come again: a ClaimTTL, or an existing claims
// bucket's TTL, shorter than a call may stay unanswered is refused at start. Before, a
// claim could expire while its call ran or waited for approval, and a redelivery or resend
// then found none and ran a side-effecting call again.
func TestClaimTTLShorterThanACallRefused(t *testing.T) {
	ctx := context.Background()
	env := natstest.Start(t)
	err := EnsureState(ctx, env.JS, Config{ClaimTTL: 5 * time.Minute})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ClaimTTL 5m0s") {
		t.Fatalf("ClaimTTL 5m: got %v, want ErrConfig naming it", err)
	}

	// A bucket declared with a short TTL (by hand, or by a process with another ClaimTTL), in
	// file storage: one in memory storage is refused for that first (see usableBucket), and
	// would not show that the short TTL is refused.
	if _, err := env.JS.CreateKeyValue(ctx, ClaimsConfig(20*time.Minute, false, 1)); err != nil {
		t.Fatal(err)
	}
	err = EnsureState(ctx, env.JS, Config{})
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "keeps claims 20m0s") ||
		!strings.Contains(err.Error(), "nats kv rm "+subjects.InflightBucket) {
		t.Fatalf("bucket of 20m: got %v, want ErrConfig naming its TTL and saying to remove it", err)
	}
	if err := env.JS.DeleteKeyValue(ctx, subjects.InflightBucket); err != nil {
		t.Fatal(err)
	}
	if err := EnsureState(ctx, env.JS, Config{}); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

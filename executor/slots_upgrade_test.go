package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// startNoUpdateServer starts a JetStream server with two users: admin, who may do anything, and
// exec, whose NATS permissions deny stream updates ($JS.API.STREAM.UPDATE.>), as an operator
// may give the executors; it returns JetStream APIs of each.
func startNoUpdateServer(t *testing.T) (admin, exec jetstream.JetStream) {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		Users: []*server.User{{Username: "admin", Password: "admin"}, {Username: "exec", Password: "exec",
			Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.UPDATE.>"}}}}}}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(waitLimit) {
		t.Fatal("server not ready")
	}
	connect := func(user string) jetstream.JetStream {
		nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(user, user), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	return connect("admin"), connect("exec")
}

// TestSlotsTTLsRefusedIsNotOldServer: the slots bucket of an older mcpstream (no per-key TTLs)
// could not be given them because the executor's NATS user may not update streams; the
// executor warned "nats-server before 2.11" on a 2.11+ server, pointing the operator at an
// upgrade they had done, and hid the refusal. The reason given is the refusal, with its text.
func TestSlotsTTLsRefusedIsNotOldServer(t *testing.T) {
	admin, exec := startNoUpdateServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := admin.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket, History: 1,
		TTL: DefaultSlotLease, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	// The denied update is dropped by the server (a permissions violation is only reported
	// asynchronously): its request times out, here after 2 s.
	uctx, ucancel := context.WithTimeout(ctx, 2*time.Second)
	defer ucancel()
	kv, noTTLs, err := ensureSlots(uctx, exec, Config{}.withDefaults(), 1)
	if err != nil || kv == nil {
		t.Fatalf("ensureSlots: %v", err)
	}
	if noTTLs == "" {
		t.Fatal("per-key TTLs taken for granted on a bucket that could not be given them")
	}
	if strings.Contains(noTTLs, "2.11") || !strings.Contains(noTTLs, context.DeadlineExceeded.Error()) ||
		!strings.Contains(noTTLs, "KV_"+subjects.SlotsBucket) || !strings.Contains(noTTLs, "allow_msg_ttl") {
		t.Fatalf("reason %q: want the refusal's text, naming the bucket's stream and allow_msg_ttl, not an old nats-server", noTTLs)
	}
}

// TestSlotsTTLRaiseRefusedSaysWhatToDo: a slots bucket with per-key TTLs but a TTL shorter than
// the longest call (declared by hand, or by an executor with shorter timeouts) whose TTL the
// executor may not raise stopped it with "raising its TTL to …: <error>": neither the TTL it
// has nor what to do. The error (ErrLimits) names the bucket, both TTLs, the refusal and the
// remedies.
func TestSlotsTTLRaiseRefusedSaysWhatToDo(t *testing.T) {
	admin, exec := startNoUpdateServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := admin.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket, History: 1,
		TTL: DefaultSlotLease, LimitMarkerTTL: time.Second, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	uctx, ucancel := context.WithTimeout(ctx, 2*time.Second)
	defer ucancel()
	cfg := Config{}.withDefaults()
	_, _, err := ensureSlots(uctx, exec, cfg, 1)
	if err == nil {
		t.Fatal("started with a slots bucket whose TTL is shorter than the longest call")
	}
	msg := err.Error()
	for _, want := range []string{subjects.SlotsBucket, cfg.slotHold().String(), DefaultSlotLease.String(),
		context.DeadlineExceeded.Error(), "nats stream edit KV_" + subjects.SlotsBucket, "$JS.API.STREAM.UPDATE.KV_" + subjects.SlotsBucket} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if !errors.Is(err, ErrLimits) {
		t.Errorf("error %v is not ErrLimits", err)
	}
}

// TestSlotsTTLRaceKeepsLongest: two executors with other call timeouts upgrade the slots bucket
// at once. A stream update replaces the whole config, with no compare-and-set: the one needing
// less read the old TTL, the other raised it, and the first then wrote its own, shorter, TTL
// over it, which freed the slots of the other's long calls while they ran. After raising the
// TTL an executor reads it again and raises it again when it is short of what it needs; and
// one needing less never lowers it.
func TestSlotsTTLRaceKeepsLongest(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := env.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket, History: 1,
		TTL: DefaultSlotLease, LimitMarkerTTL: time.Second, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	step := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(waitLimit):
			t.Fatalf("no %s", what)
		}
	}
	signal := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		case <-time.After(waitLimit):
		}
	}
	// long: read → (short reads, long writes, short writes) → long reads again.
	longRead, longGo, longWrote, longGoAgain := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	shortRead, shortGo := make(chan struct{}), make(chan struct{})
	long := Config{MaxCallTimeout: 20 * time.Minute}.withDefaults()
	writes := 0
	long.hooks.slotsUpdate = func(before bool) {
		writes++
		if writes > 2 {
			return // raised again: not held up
		}
		if before {
			signal(longRead)
			<-longGo
		} else {
			signal(longWrote)
			<-longGoAgain
		}
	}
	short := Config{MaxCallTimeout: 11 * time.Minute}.withDefaults()
	short.hooks.slotsUpdate = func(before bool) {
		if before {
			signal(shortRead)
			<-shortGo
		}
	}
	longDone, shortDone := make(chan error, 1), make(chan error, 1)
	go func() {
		_, noTTLs, err := ensureSlots(ctx, env.JS, long, 1)
		longDone <- cmpErr(noTTLs, err)
	}()
	step("read of the long executor", longRead)
	go func() {
		_, noTTLs, err := ensureSlots(ctx, env.JS, short, 1)
		shortDone <- cmpErr(noTTLs, err)
	}()
	step("read of the short executor", shortRead)
	close(longGo)
	step("update of the long executor", longWrote)
	close(shortGo)
	select {
	case err := <-shortDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the short executor did not end")
	}
	close(longGoAgain)
	if err := <-longDone; err != nil {
		t.Fatal(err)
	}
	maxAge := func() time.Duration {
		t.Helper()
		s, err := env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.MaxAge
	}
	if got := maxAge(); got < long.slotHold() {
		t.Fatalf("slots bucket TTL %s after both executors declared it, want at least the long executor's %s", got, long.slotHold())
	}
	// Declared again by the one needing less: kept.
	short.hooks.slotsUpdate = nil
	if _, noTTLs, err := ensureSlots(ctx, env.JS, short, 1); err != nil || noTTLs != "" {
		t.Fatalf("ensureSlots again: %q %v", noTTLs, err)
	}
	if got := maxAge(); got != long.slotHold() {
		t.Fatalf("slots bucket TTL %s after the short executor declared it again, want %s kept", got, long.slotHold())
	}
}

func cmpErr(noTTLs string, err error) error {
	if err == nil && noTTLs != "" {
		return errors.New("no per-key TTLs: " + noTTLs)
	}
	return err
}

// TestServerBefore211: the versions a nats-server gives in its INFO; unknown is not "before".
func TestServerBefore211(t *testing.T) {
	for v, want := range map[string]bool{"2.10.22": true, "2.9.0": true, "1.4.1": true, "2.11.0": false, "2.11.0-RC.1": false,
		"2.15.2": false, "3.0.0": false, "v2.10.1": true, "": false, "garbage": false} {
		if got := serverBefore211(v); got != want {
			t.Errorf("serverBefore211(%q) = %v, want %v", v, got, want)
		}
	}
}

// upgradingLeaderJS is the JetStream API of a cluster in a rolling upgrade: the meta leader
// that answered the account info was a nats-server before 2.11 (API level 0: nats.go refuses
// a bucket with LimitMarkerTTL, ErrLimitMarkerTTLNotSupported), the one that takes the stream
// requests after it a 2.11 or later, which turns allow_msg_ttl on.
type upgradingLeaderJS struct{ jetstream.JetStream }

func (j upgradingLeaderJS) CreateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if cfg.LimitMarkerTTL != 0 {
		return nil, jetstream.ErrLimitMarkerTTLNotSupported
	}
	return j.JetStream.CreateKeyValue(ctx, cfg)
}

// TestSlotsTTLsAfterLeaseFallbackRaised: the slots bucket was declared as for a nats-server
// before 2.11 (its TTL the lease) and then given per-key TTLs by a newer meta leader; its TTL
// was compared with the lease, not with the longest a call may hold its slot, and kept: the
// executor took per-key TTLs (no warning) while the bucket's TTL freed every slot a lease
// after it was written, also the slot of a crashed executor's call still running.
func TestSlotsTTLsAfterLeaseFallbackRaised(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cfg := Config{}.withDefaults()
	_, noTTLs, err := ensureSlots(ctx, upgradingLeaderJS{env.JS}, cfg, 1)
	if err != nil || noTTLs != "" {
		t.Fatalf("ensureSlots: no per-key TTLs %q, %v", noTTLs, err)
	}
	s, err := env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; !c.AllowMsgTTL || c.MaxAge != cfg.slotHold() {
		t.Fatalf("slots bucket with per-key TTLs: allow_msg_ttl %v, TTL %s; want its TTL %s, the longest a call may hold its slot",
			c.AllowMsgTTL, c.MaxAge, cfg.slotHold())
	}
}

// TestSlotsTTLLoweredEachTimeCountsRaises: a bucket of an older mcpstream (no per-key TTLs)
// whose TTL another process lowers after every raise: the executor stops (ErrLimits) after
// slotsUpdateTries raises, and says how many it made. Turning per-key TTLs on counted as a
// raise: it raised the TTL 4 times and said 5.
func TestSlotsTTLLoweredEachTimeCountsRaises(t *testing.T) {
	env := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := env.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: subjects.SlotsBucket, History: 1,
		TTL: DefaultSlotLease, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	cfg := Config{}.withDefaults()
	raises := 0
	cfg.hooks.slotsUpdate = func(before bool) {
		if before {
			raises++
			return
		}
		// Another process lowers it again.
		s, err := env.JS.Stream(ctx, "KV_"+subjects.SlotsBucket)
		if err != nil {
			t.Error(err)
			return
		}
		c := s.CachedInfo().Config
		c.MaxAge = DefaultSlotLease
		if _, err := env.JS.UpdateStream(ctx, c); err != nil {
			t.Error(err)
		}
	}
	_, _, err := ensureSlots(ctx, env.JS, cfg, 1)
	if !errors.Is(err, ErrLimits) {
		t.Fatalf("got %v, want ErrLimits", err)
	}
	if raises != slotsUpdateTries {
		t.Errorf("raised the TTL %d times, want %d", raises, slotsUpdateTries)
	}
	if want := fmt.Sprintf("after raising it %d times", raises); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

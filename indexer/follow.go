package indexer

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/dgraph-io/badger/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// ErrFollowing is returned by a second concurrent Follow on one catalog.
var ErrFollowing = errors.New("catalog already following a stream")

// Follow consumes the registry stream from the replica's last applied sequence (from the start
// when the catalog is empty) and applies every message, until ctx is done; it then returns nil.
// Consumer and connection failures are retried with backoff; a store failure ends it with an
// error wrapping ErrStore. Ready turns true once the replica has applied every message the
// stream held when Follow (or a retry of it) started (at once when none follows its position,
// even if the stream's last sequence is past it: those messages were deleted).
//
// A catalog built from another stream (the stream was deleted and recreated), or from messages
// the stream no longer holds (purged, even only up to a sequence behind the catalog's
// position), is dropped and rebuilt by replay: when Follow starts, and within seconds when the
// stream is purged while it follows it.
func (c *Catalog) Follow(ctx context.Context, js jetstream.JetStream) error {
	if !c.following.CompareAndSwap(false, true) {
		return ErrFollowing
	}
	defer c.following.Store(false)
	if c.cfg.Embedder != nil {
		vctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); c.vectorize(vctx) }()
		defer func() { cancel(); <-done }()
	}
	if every := c.cfg.gcInterval(); !c.cfg.InMemory && every > 0 {
		gctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); c.gcLoop(gctx, every) }()
		defer func() { cancel(); <-done }()
	}
	// Options, not fields set afterwards: the constructor starts the first interval at the
	// default 500 ms.
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second), backoff.WithMaxElapsedTime(0))
	for {
		err := c.follow(ctx, js, bo)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrStore) {
			return err
		}
		wait := bo.NextBackOff()
		c.log.Warn().Err(err).Dur("retry_in", wait).Uint64("seq", c.Seq()).Msg("registry consumer failed; resuming from the last applied sequence")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (c *Catalog) follow(ctx context.Context, js jetstream.JetStream, bo backoff.BackOff) error {
	st, err := js.Stream(ctx, c.cfg.Stream)
	if err != nil {
		return fmt.Errorf("registry stream %s: %w", c.cfg.Stream, err)
	}
	info := st.CachedInfo()
	if err := c.checkOrigin(info); err != nil {
		return err
	}
	target := info.State.LastSeq
	c.streamLast.Store(target)
	if c.Seq() >= target || info.State.Msgs == 0 {
		c.markReady()
	}
	oc := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if s := c.Seq(); s > 0 {
		oc.DeliverPolicy, oc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, s+1
	}
	cons, err := js.OrderedConsumer(ctx, c.cfg.Stream, oc)
	if err != nil {
		return fmt.Errorf("ordered consumer: %w", err)
	}
	// Buffer at most two of the largest events: a replay must not hold the stream in memory.
	it, err := cons.Messages(jetstream.PullMaxBytes(2 * subjects.MaxEventBytes))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	defer it.Stop()
	if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
		noteMax(&c.through, target) // nothing held after the replica's position
	}
	if ci := cons.CachedInfo(); !c.Ready() && ci != nil && ci.NumPending == 0 {
		// Nothing after the replica's position: the stream's last messages were deleted
		// (`nats stream rmm`, a subject purged), so no message will come at its last sequence
		// and none with nothing pending after it. Caught up all the same.
		c.markReady()
		c.log.Info().Uint64("seq", c.Seq()).Uint64("stream_last", target).Int("tools", c.Stats().Tools).
			Msg("catalog caught up with the registry stream (its messages after the catalog's position were deleted)")
	}
	// The stream may be purged while the replica follows it (the ordered consumer just goes
	// on with the next message): watch it, and start over through checkOrigin when it was, as
	// a restarted replica would.
	lost := make(chan string, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	// Next waits on wctx, which ctx's end and a lost origin cancel: the iterator's Stop does not
	// end a Next while the ordered consumer makes itself again (nats.go makes the new
	// subscription after Stop stopped the old one, and Next waits on it).
	var watching sync.WaitGroup
	defer func() {
		wcancel()
		watching.Wait() // (a test's change of originCheckEvery races no watch left running)
	}()
	watching.Go(func() { c.watchOrigin(wctx, st, func(why string) { lost <- why; wcancel() }) })
	// And the iterator's Stop on wctx's end all the same: while the stream is missing, the
	// ordered consumer retries making itself again, for good, inside Next, watching no context
	// but its Stop (a stop then waited for the stream to come back).
	stopIt := context.AfterFunc(wctx, it.Stop)
	defer stopIt()
	c.log.Info().Uint64("from", c.Seq()+1).Uint64("stream_last", target).Msg("following the registry stream")
	for {
		msg, err := it.Next(jetstream.NextContext(wctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			select {
			case why := <-lost:
				return fmt.Errorf("%s while following it", why)
			default:
			}
			return fmt.Errorf("next message: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			c.log.Warn().Err(err).Str("subject", msg.Subject()).Msg("message without JetStream metadata; skipped")
			continue
		}
		seq := md.Sequence.Stream
		noteMax(&c.streamLast, seq+md.NumPending)
		if seq <= c.Seq() {
			continue
		}
		if err := c.applyMsg(seq, msg.Subject(), msg.Data()); err != nil {
			return err
		}
		bo.Reset()
		if md.NumPending == 0 {
			noteMax(&c.through, target) // what it did not apply up to target was deleted
		}
		if !c.Ready() && (seq >= target || md.NumPending == 0) {
			c.markReady()
			c.log.Info().Uint64("seq", seq).Int("tools", c.Stats().Tools).Msg("catalog caught up with the registry stream")
		}
	}
}

func (c *Catalog) markReady() { c.ready.Store(true) }

// noteMax raises v to n when n is larger.
func noteMax(v *atomic.Uint64, n uint64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// originCheckEvery is how often a following replica checks that its stream was not purged or
// recreated (a variable: tests shorten it).
var originCheckEvery = 5 * time.Second

// watchOrigin calls lost once, and returns, when the stream the replica follows no longer holds
// the events its catalog was built from (see checkOrigin), until ctx is done. A failed check
// (NATS away) is retried at the next one.
func (c *Catalog) watchOrigin(ctx context.Context, st jetstream.Stream, lost func(why string)) {
	t := time.NewTicker(originCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stored, first, err := c.readOrigin()
		if err != nil {
			continue
		}
		// The position first: a message applied after the stream info was read is not
		// taken for one past the stream's end.
		seq := c.Seq()
		info, err := st.Info(ctx)
		if err != nil {
			continue
		}
		noteMax(&c.streamLast, info.State.LastSeq)
		if why := originLost(info, stored, first, seq); why != "" {
			lost(why)
			return
		}
	}
}

// readFormat reads the stored catalogFormat ("": none recorded, a catalog of format 1 or an
// empty one) and the sequence of the last commit of a version that records it (keyFormatSeq;
// 0: none).
func (c *Catalog) readFormat() (format string, formatSeq uint64, err error) {
	v, err := c.readMeta(keyFormat, keyFormatSeq)
	if len(v[1]) == 8 {
		formatSeq = binary.BigEndian.Uint64(v[1])
	}
	return string(v[0]), formatSeq, err
}

// readMeta reads the values of meta keys (nil for a key not stored), in one transaction.
func (c *Catalog) readMeta(keys ...[]byte) ([][]byte, error) {
	vals := make([][]byte, len(keys))
	err := c.db.View(func(txn *badger.Txn) error {
		for i, k := range keys {
			it, err := txn.Get(k)
			if errors.Is(err, badger.ErrKeyNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if vals[i], err = it.ValueCopy(nil); err != nil {
				return err
			}
		}
		return nil
	})
	return vals, err
}

// formatProblem says why a catalog at seq (> 0) of the stored format and formatSeq must be
// rebuilt ("": it need not).
func formatProblem(format string, formatSeq, seq uint64) string {
	switch {
	case format != catalogFormat:
		return fmt.Sprintf("the catalog was stored in format %q by another mcpstream version (this one stores %q)", cmp.Or(format, "1"), catalogFormat)
	case formatSeq == 0:
		return fmt.Sprintf("the catalog does not record which version applied its messages (stored before format records were kept; this version stores %q)", catalogFormat)
	case formatSeq != seq:
		return fmt.Sprintf("the catalog's messages after %d were applied by an mcpstream version that records no format (this one stores %q)", formatSeq, catalogFormat)
	}
	return ""
}

// readOrigin reads the stored origin of the catalog: the creation time of its stream and the
// stream sequence of the first message applied (0: not recorded).
func (c *Catalog) readOrigin() (stored string, first uint64, err error) {
	v, err := c.readMeta(keyStream, keyFirst)
	if len(v[1]) == 8 {
		first = binary.BigEndian.Uint64(v[1])
	}
	return string(v[0]), first, err
}

// originLost says why a catalog at seq, built from the stream created at stored (RFC 3339)
// from its message first, cannot go on following the stream info describes ("": it can).
func originLost(info *jetstream.StreamInfo, stored string, first, seq uint64) string {
	switch {
	case stored != "" && stored != info.Created.UTC().Format(time.RFC3339Nano):
		return "the registry stream was recreated"
	case seq > info.State.LastSeq:
		return "the catalog is ahead of the registry stream"
	case seq > 0 && (seq < info.State.FirstSeq || first > 0 && first < info.State.FirstSeq):
		// The registry stream keeps every event (no limits) but the confirmations registrysync
		// stores with a per-message TTL, which are never a catalog's origin (applyMsg), and a
		// snapshot is kept before any of them: events the catalog applied are gone only
		// if it was purged (whole, or up to a sequence, even one behind the catalog's
		// position), whatever was published since. A replica built now would not have them,
		// so this one drops what it built from them.
		return "the registry stream no longer holds the events the catalog was built from (purged)"
	}
	return ""
}

// checkOrigin drops the catalog when it was built from another incarnation of the stream or
// when the stream no longer holds the messages right after its position.
func (c *Catalog) checkOrigin(info *jetstream.StreamInfo) error {
	origin := info.Created.UTC().Format(time.RFC3339Nano)
	stored, first, err := c.readOrigin()
	if err != nil {
		return fmt.Errorf("%w: read origin: %w", ErrStore, err)
	}
	seq := c.Seq()
	why := originLost(info, stored, first, seq)
	format, formatSeq, err := c.readFormat()
	if err != nil {
		return fmt.Errorf("%w: read format: %w", ErrStore, err)
	}
	if why == "" && seq > 0 {
		why = formatProblem(format, formatSeq, seq)
	}
	if why != "" {
		c.log.Warn().Str("why", why).Uint64("seq", seq).Uint64("stream_first", info.State.FirstSeq).
			Uint64("stream_last", info.State.LastSeq).Msg("dropping the catalog to rebuild it by replay")
		c.ready.Store(false)
		c.storeMu.Lock() // no value log GC step rewrites a file DropAll deletes
		err := c.db.DropAll()
		c.storeMu.Unlock()
		if err != nil {
			return fmt.Errorf("%w: drop: %w", ErrStore, err)
		}
		c.mu.Lock()
		c.reset()
		c.mu.Unlock()
		stored, seq, format = "", 0, ""
	}
	if format != catalogFormat {
		if err := c.update(func(txn *badger.Txn) error { return txn.Set(keyFormat, []byte(catalogFormat)) }); err != nil {
			return storeError("write format", err)
		}
	}
	if stored != origin {
		if err := c.update(func(txn *badger.Txn) error { return txn.Set(keyStream, []byte(origin)) }); err != nil {
			return storeError("write origin", err)
		}
	}
	if seq > 0 && first == 0 {
		// A catalog built before the first sequence was recorded: the stream's events before
		// its first are gone already; a later trim is noticed.
		if err := c.update(func(txn *badger.Txn) error { return txn.Set(keyFirst, seqValue(info.State.FirstSeq)) }); err != nil {
			return storeError("write first sequence", err)
		}
	}
	return nil
}

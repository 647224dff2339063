package registrysync

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// heldBack is a kind with a notification held back: the connector saw it but stored no
// ListChanged after it, counting on one of its own that waits for an answer (or its publish
// failed). Consumers are stale for that waiting ListChanged only until any answer to it: another
// connector of the server may answer it with a list that began before the held-back
// notification (its session had not seen the change). So while a notification is held back,
// the connector watches the kind's snapshot and Confirmed subjects, and an answer it sees there
// makes it store a ListChanged at once (answered). The watch is a core subscription, which gets
// nothing while the connection is down: once it is back, the notifier reads the stream for an
// answer stored meanwhile (recheck).
type heldBack struct {
	gen   uint64 // generation of the latest notification held back
	after uint64 // the ListChanged that waited: a Confirmed with an afterSeq below it lifts nothing (read by the watch)
	subs  []*nats.Subscription
	// seen: the watch saw an answer, or the stream holds one (set on the NATS client's
	// goroutine, or by recheck; an answer seen by a watch since ended counts for nothing).
	seen atomic.Bool
	// waiting is the ListChanged a read of the stream made while subs were up found still
	// waiting for its answer (stillWaits); under pubMu.
	waiting uint64
}

// watching reports whether both answer subjects are watched: only then does the watch see
// every answer stored after a read of the stream.
func (h *heldBack) watching() bool { return len(h.subs) == 2 }

// watch makes sure kind is watched for answers to the ListChanged at changedSeq; the caller
// holds pubMu and is about to read the stream (changedWaits): an answer stored after that read
// reaches the watch, unless the connection goes down (recheck). Its subscriptions have no
// pending limits: the NATS client never drops their messages (a slow consumer), and sawAnswer
// never blocks; only the subjects of one server and kind reach them. Without a NATS connection
// (tests) nothing is watched: the connector's own re-list answers.
func (c *connector) watch(kind subjects.Kind, changedSeq uint64) *heldBack {
	if h := c.held[kind]; h != nil {
		return h // its after is at most changedSeq: the connector's ListChanged only grow
	}
	h := &heldBack{after: changedSeq}
	c.held[kind] = h
	if c.m.nc == nil {
		return h
	}
	for _, subject := range []string{subjects.RegistrySnapshot(c.sc.Name, kind), subjects.RegistryConfirmed(c.sc.Name, kind)} {
		sub, err := c.m.nc.Subscribe(subject, func(msg *nats.Msg) { c.sawAnswer(h, msg) })
		if err != nil {
			c.log.Warn().Err(err).Str("kind", string(kind)).Msg("cannot watch for answers to list_changed; the re-list will answer")
			continue
		}
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			c.log.Warn().Err(err).Str("kind", string(kind)).Msg("cannot lift the pending limits of the watch for answers to list_changed")
		}
		h.subs = append(h.subs, sub)
	}
	return h
}

// recheck reads the stream for an answer to the ListChanged the notifications of kind were held
// back for, which the watch may have missed: it gets nothing while the connection is down, and
// the notifier calls recheck once the connection is back (nats.go reports CONNECTED and resends
// the watch's subscriptions under one hold of its lock, so the read follows them: an answer
// stored after the read reaches the watch). An answer found counts as one the watch saw. It reports false if
// the stream could not be read (the notifier tries again at its next round). The caller holds
// pubMu.
func (c *connector) recheck(ctx context.Context, kind subjects.Kind) bool {
	h := c.held[kind]
	if h == nil || h.seen.Load() {
		return true
	}
	ok, err := c.answerStored(ctx, kind, h.after)
	if err != nil {
		c.log.Debug().Err(err).Str("kind", string(kind)).Msg("cannot read the stream for an answer to list_changed missed while NATS was away; trying again")
		return false
	}
	if ok {
		c.log.Debug().Str("kind", string(kind)).Msg("another connector answered list_changed while NATS was away")
		h.seen.Store(true)
	}
	return true
}

// answerStored reports whether the stream holds an answer to the ListChanged at after, as
// sawAnswer takes one: the last snapshot of kind stored after it, or any Confirmed of kind
// stored after it with an afterSeq that reaches it. The last Confirmed is not enough: another
// connector's answer may be followed by a third one's Confirmed of a re-list that began before
// the ListChanged (a lower afterSeq), which answers nothing. Past maxAnswerScan Confirmed
// events after it, the stream is taken to hold one (an answer missed leaves consumers fresh
// with a notification unrepresented; one taken wrongly costs a ListChanged and a re-list).
func (c *connector) answerStored(ctx context.Context, kind subjects.Kind, after uint64) (bool, error) {
	pctx, cancel := context.WithTimeout(ctx, c.m.publishWait)
	defer cancel()
	msg, err := c.m.lastMsg(pctx, subjects.RegistrySnapshot(c.sc.Name, kind))
	if err != nil {
		return false, err
	}
	if msg != nil && msg.Sequence > after {
		return true, nil
	}
	subject := subjects.RegistryConfirmed(c.sc.Name, kind)
	answers := func(msg *jetstream.RawStreamMsg) bool {
		ev, err := subjects.DecodeRegistryMsg(msg.Subject, msg.Data)
		return err == nil && ev.Confirmed != nil && ev.Confirmed.AfterSeq >= after
	}
	last, err := c.m.lastMsg(pctx, subject)
	if err != nil || last == nil || last.Sequence <= after {
		return false, err
	}
	if answers(last) {
		return true, nil
	}
	st, err := c.m.registryStream(pctx)
	if err != nil {
		return false, err
	}
	for seq, n := after+1, 0; seq < last.Sequence; n++ {
		if n == maxAnswerScan {
			return true, nil
		}
		msg, err := c.m.getMsg(pctx, st, seq, subject)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return false, nil
		case err != nil:
			return false, err
		case msg.Sequence >= last.Sequence:
			return false, nil
		case answers(msg):
			return true, nil
		}
		seq = msg.Sequence + 1
	}
	return false, nil
}

// maxAnswerScan bounds the Confirmed events answerStored reads.
const maxAnswerScan = 256

// sawAnswer runs on the NATS client's goroutine for a message on a watched subject: a snapshot
// (whoever stored it, it lifts every ListChanged before it), or a Confirmed whose afterSeq
// reaches the ListChanged that waited. The notifier stores a ListChanged for the notification
// held back. Whether the stream already holds the answer does not matter (subscribers get a
// message a moment before the stream stores it): the answer is on its way.
func (c *connector) sawAnswer(h *heldBack, msg *nats.Msg) {
	sub, err := subjects.ParseRegistry(msg.Subject)
	if err != nil {
		return
	}
	if sub.Event == "confirmed" {
		ev, err := subjects.DecodeRegistryMsg(msg.Subject, msg.Data)
		if err != nil || ev.Confirmed == nil || ev.Confirmed.AfterSeq < h.after {
			return
		}
	}
	h.seen.Store(true)
	select {
	case c.changedSig <- struct{}{}:
	default:
	}
}

// holdBack records that the notifications of kind up to gen have no ListChanged stored after
// them; the caller holds pubMu and called watch. Notifications that a ListChanged or a list
// already stands for (released: say, the one answered stored in the same round of the
// notifier, or one forcedChanged stored before the notifier got to them) are not held back:
// an answer to that ListChanged began after them, and held back they would make the connector
// store another ListChanged for it.
func (c *connector) holdBack(kind subjects.Kind, gen uint64, changedSeq uint64) {
	if gen <= c.released[kind] {
		c.release(kind, gen) // ends the watch the caller started, unless later ones are held
		return
	}
	h := c.watch(kind, changedSeq)
	h.gen = max(h.gen, gen)
}

// release forgets the notifications of kind held back up to gen: a ListChanged stored after
// them, or a list that began after them published, stands for them. The caller holds pubMu.
func (c *connector) release(kind subjects.Kind, gen uint64) {
	c.released[kind] = max(c.released[kind], gen)
	h := c.held[kind]
	if h == nil || h.gen > gen {
		return
	}
	delete(c.held, kind)
	for _, sub := range h.subs {
		_ = sub.Unsubscribe()
	}
}

// releaseAll ends every watch (the connector stops). The caller holds pubMu.
func (c *connector) releaseAll() {
	for kind, h := range c.held {
		delete(c.held, kind)
		for _, sub := range h.subs {
			_ = sub.Unsubscribe()
		}
	}
}

// answered stores a ListChanged for the notifications of kind held back, once another
// connector's answer lifted the one that waited; then the kind is re-listed (a re-list already
// scheduled is not postponed). Only the first answer seen after a notification was held back
// stores one: the ListChanged releases it. The caller holds pubMu.
func (c *connector) answered(ctx context.Context, kind subjects.Kind) error {
	if h := c.held[kind]; h == nil || h.gen == 0 || !h.seen.Load() {
		return nil
	}
	if err := c.publishChanged(ctx, kind); err != nil {
		return err
	}
	c.log.Debug().Str("kind", string(kind)).Msg("list_changed again: another connector answered the one a notification was held back for")
	c.mu.Lock()
	if _, ok := c.pending[kind]; !ok {
		now := time.Now()
		c.pending[kind] = pendingRelist{first: now, last: now}
	}
	c.mu.Unlock()
	select {
	case c.relistSig <- struct{}{}:
	default:
	}
	return nil
}

// getMsg reads the message of subject at seq or after it, in one of the Manager's turns to read
// the stream (streamRead), given back whatever happens.
func (m *Manager) getMsg(ctx context.Context, st jetstream.Stream, seq uint64, subject string) (*jetstream.RawStreamMsg, error) {
	done, err := m.streamRead(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
}

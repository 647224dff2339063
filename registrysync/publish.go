package registrysync

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

// publishTimeout bounds one JetStream publish or stream read.
const publishTimeout = 10 * time.Second

// headerRoom is kept free under the payload limit for headers.
const headerRoom = 4 << 10

// kindState is what the registry stream holds for one server and kind, as far as the connector
// knows: the last snapshot (fingerprint, sequence, emptiness, ttlMs), when it was last listed
// (by it or a Confirmed event), the last ListChanged event and the last one a Confirmed event
// answered.
type kindState struct {
	known      bool      // a snapshot exists on the stream
	fp         string    // its fingerprint
	seq        uint64    // its stream sequence
	empty      bool      // it has no items
	ttlMs      *int64    // its ttlMs
	listedAt   time.Time // its listedAt, or that of a later Confirmed event of its fingerprint
	changedSeq uint64    // sequence of the last ListChanged event; a snapshot or an answer must follow it
	answered   uint64    // the afterSeq of the last Confirmed event of fp after the snapshot
}

// needsConfirm reports whether a ListChanged event is followed neither by a snapshot nor by a
// Confirmed event that answers it.
func (st *kindState) needsConfirm() bool {
	return st.changedSeq > st.seq && st.changedSeq > st.answered
}

// encodeJSON marshals v without HTML escaping, so raw definitions keep their bytes (only
// insignificant whitespace is removed from json.RawMessage values).
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// payloadLimit is the largest event the connection and the registry stream take.
func (m *Manager) payloadLimit() int {
	limit := subjects.MaxEventBytes
	if m.nc != nil {
		if mp := int(m.nc.MaxPayload()); mp > 0 && mp < limit {
			limit = mp
		}
	}
	return limit - headerRoom
}

// explainTooLarge adds to a snapshot_too_large error what bounds a list: one registry event,
// and the NATS server's max_payload when it binds (1 MiB by default), so that an operator sees
// that raising it lets a server of many tools be listed. Other errors are returned as they are.
func (m *Manager) explainTooLarge(err error) error {
	coded, ok := err.(*codedError) // (not one wrapped: its wrapper, a wait say, is kept as it is)
	if !ok || coded.code != subjects.CodeSnapshotTooLarge {
		return err
	}
	note := fmt.Sprintf("a list is one registry event, of at most %d bytes", m.payloadLimit())
	if m.nc != nil {
		if mp := m.nc.MaxPayload(); mp > 0 && mp < subjects.MaxEventBytes {
			note += fmt.Sprintf(": the NATS server's max_payload is %d; mcpstream takes up to %d: raise it, as nats.conf does, or have the server list less", mp, subjects.MaxEventBytes)
		}
	}
	return &codedError{code: coded.code, msg: coded.msg + " (" + note + ")", nats: coded.nats}
}

// registryStream returns the registry stream handle, looked up once.
func (m *Manager) registryStream(ctx context.Context) (jetstream.Stream, error) {
	m.streamMu.Lock()
	defer m.streamMu.Unlock()
	if m.stream != nil {
		return m.stream, nil
	}
	st, err := m.js.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		return nil, fmt.Errorf("registry stream: %w", err)
	}
	m.stream, m.streamCreated = st, st.CachedInfo().Created
	return st, nil
}

// maxStreamReads bounds the reads of the registry stream (JetStream API requests: the last
// message of a subject, a message by sequence) a Manager has in flight at once. At start every
// connector reads the last events of its server (up to 9 requests, one at a time), all at once:
// unbounded, n servers put n requests at once in the NATS server's JetStream API queue, whose
// limit (10,000 by default, shared by every client) drops every request waiting, each then
// failing after publishTimeout. A read waits for its turn until its context ends, and then has
// publishTimeout (see lastMsg).
const maxStreamReads = 256

// streamRead takes one of the Manager's maxStreamReads turns to read the registry stream,
// waiting for one until ctx ends; done gives it back.
func (m *Manager) streamRead(ctx context.Context) (done func(), err error) {
	select {
	case m.reads <- struct{}{}:
		return func() { <-m.reads }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a turn to read the registry stream (%d reads in flight): %w", cap(m.reads), ctx.Err())
	}
}

// lastMsg returns the last message on subject, or nil if there is none. The read has
// publishTimeout from when its turn comes (streamRead), not from when it began to wait for one:
// when all of a Manager's connectors read at once (its start, a list_changed from every server),
// turns come after the reads of the hundreds of servers before, and a deadline that counted that
// wait failed the reads of the servers last in line, whose connectors then logged "cannot read
// the registry stream" and read it all again later, adding to the load. A caller whose ctx has a
// deadline of its own (a stop's budget) keeps it.
func (m *Manager) lastMsg(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	done, err := m.streamRead(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return m.lastMsgInTurn(ctx, subject)
}

// lastMsgInTurn is lastMsg for a caller that holds a turn (streamRead) already.
func (m *Manager) lastMsgInTurn(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, m.publishWait)
	defer cancel()
	st, err := m.registryStream(ctx)
	if err != nil {
		return nil, err
	}
	msg, err := st.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return msg, err
}

// snapshotHead is the part of a stored snapshot the connector needs.
type snapshotHead struct {
	Fingerprint string            `json:"fingerprint"`
	ListedAt    time.Time         `json:"listedAt"`
	TTLMs       *int64            `json:"ttlMs"`
	Items       []json.RawMessage `json:"items"`
}

// loadKind reads the stream's last snapshot, Confirmed and ListChanged event of one kind.
func (c *connector) loadKind(ctx context.Context, kind subjects.Kind) (kindState, error) {
	var st kindState
	msg, err := c.m.lastMsg(ctx, subjects.RegistrySnapshot(c.sc.Name, kind))
	if err != nil {
		return st, err
	}
	if msg != nil {
		var head snapshotHead
		if err := json.Unmarshal(msg.Data, &head); err == nil {
			st.known, st.fp, st.seq, st.empty = true, head.Fingerprint, msg.Sequence, len(head.Items) == 0
			st.ttlMs, st.listedAt = head.TTLMs, head.ListedAt
		}
	}
	if st.known {
		// A restart does not confirm again a list confirmed a moment ago, nor answer again a
		// ListChanged answered already.
		msg, err = c.m.lastMsg(ctx, subjects.RegistryConfirmed(c.sc.Name, kind))
		if err != nil {
			return st, err
		}
		if msg != nil && msg.Sequence > st.seq {
			if ev, err := subjects.DecodeRegistryMsg(msg.Subject, msg.Data); err == nil && ev.Confirmed.Fingerprint == st.fp {
				if ev.Confirmed.ListedAt.After(st.listedAt) {
					st.listedAt = ev.Confirmed.ListedAt
				}
				// A stored afterSeq names a ListChanged stored before the Confirmed: a larger one
				// (from any client allowed on the subject) would mark every later ListChanged
				// answered, and none would be answered again.
				st.answered = min(ev.Confirmed.AfterSeq, msg.Sequence-1)
			}
		}
	}
	// (Stamped by the connector before this one: on another host, whose clock may be ahead.)
	st.listedAt = notAhead(st.listedAt)
	msg, err = c.m.lastMsg(ctx, subjects.RegistryChanged(c.sc.Name, kind))
	if err != nil {
		return st, err
	}
	if msg != nil {
		st.changedSeq = msg.Sequence
	}
	return st, nil
}

// notAhead is t, or now when t is later. A listedAt read from the stream was stamped by
// another connector (one before this one, or another of the same server) on its host's clock:
// one ahead of this host's held back this connector's confirmations of the list by the skew
// (confirmUnchanged counts confirmEvery from it), and meanwhile no consumer's TTL restarted.
func notAhead(t time.Time) time.Time {
	if now := time.Now().UTC(); t.After(now) {
		return now
	}
	return t
}

// loadState fills the connector's view of the stream for every kind, so that an unchanged list
// publishes nothing even after a restart.
func (c *connector) loadState(ctx context.Context) error {
	for _, kind := range subjects.Kinds {
		st, err := c.loadKind(ctx, kind) // (each read within publishTimeout: lastMsg)
		if err != nil {
			return fmt.Errorf("read last %s snapshot: %w", kind, err)
		}
		c.mu.Lock()
		c.kstate[kind] = st
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.loaded = true
	c.mu.Unlock()
	return nil
}

func (c *connector) kind(kind subjects.Kind) kindState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kstate[kind]
}

// publishResult tells what publishSnapshot did.
type publishResult struct {
	fp        string
	seq       uint64 // sequence of the snapshot now current on the stream
	published bool   // a new message was stored
}

// publishSnapshot publishes l unless the stream's current snapshot already has its fingerprint.
// Then, if a ListChanged event waits for an answer and l began after it was stored
// (l.AfterSeq), it publishes a Confirmed event that answers it (answerChanged) instead of a copy
// of the snapshot; otherwise it may confirm the list for its TTL (confirmUnchanged). The
// Nats-Msg-Id is server/kind/fingerprint, so concurrent connectors of one server store it once;
// when the same content must be stored again (A → B → A, or a list overtaken by a
// notification, published after a ListChanged it may predate) the id gets "@" and the sequence
// of the event it follows.
func (c *connector) publishSnapshot(ctx context.Context, l *listing, info *subjects.ServerInfo) (publishResult, error) {
	l.Auth = c.sc.AuthContext
	if l.Kind == subjects.KindTools {
		c.setTaskTools(l.Items)
		c.setHeaderTools(l.Items)
	}
	st := c.kind(l.Kind)
	if err := c.keepStoredTTL(ctx, l, st); err != nil {
		return publishResult{}, err
	}
	fp := l.fingerprint()
	if st.known && st.fp == fp && st.needsConfirm() && l.AfterSeq >= st.changedSeq {
		// Consumers lift the ListChanged only for the list they hold: the stream's last
		// snapshot, which another connector of the server (or a publish whose ack was lost)
		// may have replaced without this one knowing. Then the list is published instead.
		cur, err := c.streamFingerprint(ctx, l.Kind, st.seq, st.fp)
		if err != nil {
			return publishResult{}, err
		}
		if cur == fp {
			if err := c.answerChanged(ctx, l.Kind, st, l.AfterSeq); err != nil {
				return publishResult{}, err
			}
			return publishResult{fp: fp, seq: st.seq}, nil
		}
		st.known = false // publish l below, after the ListChanged ("@" its sequence)
	}
	if st.known && st.fp == fp {
		// Unchanged. A list that began before the ListChanged that waits does not answer it
		// (a list a notification overtook, published anyway: see relist); the re-list that
		// notification scheduled does.
		c.confirmUnchanged(ctx, l.Kind, st, l.AfterSeq)
		return publishResult{fp: fp, seq: st.seq}, nil
	}
	snap := subjects.Snapshot{
		V: subjects.Version, Type: subjects.EventSnapshot,
		Server: c.sc.Name, Kind: l.Kind, Fingerprint: fp,
		ListedAt: time.Now().UTC(), Pages: l.Pages, TTLMs: l.TTLMs, CacheScope: l.Scope,
		AuthContext: c.sc.AuthContext,
		Items:       l.Items, Rejected: l.Rejected, Info: info,
	}
	if snap.Items == nil {
		snap.Items = []json.RawMessage{}
	}
	data, err := encodeJSON(snap)
	if err != nil {
		return publishResult{}, fmt.Errorf("encode snapshot: %w", err)
	}
	if limit := c.m.payloadLimit(); len(data) > limit {
		return publishResult{}, c.m.explainTooLarge(codedf(subjects.CodeSnapshotTooLarge,
			"%s snapshot is %d bytes (%d items), more than the %d an event may hold", l.Kind, len(data), len(l.Items), limit))
	}
	subject := subjects.RegistrySnapshot(c.sc.Name, l.Kind)
	id := subjects.EncodeToken(c.sc.Name) + "/" + string(l.Kind) + "/" + fp
	if st.needsConfirm() {
		id += "@" + strconv.FormatUint(st.changedSeq, 10)
	}
	pctx, cancel := context.WithTimeout(ctx, c.m.publishWait)
	defer cancel()
	ack, err := c.m.publish(pctx, subject, subjects.EventSnapshot, id, data)
	if err != nil {
		return publishResult{}, err
	}
	for tries := 1; ack.Duplicate; tries++ {
		// Stored before within the de-duplication window. If it is still the current snapshot
		// there is nothing to do; otherwise another list came in between, or the stream no
		// longer holds it (purged: JetStream keeps the ids of purged messages until the window
		// ends): store it again, under an id that follows the last one stored (the sequence the
		// duplicate was stored at). Each try follows a later one, so ids taken by copies stored
		// after earlier purges are passed over, a few at most (one per purge in the window).
		last, err := c.m.lastMsg(pctx, subject)
		if err != nil {
			return publishResult{}, fmt.Errorf("read last snapshot: %w", err)
		}
		var head snapshotHead
		if last != nil && json.Unmarshal(last.Data, &head) == nil && head.Fingerprint == fp && last.Sequence >= st.changedSeq {
			c.recordSnapshot(l, fp, last.Sequence, head.ListedAt)
			return publishResult{fp: fp, seq: last.Sequence}, nil
		}
		after := max(st.changedSeq, ack.Sequence)
		if last != nil && last.Sequence > after {
			after = last.Sequence
		}
		next := subjects.EncodeToken(c.sc.Name) + "/" + string(l.Kind) + "/" + fp + "@" + strconv.FormatUint(after, 10)
		if next == id || tries > maxDuplicateTries {
			return publishResult{}, fmt.Errorf("publish %s: answered as a duplicate of sequence %d, which the stream no longer holds (id %s)", subject, ack.Sequence, id)
		}
		id = next
		ack, err = c.m.publish(pctx, subject, subjects.EventSnapshot, id, data)
		if err != nil {
			return publishResult{}, err
		}
	}
	c.recordSnapshot(l, fp, ack.Sequence, snap.ListedAt)
	return publishResult{fp: fp, seq: ack.Sequence, published: !ack.Duplicate}, nil
}

// maxDuplicateTries bounds the ids one snapshot publish tries after the first is answered as a
// duplicate (see publishSnapshot).
const maxDuplicateTries = 8

// streamFingerprint is the fingerprint of the stream's last snapshot of kind ("" if none): that
// fp, that of the snapshot at seq, without decoding it when it is still the last.
func (c *connector) streamFingerprint(ctx context.Context, kind subjects.Kind, seq uint64, fp string) (string, error) {
	// (publishTimeout in all, the wait for its turn included, as changedWaits: the caller holds
	// pubMu, and a notification waits for it meanwhile; a read that fails lists again later)
	ctx, cancel := context.WithTimeout(ctx, c.m.publishWait)
	defer cancel()
	last, err := c.m.lastMsg(ctx, subjects.RegistrySnapshot(c.sc.Name, kind))
	if err != nil || last == nil {
		return "", err
	}
	if last.Sequence == seq {
		return fp, nil
	}
	var head struct {
		Fingerprint string `json:"fingerprint"`
	}
	if err := json.Unmarshal(last.Data, &head); err != nil {
		return "", nil
	}
	return head.Fingerprint, nil
}

// maxTTLGrowth is how many times the stored list's ttlMs a list that differs from it only by a
// longer ttlMs may have and still be taken for it (keepStoredTTL).
const maxTTLGrowth = 2

// keepStoredTTL gives l the stored list's ttlMs when that is all that tells them apart and l's
// is longer, up to maxTTLGrowth times: l is then the stored list, unchanged (confirmed, not
// stored again). A server that jitters its ttlMs at each listing (spreading its clients'
// refreshes) otherwise had a whole copy of its list stored at every re-list (each executor's
// re-list of an expired list, each resync), in a stream that keeps every snapshot. Consumers
// keep the shorter TTL: they may re-list up to twice as often as the server asks, never later.
// A shorter ttlMs (they must learn it at once), a much longer one, or one appearing or vanishing
// is published.
//
// The stored list must be the stream's last snapshot, which consumers hold, not only the one
// the connector remembers: another connector of the server (a hand-over) may have stored
// another since, this very list with its longer ttlMs say. Confirmed under the remembered
// fingerprint, the list would be confirmed (and the executors' re-lists of it answered) for a
// list no consumer holds: expired everywhere, its tools refused. So a list taken for the stored
// one is checked against the stream (one read, made only then); when the stream holds another,
// l is published as it is (a duplicate of the stream's, if that is it: recorded). A read that
// fails is returned (the list is published at the next re-list).
func (c *connector) keepStoredTTL(ctx context.Context, l *listing, st kindState) error {
	if !st.known || st.ttlMs == nil || l.TTLMs == nil || *l.TTLMs <= *st.ttlMs || *l.TTLMs > maxTTLGrowth**st.ttlMs {
		return nil
	}
	stored := *l
	stored.TTLMs = st.ttlMs
	if stored.fingerprint() != st.fp {
		return nil
	}
	cur, err := c.streamFingerprint(ctx, l.Kind, st.seq, st.fp)
	if err != nil {
		return err
	}
	if cur == st.fp {
		l.TTLMs = st.ttlMs
	}
	return nil
}

func (c *connector) recordSnapshot(l *listing, fp string, seq uint64, listedAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.kstate[l.Kind]
	st.known, st.fp, st.seq, st.empty = true, fp, seq, len(l.Items) == 0
	st.ttlMs, st.listedAt = l.TTLMs, notAhead(listedAt) // (another connector's, when a duplicate)
	c.kstate[l.Kind] = st
}

// minConfirmEvery bounds how often one list is confirmed, whatever its ttlMs.
const minConfirmEvery = time.Second

// confirmEvery is how long after a list was published or last confirmed an unchanged re-list
// of it is confirmed on the stream again: half its ttlMs, so that a list re-listed at least
// that often never runs out in any consumer, and at least minConfirmEvery, so that short TTLs
// and frequent re-lists (resyncs, every executor's re-list of an expired list) do not flood
// the registry stream. 0 means never: without a ttlMs nothing expires, and a ttlMs of 0 or
// less is out of date at once, confirmed or not.
func confirmEvery(ttlMs *int64) time.Duration {
	if ttlMs == nil || *ttlMs <= 0 {
		return 0
	}
	return max(staleness.TTL(*ttlMs)/2, minConfirmEvery)
}

// minConfirmTTL is the shortest time the registry stream keeps a confirmation of an unchanged
// list (a variable: tests shorten it; JetStream takes no per-message TTL under a second).
var minConfirmTTL = time.Hour

// maxConfirmTTL: a confirmation that would be kept longer than this is kept for good (a list
// whose ttlMs is years is confirmed about never).
const maxConfirmTTL = 10 * 365 * 24 * time.Hour

// confirmTTL is how long the registry stream keeps a Confirmed event that confirmUnchanged
// publishes for a list of ttlMs (its per-message TTL, Nats-TTL): twice the TTL, and at least
// minConfirmTTL, so that `mcpstream events --since 1h` still shows the recent ones. 0: kept for
// good. Such an event only restarts the list's TTL: once the stream drops it, the list it
// confirmed has been out of date for at least a TTL in every consumer (the second TTL is room
// for the clocks of registrysync's host, the NATS server and the consumer to differ), unless a
// later event, kept as long or longer, confirmed or replaced it; and it never answers a
// ListChanged that no kept event answers (confirmUnchanged). A replay after it expired therefore
// ends in the freshness states of a consumer that applied it, and the stream keeps at most
// confirmTTL/confirmEvery of them per list (about 120 for a ttlMs of a minute, 3,600 for one of
// 2 s or less) instead of every one ever published.
func confirmTTL(ttlMs *int64) time.Duration {
	if ttlMs == nil || *ttlMs <= 0 {
		return 0
	}
	ttl := staleness.TTL(*ttlMs)
	if ttl > maxConfirmTTL/2 {
		return 0
	}
	return max(2*ttl, minConfirmTTL)
}

// msgTTLRetryEvery is how long after the registry stream refused a per-message TTL the
// connectors publish confirmations without one before trying again.
const msgTTLRetryEvery = 10 * time.Minute

// jsErrCodeMsgTTLDisabled is JetStream's answer to a message with a per-message TTL (Nats-TTL)
// on a stream declared without allow_msg_ttl. nats.go does not name it.
const jsErrCodeMsgTTLDisabled jetstream.ErrorCode = 10166

// msgTTLDisabled reports whether err is JetStream refusing a per-message TTL on the stream.
func msgTTLDisabled(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeMsgTTLDisabled
}

// confirmUnchanged publishes a Confirmed event for a re-list that found the list st holds
// unchanged, when the list has a ttlMs and was last published or confirmed at least
// confirmEvery ago: every consumer (indexer replicas, every executor, a replay) restarts its
// TTL, not only the executor that asked for the re-list. after is the list's AfterSeq: the
// event carries it (a consumer may be stale for a ListChanged of another connector of the
// server; see subjects.Confirmed). The caller holds pubMu, so a ListChanged the server sends
// meanwhile is stored after it, with a higher sequence than after (and the confirmation does
// not lift it). A failed publish is logged and not retried: the list is unchanged, the next
// re-list confirms it.
//
// The event is stored with a per-message TTL (confirmTTL): the stream drops it once it no
// longer matters to any consumer, so that a server whose list never changes does not grow the
// registry stream, and every replay, without bound. It never answers a ListChanged alone: it is
// published only when none waits in st (st.needsConfirm is false, or the list began before the
// one that waits), so the ListChanged events up to its afterSeq are answered by a snapshot
// stored after them or by an answerChanged event, both kept for good.
func (c *connector) confirmUnchanged(ctx context.Context, kind subjects.Kind, st kindState, after uint64) {
	every := confirmEvery(st.ttlMs)
	now := time.Now().UTC()
	if every == 0 || now.Sub(st.listedAt) < every {
		return
	}
	// Connectors of one server that confirm within the same period store one event.
	id := subjects.EncodeToken(c.sc.Name) + "/" + string(kind) + "/" + st.fp + "/confirmed/" +
		strconv.FormatInt(now.UnixNano()/int64(every), 10)
	if err := c.publishConfirmed(ctx, kind, st, after, now, id, confirmTTL(st.ttlMs)); err != nil {
		if ctx.Err() == nil {
			c.log.Warn().Err(err).Str("kind", string(kind)).Msg("cannot publish a confirmation; the next re-list will")
		}
		return
	}
	c.log.Debug().Str("kind", string(kind)).Msg("list confirmed unchanged")
}

// answerChanged publishes the Confirmed event that answers the ListChanged events up to after
// (st.changedSeq, at most after): a re-list that began once they were stored found the list of
// st unchanged. Consumers holding that list make it fresh again; no copy of the snapshot is
// stored. Its Nats-Msg-Id is <server token>/<kind>/<fingerprint>/confirmed@<after>, so that
// connectors of one server answering the same ListChanged store one. The caller holds pubMu
// (see confirmUnchanged). A failed publish is returned: the ListChanged still waits. The event
// is kept for good (no per-message TTL): consumers that replay the stream lift the ListChanged
// with it.
func (c *connector) answerChanged(ctx context.Context, kind subjects.Kind, st kindState, after uint64) error {
	id := subjects.EncodeToken(c.sc.Name) + "/" + string(kind) + "/" + st.fp + "/confirmed@" + strconv.FormatUint(after, 10)
	if err := c.publishConfirmed(ctx, kind, st, after, time.Now().UTC(), id, 0); err != nil {
		return err
	}
	c.log.Debug().Str("kind", string(kind)).Uint64("changed", after).Msg("list_changed answered: list unchanged")
	return nil
}

// publishConfirmed stores a Confirmed event of the list st holds, listed at now, answering the
// ListChanged events up to after, and records it. With ttl > 0 the stream drops the event ttl
// after storing it (Nats-TTL). A registry stream declared without allow_msg_ttl (by an
// mcpstream before it, on a server that could not be updated) refuses such a message: the event
// is then stored without one, kept for good as before, with a warning, and for msgTTLRetryEvery
// every connector of the process publishes its confirmations without one (a declaration in the
// meantime, a role's restart, enables it).
func (c *connector) publishConfirmed(ctx context.Context, kind subjects.Kind, st kindState, after uint64, now time.Time, id string, ttl time.Duration) error {
	data, err := encodeJSON(subjects.Confirmed{
		V: subjects.Version, Type: subjects.EventConfirmed, Server: c.sc.Name, Kind: kind,
		Fingerprint: st.fp, ListedAt: now, AfterSeq: after,
	})
	if err != nil {
		return fmt.Errorf("encode a confirmation: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, c.m.publishWait)
	defer cancel()
	subject := subjects.RegistryConfirmed(c.sc.Name, kind)
	if ttl > 0 && time.Since(time.Unix(0, c.m.msgTTLRefused.Load())) >= msgTTLRetryEvery {
		_, err = c.m.publish(pctx, subject, subjects.EventConfirmed, id, data, jetstream.WithMsgTTL(ttl))
		if msgTTLDisabled(err) {
			// Refused before anything was stored (its Nats-Msg-Id is not taken): again without.
			c.m.msgTTLRefused.Store(time.Now().UnixNano())
			c.log.Warn().Str("stream", subjects.RegistryStream).Msg("the registry stream takes no per-message TTL " +
				"(declared without allow_msg_ttl, by an earlier mcpstream or by hand, and not declared again since): " +
				"confirmations of unchanged lists are kept for good; restart a role to declare the stream again")
			_, err = c.m.publish(pctx, subject, subjects.EventConfirmed, id, data)
		}
	} else {
		_, err = c.m.publish(pctx, subject, subjects.EventConfirmed, id, data)
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur := c.kstate[kind]; cur.fp == st.fp {
		if now.After(cur.listedAt) {
			cur.listedAt = now
		}
		cur.answered = max(cur.answered, after)
		c.kstate[kind] = cur
	}
	return nil
}

// publish stores one registry event.
func (m *Manager) publish(ctx context.Context, subject, event, msgID string, data []byte, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(subjects.HeaderEventType, event)
	if msgID != "" {
		msg.Header.Set(subjects.HeaderMsgID, msgID)
	}
	ack, err := m.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", subject, err)
	}
	return ack, nil
}

// publishChanged stores a ListChanged event and remembers its sequence: a snapshot or an answer
// must follow it. The caller holds pubMu. Its Nats-Msg-Id is <server token>/<kind>/changed/
// <connector id>/<number>, a new one for every event (connectors of one server never share
// one): a publish that fails (a timeout, a PubAck lost after the stream stored the event) is
// made once more under the same id, and the stream stores the event at most once and answers
// with its sequence (a duplicate's PubAck carries the first one's). Without that sequence the
// connector's re-lists would answer only the ListChanged events before it, and consumers would
// hold the list stale, its tools refused, until the next notification or a real change. If
// the second publish fails as well, the kind's re-list learns it all the same: every list
// first reads the stream's last ListChanged (changedFromStream).
func (c *connector) publishChanged(ctx context.Context, kind subjects.Kind) error {
	data, err := encodeJSON(subjects.ListChanged{
		V: subjects.Version, Type: subjects.EventChanged, Server: c.sc.Name, Kind: kind, At: time.Now().UTC(),
	})
	if err != nil {
		return err
	}
	subject := subjects.RegistryChanged(c.sc.Name, kind)
	gen := c.generation(kind) // the notifications this ListChanged stands for
	id := subjects.EncodeToken(c.sc.Name) + "/" + string(kind) + "/changed/" + c.m.id + "/" +
		strconv.FormatUint(c.m.changedN.Add(1), 10)
	var ack *jetstream.PubAck
	for try := 0; try < 2; try++ {
		pctx, cancel := context.WithTimeout(ctx, c.m.publishWait)
		ack, err = c.m.publish(pctx, subject, subjects.EventChanged, id, data)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	c.release(kind, gen)
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.kstate[kind]
	if ack.Sequence > st.changedSeq {
		st.changedSeq = ack.Sequence
	}
	c.kstate[kind] = st
	return nil
}

// changedFromStream reads the stream's last ListChanged of kind before a list begins and records
// its sequence, so that the list answers it. Any connector's counts: consumers hold the list
// stale for the latest, which another process running the server may have stored and never
// answered (it ended before its re-list), or this connector's own whose PubAcks were lost
// (publishChanged). A read that fails is returned: the kind is listed again later (the retry
// timer), not answered with less than the stream holds. The read is made under pubMu, taken
// once its turn has come (streamRead): a re-list waiting for its turn behind the reads of
// hundreds of servers must not hold up the ListChanged the notifier stores meanwhile (pubMu's
// other holders wait for a turn publishTimeout at most: changedWaits, answerStored).
func (c *connector) changedFromStream(ctx context.Context, kind subjects.Kind) error {
	done, err := c.m.streamRead(ctx)
	if err != nil {
		return fmt.Errorf("read last list_changed: %w", err)
	}
	defer done()
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	msg, err := c.m.lastMsgInTurn(ctx, subjects.RegistryChanged(c.sc.Name, kind)) // (within publishTimeout)
	if err != nil {
		return fmt.Errorf("read last list_changed: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.kstate[kind]; msg != nil && msg.Sequence > st.changedSeq {
		st.changedSeq = msg.Sequence
		c.kstate[kind] = st
	}
	return nil
}

// publishStatus stores a status event.
func (c *connector) publishStatus(ctx context.Context, st subjects.Status, opts ...jetstream.PublishOpt) error {
	data, err := encodeJSON(st)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, c.m.publishWait)
	defer cancel()
	ack, err := c.m.publish(pctx, subjects.RegistryStatus(c.sc.Name), subjects.EventStatus, "", data, opts...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.statusSeq = ack.Sequence
	c.mu.Unlock()
	return nil
}

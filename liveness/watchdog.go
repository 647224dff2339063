package liveness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// MinHeartbeat and MaxHeartbeat bound the heartbeat period a watchdog honours: a status
// claiming a shorter or longer one is watched as if it said the bound (subjects.MinHeartbeat,
// subjects.MaxHeartbeat, which registrysync beats within).
const (
	MinHeartbeat = subjects.MinHeartbeat
	MaxHeartbeat = subjects.MaxHeartbeat
)

// period is the heartbeat period of a status, within the bounds (a huge heartbeatMs would
// overflow a time.Duration).
func period(ms int64) time.Duration {
	if ms >= MaxHeartbeat.Milliseconds() {
		return MaxHeartbeat
	}
	return max(time.Duration(ms)*time.Millisecond, MinHeartbeat)
}

// pauseGap is how late a check may come before the watchdog takes it that this process was
// paused, rather than its connector silent.
func pauseGap(every time.Duration) time.Duration { return max(4*every, time.Second) }

// Watchdog declares the servers of silent connectors unavailable (connector_lost).
type Watchdog struct {
	NC  *nats.Conn
	JS  jetstream.JetStream
	Log zerolog.Logger
	// CheckEvery is how often deadlines are checked; 0 → 250ms.
	CheckEvery time.Duration

	mu       sync.Mutex
	beats    map[string]time.Time // connector → when its last heartbeat arrived (named ones only)
	servers  map[string]*watched  // server → its last status
	named    map[string]int       // connector → how many servers' last status names it
	since    time.Time            // start, or the last reconnection: silence counts from here at most
	declared int
	ready    atomic.Bool
	pub      jetstream.JetStream // for declarations (see Run)
	created  time.Time           // when the registry stream the consumer reads was made (see consume)
	remake   chan struct{}       // declare asks for the consumer to be made anew (see watchStream)

	// The subscription to the heartbeats, and what NATS said of it (see listen); Run's
	// goroutine only.
	sub     *nats.Subscription
	told    bool  // whether NATS told if it refused sub
	deaf    bool  // NATS refused sub
	lastErr error // the connection's last error when last looked at (see hearing)

	afterRoundTrip func() // tests: runs after a round trip that succeeded, before the deadlines are checked
}

// watched is the last status of one server.
type watched struct {
	st       subjects.Status
	seq      uint64    // its stream sequence
	created  time.Time // when the stream it was read from was made (see consume)
	seen     time.Time // when it arrived here
	declared bool      // a declaration was sent for this status
	retryAt  time.Time // a failed declaration is tried again from then
}

// is reports whether w (nil: none) is still the status s is a copy of.
func (w *watched) is(s watched) bool {
	return w != nil && w.seq == s.seq && w.created.Equal(s.created)
}

// Ready reports whether the watchdog has read the last status of every server once.
func (w *Watchdog) Ready() bool { return w.ready.Load() }

// Declared returns how many connector_lost declarations this watchdog got stored.
func (w *Watchdog) Declared() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.declared
}

// Run watches until ctx ends. It returns nil then, or an error if it could not subscribe.
func (w *Watchdog) Run(ctx context.Context) error {
	every := w.CheckEvery
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	// Declarations go out on a JetStream context of their own, whose asynchronous publishes
	// give up after 10 s: without permission to publish on the status subjects (or with NATS
	// away) they would otherwise stay pending for good, filling a shared context's budget.
	pub, err := jetstream.New(w.NC, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		return fmt.Errorf("liveness: %w", err)
	}
	w.mu.Lock()
	w.beats, w.servers, w.named, w.since, w.pub = map[string]time.Time{}, map[string]*watched{}, map[string]int{}, time.Now(), pub
	w.created, w.remake = time.Time{}, make(chan struct{}, 1)
	w.mu.Unlock()
	// The heartbeats are read by this goroutine, between checks (see hearing).
	beats := make(chan *nats.Msg, beatBuffer)
	w.sub, w.told, w.deaf, w.lastErr = nil, false, false, nil
	if err := w.listen(beats); err != nil {
		return fmt.Errorf("liveness: subscribe to heartbeats: %w", err)
	}
	defer func() { w.sub.Unsubscribe() }()
	var following sync.WaitGroup
	defer following.Wait() // Run returns only once ctx has ended, which ends follow too
	following.Go(func() { w.follow(ctx) })

	reconnects := w.NC.Stats().Reconnects
	tick := time.NewTicker(every)
	defer tick.Stop()
	lastTick := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-beats:
			w.onBeat(m)
			continue
		case <-tick.C:
		}
		w.check(ctx, beats, every, &reconnects, lastTick)
		// The gap to the next check counts from the end of this one: its own waits (the round
		// trip, up to rttTimeout; the acknowledgements of declarations, up to ackWait; the
		// look-ups of refused ones in forgetGone, up to ackWait again) are no pause of this
		// process (the NATS client kept reading heartbeats into beats meanwhile), and taken for
		// one they would count every connector's silence from scratch again.
		lastTick = time.Now()
	}
}

// check is one tick of Run: it notices a reconnection or a pause, then declares the servers of
// silent connectors.
func (w *Watchdog) check(ctx context.Context, beats chan *nats.Msg, every time.Duration, reconnects *uint64, lastTick time.Time) {
	now := time.Now()
	paused := now.Sub(lastTick) > pauseGap(every)
	if !w.NC.IsConnected() {
		return
	}
	if r := w.NC.Stats().Reconnects; r != *reconnects || paused {
		// Heartbeats sent while this process was cut off never reached it; those sent
		// while it was paused (SIGSTOP, a frozen VM, starved of CPU) wait unread in its
		// connection: silence counts from now.
		if r != *reconnects {
			// The subscription was made again (by the NATS client, with the others): it is
			// made anew at the next round trip, and whether NATS refused it told again.
			w.told, w.deaf = false, false
		}
		*reconnects = r
		w.mu.Lock()
		w.since = now
		w.mu.Unlock()
		return
	}
	// The round trip shows that every heartbeat sent before it is heard; those sent after it
	// may still wait unread (in the connection, or in beats) once it is done, however long the
	// check takes to go on (a pause of this process right after it, or a slow answer): the
	// silence is measured up to the round trip, not up to now.
	asked := time.Now()
	if len(w.due(asked, false)) == 0 {
		return
	}
	heard := w.hearing(beats)
	if heard && w.afterRoundTrip != nil {
		w.afterRoundTrip()
	}
	if !heard {
		// This process's connection is stalled (a partition that TCP and NATS have not
		// noticed yet): the connectors' silence may be its own. Declared now, the
		// declarations would wait in the connection and be stored once it flows again,
		// over the statuses of connectors that beat all along.
		w.mu.Lock()
		w.since = time.Now()
		w.mu.Unlock()
		return
	}
	if due := w.due(asked, true); len(due) > 0 {
		w.declare(ctx, due)
	}
}

// beatBuffer is how many heartbeats wait for the watchdog's goroutine at most (more are
// dropped by the NATS client, as for a slow consumer).
const beatBuffer = 1 << 16

// rttTimeout bounds the round trip to the NATS server that precedes declarations.
const rttTimeout = 2 * time.Second

// hearing reports whether this process hears NATS: a round trip to the server within
// rttTimeout. Every heartbeat the server sent before its answer is then in beats, and is taken
// into account before the deadlines are checked again.
func (w *Watchdog) hearing(beats chan *nats.Msg) bool {
	if !w.told {
		if err := w.listen(beats); err != nil {
			w.Log.Debug().Err(err).Msg("liveness: cannot subscribe to heartbeats: no declaration")
			return false
		}
	}
	if err := w.NC.FlushTimeout(rttTimeout); err != nil {
		w.Log.Debug().Err(err).Msg("liveness: no round trip to NATS: no declaration")
		return false
	}
	// A subscription NATS dropped since (its permissions changed, and the server reloaded):
	// told only if no other error came after it.
	if err := w.NC.LastError(); !sameErr(err, w.lastErr) {
		w.lastErr = err
		if refusal(err) && !w.deaf {
			w.deaf = true
			w.logDeaf(err)
		}
	}
	if !w.told || w.deaf {
		return false
	}
	for {
		select {
		case m := <-beats:
			w.onBeat(m)
		default:
			return true
		}
	}
}

// listenTries is how many subscriptions to the heartbeats listen makes at most before it takes
// one for heard without being told (other errors of the connection came with each).
const listenTries = 3

// listen subscribes to the heartbeats anew (the subscription it replaces is dropped once a round
// trip shows the new one made; without one, the new one is dropped and the old one kept), and
// notes whether NATS refused it (this process's NATS user may not subscribe there). NATS tells
// that only asynchronously, before its answer to a round trip made after the subscription, and
// the connection keeps only its last error: one told meanwhile (another subscription of a shared
// connection refused, a slow consumer) could hide the refusal, or be taken for it. A new error
// that names the heartbeats' subject tells a refusal, no new error at all tells a subscription
// made; after another error, a new subscription is asked again. Not told (no round trip), the
// old sub stays, and listen is called again at the next check that would declare. Deaf, the
// watchdog would take every connector for silent: it declares nothing until a reconnection (see
// check).
func (w *Watchdog) listen(beats chan *nats.Msg) error {
	for range listenTries {
		before := w.NC.LastError()
		sub, err := w.NC.ChanSubscribe(subjects.HeartbeatAll, beats)
		if err != nil {
			return err
		}
		// The subscription replaced is dropped only once the round trip shows the server has the
		// new one: until then the server sends the heartbeats to the old one alone (a stalled
		// connection holds them for as long as it stalls), and dropped at once, the NATS client
		// would throw them away, the connectors beating all along taken for silent.
		if w.NC.FlushTimeout(rttTimeout) != nil {
			if w.sub == nil {
				w.sub = sub
			} else {
				_ = sub.Unsubscribe()
			}
			return nil
		}
		if w.sub != nil {
			_ = w.sub.Unsubscribe()
		}
		w.sub = sub
		after := w.NC.LastError()
		w.lastErr = after
		switch {
		case sameErr(after, before):
			w.told, w.deaf = true, false
			return nil
		case refusal(after):
			w.told, w.deaf = true, true
			w.logDeaf(after)
			return nil
		}
	}
	w.told, w.deaf = true, false
	w.Log.Warn().Str("subject", subjects.HeartbeatAll).Err(w.lastErr).
		Msg("liveness: cannot tell whether NATS refused the subscription to the heartbeats (other errors on the connection): taken as made")
	return nil
}

// refusal reports whether err is NATS refusing the subscription to the heartbeats.
func refusal(err error) bool {
	return errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `Subscription to "`+subjects.HeartbeatAll+`"`)
}

// sameErr reports whether a and b are the same error value (an error of a type that cannot be
// compared is taken for another).
func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

func (w *Watchdog) logDeaf(err error) {
	w.Log.Error().Err(err).Str("subject", subjects.HeartbeatAll).
		Msg("liveness: NATS refused the subscription to the heartbeats: no connector_lost declaration (this NATS user needs to subscribe to " + subjects.HeartbeatAll + ")")
}

func (w *Watchdog) onBeat(m *nats.Msg) {
	tok := m.Subject[len(subjects.HeartbeatAll)-1:]
	id, err := subjects.DecodeToken(tok)
	if err != nil || id == "" {
		return
	}
	w.mu.Lock()
	// Only the connectors some server's last status names: anyone who may publish on the
	// heartbeat subjects could otherwise grow the map with made-up ids for hours. A heartbeat
	// that comes before the first status naming its connector is not needed: silence is
	// counted from when that status was seen at the earliest.
	if w.named[id] > 0 {
		w.beats[id] = time.Now()
	}
	w.mu.Unlock()
}

// follow feeds every server's last status, then each new one, into w.servers until ctx ends,
// starting over (with backoff) when the consumer fails. The backoff grows while no consumer can
// be made, and starts over from its first delay once one worked: a failure after hours of
// working waits 250 ms or so, not the 10 s that failures long past left it at.
func (w *Watchdog) follow(ctx context.Context) {
	// Options, not fields set afterwards: the constructor starts the first interval at the
	// default 500 ms.
	bo := backoff.NewExponentialBackOff(backoff.WithInitialInterval(250*time.Millisecond),
		backoff.WithMaxInterval(10*time.Second), backoff.WithMaxElapsedTime(0))
	for ctx.Err() == nil {
		started, err := w.consume(ctx)
		if ctx.Err() != nil {
			return
		}
		if started {
			bo.Reset()
		}
		d := bo.NextBackOff()
		w.Log.Warn().Err(err).Dur("retry_in", d).Msg("liveness: status consumer failed")
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// consume reads statuses until its consumer fails or ctx ends; started reports whether it got
// as far as reading them (its consumer made, and its iterator).
func (w *Watchdog) consume(ctx context.Context) (started bool, err error) {
	select { // a request for a new consumer, made before this one: this one is new
	case <-w.remake:
	default:
	}
	// The stream it reads, told by when it was made (see watchStream).
	stream, err := w.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		return false, err
	}
	created := stream.CachedInfo().Created
	w.mu.Lock()
	if !created.Equal(w.created) {
		// Another stream: the statuses kept are of the old one, and their sequences mean
		// nothing on this one (a declaration expecting one could land over a newer status
		// there). This consumer reads the last status of every server of the new one.
		for name, s := range w.servers {
			w.unname(s.st.Connector)
			delete(w.servers, name)
		}
		w.created = created
	}
	w.mu.Unlock()
	cons, err := w.JS.OrderedConsumer(ctx, subjects.RegistryStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.RegistryAllStatus},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
		// One try to make the consumer again when it is lost: nats.go's own retries (for
		// good by default) do not watch ctx, and while the stream is missing (deleted, NATS
		// restarted without its store) Next never returned, nor did Run once its context
		// ended. follow makes a new one, with its backoff, until ctx ends.
		MaxResetAttempts: 1,
	})
	if err != nil {
		return false, err
	}
	it, err := cons.Messages()
	if err != nil {
		return false, err
	}
	defer it.Stop()
	if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
		w.ready.Store(true)
	}
	// A stream made again ends the wait of Next (nctx), and this goroutine stops the iterator
	// (deferred above). Stopped from the watching goroutine instead, while Next was making the
	// ordered consumer again, the iterator stopped only the consumer it replaced: Next went on
	// waiting on the new one for good, and the stream's statuses were never read anew.
	var remade atomic.Bool
	var watching sync.WaitGroup
	nctx, stopNext := context.WithCancel(ctx)
	defer watching.Wait()
	defer stopNext()
	watching.Go(func() {
		if w.watchStream(nctx, stream) {
			remade.Store(true)
			stopNext()
		}
	})
	for {
		msg, err := it.Next(jetstream.NextContext(nctx))
		if err != nil {
			if remade.Load() {
				err = errors.New("the registry stream was made again")
			}
			return true, err
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		if meta.NumPending == 0 {
			w.ready.Store(true)
		}
		ev, err := subjects.DecodeRegistryMsg(msg.Subject(), msg.Data())
		if err != nil || ev.Status == nil {
			// Malformed (the indexer counts those), but the subject's last sequence moved: a
			// declaration must expect it, or the stream refuses it for good.
			if subj, perr := subjects.ParseRegistry(msg.Subject()); perr == nil {
				w.mu.Lock()
				if cur := w.servers[subj.Server]; cur != nil {
					cur.seq, cur.declared = meta.Sequence.Stream, false
				}
				w.mu.Unlock()
			}
			continue
		}
		w.mu.Lock()
		if old := w.servers[ev.Status.Server]; old != nil && old.seq == meta.Sequence.Stream && old.created.Equal(created) {
			// The status already kept, read again by a consumer made anew (which starts with
			// the last status of every server): no news of its connector. Replaced, its
			// silence would count from now again (and a consumer failing more often than 3
			// heartbeat periods would keep a dead connector's servers from ever being declared), and
			// a declaration in flight or waiting its retry would be sent again at once.
			w.mu.Unlock()
			continue
		}
		watch := watches(*ev.Status)
		if watch {
			w.named[ev.Status.Connector]++ // before the old one is unnamed: the same connector keeps its heartbeats
		}
		if old := w.servers[ev.Status.Server]; old != nil {
			w.unname(old.st.Connector)
			delete(w.servers, ev.Status.Server)
		}
		if watch {
			w.servers[ev.Status.Server] = &watched{st: *ev.Status, seq: meta.Sequence.Stream, created: created, seen: time.Now()}
		}
		// (A status that is not watched is not kept: nothing is declared over it, and a server
		// whose last status it is takes no room.)
		w.mu.Unlock()
	}
}

// watchStream reports true, and returns, once stream is found made again (deleted, or NATS
// restarted without its store, and made again by a process starting), until ctx ends (false).
// The sequences of the new stream start over from 1, and the ordered consumer, which makes
// itself again from the sequence after the last it delivered, would skip as many statuses of
// it: the consumer must be made anew, reading the last status of every server. A failed check
// (NATS away, the stream missing: the consumer fails by itself then) is tried again at the next.
func (w *Watchdog) watchStream(ctx context.Context, stream jetstream.Stream) bool {
	created := stream.CachedInfo().Created
	t := time.NewTicker(streamCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-w.remake:
			return true
		case <-t.C:
		}
		if info, err := stream.Info(ctx); err == nil && !info.Created.Equal(created) {
			return true
		}
	}
}

// watches reports whether a server whose last status is st is watched: one naming a connector
// that sends heartbeats, and not removed.
func watches(st subjects.Status) bool {
	return st.Connector != "" && st.HeartbeatMs > 0 && st.Status != subjects.StatusRemoved
}

// unname counts one status fewer naming connector (w.mu held); the heartbeats of a connector
// no status names any more are forgotten.
func (w *Watchdog) unname(connector string) {
	if connector == "" {
		return
	}
	if w.named[connector]--; w.named[connector] <= 0 {
		delete(w.named, connector)
		delete(w.beats, connector)
	}
}

// due returns the servers whose connector has been silent too long, marked declared if mark.
func (w *Watchdog) due(now time.Time, mark bool) []watched {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c, at := range w.beats {
		if now.Sub(at) > 2*MaxHeartbeat*subjects.MissedHeartbeats {
			delete(w.beats, c) // a connector gone for good
		}
	}
	var out []watched
	for _, s := range w.servers {
		if s.declared || !watches(s.st) || now.Before(s.retryAt) {
			continue
		}
		every := period(s.st.HeartbeatMs)
		last := w.since
		if b := w.beats[s.st.Connector]; b.After(last) {
			last = b
		}
		if s.seen.After(last) {
			last = s.seen
		}
		if now.Sub(last) > subjects.MissedHeartbeats*every {
			s.declared = s.declared || mark
			out = append(out, *s)
		}
	}
	return out
}

// declareRetry is how long a declaration whose publish failed waits before it is tried again
// (NATS away, or no permission to publish on the status subjects: one warning per batch).
const declareRetry = 30 * time.Second

// ackWait bounds the wait of a batch of declarations for their acknowledgements.
const ackWait = 5 * time.Second

// streamCheckEvery is how often the status consumer checks that the registry stream was not made
// again (a variable: tests shorten it).
var streamCheckEvery = 5 * time.Second

// declare publishes each server of due unavailable (connector_lost), unless its status changed
// since, all at once: a batch waits for its acknowledgements ackWait at most, whatever its size.
func (w *Watchdog) declare(ctx context.Context, due []watched) {
	type sent struct {
		s   watched
		ack jetstream.PubAckFuture
	}
	if created, ok := w.streamCreated(ctx); ok {
		// The statuses read from a stream since deleted and made again, whose sequences start
		// over: a declaration expecting one could land over a newer status of the new one.
		// Their consumer is made anew at once, and reads the new stream's statuses.
		w.mu.Lock()
		kept := due[:0]
		for _, s := range due {
			if s.created.Equal(created) {
				kept = append(kept, s)
			} else if cur := w.servers[s.st.Server]; cur.is(s) {
				cur.declared = false
			}
		}
		remade := !w.created.Equal(created)
		w.mu.Unlock()
		if remade {
			select {
			case w.remake <- struct{}{}:
			default:
			}
		}
		if len(kept) < len(due) {
			w.Log.Debug().Int("servers", len(due)-len(kept)).Msg("liveness: the registry stream was made again: no declaration until its statuses are read")
		}
		due = kept
	}
	var out []sent
	var refused []watched
	var failed []string
	var firstErr error
	fail := func(s watched, err error) {
		failed = append(failed, s.st.Server)
		if firstErr == nil {
			firstErr = err
		}
		w.mu.Lock()
		if cur := w.servers[s.st.Server]; cur.is(s) {
			cur.declared, cur.retryAt = false, time.Now().Add(declareRetry)
		}
		w.mu.Unlock()
	}
	for _, s := range due {
		silent := subjects.MissedHeartbeats * period(s.st.HeartbeatMs)
		st := subjects.Status{
			V: subjects.Version, Type: subjects.EventStatus, Server: s.st.Server,
			Status: subjects.StatusUnavailable, Code: subjects.CodeConnectorLost,
			Reason:      fmt.Sprintf("registrysync %s sent no heartbeat for over %s (killed, or cut off from NATS)", s.st.Connector, silent),
			Description: s.st.Description, Transport: s.st.Transport, Protocol: s.st.Protocol,
			Connector: s.st.Connector, At: time.Now().UTC(),
		}
		data, err := json.Marshal(st)
		if err != nil {
			continue
		}
		msg := nats.NewMsg(subjects.RegistryStatus(st.Server))
		msg.Data = data
		msg.Header.Set(subjects.HeaderEventType, subjects.EventStatus)
		ack, err := w.pub.PublishMsgAsync(msg, jetstream.WithExpectLastSequencePerSubject(s.seq))
		if err != nil {
			fail(s, err)
			continue
		}
		out = append(out, sent{s, ack})
	}
	deadline := time.NewTimer(ackWait)
	defer deadline.Stop()
	for _, o := range out {
		var err error
		select {
		case <-o.ack.Ok():
		case err = <-o.ack.Err():
		case <-deadline.C:
			err = fmt.Errorf("no acknowledgement within %s", ackWait)
			deadline.Reset(0) // the rest of the batch is late too
		case <-ctx.Done():
			return
		}
		switch {
		case err == nil:
			w.mu.Lock()
			w.declared++
			w.mu.Unlock()
			w.Log.Warn().Str("server", o.s.st.Server).Str("connector", o.s.st.Connector).Msg("connector silent: server declared unavailable (connector_lost)")
		case subjects.WrongLastSequence(err):
			// Another watchdog declared it first, or the server's status changed: nothing to do.
			// Or the status is gone (the stream purged, or the message deleted): see forgetGone.
			refused = append(refused, o.s)
		default:
			fail(o.s, err)
		}
	}
	w.forgetGone(ctx, refused)
	if len(failed) > 0 {
		w.Log.Warn().Err(firstErr).Int("servers", len(failed)).Str("first", failed[0]).Dur("retry_in", declareRetry).
			Msg("liveness: cannot publish connector_lost (NATS away, or no permission to publish on mcpstream.v1.registry.*.status)")
	}
}

// streamCreated returns when the registry stream was made, if told (not with NATS away, or
// the stream missing: a declaration then fails, or is refused, by itself).
func (w *Watchdog) streamCreated(ctx context.Context) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(ctx, ackWait)
	defer cancel()
	stream, err := w.JS.Stream(ctx, subjects.RegistryStream)
	if err != nil {
		return time.Time{}, false
	}
	return stream.CachedInfo().Created, true
}

// forgetGone drops the servers of refused declarations whose status is no longer on the stream
// (purged, or deleted): no newer one is coming, and kept, they would stay until this process
// restarts. The others were refused over a newer status, which the consumer delivers; those it
// cannot tell (NATS away) are declared again after declareRetry, and asked again if refused.
func (w *Watchdog) forgetGone(ctx context.Context, refused []watched) {
	if len(refused) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ackWait)
	defer cancel()
	stream, err := w.JS.Stream(ctx, subjects.RegistryStream)
	for _, s := range refused {
		gone := false
		if err == nil {
			var m *jetstream.RawStreamMsg
			m, err = stream.GetLastMsgForSubject(ctx, subjects.RegistryStatus(s.st.Server))
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
				gone, err = true, nil
			case err == nil:
				gone = m.Sequence < s.seq
			}
		}
		w.mu.Lock()
		if cur := w.servers[s.st.Server]; cur.is(s) {
			switch {
			case gone:
				w.unname(cur.st.Connector)
				delete(w.servers, s.st.Server)
			case err != nil:
				cur.declared, cur.retryAt = false, time.Now().Add(declareRetry)
			}
		}
		w.mu.Unlock()
	}
	if err != nil {
		w.Log.Debug().Err(err).Msg("liveness: cannot tell whether refused declarations' statuses are gone")
	}
}

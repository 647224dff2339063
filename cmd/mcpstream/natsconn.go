package main

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/subjects"
)

// hostNATSOptions are the options of a role process's NATS connection (up and the role
// subcommands; on the embedded server's in-process connection or with --nats): its name
// "mcpstream NAME", its pings, its asynchronous errors logged and counted by errs, its
// disconnections and reconnections logged (a reconnection also sent on reconnected).
func hostNATSOptions(log zerolog.Logger, name string, reconnected chan<- struct{}, errs *natsErrors) []nats.Option {
	return []nats.Option{
		nats.Name("mcpstream " + name),
		nats.PingInterval(natsPingInterval),
		nats.MaxPingsOutstanding(natsMaxPingsOut),
		errs.option(),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("nats disconnected")
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info().Str("url", redactURL(c.ConnectedUrl())).Msg("nats reconnected")
			select { // the streams are checked again at once (see watchStreams)
			case reconnected <- struct{}{}:
			default:
			}
		}),
	}
}

// natsErrorLogEvery is how often at most the same asynchronous error of a connection is logged
// for the same subject (see natsErrors).
const natsErrorLogEvery = 10 * time.Second

var natsSlowConsumer = desc("mcpstream_nats_slow_consumer_events_total",
	"Times a subscription of this process's NATS connection began dropping messages because its pending limits were full "+
		"(a slow consumer; each time one or more messages are lost to it), by subscription subject: reply inboxes as _INBOX, "+
		"per-call and per-server tokens as *.", "subject")

// natsErrors logs the asynchronous errors NATS reports on a connection (a slow consumer, a
// permissions violation, ...) and counts the slow consumers by subject for /metrics.
//
// nats.go reports a subscription's slow consumer once when it begins dropping (sub.Dropped
// counts the messages), and again only after it took a message in between: a flood could still
// report it often. The log has at most one line per kind of error and subject label (see
// subjectLabel) every natsErrorLogEvery: the first at once, then one at the end of the window
// saying how many were left out (events), with the last subject seen.
type natsErrors struct {
	log   zerolog.Logger
	inbox string // the connection's reply inbox prefix (--nats-inbox), collapsed like _INBOX
	every time.Duration
	now   func() time.Time
	after func(time.Duration, func()) // time.AfterFunc (tests hold the timer)

	mu      sync.Mutex
	slow    map[string]uint64 // slow consumer events by subject label
	windows map[string]*errWindow
}

// errWindow is the rate limit of one kind of error on one subject label.
type errWindow struct {
	last       time.Time // when the last line was logged
	pending    bool      // a line for the suppressed ones is scheduled
	suppressed int       // errors since the last line, not logged
	conn       string    // of the last one suppressed
	subject    string
	dropped    int // the subscription's dropped messages at the last one suppressed, -1 = unknown
	err        error
}

func newNATSErrors(log zerolog.Logger, inbox string) *natsErrors {
	return &natsErrors{log: log, inbox: inbox, every: natsErrorLogEvery, now: time.Now,
		after:   func(d time.Duration, f func()) { time.AfterFunc(d, f) },
		slow:    map[string]uint64{},
		windows: map[string]*errWindow{},
	}
}

// option sets the connection's error handler to e's, after any handler an earlier option set
// (which still runs, first). No package of mcpstream sets one of its own on a connection it is
// given; one that did (nc.SetErrorHandler) would replace this one.
func (e *natsErrors) option() nats.Option {
	return func(o *nats.Options) error {
		prev := o.AsyncErrorCB
		o.AsyncErrorCB = func(c *nats.Conn, sub *nats.Subscription, err error) {
			if prev != nil {
				prev(c, sub, err)
			}
			e.handle(c, sub, err)
		}
		return nil
	}
}

// handle runs on the connection's callback goroutine: it neither blocks nor waits.
func (e *natsErrors) handle(c *nats.Conn, sub *nats.Subscription, err error) {
	var conn, subject, label string
	if c != nil {
		conn = c.Opts.Name
	}
	dropped := -1
	if sub != nil {
		subject = sub.Subject
		label = subjectLabel(subject, e.inbox)
	}
	slow := errors.Is(err, nats.ErrSlowConsumer)
	if slow && sub != nil {
		if d, derr := sub.Dropped(); derr == nil {
			dropped = d
		}
	}
	kind := "other"
	switch {
	case slow:
		kind = "slow"
	case errors.Is(err, nats.ErrPermissionViolation):
		kind = "permissions"
	}
	key := kind + "\x00" + label

	e.mu.Lock()
	if slow && sub != nil {
		e.slow[label]++
	}
	w := e.windows[key]
	if w == nil {
		w = &errWindow{}
		e.windows[key] = w
	}
	now := e.now()
	if !w.pending && (w.last.IsZero() || now.Sub(w.last) >= e.every) {
		w.last = now
		e.mu.Unlock()
		e.logLine(conn, subject, err, 1, dropped)
		return
	}
	w.suppressed++
	w.conn, w.subject, w.dropped, w.err = conn, subject, dropped, err
	if !w.pending {
		w.pending = true
		e.after(w.last.Add(e.every).Sub(now), func() { e.flush(key) })
	}
	e.mu.Unlock()
}

// flush logs the errors of key suppressed in the window that just ended.
func (e *natsErrors) flush(key string) {
	e.mu.Lock()
	w := e.windows[key]
	w.pending = false
	n := w.suppressed
	w.suppressed = 0
	if n == 0 {
		e.mu.Unlock()
		return
	}
	w.last = e.now()
	conn, subject, dropped, err := w.conn, w.subject, w.dropped, w.err
	e.mu.Unlock()
	e.logLine(conn, subject, err, n, dropped)
}

// logLine logs n errors (err the last one) on the connection named conn.
func (e *natsErrors) logLine(conn, subject string, err error, n, dropped int) {
	ev := e.log.Warn().Err(err).Str("conn", conn)
	if subject != "" {
		ev = ev.Str("subject", subject)
	}
	ev = ev.Int("events", n)
	if !errors.Is(err, nats.ErrSlowConsumer) {
		ev.Msg("nats async error")
		return
	}
	if dropped >= 0 {
		ev = ev.Int("dropped", dropped)
	}
	ev.Msg("nats slow consumer: a subscription dropped messages (its pending limits were full)")
}

// collect adds mcpstream_nats_slow_consumer_events_total (no series before the first).
func (e *natsErrors) collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for label, n := range e.slow {
		counter(ch, natsSlowConsumer, float64(n), label)
	}
}

// subjectLabel is the subject label of a subscription's subject, of bounded cardinality: a
// reply inbox (under _INBOX or inbox, the per-request and per-consumer ones) is its prefix; a
// subject with a wildcard (the roles' subscriptions to all tenants, servers, connectors) is
// itself; in any other, the tokens after mcpstream.v1.KIND (a tenant, a call, a server) or
// after the first two of another ($SRV.PING.NAME.ID) are *.
func subjectLabel(subject, inbox string) string {
	for _, p := range []string{inbox, strings.TrimSuffix(nats.InboxPrefix, ".")} {
		if p != "" && (subject == p || strings.HasPrefix(subject, p+".")) {
			return p
		}
	}
	toks := strings.Split(subject, ".")
	if slices.ContainsFunc(toks, func(t string) bool { return t == "*" || t == ">" }) {
		return subject
	}
	keep := 2
	if strings.HasPrefix(subject, subjects.Root+".") {
		keep = strings.Count(subjects.Root, ".") + 2
	}
	for i := keep; i < len(toks); i++ {
		toks[i] = "*"
	}
	return strings.Join(toks, ".")
}

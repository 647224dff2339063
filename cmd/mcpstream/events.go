package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	register(command{
		name:    "events",
		summary: "print or follow the registry history (and the audit or results streams)",
		run:     runEvents,
	})
}

const eventsHelp = `
Replays stored events in order, oldest first, then exits once caught up with what was stored when
it began (events removed before they are read, by max_age, max_bytes, a message TTL or a purge,
are not waited for), or, with --follow, keeps printing new ones until Ctrl-C. By default it reads the registry stream: every snapshot,
list_changed, confirmation (re-listed unchanged), status and revocation event of every MCP server.
A --subject filter (any mcpstream subject with NATS wildcards, with or without the "mcpstream.v1."
prefix) picks the stream it belongs to: registry, results or audit; one that matches no stored
subject (registry.kb, or registry.*.snapshot without a kind, or results or audit of a tenant
token no call has: empty, over 1024 bytes decoded, or not encoded as tenants are; a server name
over 128 bytes, a call id over 256) is refused, as is a filter too long for the request that
makes its consumer (past the NATS server's max_control_line, 4 KiB), and a --server NAME over
128 bytes. Several --subject filters
(all of one stream) print every event that any of them matches, once; a filter that another
covers (registry.kb.status under registry.>) adds nothing. --server NAME keeps
the registry events of that server: with --subject, each filter is narrowed to it
(--server kb --subject 'registry.*.status' prints kb's status events only). A server the
stream holds no event of (never seen, or a typo) prints nothing, and a note on stderr says so
(exit status 0, as for any replay with nothing to print; with --follow the note comes first and
the events follow when they come). A stream deleted and created again while it is read (within
seconds, with --follow) ends the command with an error: run it again to read the
new one. While the connection to NATS is lost (NATS restarting), a line on stderr says so, and
another when it is back; the read resumes where it was, and stdout carries the events only.

Text output is one summary line per event: sequence, time, server, event, and for snapshots the
number of items and what was added (+) or removed (-) since the previous snapshot of that server and
kind seen in this replay. A message mcpstream's consumers refuse (not JSON, another version, a
payload that is not the server, event or kind of its subject) prints as "SUBJECT bad payload: why",
never skipped; control characters of payloads print as '?'. --json prints one JSON object per line:
  {"seq":N,"subject":"...","time":"RFC3339Nano","event":<the payload as stored>}
with "error":"why" added for a payload consumers refuse (and, when it is not JSON, "event":null and
"raw": its first 512 bytes). Lines are UTF-8: invalid bytes read U+FFFD, and control and format
characters are \u-escaped (the same JSON value).

Examples:
  mcpstream events --since 1h
  mcpstream events --json --since 2026-01-02T15:04:05Z
  mcpstream events --server ticketing --follow
  mcpstream events --subject 'registry.*.status'
  mcpstream events --server ticketing --subject 'registry.*.status' --subject 'registry.*.changed.*'
  mcpstream events --subject 'audit.>' --since 10m --json`

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// ErrBadFilter is returned for a --subject, --stream or --since that cannot be used.
var ErrBadFilter = errors.New("bad filter")

func runEvents(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	var filters stringList
	var since, stream, server string
	var follow bool
	fs := newFlagSet("events", "events [flags]", eventsHelp)
	cf.register(fs, false)
	fs.Var(&filters, "subject", "subject filter (repeatable), e.g. registry.*.status, audit.>, mcpstream.v1.results.acme.>")
	fs.StringVar(&server, "server", "", "only this MCP server's registry events (narrows the --subject filters)")
	fs.StringVar(&stream, "stream", "", "read this stream: registry (default), results or audit")
	fs.StringVar(&since, "since", "", "start at this age (1h, 30m) or time (RFC3339); default: the whole history")
	fs.BoolVar(&follow, "follow", false, "keep printing new events until interrupted")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageErrorf("events: unexpected argument %q", rest[0])
	}
	// A filter, stream or time that cannot be read is a usage error (exit status 2), found
	// before connecting.
	streamName, subjectFilters, err := pickStream(stream, filters)
	if err != nil {
		return &badUsage{err}
	}
	if server != "" {
		if streamName != subjects.RegistryStream {
			return usageErrorf("%w: --server selects registry events, not those of %s (filter it with --subject)", ErrBadFilter, streamName)
		}
		if subjectFilters, err = forServer(subjectFilters, server); err != nil {
			return &badUsage{err}
		}
	}
	if err := controlLineRoom(streamName, subjectFilters, cmp.Or(cf.Inbox, strings.TrimSuffix(nats.InboxPrefix, "."))); err != nil {
		return &badUsage{err}
	}
	start, err := parseSince(since, hostClock())
	if err != nil {
		return &badUsage{err}
	}
	// Lost and back again: a note on stderr (the read resumes by itself once reconnected).
	notes, stopNotes := cf.connectionNotes(stderr, "events")
	defer stopNotes()
	nc, js, err := cf.connect("events", notes)
	if err != nil {
		return err
	}
	defer nc.Close()
	if age, err := time.ParseDuration(since); err == nil {
		// JetStream compares the start with its own timestamps: an age counts back from its
		// clock, not this host's (one ahead by more than the age printed nothing).
		start = serverNow(ctx, js, streamName).Add(-age)
	}

	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: subjectFilters}
	if !start.IsZero() {
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &start
	}
	p := &eventPrinter{w: stdout, json: cf.JSON, prev: map[string][]string{}}
	// A --server the registry never saw (a typo, say) replays nothing, as a known server with
	// nothing to show does: a note on stderr tells them apart (stdout stays the events only).
	if server != "" && follow && serverUnseen(ctx, js, streamName, server) {
		fmt.Fprintf(stderr, "mcpstream events: no event of server %q is in %s yet: waiting for them (mcpstream servers lists the servers the registry knows)\n", server, streamName)
	}
	err = cf.noJetStream(readStream(ctx, js, streamName, cfg, follow, p.print))
	if err == nil && server != "" && !follow && ctx.Err() == nil && serverUnseen(ctx, js, streamName, server) {
		fmt.Fprintf(stderr, "mcpstream events: no event of server %q is in %s (mcpstream servers lists the servers the registry knows)\n", server, streamName)
	}
	return err
}

// serverNow is the NATS server's time (the stream's info), or this host's when it cannot be
// asked.
func serverNow(ctx context.Context, js jetstream.JetStream, stream string) time.Time {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if st, err := js.Stream(cctx, stream); err == nil && !st.CachedInfo().TimeStamp.IsZero() {
		return st.CachedInfo().TimeStamp // (the look-up's own info: one request)
	}
	return hostClock()
}

// serverUnseen reports whether the stream holds no message of server's registry subjects at all
// (whatever --since and --subject select); false when it cannot tell.
func serverUnseen(ctx context.Context, js jetstream.JetStream, stream, server string) bool {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := js.Stream(cctx, stream)
	if err != nil {
		return false
	}
	// The subjects of one server: a status, a revocation and three per kind at most.
	info, err := st.Info(cctx, jetstream.WithSubjectFilter(subjects.RegistryServer(server)))
	return err == nil && len(info.State.Subjects) == 0
}

// pickStream resolves the stream and subject filters of `events`.
func pickStream(stream string, filters []string) (string, []string, error) {
	byName := map[string]string{
		"registry": subjects.RegistryStream, "results": subjects.ResultsStream, "audit": subjects.AuditStream,
	}
	var name string
	if stream != "" {
		name = byName[strings.ToLower(stream)]
		if name == "" {
			for _, v := range byName {
				if v == stream {
					name = v
				}
			}
		}
		if name == "" {
			return "", nil, fmt.Errorf("%w: --stream %q: want registry, results or audit", ErrBadFilter, stream)
		}
	}
	out := make([]string, 0, len(filters))
	for _, f := range filters {
		f = strings.TrimSpace(f)
		if !strings.HasPrefix(f, "mcpstream.") {
			f = subjects.Root + "." + f
		}
		toks := strings.Split(f, ".")
		if len(toks) < 3 || toks[0] != "mcpstream" || toks[1] != subjects.Root[len("mcpstream."):] {
			return "", nil, fmt.Errorf("%w: --subject %q: not under %s", ErrBadFilter, f, subjects.Root)
		}
		for i, t := range toks {
			if t == "" || (t == ">" && i != len(toks)-1) || strings.ContainsAny(t, " \t") {
				return "", nil, fmt.Errorf("%w: --subject %q: not a NATS subject filter", ErrBadFilter, f)
			}
		}
		var s string
		switch toks[2] {
		case "registry":
			s = subjects.RegistryStream
		case "results":
			s = subjects.ResultsStream
		case "audit":
			s = subjects.AuditStream
		case "calls":
			return "", nil, fmt.Errorf("%w: --subject %q: calls is a work queue whose requests are consumed; read results or audit", ErrBadFilter, f)
		case "*", ">":
			return "", nil, fmt.Errorf("%w: --subject %q: a filter must stay within one stream (registry, results or audit)", ErrBadFilter, f)
		case "exec", "approvals", "catalog", "control", "dispatch":
			return "", nil, fmt.Errorf("%w: --subject %q: %s subjects are request/reply, not stored (watch them with `nats sub`)", ErrBadFilter, f, toks[2])
		default:
			return "", nil, fmt.Errorf("%w: --subject %q: no mcpstream subjects start with %q; stored are registry.>, results.> and audit.>", ErrBadFilter, f, subjects.Root+"."+toks[2])
		}
		if name != "" && s != name {
			return "", nil, fmt.Errorf("%w: --subject %q is not in stream %s", ErrBadFilter, f, name)
		}
		if !matchesSome(f, storedShapes[s]) {
			// A literal subject is a subject: "registry.kb" or "registry.*.snapshot" would
			// replay nothing, as if nothing had happened.
			return "", nil, fmt.Errorf("%w: --subject %q matches no %s subject: they are %s (end a filter with .> for all below it)",
				ErrBadFilter, f, toks[2], strings.Join(storedShapes[s], ", "))
		}
		if why := noTenantToken(s, toks); why != "" {
			return "", nil, fmt.Errorf("%w: --subject %s matches no %s subject: %s", ErrBadFilter, quoteCut(f, 200), toks[2], why)
		}
		if why := tooLongToken(s, toks); why != "" {
			return "", nil, fmt.Errorf("%w: --subject %s matches no %s subject: %s", ErrBadFilter, quoteCut(f, 200), toks[2], why)
		}
		name = s
		out = append(out, f)
	}
	if name == "" {
		name = subjects.RegistryStream
	}
	return name, dropCovered(out), nil
}

// noTenantToken says why the literal tenant token of a results or audit filter's tokens toks
// is no tenant's ("" when it may be one, or is a wildcard): no call has a tenant over
// subjects.MaxUserBytes or an empty one (subjects.CheckTenant: the clients and the executor
// refuse them), nor a token EncodeToken never makes. Such a filter would replay nothing, as if
// nothing had happened; and a long one put the consumer's request subject past the NATS
// server's max_control_line, which closed the connection ("connection closed", not why).
func noTenantToken(stream string, toks []string) string {
	if (stream != subjects.ResultsStream && stream != subjects.AuditStream) || len(toks) < 4 {
		return ""
	}
	tok := toks[3]
	if tok == "*" || tok == ">" || (stream == subjects.AuditStream && tok == subjects.NoTenantToken) {
		return ""
	}
	tenant, err := subjects.DecodeToken(tok)
	if err != nil {
		return "its tenant token is not a tenant token (one EncodeToken makes: upper-case hex after ~, only for bytes other than letters, digits, _ and -)"
	}
	if e := subjects.CheckTenant(tenant); e != nil {
		return e.Message
	}
	return ""
}

// tooLongToken says why a literal server token of a registry filter, or call id token of a
// results filter, is longer than any stored subject's ("" when it is not): registrysync runs no
// server named over registrysync.MaxServerNameBytes, the executor takes no call id over
// subjects.MaxCallIDBytes, and a token holds its value with each byte escaped at most (three
// bytes). Such a filter would replay nothing; and a long one put the consumer's request subject
// past the NATS server's max_control_line, which closed the connection ("connection closed",
// not why).
func tooLongToken(stream string, toks []string) string {
	i, what, limit := 3, "server name", registrysync.MaxServerNameBytes
	switch stream {
	case subjects.ResultsStream:
		i, what, limit = 4, "call id", subjects.MaxCallIDBytes
	case subjects.AuditStream:
		return "" // (its tenant: noTenantToken; its event: controlLineRoom)
	}
	if len(toks) <= i || toks[i] == "*" || toks[i] == ">" {
		return ""
	}
	return overLimit(toks[i], what, limit)
}

// overLimit says why the subject token tok holds no value of what ("" when it may): decoded
// (subjects.DecodeToken), it is over limit bytes; not decodable, it is longer than any token of
// such a value (limit bytes, each escaped to three).
func overLimit(tok, what string, limit int) string {
	if v, err := subjects.DecodeToken(tok); err == nil {
		if len(v) > limit {
			return fmt.Sprintf("the %s is %d bytes long; at most %d", what, len(v), limit)
		}
		return ""
	}
	if len(tok) > 3*limit {
		return fmt.Sprintf("its %s token is %d bytes long; a %s is at most %d bytes (%d escaped)", what, len(tok), what, limit, 3*limit)
	}
	return ""
}

// maxControlLine is the NATS server's default max_control_line: it closes a connection that
// sends a longer protocol line ("connection closed", nothing said why).
const maxControlLine = 4096

// controlLineRoom refuses a lone filter (after --server narrowed it) too long for the request
// that makes its consumer: with one filter nats.go puts it in that request's subject
// ($JS.API.CONSUMER.CREATE.<stream>.<name>.<filter>), and a line past the NATS server's
// max_control_line gets the connection closed. The room counts the consumer's name (a 22-byte
// NUID, '_' and its serial, allowed 6 digits), the reply inbox (inbox, '.', a 22-byte NUID, '.',
// 8 bytes) and the payload's size (4 digits). Every filter that can match a stored subject fits
// with any --nats-inbox up to subjects.MaxInboxPrefix (the longest, results of a 1024-byte
// tenant and a 256-byte call id, every byte escaped: 3,862 bytes). Several filters go in the
// payload, not the subject.
func controlLineRoom(stream string, filters []string, inbox string) error {
	if len(filters) != 1 {
		return nil
	}
	room := maxControlLine - len("$JS.API.CONSUMER.CREATE.") - len(stream) - len(".")*2 - (22 + 1 + 6) -
		len(" ") - (len(inbox) + 1 + 22 + 1 + 8) - len(" ") - 4
	if f := filters[0]; len(f) > room {
		return fmt.Errorf("%w: --subject %s is %d bytes long; at most %d here: the request that makes its consumer would pass "+
			"the NATS server's max_control_line (%d bytes), and it closes the connection (no stored subject is that long)",
			ErrBadFilter, quoteCut(f, 200), len(f), room, maxControlLine)
	}
	return nil
}

// quoteCut is s quoted (%q), cut to its first n bytes with "…" where it was cut: a filter
// may be kilobytes long.
func quoteCut(s string, n int) string {
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…", strings.ToValidUTF8(s[:n], ""))
}

// storedShapes are the subjects each stream stores, with * for a server, kind, tenant, call id
// or event name.
var storedShapes = map[string][]string{
	subjects.RegistryStream: {
		subjects.Root + ".registry.*.status", subjects.Root + ".registry.*.revoked", subjects.Root + ".registry.*.snapshot.*",
		subjects.Root + ".registry.*.changed.*", subjects.Root + ".registry.*.confirmed.*",
	},
	subjects.ResultsStream: {subjects.Root + ".results.*.*"},
	subjects.AuditStream:   {subjects.Root + ".audit.*.*"},
}

// matchesSome reports whether the filter f matches a subject of one of the shapes.
func matchesSome(f string, shapes []string) bool {
	for _, s := range shapes {
		if intersect(f, s) != "" {
			return true
		}
	}
	return false
}

// forServer narrows registry subject filters to one server's events (--server with --subject):
// the server token of each filter, a wildcard or that server, becomes the server; a filter of
// another server selects none of its events. Without filters: every event of the server.
func forServer(filters []string, server string) ([]string, error) {
	if len(server) > registrysync.MaxServerNameBytes {
		// No registry subject holds it (and one long enough got the connection closed, the
		// consumer's request past the NATS server's max_control_line).
		return nil, fmt.Errorf("%w: --server %s: the name is %d bytes long; at most %d (no server has a longer one)",
			ErrBadFilter, quoteCut(server, 60), len(server), registrysync.MaxServerNameBytes)
	}
	all := subjects.RegistryServer(server)
	if len(filters) == 0 {
		return []string{all}, nil
	}
	var out []string
	for _, f := range filters {
		if n := intersect(f, all); n != "" {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: --subject %s: no event of server %q matches (--server narrows the filters to its events)",
			ErrBadFilter, strings.Join(filters, ", "), server)
	}
	return dropCovered(out), nil
}

// dropCovered removes the filters that another filter covers (and repeated ones), keeping the
// order of the rest: a JetStream consumer refuses a filter that is a subset of another
// (registry.> with registry.kb.status), and the covering one selects the same events.
func dropCovered(filters []string) []string {
	out := make([]string, 0, len(filters))
	for i, f := range filters {
		covered := false
		for j, g := range filters {
			// Of two equal filters the first stays.
			if i != j && covers(g, f) && (f != g || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, f)
		}
	}
	return out
}

// covers reports whether the NATS subject filter g matches every subject that filter f matches.
func covers(g, f string) bool {
	gt, ft := strings.Split(g, "."), strings.Split(f, ".")
	for i, t := range gt {
		switch {
		case t == ">":
			return len(ft) > i
		case i >= len(ft) || ft[i] == ">":
			return false
		case t != "*" && t != ft[i]: // "*" covers a token or "*"; a literal only itself
			return false
		}
	}
	return len(ft) == len(gt)
}

// intersect returns the NATS subject filter matching exactly the subjects that both filters a
// and b match, "" when there are none.
func intersect(a, b string) string {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	var out []string
	for i := 0; ; i++ {
		switch {
		case i == len(at) && i == len(bt):
			return strings.Join(out, ".")
		case i < len(at) && at[i] == ">" && i < len(bt):
			return strings.Join(append(out, bt[i:]...), ".")
		case i < len(bt) && bt[i] == ">" && i < len(at):
			return strings.Join(append(out, at[i:]...), ".")
		case i >= len(at) || i >= len(bt):
			return ""
		case at[i] == "*":
			out = append(out, bt[i])
		case bt[i] == "*" || at[i] == bt[i]:
			out = append(out, at[i])
		default:
			return ""
		}
	}
}

// hostClock is this host's clock (a variable: tests set a host whose clock is off).
var hostClock = time.Now

// parseSince reads --since: "" (everything), a duration before now, or an RFC3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%w: --since %q: want a positive duration", ErrBadFilter, s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: --since %q: want a duration (1h, 30m) or an RFC3339 time (2026-01-02T15:04:05Z)", ErrBadFilter, s)
}

// readStream delivers a stream's messages (filtered by cfg) in order to fn, with an ordered
// consumer. Without follow it returns once the messages that existed when it started were
// delivered (or removed before they were); with follow it runs until ctx ends. Ctrl-C (ctx done) is a clean stop.
func readStream(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.OrderedConsumerConfig, follow bool, fn func(jetstream.Msg) error) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	st, err := js.Stream(sctx, stream)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("stream %s not found: is this mcpstream's NATS (has `mcpstream up` or a role run on it)?", stream)
		}
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	cfg.MaxResetAttempts = 5
	cfg.InactiveThreshold = time.Minute
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("consumer on %s: %w", stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("consumer on %s: %w", stream, err)
	}
	defer it.Stop()
	if info := cons.CachedInfo(); !follow && info != nil && info.NumPending == 0 {
		return nil
	}
	// Without --follow, the replay ends at the stream's last message when it began: under
	// traffic faster than the reader (a slow terminal), waiting for nothing to be pending
	// would never end.
	last := st.CachedInfo().State.LastSeq
	// The stream made again (deleted and created) while it is read: the ordered consumer makes
	// itself again on the new stream from the sequence after the last it read, skipping the new
	// stream's events before it (or waiting, silent, for a sequence the new stream may never
	// reach). A watch of the stream's creation time ends the read with an error instead. Next
	// waits on wctx, and the iterator is stopped on its end too: while the stream is missing,
	// nats.go retries making the consumer inside Next, watching no context but the Stop.
	wctx, wcancel := context.WithCancel(ctx)
	var remade atomic.Bool
	var watching sync.WaitGroup
	defer watching.Wait()
	defer wcancel()
	stopIt := context.AfterFunc(wctx, it.Stop)
	defer stopIt()
	created := st.CachedInfo().Created
	watching.Go(func() {
		t := time.NewTicker(followStreamCheckEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			info, err := st.Info(wctx)
			if err == nil && !info.Created.Equal(created) {
				remade.Store(true)
				wcancel()
				return
			}
		}
	})
	var got gotSoFar
	for {
		msg, err := nextMsg(wctx, it, cons, got, follow)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if remade.Load() {
				return fmt.Errorf("read %s: the stream was made again (deleted and created) while it was read: run the command again to read the new one", stream)
			}
			if errors.Is(err, errReplayDrained) {
				return nil
			}
			return fmt.Errorf("read %s: %w", stream, err)
		}
		meta, merr := msg.Metadata()
		if merr == nil {
			got = gotSoFar{consumer: meta.Consumer, seq: meta.Sequence.Consumer}
		}
		if !follow && merr == nil && meta.Sequence.Stream > last {
			return nil
		}
		if err := fn(msg); err != nil {
			return err
		}
		if !follow && merr == nil && (meta.NumPending == 0 || meta.Sequence.Stream == last) {
			return nil
		}
	}
}

// errReplayDrained is nextMsg's answer when a replay (no --follow) has no event left to come
// (see replayDrained).
var errReplayDrained = errors.New("no event left to read")

// replayIdleCheck is how long a replay waits for its next event before it asks the server
// whether one is still to come, and how often it asks again (a variable: tests shorten it).
var replayIdleCheck = 2 * time.Second

// nextMsg is the iterator's next message; without follow, errReplayDrained when none came for
// replayIdleCheck and the server has none left to send (got: what the replay received). The
// server is asked beside Next, which waits on: a deadline on Next would also end, every time,
// nats.go's watch of the pull request's heartbeats, its way to ask again for a request lost
// without a word (the replay then waited for good for events it never asked for).
func nextMsg(ctx context.Context, it jetstream.MessagesContext, cons jetstream.Consumer, got gotSoFar, follow bool) (jetstream.Msg, error) {
	if follow {
		return it.Next(jetstream.NextContext(ctx))
	}
	nctx, cancel := context.WithCancelCause(ctx)
	var asking sync.WaitGroup
	asking.Go(func() {
		t := time.NewTicker(replayIdleCheck)
		defer t.Stop()
		for {
			select {
			case <-nctx.Done():
				return
			case <-t.C:
			}
			if replayDrained(nctx, cons, got) {
				cancel(errReplayDrained)
				return
			}
		}
	})
	msg, err := it.Next(jetstream.NextContext(nctx))
	cancel(nil)
	asking.Wait()
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(nctx), errReplayDrained) {
		return nil, errReplayDrained
	}
	return msg, err
}

// gotSoFar is the consumer (its name: the ordered consumer makes a new one on a reset) and the
// consumer sequence of the last message a replay received.
type gotSoFar struct {
	consumer string
	seq      uint64
}

// replayDrained reports whether the server has no event left to send a replay: none pending
// and none sent that the replay has not received. The last event a replay is sent says how many
// are pending after it, and those can be removed before they are sent (max_age, max_bytes, a
// per-message TTL, a purge, a deleted message): the replay waited for them for good. False
// when the consumer cannot be asked (a reset, a slow server): the replay waits on.
func replayDrained(ctx context.Context, cons jetstream.Consumer, got gotSoFar) bool {
	ictx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := cons.Info(ictx)
	if err != nil || info.NumPending > 0 {
		return false
	}
	// Sent but not yet received (the server's answer can overtake its messages): wait on.
	received := uint64(0)
	if info.Name == got.consumer {
		received = got.seq
	}
	return info.Delivered.Consumer <= received
}

// eventLine is one --json line of `events`.
type eventLine struct {
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
	Time    string          `json:"time"`
	Event   json.RawMessage `json:"event"`
	// Error is set for a payload mcpstream's consumers refuse (printed, never dropped): one that
	// is not JSON (event is null, Raw holds its first bytes), or a registry payload
	// subjects.DecodeRegistryMsg refuses (event is the payload as stored).
	Error string `json:"error,omitempty"`
	Raw   string `json:"raw,omitempty"`
}

// eventPrinter prints events; prev remembers the item names of the last snapshot per server and
// kind, for the text diff.
type eventPrinter struct {
	w    io.Writer
	json bool
	prev map[string][]string
}

// maxRawInLine caps the raw bytes of a malformed payload shown on one line, maxErrInLine the
// bytes of why it is malformed.
const (
	maxRawInLine = 512
	maxErrInLine = 300
)

// termSafeJSON returns the valid JSON data as the same JSON value, safe to print on a terminal
// (one --json line, whose "event" is a payload as stored and "raw" the bytes of one that is not
// JSON):
// a byte of invalid UTF-8 becomes U+FFFD (as mcpstream's consumers read it, and a strict UTF-8
// reader of the line would fail on it), and a control or format character that JSON lets through
// unescaped (DEL, C1 controls such as the CSI U+009B, bidi overrides) is escaped as \uXXXX. Such
// bytes can only occur inside JSON strings, where the escapes mean the same text.
func termSafeJSON(data []byte) []byte {
	clean := true
	for _, c := range data {
		if c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return data
	}
	var b []byte
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r >= 0x7f && termUnsafe(r):
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				b = fmt.Appendf(b, `\u%04x\u%04x`, r1, r2)
			} else {
				b = fmt.Appendf(b, `\u%04x`, r)
			}
		default:
			b = append(b, data[i:i+size]...)
		}
		i += size
	}
	return b
}

func (p *eventPrinter) print(msg jetstream.Msg) error {
	meta, err := msg.Metadata()
	if err != nil {
		return fmt.Errorf("message metadata: %w", err)
	}
	data := msg.Data()
	if p.json {
		line := eventLine{Seq: meta.Sequence.Stream, Subject: msg.Subject(), Time: meta.Timestamp.UTC().Format(time.RFC3339Nano)}
		if json.Valid(data) {
			line.Event = data
			if strings.HasPrefix(line.Subject, subjects.Root+".registry.") {
				if _, err := subjects.DecodeRegistryMsg(line.Subject, data); err != nil {
					line.Error = truncate(err.Error(), maxErrInLine)
				}
			}
		} else {
			line.Event = json.RawMessage("null")
			line.Error = subjects.CodeBadRequest + ": payload is not JSON"
			line.Raw = truncate(string(data), maxRawInLine)
		}
		b, err := json.Marshal(line)
		if err != nil {
			return fmt.Errorf("encode event: %w", err)
		}
		_, err = fmt.Fprintf(p.w, "%s\n", termSafeJSON(b))
		return err
	}
	_, err = fmt.Fprintf(p.w, "%d %s %s\n", meta.Sequence.Stream, meta.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"), p.summary(msg.Subject(), data))
	return err
}

// summary is the readable one-line form of an event.
func (p *eventPrinter) summary(subject string, data []byte) string {
	// Every part of a summary may be text from outside (a server's name in a subject token, a
	// payload's fields): the line as a whole never carries a control or format character to the
	// terminal, whichever part forgot to.
	return oneLine(p.summarize(subject, data))
}

func (p *eventPrinter) summarize(subject string, data []byte) string {
	if strings.HasPrefix(subject, subjects.Root+".registry.") {
		return p.registrySummary(subject, data)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		if !json.Valid(data) {
			return subject + " bad payload: not JSON"
		}
		return subject + " bad payload: not a JSON object"
	}
	var m struct {
		V        int             `json:"v"`
		Type     string          `json:"type"`
		ID       string          `json:"id"`
		CallID   string          `json:"callId"`
		Tenant   string          `json:"tenant"`
		User     string          `json:"user"`
		Tool     string          `json:"tool"`
		Status   string          `json:"status"`
		Decision string          `json:"decision"`
		Code     string          `json:"code"`
		Error    *subjects.Error `json:"error"`
		IsError  bool            `json:"isError"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return subject + " bad payload: " + truncate(oneLine(err.Error()), maxErrInLine)
	}
	var b strings.Builder
	kind := m.Type
	if kind == "" {
		kind = "result"
	}
	b.WriteString(kind)
	for _, kv := range [][2]string{
		{"call", firstNonEmpty(m.CallID, m.ID)}, {"tenant", m.Tenant}, {"user", m.User}, {"tool", m.Tool},
		{"status", m.Status}, {"decision", m.Decision}, {"code", m.Code},
	} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%s", kv[0], truncate(oneLine(kv[1]), 128))
		}
	}
	if m.Error != nil {
		fmt.Fprintf(&b, " code=%s: %s", truncate(oneLine(m.Error.Code), 128), truncate(oneLine(m.Error.Message), 200))
	}
	if m.IsError {
		b.WriteString(" isError")
	}
	if m.V != 0 && m.V != subjects.Version {
		fmt.Fprintf(&b, " (payload version %d; this mcpstream reads %d)", m.V, subjects.Version)
	}
	return b.String()
}

func (p *eventPrinter) registrySummary(subject string, data []byte) string {
	// As every consumer of the registry stream reads it: a payload that does not match its
	// subject (another server, event or kind) is refused, not shown as that event.
	ev, err := subjects.DecodeRegistryMsg(subject, data)
	if err != nil {
		return subject + " bad payload: " + truncate(oneLine(err.Error()), maxErrInLine)
	}
	switch {
	case ev.Snapshot != nil:
		s := ev.Snapshot
		names := itemNames(s.Items)
		key := s.Server + "\x00" + string(s.Kind)
		prev, seen := p.prev[key]
		p.prev[key] = names
		var b strings.Builder
		fmt.Fprintf(&b, "%s snapshot %s: %s", s.Server, s.Kind, plural(len(s.Items), "item"))
		if seen {
			added, removed := diffNames(prev, names)
			if len(added)+len(removed) == 0 {
				b.WriteString(" (unchanged)")
			} else {
				var parts []string
				for _, n := range capNames(added, 8) {
					parts = append(parts, "+"+n)
				}
				for _, n := range capNames(removed, 8) {
					parts = append(parts, "-"+n)
				}
				b.WriteString(" (" + strings.Join(parts, " ") + ")")
			}
		} else if len(names) > 0 {
			b.WriteString(": " + strings.Join(capNames(names, 8), ", "))
		}
		if s.Pages > 1 {
			fmt.Fprintf(&b, " pages=%d", s.Pages)
		}
		if s.TTLMs != nil {
			fmt.Fprintf(&b, " ttl=%s", staleness.TTL(*s.TTLMs))
		}
		if s.CacheScope != "" {
			b.WriteString(" scope=" + oneLine(s.CacheScope))
		}
		if len(s.Rejected) > 0 {
			rej := make([]string, 0, len(s.Rejected))
			for _, r := range s.Rejected {
				rej = append(rej, truncate(oneLine(firstNonEmpty(r.Name, "?")), 128)+":"+oneLine(r.Code))
			}
			fmt.Fprintf(&b, " rejected=%d [%s]", len(s.Rejected), strings.Join(capNames(rej, 5), " "))
		}
		return b.String()
	case ev.ListChanged != nil:
		return fmt.Sprintf("%s changed %s (list_changed)", ev.ListChanged.Server, ev.ListChanged.Kind)
	case ev.Confirmed != nil:
		cf := ev.Confirmed
		if cf.AfterSeq > 0 {
			return fmt.Sprintf("%s confirmed %s (re-listed unchanged after list_changed #%d, ttl restarted)", cf.Server, cf.Kind, cf.AfterSeq)
		}
		return fmt.Sprintf("%s confirmed %s (re-listed unchanged, ttl restarted)", cf.Server, cf.Kind)
	case ev.Status != nil:
		s := ev.Status
		var b strings.Builder
		fmt.Fprintf(&b, "%s status %s", s.Server, truncate(oneLine(s.Status), 128))
		if s.Code != "" {
			b.WriteString(" code=" + truncate(oneLine(s.Code), 128))
		}
		if s.Attempt > 0 {
			fmt.Fprintf(&b, " attempt=%d", s.Attempt)
		}
		if s.RetryInMs > 0 {
			fmt.Fprintf(&b, " retry_in=%s", time.Duration(s.RetryInMs)*time.Millisecond)
		}
		if s.Transport != "" {
			b.WriteString(" transport=" + truncate(oneLine(s.Transport), 128))
		}
		if s.Protocol != "" {
			b.WriteString(" protocol=" + truncate(oneLine(s.Protocol), 128))
		}
		if s.Reason != "" {
			b.WriteString(": " + truncate(oneLine(s.Reason), 200))
		}
		return b.String()
	case ev.Revocation != nil:
		r := ev.Revocation
		var b strings.Builder
		fmt.Fprintf(&b, "%s revoked", r.Server)
		if len(r.Tools) > 0 {
			b.WriteString(" tools=" + strings.Join(capNames(oneLines(r.Tools), 8), ","))
		}
		if len(r.Restore) > 0 {
			b.WriteString(" restore=" + strings.Join(capNames(oneLines(r.Restore), 8), ","))
		}
		if r.Reason != "" {
			b.WriteString(": " + truncate(oneLine(r.Reason), 200))
		}
		return b.String()
	}
	return subject
}

// itemNames returns the sorted names of snapshot items: "name", or "uri" for resources without one
// (resource templates: "uriTemplate").
func itemNames(items []json.RawMessage) []string {
	names := make([]string, 0, len(items))
	for _, it := range items {
		var v struct {
			Name        string `json:"name"`
			URI         string `json:"uri"`
			URITemplate string `json:"uriTemplate"`
		}
		if json.Unmarshal(it, &v) != nil {
			names = append(names, "?")
			continue
		}
		names = append(names, truncate(oneLine(firstNonEmpty(v.URI, v.URITemplate, v.Name, "?")), 128))
	}
	sort.Strings(names)
	return names
}

// diffNames compares two sorted name lists.
func diffNames(prev, cur []string) (added, removed []string) {
	old := make(map[string]bool, len(prev))
	for _, n := range prev {
		old[n] = true
	}
	now := make(map[string]bool, len(cur))
	for _, n := range cur {
		now[n] = true
		if !old[n] {
			added = append(added, n)
		}
	}
	for _, n := range prev {
		if !now[n] {
			removed = append(removed, n)
		}
	}
	return added, removed
}

// capNames keeps the first max names and says how many more there were.
func capNames(names []string, max int) []string {
	if len(names) <= max {
		return names
	}
	out := append([]string(nil), names[:max]...)
	return append(out, fmt.Sprintf("…%d more", len(names)-max))
}

// plural returns "1 item", "2 items".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// oneLine makes text from outside (names, reasons) safe for one terminal line: runs of spaces
// become one space and control characters (escape sequences) become '?'.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if termUnsafe(r) && r != '\t' && r != '\n' && r != '\r' {
			return '?'
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// oneLines applies oneLine (and a 128-byte cap) to each name.
func oneLines(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = truncate(oneLine(n), 128)
	}
	return out
}

// truncate cuts s to at most n bytes at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// A rune the cut would split starts in the utf8.UTFMax-1 bytes before it: cut before that
	// rune. Bytes of invalid UTF-8 are runes of a byte each (backing up to any byte that starts
	// a rune emptied a run of continuation bytes, 0x80…).
	for i := n - 1; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if r, size := utf8.DecodeRuneInString(s[i:]); (r != utf8.RuneError || size > 1) && i+size > n {
				n = i
			}
			break
		}
	}
	return s[:n] + "…"
}

// followStreamCheckEvery is how often readStream checks that the stream it reads was not made
// again (a variable: tests shorten it).
var followStreamCheckEvery = 5 * time.Second

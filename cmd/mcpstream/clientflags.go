package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpstream/mcpstream/subjects"
)

// Environment variables the client commands read.
const (
	envNATS      = "MCPSTREAM_NATS"       // default of --nats
	envNATSCreds = "MCPSTREAM_NATS_CREDS" // default of --nats-creds
	envPrincipal = "MCPSTREAM_PRINCIPAL"  // default of --principal
	envInbox     = "MCPSTREAM_NATS_INBOX" // default of --nats-inbox
)

// defaultNATS is the URL clients use without --nats or $MCPSTREAM_NATS: `mcpstream up`'s default.
const defaultNATS = "nats://127.0.0.1:4222"

// defaultNATSURL is $MCPSTREAM_NATS, else nats://127.0.0.1:4222.
func defaultNATSURL() string {
	if u := os.Getenv(envNATS); u != "" {
		return u
	}
	return defaultNATS
}

// natsFlags are the flags of every command that connects to a NATS server or cluster.
type natsFlags struct {
	URL   string // one URL or a comma-separated list of cluster URLs
	Creds string // NATS credentials file (JWT + nkey), "" = none
	Inbox string // reply inbox prefix, "" = _INBOX
}

func (n *natsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&n.URL, "nats", defaultNATSURL(), "NATS server or cluster URL(s), comma-separated (env "+envNATS+")")
	// The usage prints the default, $MCPSTREAM_NATS: its credentials redacted (--help, and the
	// usage of a command given a wrong argument, which goes to stderr and a unit's journal).
	fs.Lookup("nats").DefValue = redactURL(defaultNATSURL())
	fs.StringVar(&n.Creds, "nats-creds", os.Getenv(envNATSCreds), "NATS credentials file (env "+envNATSCreds+")")
	fs.StringVar(&n.Inbox, "nats-inbox", os.Getenv(envInbox), "reply inbox prefix, e.g. _INBOX.acme when NATS permissions let a tenant subscribe only to\n_INBOX.acme.>; at most "+strconv.Itoa(subjects.MaxInboxPrefix)+" bytes (env "+envInbox+"; default _INBOX)")
}

// connect opens a connection named "mcpstream NAME" that reconnects forever.
func (n *natsFlags) connect(name string, extra ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	opts := []nats.Option{
		nats.Name("mcpstream " + name),
		nats.Timeout(natsConnectTimeout),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(false),
	}
	opts = append(opts, extra...)
	if n.Creds != "" {
		opts = append(opts, nats.UserCredentials(n.Creds))
	}
	if err := n.check(); err != nil {
		return nil, nil, err
	}
	if n.Inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(n.Inbox))
	}
	nc, err := nats.Connect(n.URL, opts...)
	if err != nil {
		hint := ""
		if greetingTimeout(err) {
			// Something accepted the connection and said nothing (NATS greets a client at
			// once with its INFO): another service's port, or a proxy to nothing.
			hint = fmt.Sprintf(" (it accepted the connection but sent no NATS greeting within %s: %s may not be a NATS server",
				natsConnectTimeout, redactURL(n.URL))
			if name != "up" { // (up --nats: the user's own server)
				hint += "; `mcpstream up` prints its NATS URL"
			}
			hint += ")"
		}
		if errors.Is(err, nats.ErrNoServers) {
			// Nothing answered there; other failures (credentials, TLS, authorization) say why.
			hint = fmt.Sprintf(" (is `mcpstream up` running? set --nats or $%s)", envNATS)
			if name == "up" {
				// up --nats: the server is the user's own, and up reads no $MCPSTREAM_NATS.
				hint = " (no NATS server answered there: is it running, and reachable from this host?)"
			}
		}
		err = &scrubbedError{msg: scrubCredentials(err.Error(), n.URL), err: err} // a url.Error quotes the URL
		return nil, nil, &notReachedError{fmt.Errorf("connect to NATS at %s: %w%s", redactURL(n.URL), err, hint)}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}

// natsConnectTimeout bounds the dial to NATS and the wait for its greeting (its INFO).
const natsConnectTimeout = 5 * time.Second

// greetingTimeout reports whether err is a connection's read that timed out: the dial succeeded
// but no INFO came (a dial that timed out is an OpError "dial").
func greetingTimeout(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "read" && op.Timeout()
}

// connectionNotes returns an option that says on w, in a line "mcpstream CMD: ...", when the
// connection to NATS is lost and when it is back: a command that waits (events --follow, a call
// waiting for its answer) reconnects by itself, in silence otherwise. stdout is left alone
// (scripts read it). nats.go runs the handlers on its own goroutine, possibly after the command
// returned: stop, deferred, ends the notes before the command's stderr is done with.
func (n *natsFlags) connectionNotes(w io.Writer, cmd string) (opt nats.Option, stop func()) {
	var mu sync.Mutex
	stopped := false
	note := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			fmt.Fprintf(w, "mcpstream %s: "+format+"\n", append([]any{cmd}, args...)...)
		}
	}
	opt = func(o *nats.Options) error {
		o.DisconnectedErrCB = func(_ *nats.Conn, err error) {
			if err == nil {
				return // (closed by the command itself)
			}
			note("lost the connection to NATS at %s (%s): reconnecting", redactURL(n.URL), termLine(scrubCredentials(err.Error(), n.URL)))
		}
		o.ReconnectedCB = func(c *nats.Conn) {
			note("reconnected to NATS at %s", redactURL(c.ConnectedUrl()))
		}
		return nil
	}
	stop = func() {
		mu.Lock()
		stopped = true
		mu.Unlock()
	}
	return opt, stop
}

// check refuses a --nats-inbox that is no subject prefix or is over subjects.MaxInboxPrefix
// bytes, and a --nats URL that is an HTTP one, before connecting (the role commands: before
// anything is created, as usage errors).
func (n *natsFlags) check() error {
	if n.Inbox != "" {
		if strings.ContainsAny(n.Inbox, " \t\r\n*>") || strings.HasPrefix(n.Inbox, ".") || strings.HasSuffix(n.Inbox, ".") {
			return fmt.Errorf("--nats-inbox %q: want subject tokens without wildcards, e.g. _INBOX.acme", n.Inbox)
		}
		if len(n.Inbox) > subjects.MaxInboxPrefix {
			// Its requests' control lines could pass the server's max_control_line, and the
			// server would close the connection (see subjects.MaxInboxPrefix).
			return fmt.Errorf("--nats-inbox %.40q... is %d bytes long; at most %d (with a longer prefix the longest requests "+
				"pass the NATS server's max_control_line, 4 KiB, and it closes the connection)", n.Inbox, len(n.Inbox), subjects.MaxInboxPrefix)
		}
	}
	for _, u := range strings.Split(n.URL, ",") {
		// up prints an HTTP URL (health, metrics) beside its NATS URL; a NATS client would
		// connect there and wait for a NATS greeting that never comes.
		if l := strings.ToLower(strings.TrimSpace(u)); strings.HasPrefix(l, "http://") || strings.HasPrefix(l, "https://") {
			return fmt.Errorf("--nats %s: not a NATS URL: want nats://HOST:PORT (mcpstream up prints its NATS URL before its HTTP one)", redactURL(strings.TrimSpace(u)))
		}
	}
	return nil
}

// watchPermissions returns a context derived from ctx that ends, with the server's permissions
// violation as its cause, once NATS refuses the connection made with the returned option a
// publish to one of subjects or a subscription under its reply inbox (--nats-inbox). NATS says
// so asynchronously and nothing else: a request would wait for its answer until its timeout and
// report that instead (a timeout, or "no call is waiting" for an approval).
func (n *natsFlags) watchPermissions(ctx context.Context, subjects ...string) (context.Context, context.CancelCauseFunc, nats.Option) {
	wctx, denied := context.WithCancelCause(ctx)
	inbox := n.inbox()
	return wctx, denied, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if !errors.Is(err, nats.ErrPermissionViolation) {
			return
		}
		// The server's text is all there is: `... for Publish to "SUBJECT"`, `... for
		// Subscription to "SUBJECT"` (nats.go reads its subject the same way).
		if strings.Contains(err.Error(), `"`+inbox+`.`) {
			denied(err)
			return
		}
		for _, s := range subjects {
			if strings.Contains(err.Error(), `"`+s+`"`) {
				denied(err)
				return
			}
		}
	})
}

// inbox is the reply inbox prefix of the connection: --nats-inbox, else nats.go's _INBOX.
func (n *natsFlags) inbox() string { return cmp.Or(n.Inbox, strings.TrimSuffix(nats.InboxPrefix, ".")) }

// permissionsError is the error of a request NATS refused (see watchPermissions), saying what
// the user needs; nil when ctx did not end for that.
func (n *natsFlags) permissionsError(ctx context.Context, what, subject string) error {
	cause := context.Cause(ctx)
	if cause == nil || !errors.Is(cause, nats.ErrPermissionViolation) {
		return nil
	}
	return fmt.Errorf("%s: NATS refused it: %w (the NATS user needs to publish to %s and to subscribe to its reply inbox %s.>, see --nats-inbox)",
		what, cause, subject, n.inbox())
}

// ErrNoJetStream is wrapped by the error of a command or role that needs JetStream (the
// streams) on a NATS server or account without it.
var ErrNoJetStream = errors.New("JetStream is not enabled")

// noJetStream explains err when it says that NATS has no JetStream for this connection: its
// API has no responders (a server started without -js), or it answers that JetStream is not
// enabled for the account. Other errors (and nil) are returned as they are.
func (n *natsFlags) noJetStream(err error) error {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("%w on %s for this account: mcpstream keeps its state in JetStream "+
			"(run nats-server with -js or a jetstream block, as in nats.conf): %w", ErrNoJetStream, redactURL(n.URL), err)
	}
	return err
}

// redactURL hides the credentials of NATS URLs: the password of nats://user:pass@host, the
// token of nats://token@host (all of the user part when it has no password). A URL without a
// scheme (user:pass@host:4222), which nats.go takes as nats://, is redacted the same.
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		prefix, rest := splitNATSScheme(p)
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			user, _, hasPass := strings.Cut(rest[:at], ":")
			if !hasPass {
				user = "***" // a token
			} else {
				user += ":***"
			}
			parts[i] = prefix + user + "@" + rest[at+1:]
		}
	}
	return strings.Join(parts, ",")
}

// splitNATSScheme splits one URL of a --nats list into what precedes its user info (leading
// spaces and "scheme://", either possibly absent) and the rest.
func splitNATSScheme(p string) (prefix, rest string) {
	if i := strings.Index(p, "://"); i >= 0 {
		return p[:i+3], p[i+3:]
	}
	trimmed := strings.TrimLeft(p, " \t")
	return p[:len(p)-len(trimmed)], trimmed
}

// scrubCredentials replaces, in text (an error's, say), the credentials of the URLs in urls.
func scrubCredentials(text, urls string) string {
	for _, p := range strings.Split(urls, ",") {
		_, rest := splitNATSScheme(p)
		if at := strings.LastIndexByte(rest, '@'); at > 0 {
			text = strings.ReplaceAll(text, rest[:at], "***")
		}
	}
	return text
}

// notReachedError is the error of a connection to NATS that failed: nothing was sent, and a
// client command's --json error is unavailable (NATS not reached), also when the dial timed
// out (a net timeout is a context.DeadlineExceeded, which a request's error says: timeout).
type notReachedError struct{ error }

func (e *notReachedError) Unwrap() error { return e.error }

// scrubbedError is err with its text scrubbed of credentials (see scrubCredentials).
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// clientFlags are the flags shared by the client commands: --nats, --nats-creds, --principal,
// --roles, --json.
type clientFlags struct {
	natsFlags
	Principal string // [TENANT/]USER
	Roles     string // comma-separated
	JSON      bool
}

// register adds --nats, --nats-creds and --json, and with withPrincipal --principal and --roles.
func (c *clientFlags) register(fs *flag.FlagSet, withPrincipal bool) {
	c.natsFlags.register(fs)
	fs.BoolVar(&c.JSON, "json", false, "print JSON instead of text")
	if withPrincipal {
		def := os.Getenv(envPrincipal)
		if def == "" {
			def = "local/local"
		}
		fs.StringVar(&c.Principal, "principal", def, "who the request acts for: [TENANT/]USER[:ROLE,ROLE] (env "+envPrincipal+")")
		fs.StringVar(&c.Roles, "roles", "", "comma-separated roles of the principal (used when the policy lists no principals)")
	}
}

// explain adds to an unknown_principal answer, in text, that the request went as local/local
// for want of --principal (under a policy that lists its principals, local is rarely one).
func (c *clientFlags) explain(e *subjects.Error) *subjects.Error {
	if e == nil || e.Code != subjects.CodeUnknownPrincipal || c.JSON || c.Principal != "local/local" || os.Getenv(envPrincipal) != "" {
		return e
	}
	x := *e
	x.Message += "; without --principal (or $" + envPrincipal + ") the request is local/local's: give --principal [TENANT/]USER"
	return &x
}

// ErrBadPrincipal is returned for a --principal that is not [TENANT/]USER.
var ErrBadPrincipal = errors.New("bad principal")

// principal parses --principal and --roles.
// principal parses --principal [TENANT/]USER[:ROLE,ROLE] and --roles, the same for every
// command (call read "alice:support" as the user name, search and inspect as alice with a role).
func (c *clientFlags) principal() (subjects.Principal, error) {
	p, roles, _ := strings.Cut(c.Principal, ":")
	if c.Roles != "" {
		roles = strings.Trim(roles+","+c.Roles, ",")
	}
	pr, err := parsePrincipal(p, roles)
	if err != nil {
		// Quote the value as given, roles included: the user part alone ("" for ":support")
		// would not show what is wrong.
		err = fmt.Errorf("%w: %q: want [TENANT/]USER[:ROLE,ROLE]", ErrBadPrincipal, c.Principal)
	}
	if env := os.Getenv(envPrincipal); err != nil && env != "" && c.Principal == env {
		// (a value left in the environment, not one typed on this command line; an empty
		// --principal "$UNSET" is the flag's, not the unset variable's)
		err = fmt.Errorf("%w (from $%s)", err, envPrincipal)
	}
	return pr, err
}

func parsePrincipal(s, roles string) (subjects.Principal, error) {
	var p subjects.Principal
	tenant, user, ok := strings.Cut(s, "/")
	if !ok {
		tenant, user = "", s
	}
	if user == "" || strings.Contains(user, "/") || (ok && tenant == "") {
		return p, fmt.Errorf("%w: %q: want [TENANT/]USER", ErrBadPrincipal, s)
	}
	p.Tenant, p.User = tenant, user
	for _, r := range strings.Split(roles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			p.Roles = append(p.Roles, r)
		}
	}
	return p, nil
}

// newFlagSet returns a flag set whose usage prints "Usage: mcpstream USAGE", the help text and
// the flags.
func newFlagSet(name, usage, help string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: mcpstream %s\n\n%s\n", usage, strings.TrimSpace(help))
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if !hasFlags { // (policy: its flags are policy check's and policy digest's)
			return
		}
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	return fs
}

// usageError prints "mcpstream NAME: MSG" (with the arguments given, if any), then the usage,
// to stderr: a missing or extra positional argument.
func usageError(fs *flag.FlagSet, stderr io.Writer, msg string, got []string) {
	if len(got) > 0 {
		msg += fmt.Sprintf(" (got %d arguments: %s)", len(got), strings.Join(got, " "))
	}
	fmt.Fprintf(stderr, "mcpstream %s: %s\n", fs.Name(), msg)
	fs.SetOutput(stderr)
	fs.Usage()
}

// lookupGetter returns the value of fs's flag name when it can be read.
func lookupGetter(fs *flag.FlagSet, name string) (flag.Getter, bool) {
	f := fs.Lookup(name)
	if f == nil {
		return nil, false
	}
	g, ok := f.Value.(flag.Getter)
	return g, ok
}

// parseFlags parses args, allowing flags after positional arguments (`call TOOL ARGS --json`);
// "--" ends the flags. On -h/--help it prints the usage to stdout and returns flag.ErrHelp (which
// run turns into a clean exit); on a bad flag it prints the error (with the flag meant, for a
// typo) and where the usage is to stderr and returns exit status 2.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]string, error) {
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return nil, flag.ErrHelp
		}
		if err != nil {
			// The error, the flag meant, and where the flags are: not the whole help, under
			// which this line would scroll out of sight.
			msg := err.Error()
			if strings.HasSuffix(msg, ": parse error") && strings.HasPrefix(msg, "invalid value ") {
				// A duration: Go's flag package drops time.ParseDuration's reason.
				if _, name, ok := strings.Cut(strings.TrimSuffix(msg, ": parse error"), " for flag -"); ok {
					if g, ok := lookupGetter(fs, name); ok {
						if _, isDuration := g.Get().(time.Duration); isDuration {
							msg = strings.TrimSuffix(msg, "parse error") + "want a duration such as 30s, 5m or 1h30m"
						}
					}
				}
			}
			if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
				var names []string
				fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
				if s := closest(strings.TrimPrefix(name, "-"), names); s != "" {
					msg += " (did you mean --" + s + "?)"
				}
			}
			fmt.Fprintf(stderr, "mcpstream %s: %s\nRun `mcpstream %s --help` for its usage and flags.\n", fs.Name(), msg, fs.Name())
			return nil, exitCode(2)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

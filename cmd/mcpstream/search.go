package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/staleness"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	register(command{
		name:    "search",
		summary: "search the tool catalog (what search_tools answers), permission-filtered",
		run:     runSearch,
	})
}

const searchHelp = `
Searches the catalog through the catalog service (an indexer replica must run: ` + "`mcpstream up`" + `
or ` + "`mcpstream indexer`" + `). Ranking is lexical (BM25F over tool names split on _ - and
camelCase, titles, descriptions, parameter names and descriptions, and the server's name and
description; exact names boosted; Chinese and Japanese text searchable). A query that matches
nothing returns nothing.

Only tools the principal may call are candidates: the policy and private cache scopes filter
before ranking. The request goes to the catalog subject of the principal's tenant
(mcpstream.v1.catalog.TENANT.search; local without one): a user the policy puts in another
tenant is refused, so give TENANT/USER. Unavailable, stale, removed and revoked tools are left out unless --all (which
still never shows removed or revoked ones).

QUERY may be several words; "select:NAME[,NAME]" returns those exact tools (public names).

Detail levels: name (names only), summary (name, one-line description, server, labels, state;
the default), full (adds input and output schema, annotations, cache scope, TTL, listing time).

Labels: read-only, destructive, idempotent, open-world (the tool's annotations), needs-approval
(the policy), and the state when it is not fresh (expired, stale, unavailable).

--json prints a JSON array, best first: [{"name","server","tool","title","description","score",
"labels","state",...}, ...]. On an error it prints {"error":{"code","message"}} and exits 1.

Examples:
  mcpstream search "open a ticket for a bug"
  mcpstream search "search logs" --k 3 --detail full --json
  mcpstream search "select:ticketing__createIssue,kb__get_document"
  mcpstream search "refund policy" --principal acme/alice:support,oncall --tags read-only`

// searchResult is one line of `search --json`: the catalog's ToolInfo with the score always
// present.
type searchResult struct {
	subjects.ToolInfo
	Score float64 `json:"score"`
}

func runSearch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("search", "search QUERY [flags]", searchHelp)
	cf.register(fs, true)
	k := fs.Int("k", indexer.DefaultK, fmt.Sprintf("number of results, 1..%d", indexer.MaxK))
	detail := fs.String("detail", subjects.DetailSummary, "detail level: name, summary or full")
	servers := fs.String("servers", "", "only tools of these servers (comma-separated)")
	tags := fs.String("tags", "", "only tools with every one of these labels (comma-separated), e.g. read-only")
	all := fs.Bool("all", false, "include stale and unavailable tools (never removed or revoked ones)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the catalog service")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	query := strings.TrimSpace(strings.Join(rest, " "))
	if query == "" {
		usageError(fs, stderr, "want a QUERY", nil)
		return exitCode(2)
	}
	if !catalogTimeoutOK(fs, stderr, *timeout) {
		return exitCode(2)
	}
	// The catalog's own bounds (bad_request there), checked here: a usage error.
	if *k < 0 || *k > indexer.MaxK {
		usageError(fs, stderr, fmt.Sprintf("--k %d: want 1..%d (0 = the default, %d)", *k, indexer.MaxK, indexer.DefaultK), nil)
		return exitCode(2)
	}
	switch *detail {
	case subjects.DetailName, subjects.DetailSummary, subjects.DetailFull:
	default:
		usageError(fs, stderr, fmt.Sprintf("--detail %q: want name, summary or full", *detail), nil)
		return exitCode(2)
	}
	cs, err := openCatalog(ctx, &cf, "search", *timeout, subjects.CatalogSearch)
	if err != nil {
		return requestFailure(stdout, cf.JSON, err)
	}
	defer cs.close()
	req := subjects.SearchRequest{
		V: subjects.Version, Query: query, K: *k, Detail: *detail, Principal: cs.pr,
		Servers: splitList(*servers), Tags: splitList(*tags), IncludeUnavailable: *all,
	}
	rep, err := cs.cl.Search(cs.ctx, cs.tenant, req)
	if err != nil {
		return requestFailure(stdout, cf.JSON, cs.failed(err))
	}
	if rep.Error != nil {
		return catalogFailure(stdout, cf.JSON, cf.explain(rep.Error))
	}
	if cf.JSON {
		out := make([]searchResult, len(rep.Tools))
		for i, t := range rep.Tools {
			out[i] = searchResult{ToolInfo: t, Score: t.Score}
		}
		return printJSON(stdout, out)
	}
	if len(rep.Tools) == 0 {
		fmt.Fprintln(stdout, "no tool matches")
		return nil
	}
	for i, t := range rep.Tools {
		if req.Detail == subjects.DetailName {
			fmt.Fprintln(stdout, t.Name)
			continue
		}
		printToolHead(stdout, i+1, t)
		if req.Detail == subjects.DetailFull {
			printToolFull(stdout, t)
		}
	}
	return nil
}

// tenantOf is the tenant a principal's requests go to: its own, else the local one.
func tenantOf(pr subjects.Principal) string {
	if pr.Tenant != "" {
		return pr.Tenant
	}
	return policy.Local.Tenant
}

// catalogSession is a catalog client command's connection: the principal of its flags, the
// tenant its requests go to, and a client of the catalog service. Its requests use ctx, which
// ends as soon as NATS refuses the user the request's subject or its reply inbox.
type catalogSession struct {
	pr      subjects.Principal
	tenant  string
	cl      indexer.Client
	nc      *nats.Conn
	ctx     context.Context
	name    string // the command's
	subject string // the catalog subject the command requests
	flags   *clientFlags
	stop    context.CancelCauseFunc
}

// openCatalog parses the principal flags and connects (the command's name names the
// connection) to request subject(tenant). Call close when done.
func openCatalog(ctx context.Context, cf *clientFlags, name string, timeout time.Duration, subject func(tenant string) string) (*catalogSession, error) {
	pr, err := catalogPrincipal(cf)
	if err != nil {
		return nil, &badRequestError{err}
	}
	tenant := tenantOf(pr)
	subj := subject(tenant)
	wctx, stop, watch := cf.watchPermissions(ctx, subj)
	nc, _, err := cf.connect(name, watch)
	if err != nil {
		stop(nil)
		return nil, err
	}
	return &catalogSession{pr: pr, tenant: tenant, cl: indexer.Client{NC: nc, Timeout: timeout}, nc: nc,
		ctx: wctx, name: name, subject: subj, flags: cf, stop: stop}, nil
}

func (cs *catalogSession) close() {
	cs.nc.Close()
	cs.stop(nil)
}

// failed is the error of a request that got no answer: NATS's refusal when it refused it.
func (cs *catalogSession) failed(err error) error {
	if perr := cs.flags.permissionsError(cs.ctx, cs.name, cs.subject); perr != nil {
		return perr
	}
	return err
}

// catalogPrincipal parses --principal [TENANT/]USER[:ROLE,ROLE] and --roles.
func catalogPrincipal(cf *clientFlags) (subjects.Principal, error) { return cf.principal() }

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// catalogFailure reports a catalog error: as {"error":...} on stdout with --json, else as the
// command's error; the exit status is 1 either way.
func catalogFailure(stdout io.Writer, asJSON bool, e *subjects.Error) error {
	if asJSON {
		if err := printJSON(stdout, map[string]any{"error": e}); err != nil {
			return err
		}
		return exitCode(1)
	}
	msg := e.Code + ": " + e.Message
	if e.Reason != "" && !strings.Contains(e.Message, "("+e.Reason+")") {
		msg += " (" + e.Reason + ")"
	}
	// Safe for a terminal, as call prints a refusal: the message may quote the name asked
	// for, control and format characters (a bidi override) included.
	return errors.New(termBlock(msg))
}

// catalogTimeoutOK reports whether --timeout (a catalog request's bound; 0 = indexer.Client's
// default) can be waited, after printing the usage error when it cannot: a negative one
// would send the request with its deadline already past.
func catalogTimeoutOK(fs *flag.FlagSet, stderr io.Writer, timeout time.Duration) bool {
	if timeout >= 0 {
		return true
	}
	usageError(fs, stderr, fmt.Sprintf("--timeout %s: must not be negative (0 = the default, 5s)", timeout), nil)
	return false
}

// badRequestError is an error in the command's own arguments (a malformed --principal, say).
type badRequestError struct{ error }

func (e *badRequestError) Unwrap() error { return e.error }

// requestFailure reports a request that got no answer (no NATS, no catalog replica, no answer
// in time): with --json as {"error":{"code","message"}} on stdout, as an answered error is.
func requestFailure(stdout io.Writer, asJSON bool, err error) error {
	if errors.Is(err, context.Canceled) {
		// The command's context, cancelled by Ctrl-C (a permissions violation is reported as
		// such before): NATS was reached, the request given up, as call says (code timeout).
		err = fmt.Errorf("interrupted before the answer: %w", err)
	}
	if !asJSON {
		return err
	}
	code := subjects.CodeUnavailable
	var bad *badRequestError
	var notReached *notReachedError
	switch {
	case errors.As(err, &bad):
		code = subjects.CodeBadRequest
	case errors.As(err, &notReached):
		// (A dial that timed out included: nothing was sent.)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.Canceled):
		code = subjects.CodeTimeout
	}
	return catalogFailure(stdout, true, &subjects.Error{Code: code, Message: err.Error()})
}

// printJSON prints v as indented JSON, safe for a terminal (termSafeJSON): the strings servers
// listed (a description, a schema as listed) keep their value, but a C1 control, bidi override
// or DEL in them is escaped and a byte of invalid UTF-8 is U+FFFD.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", termSafeJSON(b))
	return err
}

// printToolHead prints a summary entry: rank, name, server, score, labels, one-line description.
func printToolHead(w io.Writer, rank int, t subjects.ToolInfo) {
	var b strings.Builder
	if rank > 0 {
		fmt.Fprintf(&b, "%d. ", rank)
	}
	b.WriteString(t.Name)
	if t.Server != "" {
		fmt.Fprintf(&b, "  (server %s, tool %s)", termLine(t.Server), termLine(t.Tool))
	}
	if t.Score > 0 {
		fmt.Fprintf(&b, "  score %.4g", t.Score)
	}
	if len(t.Labels) > 0 {
		fmt.Fprintf(&b, "  [%s]", strings.Join(t.Labels, ", "))
	}
	fmt.Fprintln(w, b.String())
	if t.Title != "" {
		fmt.Fprintf(w, "   %s\n", termClip(t.Title, 200))
	}
	if d := termClip(t.Description, 300); d != "" {
		fmt.Fprintf(w, "   %s\n", d)
	}
	if t.State != "" && t.State != subjects.StateFresh {
		fmt.Fprintf(w, "   state: %s — %s\n", t.State, termLine(t.StateReason))
	}
}

// printToolFull prints what the full detail level adds.
func printToolFull(w io.Writer, t subjects.ToolInfo) {
	var facts []string
	if t.State == "" || t.State == subjects.StateFresh {
		// Any other state, with its reason, is on printToolHead's lines already.
		facts = append(facts, "state: "+cmp.Or(t.State, "unknown"))
	}
	if t.CacheScope != "" {
		facts = append(facts, "cache scope "+termLine(t.CacheScope))
	}
	if t.TTLMs != nil {
		facts = append(facts, "ttl "+staleness.TTL(*t.TTLMs).String())
	}
	if t.ListedAt != "" {
		facts = append(facts, "listed "+termLine(t.ListedAt))
	}
	if len(facts) > 0 {
		fmt.Fprintf(w, "   %s\n", strings.Join(facts, ", "))
	}
	for _, part := range []struct {
		name string
		raw  json.RawMessage
	}{{"input schema", t.InputSchema}, {"output schema", t.OutputSchema}, {"annotations", t.Annotations}} {
		if len(part.raw) == 0 {
			continue
		}
		var buf strings.Builder
		b, err := json.MarshalIndent(part.raw, "   ", "  ")
		if err != nil {
			b = part.raw
		}
		buf.Write(b)
		fmt.Fprintf(w, "   %s: %s\n", part.name, termBlock(buf.String()))
	}
}

// termUnsafe reports whether r must not reach a terminal as is: a control character (escape
// sequences start with one) or a format character (bidirectional overrides reorder what the
// terminal shows). Text from servers and from NATS messages is shown through termLine,
// termBlock or oneLine, which all ask it; JSON output through termSafeJSON.
func termUnsafe(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// termLine makes text from servers safe for one terminal line (no control characters, no
// escape sequences, one space between words).
func termLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if termUnsafe(r) {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

// termClip is termLine cut to n bytes at a rune boundary.
func termClip(s string, n int) string {
	s = termLine(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// termBlock keeps newlines and tabs but drops other control and format characters (termUnsafe).
func termBlock(s string) string {
	return strings.Map(func(r rune) rune {
		if termUnsafe(r) && r != '\n' && r != '\t' {
			return ' '
		}
		return r
	}, s)
}

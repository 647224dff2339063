package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/mcpstream/mcpstream/indexer"
	"github.com/mcpstream/mcpstream/registrysync"
	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	register(command{
		name:    "servers",
		summary: "list the MCP servers with their status and tool counts (servers remove NAME: retract one)",
		run:     runServers,
	})
}

const serversHelp = `
Lists every MCP server the registry knows, from the last status event and the last tools, prompts
and resources snapshot of each server in the registry stream. It needs only NATS (no indexer).
A message the consumers refuse (not JSON, another server's payload) is skipped, as the catalog
skips it: the valid event before it counts, and stderr says how many were skipped.

Status is one of connecting, ready, unavailable (with the code and reason of the failure) or
removed (the server left the configuration). The counts are those of the last snapshot listed,
even while a server is unavailable.

Definitions a server listed that were left out (a name holding a configured secret, shown
redacted: secret_in_name; an invalid schema or definition; a name listed twice; too large) are
listed after the table, at most 32 per server, with their code.

--json prints an array: [{"name","status","tools","prompts","resources","description",
"transport","protocol","code","reason","since","rejected":[{"kind","name","code","message"}],
"rejectedMore"}, ...], sorted by name.

--catalog asks the catalog service instead (an indexer replica must run): the servers and
counts the principal (--principal, --roles) may see, and the definitions left out by the
catalog too (name_collision: another tool holds the public name). It follows the pages of the
listing itself (at most 10,000); --limit N asks for one page of at most N servers (1..1000)
and --after NAME starts after the server NAME; when more servers follow a page, stderr says
the --after to ask for them.

Examples:
  mcpstream servers
  mcpstream servers --json --nats nats://10.0.0.1:4222
  mcpstream servers --catalog --principal acme/alice
  mcpstream servers --catalog --limit 100 --after ticketing

To retract a server that left the configuration, see: mcpstream servers remove --help`

const serversRemoveHelp = `
Retracts MCP servers from the registry for good: publishes status "removed" and an empty list of
every kind each one had, so every indexer replica drops its tools, prompts and resources and
executors refuse its calls (stale). Use it for a server dropped from the configuration: until
then it stays in the registry, unavailable (connector_stopped).

A server that a running registrysync still runs is refused (remove it from that process's
configuration and restart the process first); one cut off from NATS then publishes it again
when it is back. A name the registry never saw is an error. Adding
the server back to a configuration brings it back. Exit status 1 if any name failed.

Examples:
  mcpstream servers remove ticketing
  mcpstream servers remove old-crm legacy-wiki --nats nats://10.0.0.1:4222`

// runServersRemove is "servers remove NAME...".
func runServersRemove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var nf natsFlags
	fs := newFlagSet("servers remove", "servers remove NAME... [flags]", serversRemoveHelp)
	nf.register(fs)
	names, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		usageError(fs, stderr, "name at least one server", nil)
		return exitCode(2)
	}
	for _, name := range names {
		if len(name) > registrysync.MaxServerNameBytes {
			// No server has it; and its relist probe's subject, and its stream look-up's, got
			// the connection closed past the NATS server's max_control_line, read as the server
			// being run elsewhere. Refused before anything is removed.
			usageError(fs, stderr, fmt.Sprintf("%s: the name is %d bytes long; at most %d (no server has a longer one)",
				quoteCut(name, 60), len(name), registrysync.MaxServerNameBytes), nil)
			return exitCode(2)
		}
	}
	nc, js, err := nf.connect("servers remove")
	if err != nil {
		return err
	}
	defer nc.Close()
	m := registrysync.New(js, nc, registrysync.Config{}, zerolog.Nop())
	failed := 0
	for _, name := range names {
		if err := m.Remove(ctx, name); err != nil {
			if errors.Is(err, registrysync.ErrNotFound) {
				err = fmt.Errorf("no server %q in the registry", name)
			}
			err = nf.noJetStream(err)
			fmt.Fprintf(stderr, "mcpstream servers remove: %v\n", err)
			failed++
			continue
		}
		fmt.Fprintf(stdout, "removed %s\n", oneLine(name))
	}
	if failed > 0 {
		return exitCode(1)
	}
	return nil
}

// serverRow is one server in `servers` output: the catalog's ServerSummary plus the failure code
// and the time of the last status.
type serverRow struct {
	subjects.ServerSummary
	Code  string    `json:"code,omitempty"`
	Since time.Time `json:"since,omitzero"` // when the current status was reported
	// rejected are the rejected definitions of the last snapshot of each kind (registry
	// stream mode), merged into ServerSummary.Rejected at the end.
	rejected map[subjects.Kind][]subjects.RejectedDefinition
}

func runServers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "remove" {
		return runServersRemove(ctx, args[1:], stdout, stderr)
	}
	var cf clientFlags
	fs := newFlagSet("servers", "servers [flags]", serversHelp)
	cf.register(fs, true)
	catalog := fs.Bool("catalog", false, "ask the catalog service (what the principal may see, catalog rejections too)")
	limit := fs.Int("limit", 0, fmt.Sprintf("with --catalog: one page of at most this many servers, 1..%d (0: every page)", indexer.MaxServers))
	after := fs.String("after", "", "with --catalog: start after this server name")
	timeout := fs.Duration("timeout", 5*time.Second, "with --catalog: how long to wait for each page")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		if closest(rest[0], []string{"remove"}) != "" {
			return usageErrorf("servers: unexpected argument %q (did you mean \"servers remove\"?)", rest[0])
		}
		return usageErrorf("servers: unexpected argument %q", rest[0])
	}
	if !*catalog && (*limit != 0 || *after != "" || flagSet(fs, "principal") || flagSet(fs, "roles")) {
		usageError(fs, stderr, "--limit, --after, --principal and --roles need --catalog", nil)
		return exitCode(2)
	}
	if *limit < 0 || *limit > indexer.MaxServers {
		usageError(fs, stderr, fmt.Sprintf("--limit %d out of range 0..%d", *limit, indexer.MaxServers), nil)
		return exitCode(2)
	}
	if !catalogTimeoutOK(fs, stderr, *timeout) {
		return exitCode(2)
	}
	if *catalog {
		return runServersCatalog(ctx, &cf, *limit, *after, *timeout, stdout, stderr)
	}
	nc, js, err := cf.connect("servers")
	if err != nil {
		return requestFailure(stdout, cf.JSON, err)
	}
	defer nc.Close()
	rows, bad, err := readServers(ctx, js)
	if err != nil {
		return requestFailure(stdout, cf.JSON, cf.noJetStream(err))
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "mcpstream servers: skipped %d malformed registry event(s)\n", bad)
	}
	return printServers(stdout, cf.JSON, rows)
}

// runServersCatalog is "servers --catalog": the catalog service's listing, every page (limit
// 0) or one.
func runServersCatalog(ctx context.Context, cf *clientFlags, limit int, after string, timeout time.Duration, stdout, stderr io.Writer) error {
	cs, err := openCatalog(ctx, cf, "servers", timeout, subjects.CatalogServers)
	if err != nil {
		return requestFailure(stdout, cf.JSON, err)
	}
	defer cs.close()
	req := subjects.ServersRequest{V: subjects.Version, Principal: cs.pr, Limit: limit, After: after}
	var rep subjects.ServersReply
	if limit > 0 {
		rep, err = cs.cl.Servers(cs.ctx, cs.tenant, req)
	} else {
		rep, err = cs.cl.AllServers(cs.ctx, cs.tenant, req, 0)
	}
	if err != nil {
		return requestFailure(stdout, cf.JSON, cs.failed(err))
	}
	if rep.Error != nil {
		return catalogFailure(stdout, cf.JSON, cf.explain(rep.Error))
	}
	rows := make([]serverRow, len(rep.Servers))
	for i, s := range rep.Servers {
		rows[i] = serverRow{ServerSummary: s}
	}
	if err := printServers(stdout, cf.JSON, rows); err != nil {
		return err
	}
	if rep.Next != "" {
		fmt.Fprintf(stderr, "mcpstream servers: more servers follow: --after %s\n", shellQuote(rep.Next))
	}
	return nil
}

// printServers prints rows as a JSON array or a table, then the rejected definitions.
func printServers(stdout io.Writer, asJSON bool, rows []serverRow) error {
	if asJSON {
		return printJSON(stdout, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tTOOLS\tPROMPTS\tRESOURCES\tTRANSPORT\tPROTOCOL\tREASON")
	for _, r := range rows {
		reason := r.Reason
		if r.Code != "" {
			reason = r.Code + ": " + reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", oneLine(r.Name), dash(truncate(r.Status, 40)), r.Tools, r.Prompts, r.Resources,
			dash(r.Transport), dash(r.Protocol), dash(truncate(reason, 80)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return printRejected(stdout, rows)
}

// printRejected lists the rejected definitions of rows, if any, after the table.
func printRejected(stdout io.Writer, rows []serverRow) error {
	header := false
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		if len(r.Rejected) == 0 && r.RejectedMore == 0 {
			continue
		}
		if !header {
			fmt.Fprintln(tw, "\nREJECTED (left out of the catalog)\nSERVER\tKIND\tNAME\tCODE\tMESSAGE")
			header = true
		}
		for _, d := range r.Rejected {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(r.Name), dash(truncate(string(d.Kind), 20)), dash(truncate(oneLine(d.Name), 80)),
				dash(truncate(d.Code, 40)), dash(truncate(d.Message, 120)))
		}
		if r.RejectedMore > 0 {
			fmt.Fprintf(tw, "%s\t-\t(%d more)\t-\t-\n", oneLine(r.Name), r.RejectedMore)
		}
	}
	return tw.Flush()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(oneLine(s), "'", `'\''`) + "'"
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// rejectedOf is what a snapshot says was left out of its list.
func rejectedOf(s *subjects.Snapshot) []subjects.RejectedDefinition {
	out := make([]subjects.RejectedDefinition, 0, len(s.Rejected))
	for _, r := range s.Rejected {
		out = append(out, subjects.RejectedDefinition{Kind: s.Kind, Name: r.Name, Code: r.Code, Message: r.Message})
	}
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return oneLine(s)
}

// readServers reads the last status and snapshot of every server (one ordered consumer with
// DeliverLastPerSubject) and returns one row per server, sorted by name, and how many
// malformed events it skipped. A subject whose last message is malformed shows its last valid
// event instead, as the catalog does (it skips malformed messages).
func readServers(ctx context.Context, js jetstream.JetStream) ([]serverRow, int, error) {
	byName := map[string]*serverRow{}
	get := func(name string) *serverRow {
		r := byName[name]
		if r == nil {
			r = &serverRow{ServerSummary: subjects.ServerSummary{Name: name, Status: "unknown"}}
			byName[name] = r
		}
		return r
	}
	bad := 0
	// Subjects whose last message the consumers refuse: the catalog skips such a message and
	// keeps the event before it, so their last valid event is looked for below.
	var refused []string
	apply := func(server string, ev subjects.RegistryEvent) {
		r := get(server)
		switch {
		case ev.Status != nil:
			s := ev.Status
			r.Status, r.Code, r.Reason, r.Since = s.Status, s.Code, s.Reason, s.At
			r.Description = firstNonEmpty(s.Description, r.Description)
			r.Transport = firstNonEmpty(s.Transport, r.Transport)
			r.Protocol = firstNonEmpty(s.Protocol, r.Protocol)
		case ev.Snapshot != nil:
			s := ev.Snapshot
			switch s.Kind {
			case subjects.KindTools:
				r.Tools = len(s.Items)
			case subjects.KindPrompts:
				r.Prompts = len(s.Items)
			case subjects.KindResources:
				r.Resources = len(s.Items)
			}
			if r.rejected == nil {
				r.rejected = map[subjects.Kind][]subjects.RejectedDefinition{}
			}
			r.rejected[s.Kind] = rejectedOf(s)
			if s.Info != nil {
				r.Description = firstNonEmpty(r.Description, s.Info.Description)
				r.Transport = firstNonEmpty(r.Transport, s.Info.Transport)
				r.Protocol = firstNonEmpty(r.Protocol, s.Info.Protocol)
			}
		}
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subjects.RegistryAllStatus, subjects.RegistryAllSnapshots},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	}
	err := readStream(ctx, js, subjects.RegistryStream, cfg, false, func(msg jetstream.Msg) error {
		subj, err := subjects.ParseRegistry(msg.Subject())
		if err != nil {
			bad++
			return nil
		}
		// As the catalog reads it: a payload must be the event, server and kind of its subject.
		ev, err := subjects.DecodeRegistryMsg(msg.Subject(), msg.Data())
		if err != nil || ev.Status == nil && ev.Snapshot == nil {
			bad++
			refused = append(refused, msg.Subject())
			return nil
		}
		apply(subj.Server, ev)
		return nil
	})
	if err != nil {
		return nil, bad, err
	}
	for _, subject := range refused {
		// Rare (a buggy or hostile publisher): replay this one subject for its last valid event.
		var last *subjects.RegistryEvent
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
		err := readStream(ctx, js, subjects.RegistryStream, cfg, false, func(msg jetstream.Msg) error {
			if ev, err := subjects.DecodeRegistryMsg(msg.Subject(), msg.Data()); err == nil && (ev.Status != nil || ev.Snapshot != nil) {
				last = &ev
			}
			return nil
		})
		if err != nil {
			return nil, bad, err
		}
		if subj, err := subjects.ParseRegistry(subject); err == nil && last != nil {
			apply(subj.Server, *last)
		}
	}
	rows := make([]serverRow, 0, len(byName))
	for _, r := range byName {
		if r.Status == subjects.StatusRemoved {
			r.Tools, r.Prompts, r.Resources = 0, 0, 0 // its definitions are gone
			r.rejected = nil
		}
		// As the catalog shows them: tools first, at most indexer.MaxRejected, the rest counted.
		for _, k := range subjects.Kinds {
			for _, d := range r.rejected[k] {
				if len(r.Rejected) >= indexer.MaxRejected {
					r.RejectedMore++
					continue
				}
				r.Rejected = append(r.Rejected, d)
			}
		}
		r.rejected = nil
		rows = append(rows, *r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, bad, nil
}

// eventServer is the server a registry payload names.
func eventServer(ev subjects.RegistryEvent) string {
	switch {
	case ev.Snapshot != nil:
		return ev.Snapshot.Server
	case ev.ListChanged != nil:
		return ev.ListChanged.Server
	case ev.Status != nil:
		return ev.Status.Server
	case ev.Revocation != nil:
		return ev.Revocation.Server
	case ev.Confirmed != nil:
		return ev.Confirmed.Server
	}
	return ""
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

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

Status is one of connecting, ready, unavailable (with the code and reason of the failure) or
removed (the server left the configuration). The counts are those of the last snapshot listed,
even while a server is unavailable.

--json prints an array: [{"name","status","tools","prompts","resources","description",
"transport","protocol","code","reason","since"}, ...], sorted by name.

Examples:
  mcpstream servers
  mcpstream servers --json --nats nats://10.0.0.1:4222

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
}

func runServers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "remove" {
		return runServersRemove(ctx, args[1:], stdout, stderr)
	}
	var cf clientFlags
	fs := newFlagSet("servers", "servers [flags]", serversHelp)
	cf.register(fs, false)
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("servers: unexpected argument %q", rest[0])
	}
	nc, js, err := cf.connect("servers")
	if err != nil {
		return err
	}
	defer nc.Close()
	rows, bad, err := readServers(ctx, js)
	if err != nil {
		return cf.noJetStream(err)
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "mcpstream servers: skipped %d malformed registry event(s)\n", bad)
	}
	if cf.JSON {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
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
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return oneLine(s)
}

// readServers reads the last status and snapshot of every server (one ordered consumer with
// DeliverLastPerSubject) and returns one row per server, sorted by name, and how many
// malformed events it skipped.
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
		ev, err := subjects.DecodeRegistry(msg.Data())
		if err != nil {
			bad++
			return nil
		}
		if eventServer(ev) != subj.Server {
			bad++ // a payload must be about the server of its subject
			return nil
		}
		r := get(subj.Server)
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
			if s.Info != nil {
				r.Description = firstNonEmpty(r.Description, s.Info.Description)
				r.Transport = firstNonEmpty(r.Transport, s.Info.Transport)
				r.Protocol = firstNonEmpty(r.Protocol, s.Info.Protocol)
			}
		default:
			bad++
		}
		return nil
	})
	if err != nil {
		return nil, bad, err
	}
	rows := make([]serverRow, 0, len(byName))
	for _, r := range byName {
		if r.Status == subjects.StatusRemoved {
			r.Tools, r.Prompts, r.Resources = 0, 0, 0 // its definitions are gone
		}
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

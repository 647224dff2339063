package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcpstream/mcpstream/subjects"
)

func init() {
	register(command{
		name:    "inspect",
		summary: "show one tool's full definition and freshness (what get_tool_details answers)",
		run:     runInspect,
	})
}

const inspectHelp = `
Shows one tool of the catalog by its public name (server__tool, as search prints it): the
server and original name it maps back to, title, labels, freshness state and why, cache scope,
TTL and listing time, the whole description, and the input schema, output schema and
annotations exactly as the server listed them.

A tool the principal may not call is reported exactly like one that does not exist (not_found);
a tool that was removed says so. Stale, unavailable and revoked tools are shown with their state.
The request goes to the catalog subject of the principal's tenant
(mcpstream.v1.catalog.TENANT.details; local without one).

--json prints the catalog's entry as one JSON object {"name","server","tool","title",
"description","labels","state","stateReason","inputSchema","outputSchema","annotations",
"definition","cacheScope","ttlMs","listedAt"}. On an error it prints {"error":{"code","message",
"reason"}} and exits 1.

Examples:
  mcpstream inspect ticketing__createIssue
  mcpstream inspect kb__search_knowledge_base --json --principal acme/alice`

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cf clientFlags
	fs := newFlagSet("inspect", "inspect NAME [flags]", inspectHelp)
	cf.register(fs, true)
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the catalog service")
	rest, err := parseFlags(fs, args, stdout, stderr)
	if err != nil {
		return err
	}
	if len(rest) != 1 || strings.TrimSpace(rest[0]) == "" {
		usageError(fs, stderr, "want one tool NAME (server__tool)", rest)
		return exitCode(2)
	}
	if !catalogTimeoutOK(fs, stderr, *timeout) {
		return exitCode(2)
	}
	cs, err := openCatalog(ctx, &cf, "inspect", *timeout, subjects.CatalogDetails)
	if err != nil {
		return requestFailure(stdout, cf.JSON, err)
	}
	defer cs.close()
	rep, err := cs.cl.Details(cs.ctx, cs.tenant, subjects.DetailsRequest{
		// The name as given, as call sends it: a name with spaces around it is no public name,
		// not_found with the one meant, as the details request and the call of it say.
		V: subjects.Version, Names: []string{rest[0]}, Principal: cs.pr,
	})
	if err != nil {
		return requestFailure(stdout, cf.JSON, cs.failed(err))
	}
	if rep.Error != nil || len(rep.Tools) == 0 {
		e := rep.Error
		if e == nil {
			e = &subjects.Error{Code: subjects.CodeNotFound, Message: "no tool named " + rest[0]}
		}
		return catalogFailure(stdout, cf.JSON, cf.explain(e))
	}
	t := rep.Tools[0]
	if cf.JSON {
		return printJSON(stdout, t)
	}
	head := t
	head.Description = ""
	printToolHead(stdout, 0, head)
	if t.Description != "" {
		fmt.Fprintf(stdout, "   description:\n%s\n", inspectIndent(termBlock(t.Description), "     "))
	}
	printToolFull(stdout, t)
	return nil
}

func inspectIndent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

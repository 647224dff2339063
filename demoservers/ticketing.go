package demoservers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

var ticketingSpec = spec{
	title:       "Issue Tracker",
	description: "Issue tracker: create and list tickets",
	instructions: "createIssue files a new ticket on every call (it is not idempotent: check listIssues before retrying). " +
		"closeIssue is destructive and should be confirmed by the user.",
	toolsTTL:   30_000,
	toolsScope: mcp.CacheScopePrivate,
	tools:      ticketingTools,
}

type ticket struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Body      string `json:"body"`
	Priority  string `json:"priority"`
	Status    string `json:"status"`
	Assignee  string `json:"assignee,omitempty"`
	CreatedAt string `json:"createdAt"`
	ClosedAt  string `json:"closedAt,omitempty"`
}

// ticketStore holds the tickets of one server instance, in creation order.
type ticketStore struct {
	mu      sync.Mutex
	next    int
	tickets []*ticket
	byID    map[string]*ticket
	bytes   int // of the tickets' titles and bodies
}

// errStoreFull is createIssue's answer once the store holds maxTickets or maxTicketBytes.
var errStoreFull = fmt.Errorf("the issue tracker is full (at most %d tickets, %d MiB of titles and bodies): no ticket was created", maxTickets, maxTicketBytes>>20)

func newTicketStore() *ticketStore {
	return &ticketStore{next: 1, byID: make(map[string]*ticket)}
}

func (s *ticketStore) create(title, body, priority string, now time.Time) (ticket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	size := len(title) + len(body)
	if len(s.tickets) >= maxTickets || s.bytes+size > maxTicketBytes {
		return ticket{}, errStoreFull
	}
	s.bytes += size
	t := &ticket{
		ID:        fmt.Sprintf("TCK-%d", s.next),
		Title:     title,
		Body:      body,
		Priority:  priority,
		Status:    "open",
		CreatedAt: now.UTC().Format(time.RFC3339Nano),
	}
	s.next++
	s.tickets = append(s.tickets, t)
	s.byID[t.ID] = t
	return *t, nil
}

// list returns up to limit tickets with the given status ("" = any), oldest
// first, and the number of matching tickets.
func (s *ticketStore) list(status string, limit int) ([]ticket, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []ticket{}
	total := 0
	for _, t := range s.tickets {
		if status != "" && t.Status != status {
			continue
		}
		total++
		if len(out) < limit {
			out = append(out, *t)
		}
	}
	return out, total
}

// update applies fn to the ticket id under the lock.
func (s *ticketStore) update(id string, fn func(t *ticket)) (ticket, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byID[id]
	if !ok {
		return ticket{}, false
	}
	fn(t)
	return *t, true
}

// maxTicketBytes bounds the titles and bodies a ticketing server stores, and maxTickets how
// many tickets: past either, createIssue refuses to file one (a tool error), so that a peer
// calling it in a loop cannot grow the process without bound. (An assignee is at most 100
// bytes a ticket.)
const (
	maxTicketBytes = 8 << 20
	maxTickets     = 10000
)

const ticketProps = `
      "id": {"type": "string", "description": "Ticket id, e.g. TCK-12."},
      "title": {"type": "string", "description": "One-line summary."},
      "priority": {"type": "string", "enum": ["low", "medium", "high", "critical"], "description": "Priority."},
      "status": {"type": "string", "enum": ["open", "closed"], "description": "Current status."},
      "createdAt": {"type": "string", "format": "date-time", "description": "Creation time (RFC 3339, UTC)."}`

const createIssueSchema = `{
  "type": "object",
  "properties": {` + ticketProps + `
  },
  "required": ["id", "title", "priority", "status", "createdAt"]
}`

const listIssuesSchema = `{
  "type": "object",
  "properties": {
    "issues": {
      "type": "array",
      "description": "Matching tickets, oldest first, at most limit of them.",
      "items": {
        "type": "object",
        "properties": {` + ticketProps + `,
          "body": {"type": "string", "description": "Full description."},
          "assignee": {"type": "string", "description": "Assigned person, if any."},
          "closedAt": {"type": "string", "format": "date-time", "description": "Closing time, for closed tickets."}
        },
        "required": ["id", "title", "body", "priority", "status", "createdAt"]
      }
    },
    "total": {"type": "integer", "description": "Number of matching tickets, regardless of limit."}
  },
  "required": ["issues", "total"]
}`

const closeIssueSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "Ticket id."},
    "status": {"type": "string", "enum": ["closed"], "description": "Always closed."},
    "closedAt": {"type": "string", "format": "date-time", "description": "When the ticket was closed."},
    "alreadyClosed": {"type": "boolean", "description": "True if the ticket was already closed before this call."}
  },
  "required": ["id", "status", "closedAt", "alreadyClosed"]
}`

const assignIssueSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "Ticket id."},
    "assignee": {"type": "string", "description": "New assignee."},
    "status": {"type": "string", "enum": ["open", "closed"], "description": "Current status."}
  },
  "required": ["id", "assignee", "status"]
}`

type createdIssue struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Priority  string `json:"priority"`
	Status    string `json:"status"`
	CreatedAt string `json:"createdAt"`
}

type issueList struct {
	Issues []ticket `json:"issues"`
	Total  int      `json:"total"`
}

type closedIssue struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	ClosedAt      string `json:"closedAt"`
	AlreadyClosed bool   `json:"alreadyClosed"`
}

type assignedIssue struct {
	ID       string `json:"id"`
	Assignee string `json:"assignee"`
	Status   string `json:"status"`
}

func ticketingTools(Options) (base, extras []server.ServerTool) {
	store := newTicketStore()

	createIssue := mcp.NewTool("createIssue",
		mcp.WithToolTitle("Create issue"),
		mcp.WithDescription("Open a new ticket in the issue tracker for a bug, incident or task. Every call creates a new ticket with a new id, "+
			"even with identical arguments; do not retry blindly after an unknown outcome."),
		mcp.WithString("title", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(200),
			mcp.Description("One-line summary of the problem, e.g. the error message.")),
		mcp.WithString("body", mcp.Required(), mcp.MaxLength(65536),
			mcp.Description("Full description: steps, context, stack trace. May be empty.")),
		mcp.WithString("priority", mcp.Required(), mcp.Enum("low", "medium", "high", "critical"),
			mcp.Description("Priority: low, medium, high or critical.")),
		outputSchema(createIssueSchema),
		annotate("Create issue", hints{}),
	)
	type createArgs struct {
		Title    string `json:"title"`
		Body     string `json:"body"`
		Priority string `json:"priority"`
	}
	createHandler := typed(func(_ context.Context, a createArgs) (*mcp.CallToolResult, error) {
		title := strings.TrimSpace(a.Title)
		if title == "" {
			return mcp.NewToolResultError("title must not be blank"), nil
		}
		t, err := store.create(title, a.Body, a.Priority, time.Now())
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		out := createdIssue{ID: t.ID, Title: t.Title, Priority: t.Priority, Status: t.Status, CreatedAt: t.CreatedAt}
		return mcp.NewToolResultStructured(out, fmt.Sprintf("Created %s (%s): %s", t.ID, t.Priority, t.Title)), nil
	})

	listIssues := mcp.NewTool("listIssues",
		mcp.WithToolTitle("List issues"),
		mcp.WithDescription("List tickets, oldest first, optionally only open or closed ones. "+
			"total counts every matching ticket, even beyond limit."),
		mcp.WithString("status", mcp.Enum("open", "closed"),
			mcp.Description("Only tickets with this status. Omit for all tickets.")),
		mcp.WithInteger("limit", mcp.Min(1), mcp.Max(1000), mcp.DefaultNumber(100),
			mcp.Description("Maximum number of tickets to return (1-1000, default 100).")),
		outputSchema(listIssuesSchema),
		annotate("List issues", readOnly),
	)
	type listArgs struct {
		Status string `json:"status"`
		Limit  int    `json:"limit"`
	}
	listHandler := typed(func(_ context.Context, a listArgs) (*mcp.CallToolResult, error) {
		if a.Limit <= 0 {
			a.Limit = 100
		}
		issues, total := store.list(a.Status, a.Limit)
		return mcp.NewToolResultStructured(issueList{Issues: issues, Total: total},
			fmt.Sprintf("%d ticket(s) match, %d returned.", total, len(issues))), nil
	})

	closeIssue := mcp.NewTool("closeIssue",
		mcp.WithToolTitle("Close issue"),
		mcp.WithDescription("Close a ticket. Closed tickets drop out of the team's queue; this needs the user's approval."),
		mcp.WithString("id", mcp.Required(), mcp.Pattern(`^TCK-[0-9]+$`),
			mcp.Description("Ticket id, e.g. TCK-12.")),
		mcp.WithString("resolution", mcp.MaxLength(2000),
			mcp.Description("Optional note on why the ticket is closed.")),
		outputSchema(closeIssueSchema),
		annotate("Close issue", hints{destructive: true, idempotent: true}),
	)
	type closeArgs struct {
		ID string `json:"id"`
	}
	closeHandler := typed(func(_ context.Context, a closeArgs) (*mcp.CallToolResult, error) {
		already := false
		t, ok := store.update(a.ID, func(t *ticket) {
			if t.Status == "closed" {
				already = true
				return
			}
			t.Status = "closed"
			t.ClosedAt = time.Now().UTC().Format(time.RFC3339Nano)
		})
		if !ok {
			return mcp.NewToolResultError(fmt.Sprintf("ticket %s not found", a.ID)), nil
		}
		out := closedIssue{ID: t.ID, Status: t.Status, ClosedAt: t.ClosedAt, AlreadyClosed: already}
		return mcp.NewToolResultStructured(out, fmt.Sprintf("Closed %s.", t.ID)), nil
	})

	assignIssue := mcp.NewTool("assignIssue",
		mcp.WithToolTitle("Assign issue"),
		mcp.WithDescription("Assign a ticket to a person, replacing any previous assignee."),
		mcp.WithString("id", mcp.Required(), mcp.Pattern(`^TCK-[0-9]+$`),
			mcp.Description("Ticket id, e.g. TCK-12.")),
		mcp.WithString("assignee", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(100),
			mcp.Description("User name or email of the new assignee.")),
		outputSchema(assignIssueSchema),
		annotate("Assign issue", hints{idempotent: true}),
	)
	type assignArgs struct {
		ID       string `json:"id"`
		Assignee string `json:"assignee"`
	}
	assignHandler := typed(func(_ context.Context, a assignArgs) (*mcp.CallToolResult, error) {
		t, ok := store.update(a.ID, func(t *ticket) { t.Assignee = a.Assignee })
		if !ok {
			return mcp.NewToolResultError(fmt.Sprintf("ticket %s not found", a.ID)), nil
		}
		out := assignedIssue{ID: t.ID, Assignee: t.Assignee, Status: t.Status}
		return mcp.NewToolResultStructured(out, fmt.Sprintf("Assigned %s to %s.", t.ID, t.Assignee)), nil
	})

	base = []server.ServerTool{
		{Tool: createIssue, Handler: createHandler},
		{Tool: listIssues, Handler: listHandler},
		{Tool: closeIssue, Handler: closeHandler},
	}
	extras = []server.ServerTool{{Tool: assignIssue, Handler: assignHandler}}
	return base, extras
}

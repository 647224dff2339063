package demoservers

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

type gotIssue struct {
	ID            string `json:"id"`
	Title         string `json:"title"`
	Body          string `json:"body"`
	Priority      string `json:"priority"`
	Status        string `json:"status"`
	Assignee      string `json:"assignee"`
	CreatedAt     string `json:"createdAt"`
	ClosedAt      string `json:"closedAt"`
	AlreadyClosed bool   `json:"alreadyClosed"`
}

type gotIssues struct {
	Issues []gotIssue `json:"issues"`
	Total  int        `json:"total"`
}

func TestTicketing(t *testing.T) {
	for _, kind := range []string{"inprocess", "stdio", "http"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c := connect(t, kind, "ticketing", testOptions(t))

			if got := callOK[gotIssues](t, c, "listIssues", map[string]any{}); got.Total != 0 || len(got.Issues) != 0 {
				t.Fatalf("fresh server lists %+v, want no tickets", got)
			}
			const n = 7
			for i := 1; i <= n; i++ {
				args := map[string]any{"title": fmt.Sprintf("Problem %d", i), "body": "same body", "priority": "high"}
				got := callOK[gotIssue](t, c, "createIssue", args)
				if want := fmt.Sprintf("TCK-%d", i); got.ID != want {
					t.Errorf("createIssue #%d id = %q, want %q", i, got.ID, want)
				}
				if got.Title != args["title"] || got.Priority != "high" || got.Status != "open" {
					t.Errorf("createIssue #%d = %+v", i, got)
				}
				if _, err := time.Parse(time.RFC3339Nano, got.CreatedAt); err != nil {
					t.Errorf("createdAt %q: %v", got.CreatedAt, err)
				}
			}
			// Identical arguments still create a new ticket: not idempotent.
			callOK[gotIssue](t, c, "createIssue", map[string]any{"title": "Problem 1", "body": "same body", "priority": "high"})

			all := callOK[gotIssues](t, c, "listIssues", map[string]any{})
			if all.Total != n+1 || len(all.Issues) != n+1 {
				t.Fatalf("listIssues total %d, %d issues, want %d", all.Total, len(all.Issues), n+1)
			}
			limited := callOK[gotIssues](t, c, "listIssues", map[string]any{"limit": 3})
			if limited.Total != n+1 || len(limited.Issues) != 3 || limited.Issues[0].ID != "TCK-1" {
				t.Errorf("listIssues limit 3 = total %d, %d issues (first %+v)", limited.Total, len(limited.Issues), limited.Issues[0])
			}

			closed := callOK[gotIssue](t, c, "closeIssue", map[string]any{"id": "TCK-2"})
			if closed.Status != "closed" || closed.AlreadyClosed || closed.ClosedAt == "" {
				t.Errorf("closeIssue = %+v", closed)
			}
			again := callOK[gotIssue](t, c, "closeIssue", map[string]any{"id": "TCK-2"})
			if !again.AlreadyClosed || again.ClosedAt != closed.ClosedAt {
				t.Errorf("second closeIssue = %+v, want alreadyClosed with the same closedAt", again)
			}
			open := callOK[gotIssues](t, c, "listIssues", map[string]any{"status": "open"})
			closedList := callOK[gotIssues](t, c, "listIssues", map[string]any{"status": "closed"})
			if open.Total != n || closedList.Total != 1 || closedList.Issues[0].ID != "TCK-2" {
				t.Errorf("open %d, closed %+v; want %d open and TCK-2 closed", open.Total, closedList, n)
			}

			for _, tc := range []struct {
				tool string
				args map[string]any
			}{
				{"closeIssue", map[string]any{"id": "TCK-999"}},
				{"closeIssue", map[string]any{"id": "not-an-id"}},
				{"createIssue", map[string]any{"title": "x", "body": "", "priority": "urgent"}},
				{"createIssue", map[string]any{"title": "   ", "body": "", "priority": "low"}},
				{"createIssue", map[string]any{"body": "", "priority": "low"}},
				{"listIssues", map[string]any{"status": "pending"}},
			} {
				if res := callTool(t, c, tc.tool, tc.args); !res.IsError {
					t.Errorf("%s(%v): want isError, got %s", tc.tool, tc.args, resultText(res))
				}
			}
			if got := callOK[gotIssues](t, c, "listIssues", map[string]any{}); got.Total != n+1 {
				t.Errorf("after failed calls: %d tickets, want %d", got.Total, n+1)
			}
		})
	}
}

func TestTicketingConcurrentCreates(t *testing.T) {
	c := connect(t, "stdio", "ticketing", testOptions(t))
	const n = 40
	ids := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ids <- callOK[gotIssue](t, c, "createIssue", map[string]any{"title": fmt.Sprint("t", i), "body": "", "priority": "low"}).ID
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("duplicate id %s", id)
		}
		seen[id] = true
	}
	if got := callOK[gotIssues](t, c, "listIssues", map[string]any{"limit": 1000}); got.Total != n || len(seen) != n {
		t.Errorf("%d tickets, %d distinct ids; want %d", got.Total, len(seen), n)
	}
}

func TestTicketingStatePerInstance(t *testing.T) {
	a := connect(t, "inprocess", "ticketing", testOptions(t))
	b := connect(t, "inprocess", "ticketing", testOptions(t))
	callOK[gotIssue](t, a, "createIssue", map[string]any{"title": "only in a", "body": "", "priority": "medium"})
	if got := callOK[gotIssues](t, b, "listIssues", map[string]any{}); got.Total != 0 {
		t.Errorf("second instance sees %d tickets, want 0", got.Total)
	}
}

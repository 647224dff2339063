package executor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

func TestCallThroughNATS(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"ticketing"}})
	res := r.call("local", "ticketing__createIssue", `{"title":"Disk full","body":"on db-1","priority":"high"}`)
	if res.Status != subjects.CallOK || res.Error != nil {
		t.Fatalf("got %+v, want ok", res)
	}
	var out struct {
		StructuredContent struct {
			ID string `json:"id"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res.Result, &out); err != nil {
		t.Fatal(err)
	}
	if out.StructuredContent.ID != "TCK-1" || out.IsError {
		t.Errorf("got result %s, want structuredContent.id TCK-1", res.Result)
	}
	if got := r.ticketCount(); got != 1 {
		t.Errorf("got %d tickets, want 1", got)
	}
	want := "audit.request,audit.decision,audit.dispatch,audit.result"
	var got string
	waitFor(t, "audit events "+want, func() bool {
		var types []string
		for _, ev := range r.auditEvents("local", res.ID) {
			types = append(types, ev.Type)
		}
		got = strings.Join(types, ",")
		return got == want || len(types) > 4
	})
	if got != want {
		t.Errorf("got audit %s, want %s", got, want)
	}
}

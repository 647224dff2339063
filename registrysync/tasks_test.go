package registrysync

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

func TestTaskToolNames(t *testing.T) {
	items := []json.RawMessage{
		json.RawMessage(`{"name":"plain","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"task","execution":{"taskSupport":"required"},"inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"optional","execution":{"taskSupport":"optional"}}`),
		json.RawMessage(`{"name":"cased","Execution":{"taskSupport":"required"}}`),
		json.RawMessage(`{"name":"junk","execution":"required"}`),
		json.RawMessage(`{"execution":{"taskSupport":"required"}}`),
		json.RawMessage(`[1,2]`),
	}
	got := taskToolNames(items)
	if len(got) != 1 || !got["task"] {
		t.Errorf("taskToolNames = %v, want only task", got)
	}
}

// server-everything's simulate-research-query says execution.taskSupport "required": a plain
// tools/call is refused (-32601). The connector calls it as a task and returns its result; a
// deadline shorter than the task ends as a timeout.
func TestNPMEverythingTaskTool(t *testing.T) {
	t.Parallel()
	entry := npmServer(t, "server-everything")
	sc := ServerConfig{Name: "everything", Transport: TransportStdio, Command: "node", Args: []string{entry, "stdio"}}
	h := run(t, nil, fastConfig(sc))
	rec := record(t, h.env, subjects.RegistryServer("everything"))
	rec.wait(0, "research tool listed", isSnapshot(subjects.KindTools, func(s *subjects.Snapshot) bool { return hasName(t, s, "simulate-research-query") }))
	waitUntil(t, "ready", func() bool { return h.m.Statuses()["everything"].Status == subjects.StatusReady })

	r := dispatch(t, h, "everything", subjects.DispatchRequest{V: 1, Tool: "simulate-research-query", Arguments: json.RawMessage(`{"topic":"nats jetstream"}`), TimeoutMs: 30000})
	if r.Error != nil {
		t.Fatalf("task tool: %+v", r.Error)
	}
	if text := resultText(t, r.Result); !strings.Contains(strings.ToLower(text), "nats jetstream") || strings.Contains(string(r.Result), `"isError":true`) {
		t.Errorf("task tool result: %s", r.Result)
	}

	r = dispatch(t, h, "everything", subjects.DispatchRequest{V: 1, Tool: "simulate-research-query", Arguments: json.RawMessage(`{"topic":"short"}`), TimeoutMs: 1500})
	if r.Error == nil || r.Error.Code != subjects.CodeTimeout {
		t.Errorf("task past its deadline: %+v %s", r.Error, r.Result)
	}
	// Plain tools of the same server still go the plain way.
	r = dispatch(t, h, "everything", subjects.DispatchRequest{V: 1, Tool: "echo", Arguments: json.RawMessage(`{"message":"hi"}`)})
	if r.Error != nil || !strings.Contains(resultText(t, r.Result), "hi") {
		t.Errorf("echo: %+v %s", r.Error, r.Result)
	}
}

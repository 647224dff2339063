package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/subjects"
)

// Malformed and hostile input gets a clear, coded answer; the workers keep serving.
func TestMalformedRequests(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	big := func(n int) string {
		return `{"id":"big","tool":"fixture__echo","arguments":{"text":"` + strings.Repeat("x", n) + `"}}`
	}

	t.Run("exec", func(t *testing.T) {
		cases := []struct {
			name    string
			subject string
			data    string
			code    string
		}{
			{"not JSON", subjects.Exec("local"), `{"id": "x", "tool": `, subjects.CodeBadRequest},
			{"not an object", subjects.Exec("local"), `[1,2,3]`, subjects.CodeBadRequest},
			{"no id", subjects.Exec("local"), `{"tool":"fixture__echo"}`, subjects.CodeBadRequest},
			{"no tool", subjects.Exec("local"), `{"id":"m-1"}`, subjects.CodeBadRequest},
			{"id too long", subjects.Exec("local"), `{"id":"` + strings.Repeat("i", 300) + `","tool":"fixture__echo"}`, subjects.CodeBadRequest},
			{"arguments wrong type", subjects.Exec("local"), `{"id":"m-2","tool":"fixture__echo","arguments":"text"}`, subjects.CodeInvalidArguments},
			{"negative timeout", subjects.Exec("local"), `{"id":"m-3","tool":"fixture__echo","timeoutMs":-5}`, subjects.CodeBadRequest},
			{"5 MB arguments", subjects.Exec("local"), big(5 << 20), subjects.CodeTooLarge},
			{"bad tenant token", subjects.Root + ".exec.a~ZZ", `{"id":"m-4","tool":"fixture__echo"}`, subjects.CodeBadRequest},
			{"tool named up to case", subjects.Exec("local"), `{"id":"m-6","Tool":"fixture__echo","arguments":{"text":"x"}}`, subjects.CodeBadRequest},
			{"tool named twice", subjects.Exec("local"), `{"id":"m-7","tool":"fixture__echo","tool":"fixture__other","arguments":{"text":"x"}}`, subjects.CodeBadRequest},
			{"user named up to case", subjects.Exec("local"), `{"id":"m-8","tool":"fixture__echo","arguments":{"text":"x"},"principal":{"user":"a","USER":"b"}}`, subjects.CodeBadRequest},
			{"argument named twice", subjects.Exec("local"), `{"id":"m-9","tool":"fixture__echo","arguments":{"text":"x","text":"y"}}`, subjects.CodeInvalidArguments},
			{"nested argument named twice", subjects.Exec("local"), `{"id":"m-10","tool":"fixture__echo","arguments":{"text":"x","o":[1,{"a":1,"a":2}]}}`, subjects.CodeInvalidArguments},
			{"no user: the open policy's local user", subjects.Exec("local"), `{"id":"m-5","tool":"fixture__echo","arguments":{"text":"x"},"principal":{"user":""}}`, ""},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				m, err := r.env.NC.Request(tc.subject, []byte(tc.data), waitLimit)
				if err != nil {
					t.Fatalf("request: %v", err)
				}
				var res subjects.CallResult
				if err := json.Unmarshal(m.Data, &res); err != nil {
					t.Fatalf("answer %q: %v", m.Data, err)
				}
				code := ""
				if res.Error != nil {
					code = res.Error.Code
				}
				if code != tc.code {
					t.Fatalf("got %s %q (%+v), want code %q", res.Status, code, res.Error, tc.code)
				}
				if res.Error != nil && res.Error.Message == "" {
					t.Errorf("no message with code %s", code)
				}
			})
		}
	})

	t.Run("10 MB arguments", func(t *testing.T) {
		// The client refuses it without sending (the calls stream holds at most 4 MiB).
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		res, err := r.client.Call(ctx, "local", subjects.CallRequest{Tool: "fixture__echo",
			Arguments: json.RawMessage(`{"text":"` + strings.Repeat("x", 10<<20) + `"}`)})
		if err != nil || res.Error == nil || res.Error.Code != subjects.CodeTooLarge {
			t.Fatalf("got %+v %v, want too_large", res.Error, err)
		}
		// A raw NATS client cannot even send it (max_payload 8 MiB).
		if _, err := r.env.NC.Request(subjects.Exec("local"), []byte(big(10<<20)), time.Second); !errors.Is(err, nats.ErrMaxPayload) {
			t.Errorf("raw 10 MB request: got %v, want %v", err, nats.ErrMaxPayload)
		}
	})

	t.Run("published to the calls stream directly", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		// No id: nothing to answer to. The worker drops it and the audit stream keeps it.
		if _, err := r.env.JS.Publish(ctx, subjects.Calls("local"), []byte(`{"tool": 42`)); err != nil {
			t.Fatal(err)
		}
		// With an id: a refused answer on the results subject.
		if _, err := r.env.JS.Publish(ctx, subjects.Calls("local"), []byte(`{"id":"direct-1","tool":""}`)); err != nil {
			t.Fatal(err)
		}
		res, err := r.client.Await(ctx, "local", "direct-1")
		if err != nil || res.Error == nil || res.Error.Code != subjects.CodeBadRequest {
			t.Fatalf("got %+v %v, want bad_request", res.Error, err)
		}
		// Over the stream's limit: the publisher gets the error.
		if _, err := r.env.JS.Publish(ctx, subjects.Calls("local"), []byte(big(5<<20))); err == nil {
			t.Errorf("a 5 MB call request was stored")
		}
		// Junk on a results subject is not taken for the answer.
		id := "junk-answer"
		done := make(chan subjects.CallResult, 1)
		go func() {
			res, _ := r.client.Await(ctx, "local", id)
			done <- res
		}()
		r.env.NC.Publish(subjects.Result("local", id), []byte(`{"id":"other"}`))
		r.env.NC.Publish(subjects.Result("local", id), []byte(`garbage`))
		if _, _, err := r.client.Submit(ctx, "local", subjects.CallRequest{ID: id, Tool: "fixture__echo", Arguments: json.RawMessage(`{"text":"real"}`)}); err != nil {
			t.Fatal(err)
		}
		if res := <-done; res.Status != subjects.CallOK {
			t.Errorf("got %s %+v, want the real answer", res.Status, res.Error)
		}
	})

	t.Run("approval junk", func(t *testing.T) {
		// Nobody waits: no responders.
		if _, err := r.env.NC.Request(subjects.Approvals("local", "nobody"), []byte("junk"), time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("got %v, want no responders", err)
		}
	})

	t.Run("a panic is answered", func(t *testing.T) {
		r2 := startRig(t, rigOptions{servers: []string{"fixture"}, noExecutor: true})
		r2.startExecutor(Config{Dispatcher: panicky{r2.mgr}, Relister: r2.mgr}, r2.env.NC)
		r2.waitTool("fixture__echo")
		// The panic is in the dispatch: the call may have reached its server.
		res := r2.call("local", "fixture__echo", `{"text":"boom"}`)
		if res.Error == nil || res.Error.Code != subjects.CodeOutcomeUnknown {
			t.Fatalf("got %s %+v, want outcome_unknown", res.Status, res.Error)
		}
		if res := r2.call("local", "fixture__echo", `{"text":"fine"}`); res.Status != subjects.CallOK {
			t.Errorf("after a panic: got %s %+v, want ok", res.Status, res.Error)
		}
	})

	// Still serving after all of it.
	if res := r.call("local", "fixture__echo", `{"text":"still here"}`); res.Status != subjects.CallOK {
		t.Errorf("after malformed input: got %s %+v, want ok", res.Status, res.Error)
	}
	waitFor(t, "audit event of the call request without an id", func() bool {
		return len(r.auditEventsWhere(func(ev subjects.AuditEvent) bool { return ev.CallID == "" && ev.Code == subjects.CodeBadRequest })) > 0
	})
}

// panicky panics on "boom".
type panicky struct{ inner Dispatcher }

func (p panicky) Dispatch(ctx context.Context, server string, req subjects.DispatchRequest) subjects.DispatchReply {
	if strings.Contains(string(req.Arguments), "boom") {
		panic("boom")
	}
	return p.inner.Dispatch(ctx, server, req)
}

package indexer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/subjects"
)

// A client that writes its integers as floats (Python's json.dumps of 1.0 and 5.0; JSON does not
// tell them apart) is served through NATS as one that writes 1 and 5: search, details and
// servers alike. A number with a fraction, or out of range, stays bad_request, naming the member.
func TestServiceIntegralNumbers(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	nc := env.Connect(t)
	waitFor(t, "service up", func() bool {
		_, err := nc.Request(subjects.CatalogServers("local"), []byte(`{}`), time.Second)
		return err == nil
	})
	search, details, servers := subjects.CatalogSearch("local"), subjects.CatalogDetails("local"), subjects.CatalogServers("local")
	for _, pair := range []struct{ subject, ints, floats string }{
		{search, `{"v":1,"query":"search the knowledge base","k":2}`, `{"v":1.0,"query":"search the knowledge base","k":2.0}`},
		{search, `{"v":1,"query":"search the knowledge base","k":2}`, `{"v":1e0,"query":"search the knowledge base","k":20E-1}`},
		{details, `{"v":1,"names":["kb__search_knowledge_base"]}`, `{"v":1.00,"names":["kb__search_knowledge_base"]}`},
		{servers, `{"v":1,"limit":2}`, `{"v":1.0,"limit":2.0}`},
		{servers, `{"limit":0}`, `{"limit":-0.0}`}, // 0: the default limit
	} {
		want := request(t, nc, pair.subject, []byte(pair.ints))
		got := request(t, nc, pair.subject, []byte(pair.floats))
		if !bytes.Equal(got.Data, want.Data) || got.Header.Get(micro.ErrorCodeHeader) != "" {
			t.Errorf("%s: answered\n%s\nwant (as for %s)\n%s", pair.floats, got.Data, pair.ints, want.Data)
		}
		if bytes.Contains(want.Data, []byte(`"error"`)) {
			t.Errorf("%s: %s", pair.ints, want.Data)
		}
	}
	var rep subjects.SearchReply
	if err := json.Unmarshal(request(t, nc, search, []byte(`{"v":1.0,"query":"logs","k":1.0}`)).Data, &rep); err != nil || rep.Error != nil || len(rep.Tools) != 1 {
		t.Errorf("k 1.0: %+v %v, want one tool", rep, err)
	}
	for _, tc := range []struct{ subject, body, member, why string }{
		{search, `{"v":1.0,"query":"logs","k":2.5}`, "k", "not an integer"},
		{search, `{"v":1.5,"query":"logs"}`, "v", "not an integer"},
		{search, `{"query":"logs","k":1e19}`, "k", "out of range"},
		{search, `{"query":"logs","k":"5"}`, "k", "string"},
		{details, `{"v":0.5,"names":["kb__search_knowledge_base"]}`, "v", "not an integer"},
		{servers, `{"limit":10.01}`, "limit", "not an integer"},
		{servers, `{"limit":-1e30}`, "limit", "out of range"},
	} {
		msg := request(t, nc, tc.subject, []byte(tc.body))
		var rep struct {
			Error *subjects.Error `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &rep); err != nil || rep.Error == nil || rep.Error.Code != subjects.CodeBadRequest ||
			msg.Header.Get(micro.ErrorCodeHeader) != subjects.CodeBadRequest ||
			!strings.Contains(rep.Error.Message, `"`+tc.member+`"`) && tc.why != "string" || !strings.Contains(rep.Error.Message, tc.why) {
			t.Errorf("%s: answered %s, want bad_request naming %q: %s", tc.body, msg.Data, tc.member, tc.why)
		}
	}
	// A float "v" that is no version this service speaks is refused as "v": 2 is.
	msg := request(t, nc, search, []byte(`{"v":2.0,"query":"logs"}`))
	if !bytes.Contains(msg.Data, []byte(`"code":"bad_request"`)) {
		t.Errorf("v 2.0: %s", msg.Data)
	}
}

// Every error reply of the catalog has the shape of its endpoint's reply, as README says: the
// version, an empty list of tools (search, details) or servers, and the error. The replies of a
// body over 64 KiB and of a subject without a valid tenant token had no list.
func TestServiceErrorRepliesHaveTheirList(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	nc := env.Connect(t)
	waitFor(t, "service up", func() bool {
		_, err := nc.Request(subjects.CatalogServers("local"), []byte(`{}`), time.Second)
		return err == nil
	})
	big := `{"query":"logs","names":["a__b"],"pad":"` + strings.Repeat("x", MaxRequestBytes) + `"}`
	for _, ep := range []struct{ name, list string }{{"search", "tools"}, {"details", "tools"}, {"servers", "servers"}} {
		good := subjects.Root + ".catalog.local." + ep.name
		badTenant := subjects.Root + ".catalog.a~ZZ." + ep.name
		for _, tc := range []struct{ what, subject, body, code string }{
			{"malformed", good, `{"v":`, subjects.CodeBadRequest},
			{"too large", good, big, subjects.CodeTooLarge},
			{"bad tenant", badTenant, `{"query":"logs","names":["a__b"]}`, subjects.CodeBadRequest},
		} {
			msg := request(t, nc, tc.subject, []byte(tc.body))
			var rep map[string]json.RawMessage
			if err := json.Unmarshal(msg.Data, &rep); err != nil {
				t.Fatalf("%s %s: %s: %v", ep.name, tc.what, msg.Data, err)
			}
			var e subjects.Error
			if string(rep["v"]) != "1" || string(rep[ep.list]) != "[]" || json.Unmarshal(rep["error"], &e) != nil || e.Code != tc.code ||
				len(rep) != 3 || msg.Header.Get(micro.ErrorCodeHeader) != tc.code {
				t.Errorf("%s %s: answered %s, want {\"v\":1,%q:[],\"error\":{\"code\":%q...}}", ep.name, tc.what, msg.Data, ep.list, tc.code)
			}
		}
	}
}

package indexer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

// TestServiceHostileRequestsTellNothing: requests any NATS client may send, naming what the
// principal may not see, get byte for byte the answer of requests naming what nobody lists
// (search filtered to a hidden server, select of a hidden tool, details of one, a servers
// page after a hidden server); odd bodies (numbers past int, nulls, deep nesting, invalid
// UTF-8, members named twice through escapes, a request without a reply subject) get a JSON
// error with a stable code in the body and the micro header, and the service keeps serving.
func TestServiceHostileRequestsTellNothing(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{"alice": {Tenant: "acme", Roles: []string{"support"}}},
		Rules:      []policy.Rule{{Name: "support", Roles: []string{"support"}, Allow: []string{"kb__*"}}},
	})
	r := startReplica(t, env, "", pol, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	nc := env.Connect(t)
	waitFor(t, "service up", func() bool {
		_, err := nc.Request(subjects.CatalogServers("acme"), []byte(`{"principal":{"user":"alice"}}`), time.Second)
		return err == nil
	})
	ask := func(subject, body string) *nats.Msg {
		t.Helper()
		return request(t, nc, subject, []byte(body))
	}
	alice := `"principal":{"user":"alice","roles":["ops","admin"]}` // roles come from the policy, not the request
	same := func(what, subject, hidden, nobody, hiddenName, nobodyName string) {
		t.Helper()
		h, n := ask(subject, hidden), ask(subject, nobody)
		hb := bytes.ReplaceAll(h.Data, []byte(hiddenName), []byte("NAME"))
		nb := bytes.ReplaceAll(n.Data, []byte(nobodyName), []byte("NAME"))
		if !bytes.Equal(hb, nb) || h.Header.Get(micro.ErrorCodeHeader) != n.Header.Get(micro.ErrorCodeHeader) {
			t.Errorf("%s: a hidden name is told apart from one nobody lists:\n%s\n%s", what, h.Data, n.Data)
		}
	}
	search, details, servers := subjects.CatalogSearch("acme"), subjects.CatalogDetails("acme"), subjects.CatalogServers("acme")
	same("search filtered to a hidden server", search,
		`{"query":"get logs",`+alice+`,"servers":["logging"]}`, `{"query":"get logs",`+alice+`,"servers":["loggimg"]}`, "logging", "loggimg")
	same("select of a hidden tool", search,
		`{"query":"select:logging__getLogs",`+alice+`}`, `{"query":"select:logging__getLogz",`+alice+`}`, "getLogs", "getLogz")
	same("select of a hidden tool, full", search,
		`{"query":"select:kb__search_knowledge_base,ticketing__closeIssue","detail":"full",`+alice+`}`,
		`{"query":"select:kb__search_knowledge_base,ticketing__closeIssuf","detail":"full",`+alice+`}`, "closeIssue", "closeIssuf")
	same("details of a hidden tool", details,
		`{"names":["logging__getLogs"],`+alice+`}`, `{"names":["logging__getLogz"],`+alice+`}`, "getLogs", "getLogz")
	same("details of a hidden tool among visible ones", details,
		`{"names":["kb__search_knowledge_base","bing-cn__bing_search"],`+alice+`}`,
		`{"names":["kb__search_knowledge_base","bing-cn__bing_searcj"],`+alice+`}`, "bing_search", "bing_searcj")
	same("servers after a hidden server", servers,
		`{"after":"bing-cn","limit":1,`+alice+`}`, `{"after":"bing-cm","limit":1,`+alice+`}`, "bing-cn", "bing-cm")
	same("servers before a hidden server", servers,
		`{"limit":1,`+alice+`}`, `{"limit":1,`+alice+`}`, "", "")
	var page subjects.ServersReply
	if err := json.Unmarshal(ask(servers, `{"limit":1,`+alice+`}`).Data, &page); err != nil || page.Error != nil ||
		len(page.Servers) != 1 || page.Servers[0].Name != "kb" || page.Next != "" {
		t.Errorf("alice's first page of one: %+v %v, want kb alone and no next (nothing she may see follows)", page, err)
	}

	deep := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)
	for _, tc := range []struct{ subject, body, code string }{
		{search, `{"query":"logs","k":1e400,` + alice + `}`, subjects.CodeBadRequest},
		{search, `{"query":"logs","k":9223372036854775808,` + alice + `}`, subjects.CodeBadRequest},
		{search, `{"query":"logs","k":2.5,` + alice + `}`, subjects.CodeBadRequest},
		{search, `{"query":"logs","x":` + deep + `,` + alice + `}`, subjects.CodeBadRequest},
		{search, `{"query":"logs","\u0071uery":"select:logging__getLogs",` + alice + `}`, subjects.CodeBadRequest},
		{search, `{"query":"logs","principal":{"user":"alice","\u0075ser":"bob"}}`, subjects.CodeBadRequest},
		{search, `{"query":"logs","principal":{"user":"alice","tenant":"globex"}}`, subjects.CodeBadRequest},
		{search, `{"query":"logs","principal":{"user":""}}`, subjects.CodeUnknownPrincipal},
		{search, `{"query":"logs","principal":null}`, subjects.CodeUnknownPrincipal},
		{search, `{"query":null,` + alice + `}`, subjects.CodeBadRequest},
		{search, `"select:logging__getLogs"`, subjects.CodeBadRequest},
		{search, `{"query":"logs",` + alice + `} {"query":"more"}`, subjects.CodeBadRequest},
		{details, `{"names":null,` + alice + `}`, subjects.CodeBadRequest},
		{details, `{"names":[null,""],` + alice + `}`, subjects.CodeNotFound},
		{details, "{\"names\":[\"kb__\xff\xfe\"]," + alice + "}", subjects.CodeNotFound},
		{details, `{"names":["` + strings.Repeat("é", MaxNameBytes/2+1) + `"],` + alice + `}`, subjects.CodeTooLarge},
		{servers, `{"limit":-0.5,` + alice + `}`, subjects.CodeBadRequest}, // (-0.0 is 0: TestServiceIntegralNumbers)
		{servers, `{"after":7,` + alice + `}`, subjects.CodeBadRequest},
		{servers, `{"limit":1000,"v":2,` + alice + `}`, subjects.CodeBadRequest},
	} {
		msg := ask(tc.subject, tc.body)
		var rep struct {
			V     int             `json:"v"`
			Error *subjects.Error `json:"error"`
		}
		if err := json.Unmarshal(msg.Data, &rep); err != nil || rep.V != subjects.Version {
			t.Errorf("%.80s: reply %q is not a JSON reply: %v", tc.body, msg.Data, err)
			continue
		}
		if rep.Error == nil || rep.Error.Code != tc.code || rep.Error.Message == "" || msg.Header.Get(micro.ErrorCodeHeader) != tc.code {
			t.Errorf("%.80s: error %+v, header %q; want %s in both", tc.body, rep.Error, msg.Header.Get(micro.ErrorCodeHeader), tc.code)
		}
		if strings.Contains(string(msg.Data), "getLogs") && !strings.Contains(tc.body, "getLogs") {
			t.Errorf("%.80s: the reply names a tool alice may not see: %s", tc.body, msg.Data)
		}
	}
	// A request without a reply subject is served into nothing; the next is answered.
	if err := nc.Publish(search, []byte(`{"query":"logs",`+alice+`}`)); err != nil {
		t.Fatal(err)
	}
	var rep subjects.SearchReply
	if err := json.Unmarshal(ask(search, `{"query":"knowledge base",`+alice+`}`).Data, &rep); err != nil || rep.Error != nil || len(rep.Tools) == 0 {
		t.Fatalf("after hostile requests: %v %+v", err, rep)
	}
	for _, ti := range rep.Tools {
		if ti.Server != "kb" {
			t.Errorf("alice, claiming roles ops and admin, finds %s", ti.Name)
		}
	}
}

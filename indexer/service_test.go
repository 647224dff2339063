package indexer

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mcpstream/mcpstream/natstest"
	"github.com/mcpstream/mcpstream/policy"
	"github.com/mcpstream/mcpstream/subjects"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func request(t testing.TB, nc *nats.Conn, subject string, body []byte) *nats.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

func TestServiceMalformedRequests(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	nc := env.Connect(t)
	waitFor(t, "service up", func() bool {
		_, err := nc.Request(subjects.CatalogServers("local"), []byte(`{}`), time.Second)
		return err == nil
	})

	huge := strings.Repeat("word ", MaxQueryBytes/5+10)
	tests := []struct {
		name, subject, body, code string
	}{
		{"search bad json", subjects.CatalogSearch("local"), `{"query":`, subjects.CodeBadRequest},
		{"search not an object", subjects.CatalogSearch("local"), `[1,2]`, subjects.CodeBadRequest},
		{"search wrong type", subjects.CatalogSearch("local"), `{"query":42}`, subjects.CodeBadRequest},
		{"search empty query", subjects.CatalogSearch("local"), `{"query":"  "}`, subjects.CodeBadRequest},
		{"search huge query", subjects.CatalogSearch("local"), `{"query":"` + huge + `"}`, subjects.CodeTooLarge},
		{"search k negative", subjects.CatalogSearch("local"), `{"query":"logs","k":-1}`, subjects.CodeBadRequest},
		{"search k too big", subjects.CatalogSearch("local"), `{"query":"logs","k":101}`, subjects.CodeBadRequest},
		{"search bad detail", subjects.CatalogSearch("local"), `{"query":"logs","detail":"everything"}`, subjects.CodeBadRequest},
		{"search future version", subjects.CatalogSearch("local"), `{"v":2,"query":"logs"}`, subjects.CodeBadRequest},
		{"search query named up to case", subjects.CatalogSearch("local"), `{"query":"logs","Query":"select:secret__tool"}`, subjects.CodeBadRequest},
		{"search principal named twice", subjects.CatalogSearch("local"), `{"query":"logs","principal":{"user":"a"},"principal":{"user":"b"}}`, subjects.CodeBadRequest},
		{"search body too large", subjects.CatalogSearch("local"), `{"query":"logs","pad":"` + strings.Repeat("x", MaxRequestBytes) + `"}`, subjects.CodeTooLarge},
		{"search too many servers", subjects.CatalogSearch("local"), `{"query":"logs","servers":[` + strings.Repeat(`"a",`, MaxFilterValues) + `"a"]}`, subjects.CodeTooLarge},
		{"details bad json", subjects.CatalogDetails("local"), `nope`, subjects.CodeBadRequest},
		{"details no names", subjects.CatalogDetails("local"), `{"names":[]}`, subjects.CodeBadRequest},
		{"details too many names", subjects.CatalogDetails("local"), `{"names":[` + strings.Repeat(`"a__b",`, MaxDetailNames) + `"a__b"]}`, subjects.CodeTooLarge},
		{"details unknown", subjects.CatalogDetails("local"), `{"names":["kb__nothing"]}`, subjects.CodeNotFound},
		{"servers bad json", subjects.CatalogServers("local"), `{"principal":7}`, subjects.CodeBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := request(t, nc, tt.subject, []byte(tt.body))
			var rep struct {
				V     int             `json:"v"`
				Error *subjects.Error `json:"error"`
			}
			if err := json.Unmarshal(msg.Data, &rep); err != nil {
				t.Fatalf("reply is not JSON: %v: %s", err, msg.Data)
			}
			if rep.Error == nil || rep.Error.Code != tt.code || rep.Error.Message == "" {
				t.Fatalf("error %+v, want code %s", rep.Error, tt.code)
			}
			if got := msg.Header.Get("Nats-Service-Error-Code"); got != tt.code {
				t.Errorf("micro error header %q, want %q", got, tt.code)
			}
		})
	}
	// Still serving.
	var rep subjects.SearchReply
	if err := json.Unmarshal(request(t, nc, subjects.CatalogSearch("local"), []byte(`{"v":1,"query":"knowledge base"}`)).Data, &rep); err != nil || rep.Error != nil || len(rep.Tools) == 0 {
		t.Fatalf("after malformed requests: %v %+v", err, rep)
	}
	// Every request is counted by endpoint, the refusals as errors.
	wantErrs := map[string]uint64{}
	for _, tt := range tests {
		wantErrs[strings.SplitN(tt.name, " ", 2)[0]]++
	}
	eps := r.Stats().Endpoints
	if s := eps["search"]; s.Errors != wantErrs["search"] || s.Requests < wantErrs["search"]+1 || s.Seconds <= 0 {
		t.Errorf("search counted %+v, want %d errors among at least %d requests", s, wantErrs["search"], wantErrs["search"]+1)
	}
	if d := eps["details"]; d.Errors != wantErrs["details"] || d.Requests != wantErrs["details"] {
		t.Errorf("details counted %+v, want %d errors of %d", d, wantErrs["details"], wantErrs["details"])
	}
	if sv := eps["servers"]; sv.Errors != wantErrs["servers"] || sv.Requests < wantErrs["servers"]+1 {
		t.Errorf("servers counted %+v, want %d errors among more requests", sv, wantErrs["servers"])
	}
}

// TestServiceQueueGroup: replicas share the service in one queue group; Client works against it.
func TestServiceQueueGroup(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r1 := startReplica(t, env, filepath.Join(t.TempDir(), "1"), nil, env.Connect(t))
	r2 := startReplica(t, env, filepath.Join(t.TempDir(), "2"), nil, env.Connect(t))
	waitSeq(t, r1.Catalog, seq)
	waitSeq(t, r2.Catalog, seq)
	nc := env.Connect(t)

	// Both replicas answer the micro discovery ping.
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	replicas := map[string]bool{}
	for range 100 {
		if err := nc.PublishRequest("$SRV.PING."+subjects.CatalogService, inbox, nil); err != nil {
			t.Fatal(err)
		}
		for {
			msg, err := sub.NextMsg(50 * time.Millisecond)
			if err != nil {
				break
			}
			var ping struct {
				ID string `json:"id"`
			}
			json.Unmarshal(msg.Data, &ping)
			replicas[ping.ID] = true
		}
		if len(replicas) == 2 {
			break
		}
	}
	if len(replicas) != 2 {
		t.Fatalf("%d replicas answer the ping, want 2", len(replicas))
	}

	cl := Client{NC: nc}
	ctx := context.Background()
	for range 20 {
		rep, err := cl.Search(ctx, "local", subjects.SearchRequest{V: 1, Query: "knowledge base refund policy", K: 3})
		if err != nil || rep.Error != nil || len(rep.Tools) == 0 || rep.Tools[0].Name != "kb__search_knowledge_base" {
			t.Fatalf("search: %v %+v", err, rep)
		}
	}
	det, err := cl.Details(ctx, "local", subjects.DetailsRequest{V: 1, Names: []string{"kb__get_document"}})
	if err != nil || det.Error != nil || len(det.Tools) != 1 || det.Tools[0].InputSchema == nil {
		t.Fatalf("details: %v %+v", err, det)
	}
	srv, err := cl.Servers(ctx, "local", subjects.ServersRequest{V: 1})
	if err != nil || srv.Error != nil || len(srv.Servers) != 4 {
		t.Fatalf("servers: %v %+v", err, srv)
	}

	// With no replica left, the client says so.
	r1.stop(t)
	r2.stop(t)
	if _, err := cl.Search(ctx, "local", subjects.SearchRequest{V: 1, Query: "x"}); err != ErrNoCatalog {
		t.Errorf("no replica: err %v, want ErrNoCatalog", err)
	}
}

// TestGoldenReplies pins the JSON of summary and full search replies on the demo catalog.
func TestGoldenReplies(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	r := startReplica(t, env, "", nil, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	nc := env.Connect(t)
	waitFor(t, "service up", func() bool {
		_, err := nc.Request(subjects.CatalogServers("local"), []byte(`{}`), time.Second)
		return err == nil
	})
	for _, tt := range []struct{ file, body string }{
		{"search_summary.json", `{"v":1,"query":"select:ticketing__createIssue,kb__search_knowledge_base,logging__getLogs"}`},
		{"search_ranked.json", `{"v":1,"query":"create a ticket for the login error","k":1,"detail":"name"}`},
		{"search_full.json", `{"v":1,"query":"select:ticketing__closeIssue","detail":"full"}`},
		{"search_name.json", `{"v":1,"query":"logs","detail":"name"}`},
		{"details_removed.json", `{"v":1,"names":["kb__get_document","kb__nope"]}`},
	} {
		t.Run(tt.file, func(t *testing.T) {
			var buf bytes.Buffer
			if err := json.Indent(&buf, request(t, nc, subjectFor(tt.file), []byte(tt.body)).Data, "", "  "); err != nil {
				t.Fatal(err)
			}
			// Scores move whenever ranking is tuned; the golden file pins their presence only.
			got := scoreRe.ReplaceAll(buf.Bytes(), []byte(`"score": "<positive>"`))
			got = append(got, '\n')
			path := filepath.Join("testdata", tt.file)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs (run with -update after checking):\n%s", path, firstDiff(string(got), string(want)))
			}
		})
	}
}

var scoreRe = regexp.MustCompile(`"score": [0-9.eE+-]+`)

func subjectFor(file string) string {
	if strings.HasPrefix(file, "details") {
		return subjects.CatalogDetails("local")
	}
	return subjects.CatalogSearch("local")
}

// TestServiceTenantFromSubject: the tenant is the subject's token. A principal naming another
// tenant, or a configured user of another tenant, is refused, so NATS permissions on
// mcpstream.v1.catalog.<tenant>.> decide which tenant's catalog a client can see.
func TestServiceTenantFromSubject(t *testing.T) {
	env := natstest.Start(t)
	seq := publish(t, env.JS, demoEvents(t)...)
	pol := mustPolicy(t, &policy.Config{
		Principals: map[string]policy.PrincipalConfig{
			"alice": {Tenant: "acme", Roles: []string{"support"}},
			"zoe":   {Tenant: "beta", Roles: []string{"support"}},
		},
		Rules: []policy.Rule{{Name: "support", Roles: []string{"support"}, Allow: []string{"kb__*"}}},
	})
	r := startReplica(t, env, "", pol, env.Connect(t))
	waitSeq(t, r.Catalog, seq)
	nc := env.Connect(t)
	cl := Client{NC: nc}
	ctx := context.Background()
	waitFor(t, "service up", func() bool {
		_, err := cl.Servers(ctx, "acme", subjects.ServersRequest{V: 1, Principal: subjects.Principal{User: "alice"}})
		return err == nil
	})
	search := func(tenant string, pr subjects.Principal) subjects.SearchReply {
		t.Helper()
		rep, err := cl.Search(ctx, tenant, subjects.SearchRequest{V: 1, Query: "knowledge base", Principal: pr})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := search("acme", subjects.Principal{User: "alice"}); rep.Error != nil || len(rep.Tools) == 0 {
		t.Fatalf("alice on acme: %+v %+v, want results", rep.Error, rep.Tools)
	}
	if rep := search("acme", subjects.Principal{Tenant: "acme", User: "alice"}); rep.Error != nil || len(rep.Tools) == 0 {
		t.Fatalf("acme/alice on acme: %+v, want results", rep.Error)
	}
	for _, tc := range []struct {
		name, tenant string
		pr           subjects.Principal
		code         string
	}{
		{"zoe on acme's subject", "acme", subjects.Principal{User: "zoe"}, subjects.CodeUnknownPrincipal},
		{"zoe claiming acme on beta's subject", "beta", subjects.Principal{Tenant: "acme", User: "zoe"}, subjects.CodeBadRequest},
		{"alice on the local subject", "local", subjects.Principal{User: "alice"}, subjects.CodeUnknownPrincipal},
		{"a user name past the limit", "acme", subjects.Principal{User: strings.Repeat("a", subjects.MaxUserBytes+1)}, subjects.CodeBadRequest},
		{"a role past the limit", "acme", subjects.Principal{User: "alice", Roles: []string{strings.Repeat("r", subjects.MaxRoleBytes+1)}}, subjects.CodeBadRequest},
	} {
		rep := search(tc.tenant, tc.pr)
		if rep.Error == nil || rep.Error.Code != tc.code || len(rep.Tools) != 0 {
			t.Errorf("%s: got %+v, %d tools; want %s and none", tc.name, rep.Error, len(rep.Tools), tc.code)
		}
	}
	// The refusal does not say which tenant alice belongs to.
	if rep := search("local", subjects.Principal{User: "alice"}); rep.Error == nil || strings.Contains(rep.Error.Message, "acme") {
		t.Errorf("alice on local: %+v, want unknown_principal without her tenant", rep.Error)
	}
	// Nor that she is anyone's user: her refusal reads as that of a name nobody configures.
	for _, tenant := range []string{"local", "beta"} {
		alice, nobody := search(tenant, subjects.Principal{User: "alice"}).Error, search(tenant, subjects.Principal{User: "mallory"}).Error
		if alice == nil || nobody == nil || strings.ReplaceAll(alice.Message, `"alice"`, "U") != strings.ReplaceAll(nobody.Message, `"mallory"`, "U") {
			t.Errorf("on %s, alice (acme's) and mallory (nobody's) are told apart: %+v / %+v", tenant, alice, nobody)
		}
	}
	det, err := cl.Details(ctx, "beta", subjects.DetailsRequest{V: 1, Names: []string{"kb__search_knowledge_base"}, Principal: subjects.Principal{User: "alice"}})
	if err != nil || det.Error == nil || det.Error.Code != subjects.CodeUnknownPrincipal || len(det.Tools) != 0 {
		t.Errorf("details of alice on beta: %+v, %v; want unknown_principal", det.Error, err)
	}
	srv, err := cl.Servers(ctx, "beta", subjects.ServersRequest{V: 1, Principal: subjects.Principal{User: "alice"}})
	if err != nil || srv.Error == nil || srv.Error.Code != subjects.CodeUnknownPrincipal || len(srv.Servers) != 0 {
		t.Errorf("servers of alice on beta: %+v, %v; want unknown_principal", srv.Error, err)
	}
	// A tenant token that does not decode.
	msg := request(t, nc, "mcpstream.v1.catalog.~ZZ.search", []byte(`{"query":"kb"}`))
	if got := msg.Header.Get("Nats-Service-Error-Code"); got != subjects.CodeBadRequest {
		t.Errorf("bad tenant token: error code %q, want bad_request", got)
	}
}

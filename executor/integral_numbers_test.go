package executor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// A caller that writes its integers as floats (Python's json.dumps: "v": 1.0, "timeoutMs":
// 30000.0; JSON does not tell them from 1 and 30000) is served through NATS as one that writes
// integers: a call, and the approval of a call that needs one. A number with a fraction, or out
// of range, is refused bad_request naming the member, and nothing runs.
func TestIntegralNumbersThroughNATS(t *testing.T) {
	r := startRig(t, rigOptions{servers: []string{"fixture"}})
	exec := func(body string) subjects.CallResult {
		t.Helper()
		m, err := r.env.NC.Request(subjects.Exec("local"), []byte(body), waitLimit)
		if err != nil {
			t.Fatalf("request: %v", err)
		}
		var res subjects.CallResult
		if err := json.Unmarshal(m.Data, &res); err != nil {
			t.Fatalf("answer %q: %v", m.Data, err)
		}
		return res
	}
	res := exec(`{"v":1.0,"id":"float-1","tool":"fixture__echo","arguments":{"text":"hi"},"principal":{"user":"local"},"timeoutMs":3e4,"approvalTimeoutMs":-1.0}`)
	if res.Status != subjects.CallOK || res.ID != "float-1" || !strings.Contains(string(res.Result), `"echo":"hi"`) {
		t.Fatalf("got %s %+v %s, want ok", res.Status, res.Error, res.Result)
	}
	for _, tc := range []struct{ body, member, why string }{
		{`{"v":1.5,"id":"float-2","tool":"fixture__echo","arguments":{"text":"hi"}}`, "v", "not an integer"},
		{`{"v":1,"id":"float-3","tool":"fixture__echo","arguments":{"text":"hi"},"timeoutMs":2.5}`, "timeoutMs", "not an integer"},
		{`{"id":"float-4","tool":"fixture__echo","arguments":{"text":"hi"},"approvalTimeoutMs":1e400}`, "approvalTimeoutMs", "out of range"},
		{`{"id":"float-5","tool":"fixture__echo","arguments":{"text":"hi"},"timeoutMs":"5"}`, "timeoutMs", "string"},
	} {
		res := exec(tc.body)
		if res.Status != subjects.CallRefused || res.Error == nil || res.Error.Code != subjects.CodeBadRequest ||
			!strings.Contains(res.Error.Message, tc.member) || !strings.Contains(res.Error.Message, tc.why) {
			t.Errorf("%s: got %s %+v, want refused bad_request naming %s (%s)", tc.body, res.Status, res.Error, tc.member, tc.why)
		}
	}
	if res := exec(`{"v":2.0,"id":"float-6","tool":"fixture__echo","arguments":{"text":"hi"}}`); res.Error == nil ||
		res.Error.Code != subjects.CodeBadRequest || !strings.Contains(res.Error.Message, "v=2") {
		t.Errorf("v 2.0: got %s %+v, want the answer of v 2", res.Status, res.Error)
	}

	// A destructive call, approved by an approval whose "v" is 1.0.
	id := NewCallID()
	done := make(chan subjects.CallResult, 1)
	go func() {
		m, err := r.env.NC.Request(subjects.Exec("local"), []byte(`{"v":1.0,"id":"`+id+`","tool":"fixture__wipe","principal":{"user":"local"},"approvalTimeoutMs":6e4}`), waitLimit)
		var res subjects.CallResult
		if err == nil {
			err = json.Unmarshal(m.Data, &res)
		}
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	waitFor(t, "needs_approval audit event", func() bool {
		for _, ev := range r.auditEvents("local", id) {
			if ev.Decision == subjects.CodeNeedsApproval {
				return true
			}
		}
		return false
	})
	approve := func(body string) subjects.ApprovalReply {
		t.Helper()
		m, err := r.env.NC.Request(subjects.Approvals("local", id), []byte(body), waitLimit)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var rep subjects.ApprovalReply
		if err := json.Unmarshal(m.Data, &rep); err != nil {
			t.Fatalf("%s: answer %q: %v", body, m.Data, err)
		}
		return rep
	}
	if rep := approve(`{"v":1.25,"id":"` + id + `","approve":false}`); rep.OK || rep.Error == nil || rep.Error.Code != subjects.CodeBadRequest ||
		!strings.Contains(rep.Error.Message, `"v"`) {
		t.Fatalf("v 1.25: got %+v, want bad_request naming v", rep)
	}
	if rep := approve(`{"v":1.0,"id":"` + id + `","approve":true,"by":"ops"}`); !rep.OK || rep.Error != nil {
		t.Fatalf("v 1.0: got %+v, want ok", rep)
	}
	if res := <-done; res.Status != subjects.CallOK {
		t.Fatalf("got %s %+v, want ok", res.Status, res.Error)
	}
}

package subjects

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// memberPaths lists the JSON member paths of struct type t ("principal.user"), looking into
// struct members and the elements of arrays of structs (not into time.Time or raw JSON).
func memberPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() {
		return nil
	}
	var paths []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		paths = append(paths, prefix+name)
		if f.Type != reflect.TypeFor[json.RawMessage]() && f.Type != reflect.TypeFor[[]json.RawMessage]() {
			paths = append(paths, memberPaths(f.Type, prefix+name+".")...)
		}
	}
	return paths
}

// presentPaths adds the member paths of the JSON value v to seen.
func presentPaths(v any, prefix string, seen map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			seen[prefix+k] = true
			presentPaths(x, prefix+k+".", seen)
		}
	case []any:
		for _, x := range v {
			presentPaths(x, prefix, seen)
		}
	}
}

// TestGoldenCoversEveryMember: every member of every payload type is pinned by at least one
// golden file of that type, and every member of the types payloads share (principal, error, a
// catalog entry...) by at least one golden file, so that the wire form of each documented
// member is fixed and an integrator finds it in testdata/.
func TestGoldenCoversEveryMember(t *testing.T) {
	all := map[string]bool{} // nested paths of every golden file, from the shared member down
	nested := map[string]reflect.Type{}
	for _, tc := range []struct {
		v     any
		files []string
	}{
		{Snapshot{}, []string{"snapshot", "snapshot_private"}},
		{ListChanged{}, []string{"changed"}},
		{Confirmed{}, []string{"confirmed", "confirmed_after_changed"}},
		{Status{}, []string{"status", "status_ready"}},
		{Heartbeat{}, []string{"heartbeat"}},
		{Revocation{}, []string{"revoked", "revoked_restore"}},
		{CallRequest{}, []string{"call_request", "call_request_full"}},
		{CallResult{}, []string{"call_result_ok", "call_result_refused", "call_result_failed"}},
		{Approval{}, []string{"approval"}},
		{ApprovalReply{}, []string{"approval_reply", "approval_reply_ok"}},
		{AuditEvent{}, []string{"audit", "audit_request", "audit_dispatch", "audit_result"}},
		{RelistRequest{}, []string{"relist_request"}},
		{RelistReply{}, []string{"relist_reply", "relist_reply_error"}},
		{DispatchRequest{}, []string{"dispatch_request"}},
		{DispatchReply{}, []string{"dispatch_reply", "dispatch_reply_withheld", "dispatch_reply_ok", "dispatch_reply_not_sent"}},
		{SearchRequest{}, []string{"search_request", "search_request_filters"}},
		{SearchReply{}, []string{"search_reply", "error_reply", "error_reply_rebuilding"}},
		{DetailsRequest{}, []string{"details_request"}},
		{DetailsReply{}, []string{"details_reply", "details_reply_full", "details_reply_error"}},
		{ServersRequest{}, []string{"servers_request", "servers_request_page"}},
		{ServersReply{}, []string{"servers_reply", "servers_reply_page", "servers_reply_bad_limit", "servers_reply_unavailable"}},
	} {
		typ := reflect.TypeOf(tc.v)
		seen := map[string]bool{}
		for _, f := range tc.files {
			data, err := os.ReadFile(filepath.Join("testdata", f+".golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			presentPaths(v, "", seen)
		}
		var missing []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !seen[name] {
				missing = append(missing, name)
			}
			if sub := memberPaths(f.Type, ""); len(sub) > 0 {
				nested[name] = f.Type
				for p := range seen {
					if rest, ok := strings.CutPrefix(p, name+"."); ok {
						all[name+"."+rest] = true
					}
				}
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s: no golden file (%s) pins %q", typ.Name(), strings.Join(tc.files, ", "), missing)
		}
	}
	for name, ft := range nested {
		var missing []string
		for _, p := range memberPaths(ft, name+".") {
			if !all[p] {
				missing = append(missing, p)
			}
		}
		if len(missing) > 0 {
			slices.Sort(missing)
			t.Errorf("member %s: no golden file pins %q", name, missing)
		}
	}
}

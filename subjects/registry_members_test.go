package subjects

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestDecodeRegistryRefusesAmbiguousMembers: a registry event whose members a case-sensitive
// reader takes otherwise than encoding/json (a member named twice, or one that matches a field
// only up to case) is malformed, as in requests (Decode): with {"server":"victim","Server":"kb"}
// on kb's subject, mcpstream's consumers read kb while its "server" member (what README's
// consumers of the stream read) is another server's; {"v":2,"V":1} would pass as version 1.
func TestDecodeRegistryRefusesAmbiguousMembers(t *testing.T) {
	for _, tc := range []struct{ subject, data string }{
		{RegistryStatus("kb"), `{"v":1,"type":"status","server":"victim","Server":"kb","status":"ready"}`},
		{RegistryStatus("kb"), `{"v":1,"type":"status","server":"victim","server":"kb","status":"ready"}`},
		{RegistryStatus("kb"), `{"v":2,"V":1,"type":"status","server":"kb","status":"ready"}`},
		{RegistryStatus("kb"), `{"v":1,"type":"revoked","Type":"status","server":"kb","status":"ready"}`},
		{RegistryRevoked("kb"), `{"v":1,"type":"revoked","server":"kb","tools":["a"],"Tools":["b"]}`},
		{RegistrySnapshot("kb", KindTools), `{"v":1,"type":"snapshot","server":"kb","kind":"prompts","KIND":"tools","items":[]}`},
		{RegistrySnapshot("kb", KindTools), `{"v":1,"type":"snapshot","server":"kb","kind":"tools","items":[],"serverInfo":{"name":"a","Name":"b"}}`},
		{RegistryConfirmed("kb", KindTools), `{"v":1,"type":"confirmed","server":"kb","kind":"tools","fingerprint":"a","fingerprint":"b","listedAt":"2026-11-30T12:00:00Z"}`},
	} {
		if ev, err := DecodeRegistryMsg(tc.subject, []byte(tc.data)); !errors.Is(err, ErrBadPayload) {
			t.Errorf("DecodeRegistryMsg(%s, %s) = %+v, %v; want ErrBadPayload", tc.subject, tc.data, ev, err)
		}
	}
	// Unknown members still pass (a newer publisher's additive fields), as do the names of an
	// item's own members.
	for _, tc := range []struct{ subject, data string }{
		{RegistryStatus("kb"), `{"v":1,"type":"status","server":"kb","status":"ready","future":1,"future":2}`},
		{RegistrySnapshot("kb", KindTools), `{"v":1,"type":"snapshot","server":"kb","kind":"tools","items":[{"name":"a","Name":"b","name":"c"}]}`},
	} {
		if _, err := DecodeRegistryMsg(tc.subject, []byte(tc.data)); err != nil {
			t.Errorf("DecodeRegistryMsg(%s, %s): %v; want it decoded", tc.subject, tc.data, err)
		}
	}
}

// TestDecodeRegistryMsgCaseSensitiveReaderProperty: for random events built of the head members
// in any case, named any number of times, an event DecodeRegistryMsg accepts is, to a
// case-sensitive reader, of version 1 and of the subject's type, server and kind.
func TestDecodeRegistryMsgCaseSensitiveReaderProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	members := []string{`"v":1`, `"V":1`, `"v":2`, `"V":2`, `"type":"snapshot"`, `"Type":"snapshot"`, `"type":"status"`, `"TYPE":"status"`,
		`"server":"kb"`, `"Server":"kb"`, `"server":"other"`, `"SERVER":"other"`, `"kind":"tools"`, `"Kind":"tools"`, `"kind":"prompts"`,
		`"status":"ready"`, `"items":[]`, `"Items":[]`, `"x":1`}
	subjects := []string{RegistryStatus("kb"), RegistrySnapshot("kb", KindTools)}
	accepted := 0
	for range 20_000 {
		// A valid event of the subject, with up to three members of the list added, shuffled.
		subject := subjects[r.IntN(len(subjects))]
		picked := []string{`"v":1`, `"server":"kb"`, `"type":"status"`, `"status":"ready"`}
		if subject != subjects[0] {
			picked = []string{`"v":1`, `"server":"kb"`, `"type":"snapshot"`, `"kind":"tools"`, `"items":[]`}
		}
		for range r.IntN(4) {
			picked = append(picked, members[r.IntN(len(members))])
		}
		r.Shuffle(len(picked), func(i, j int) { picked[i], picked[j] = picked[j], picked[i] })
		data := []byte("{" + strings.Join(picked, ",") + "}")
		if _, err := DecodeRegistryMsg(subject, data); err != nil {
			continue
		}
		accepted++
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("%s accepted: %v", data, err)
		}
		rs, _ := ParseRegistry(subject)
		if m["v"] != 1.0 || m["type"] != rs.Event || m["server"] != rs.Server || rs.Kind != "" && m["kind"] != string(rs.Kind) {
			t.Fatalf("DecodeRegistryMsg(%s, %s) accepted; a case-sensitive reader reads %v", subject, data, m)
		}
	}
	if accepted == 0 {
		t.Fatal("no event accepted: the property was never checked")
	}
}

package subjects

import (
	"bytes"
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// JSON does not tell 1 from 1.0 (Python's json.dumps writes a float so, and JavaScript has no
// other numbers): an integer-valued number is accepted wherever a request takes an integer, in
// every spelling (1.0, 1e0, 5.00, 5E0, 50e-1), and decodes as that integer. A number with a
// fraction, one out of the field's range and a non-number stay refused, naming the member.
func TestDecodeIntegralNumbers(t *testing.T) {
	type fields struct {
		name   string
		decode func([]byte) (map[string]int64, error)
		base   string            // a valid request without the integer fields
		ints   map[string]string // member → a valid integer value of it (its text)
	}
	dec := func(v any, get func() map[string]int64) func([]byte) (map[string]int64, error) {
		return func(data []byte) (map[string]int64, error) {
			err := Decode(data, v)
			return get(), err
		}
	}
	var call CallRequest
	var search SearchRequest
	var details DetailsRequest
	var servers ServersRequest
	var appr Approval
	var relist RelistRequest
	var dispatch DispatchRequest
	types := []fields{
		{"CallRequest", dec(&call, func() map[string]int64 {
			return map[string]int64{"v": int64(call.V), "timeoutMs": call.TimeoutMs, "approvalTimeoutMs": call.ApprovalTimeoutMs}
		}), `"id":"c-1","tool":"s__t","principal":{"user":"u"}`, map[string]string{"v": "1", "timeoutMs": "30000", "approvalTimeoutMs": "-1"}},
		{"SearchRequest", dec(&search, func() map[string]int64 { return map[string]int64{"v": int64(search.V), "k": int64(search.K)} }),
			`"query":"q"`, map[string]string{"v": "1", "k": "5"}},
		{"DetailsRequest", dec(&details, func() map[string]int64 { return map[string]int64{"v": int64(details.V)} }),
			`"names":["s__t"]`, map[string]string{"v": "1"}},
		{"ServersRequest", dec(&servers, func() map[string]int64 { return map[string]int64{"v": int64(servers.V), "limit": int64(servers.Limit)} }),
			`"after":"a"`, map[string]string{"v": "1", "limit": "100"}},
		{"Approval", dec(&appr, func() map[string]int64 { return map[string]int64{"v": int64(appr.V)} }),
			`"id":"c-1","approve":true`, map[string]string{"v": "1"}},
		{"RelistRequest", dec(&relist, func() map[string]int64 { return map[string]int64{"v": int64(relist.V)} }),
			`"kind":"tools"`, map[string]string{"v": "1"}},
		{"DispatchRequest", dec(&dispatch, func() map[string]int64 {
			return map[string]int64{"v": int64(dispatch.V), "timeoutMs": dispatch.TimeoutMs}
		}),
			`"callId":"c-1","tool":"t"`, map[string]string{"v": "1", "timeoutMs": "2500"}},
	}
	// spellings of the integer n (its decimal text) that are the same number
	spellings := func(n string) []string {
		sign, digits := "", n
		if strings.HasPrefix(n, "-") {
			sign, digits = "-", n[1:]
		}
		return []string{
			n + ".0", n + ".000", n + "e0", n + "E0", n + "E+0", n + "e-0", sign + digits + "0e-1",
			sign + digits + "00E-2", sign + "0." + digits + "e" + strconv.Itoa(len(digits)), n + ".0e0", " " + n + ".0 ",
		}
	}
	for _, ty := range types {
		for member, n := range ty.ints {
			want, _ := ty.decode([]byte(`{` + ty.base + `,"` + member + `":` + n + `}`))
			if _, err := ty.decode([]byte(`{` + ty.base + `,"` + member + `":` + n + `}`)); err != nil {
				t.Fatalf("%s: the plain %s %s refused: %v", ty.name, member, n, err)
			}
			for _, s := range spellings(n) {
				got, err := ty.decode([]byte(`{` + ty.base + `,"` + member + `":` + s + `}`))
				if err != nil {
					t.Errorf("%s: %s %s refused: %v", ty.name, member, s, err)
					continue
				}
				if got[member] != want[member] {
					t.Errorf("%s: %s %s decoded as %d, want %d", ty.name, member, s, got[member], want[member])
				}
			}
			for _, bad := range []struct{ value, msg string }{
				{"1.5", "not an integer"},
				{"0.1e1000", "out of range"}, // 10^999: an integer, beyond int64
				{"-2.5e-1", "not an integer"},
				{"1.0000000000000000001", "not an integer"}, // float64 would round it to 1
				{"1e-400", "not an integer"},
				{"1e400", "out of range"},
				{"9223372036854775808", "out of range"},
				{"9.223372036854775808e18", "out of range"},
				{"-9223372036854775809.0", "out of range"},
				{"1e99999999999999999999", "out of range"},
				{`"1"`, "string"},
				{"true", "bool"},
				{"[1]", "array"},
			} {
				_, err := ty.decode([]byte(`{` + ty.base + `,"` + member + `":` + bad.value + `}`))
				if err == nil {
					t.Errorf("%s: %s %s accepted", ty.name, member, bad.value)
					continue
				}
				if !strings.Contains(err.Error(), bad.msg) || !strings.Contains(err.Error(), member) {
					t.Errorf("%s: %s %s refused with %q, want it to name %q and say %q", ty.name, member, bad.value, err, member, bad.msg)
				}
			}
		}
	}

	// Every integer field at once, with the other checks of Decode still made on what it reads.
	var req CallRequest
	data := []byte(`{"v":1.0,"id":"c-1","tool":"s__t","timeoutMs":3e4,"approvalTimeoutMs":-1.0,"arguments":{"n":2.50,"m":1.0},"principal":{"user":"u"}}`)
	if err := Decode(data, &req); err != nil || req.V != 1 || req.TimeoutMs != 30000 || req.ApprovalTimeoutMs != -1 ||
		string(req.Arguments) != `{"n":2.50,"m":1.0}` || req.Principal.User != "u" {
		t.Fatalf("got %+v %v", req, err)
	}
	for _, tc := range []struct{ data, want string }{
		{`{"v":1.0,"v":1.0,"id":"a","tool":"s__t"}`, `member "v" appears twice`},
		{`{"V":1.0,"id":"a","tool":"s__t"}`, `member "V" is not a field`},
		{`{"v":1.0,"id":"a","tool":"s__t","principal":{"user":"a","USER":"b"}}`, `did you mean "principal.user"?`},
	} {
		var req CallRequest
		if err := Decode([]byte(tc.data), &req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.data, err, tc.want)
		}
	}
	// Decode fills v as json.Unmarshal does: members absent from the request leave v's fields as
	// they were, also when it reads the request a second time.
	pre := SearchRequest{Detail: "full", Query: "before"}
	if err := Decode([]byte(`{"v":1.0,"query":"after","k":2.0}`), &pre); err != nil || pre.Detail != "full" || pre.Query != "after" || pre.K != 2 {
		t.Fatalf("got %+v %v", pre, err)
	}
	// The bytes given are never changed.
	orig := []byte(`{"v":1.0,"query":"q","k":5.0}`)
	cp := bytes.Clone(orig)
	if err := Decode(orig, new(SearchRequest)); err != nil || !bytes.Equal(orig, cp) {
		t.Fatalf("decode changed its input to %s (%v)", orig, err)
	}
}

// Registry events an operator publishes (a revocation with nats pub, a script) take an
// integer-valued number as well; so does every integer field of the other events.
func TestDecodeRegistryIntegralNumbers(t *testing.T) {
	for _, tc := range []struct{ data, check string }{
		{`{"v":1.0,"type":"revoked","server":"ticketing","tools":["closeIssue"],"at":"2026-11-30T12:00:00Z"}`, "revoked"},
		{`{"v":1e0,"type":"status","server":"s","status":"unavailable","attempt":2.0,"retryInMs":5E2,"heartbeatMs":5000.0,"at":"2026-11-30T12:00:00Z"}`, "status"},
		{`{"v":1,"type":"snapshot","server":"s","kind":"tools","fingerprint":"f","listedAt":"2026-11-30T12:00:00Z","pages":1.0,"ttlMs":6e4,"items":[]}`, "snapshot"},
		{`{"v":1,"type":"confirmed","server":"s","kind":"tools","fingerprint":"f","listedAt":"2026-11-30T12:00:00Z","afterSeq":41.0}`, "confirmed"},
	} {
		ev, err := DecodeRegistry([]byte(tc.data))
		if err != nil {
			t.Errorf("%s: %v", tc.data, err)
			continue
		}
		switch tc.check {
		case "revoked":
			if ev.Revocation == nil || ev.Revocation.V != 1 || len(ev.Revocation.Tools) != 1 {
				t.Errorf("got %+v", ev.Revocation)
			}
		case "status":
			if s := ev.Status; s == nil || s.Attempt != 2 || s.RetryInMs != 500 || s.HeartbeatMs != 5000 {
				t.Errorf("got %+v", s)
			}
		case "snapshot":
			if s := ev.Snapshot; s == nil || s.Pages != 1 || s.TTLMs == nil || *s.TTLMs != 60000 {
				t.Errorf("got %+v", s)
			}
		case "confirmed":
			if c := ev.Confirmed; c == nil || c.AfterSeq != 41 {
				t.Errorf("got %+v", c)
			}
		}
	}
	for _, data := range []string{
		`{"v":1.5,"type":"revoked","server":"s","at":"2026-11-30T12:00:00Z"}`,
		`{"v":2.0,"type":"revoked","server":"s","at":"2026-11-30T12:00:00Z"}`,
		`{"v":1,"type":"confirmed","server":"s","kind":"tools","fingerprint":"f","listedAt":"2026-11-30T12:00:00Z","afterSeq":-1.0}`,
		`{"v":1,"type":"status","server":"s","status":"ready","attempt":0.5,"at":"2026-11-30T12:00:00Z"}`,
	} {
		if _, err := DecodeRegistry([]byte(data)); err == nil {
			t.Errorf("%s accepted", data)
		}
	}
}

// integerText against math/big on many numbers of JSON's grammar: the same integers, the same
// refusals.
func TestIntegerTextMatchesBig(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	digits := func(n int, lead bool) string {
		var b strings.Builder
		for i := range n {
			d := r.IntN(10)
			if i == 0 && lead && d == 0 {
				d = 1
			}
			b.WriteByte(byte('0' + d))
		}
		return b.String()
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[int](), reflect.TypeFor[int32](), reflect.TypeFor[uint64](), reflect.TypeFor[uint8]()} {
		lo, hi := integerRange(typ)
		blo, _ := new(big.Int).SetString(lo, 10)
		bhi, _ := new(big.Int).SetString(hi, 10)
		for range 20000 {
			s := ""
			if r.IntN(3) == 0 {
				s = "-"
			}
			if r.IntN(4) == 0 {
				s += "0"
			} else {
				s += digits(1+r.IntN(22), true)
			}
			if r.IntN(2) == 0 {
				s += "." + digits(1+r.IntN(22), false)
				if r.IntN(2) == 0 {
					s = strings.TrimRight(s, "123456789") + "0"
				}
			}
			if r.IntN(2) == 0 {
				s += []string{"e", "E", "e+", "e-", "E-"}[r.IntN(5)] + digits(1+r.IntN(2), false)
			}
			var want string
			rat, ok := new(big.Rat).SetString(s)
			switch {
			case !ok:
				t.Fatalf("%s: not a number to math/big", s)
			case !rat.IsInt():
				want = "not an integer"
			case rat.Num().Cmp(blo) < 0 || rat.Num().Cmp(bhi) > 0:
				want = "out of range"
			default:
				want = rat.Num().String()
			}
			text, why := integerText(s, typ)
			got := text
			if why != "" {
				got, _, _ = strings.Cut(why, ":")
			}
			if got != want {
				t.Fatalf("%s as %s: got %q (%q), want %q", s, typ, text, why, want)
			}
		}
	}
}

// Decode runs for every call (the executor's worker, the catalog's requests): a request whose
// integers are written as integers costs no allocation more than json.Unmarshal and the member
// checks, as before integral numbers were accepted (a copy of the struct per decode, to restore
// it should a second decoding follow, cost two allocations and 168 bytes per call).
func TestDecodeCommonRequestAllocatesNoMore(t *testing.T) {
	data := []byte(`{"v":1,"id":"call-1","tool":"demo__echo","arguments":{"text":"hi"},` +
		`"principal":{"tenant":"acme","user":"alice","roles":["dev"]},"timeoutMs":30000}`)
	plain := testing.AllocsPerRun(200, func() {
		var req CallRequest
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatal(err)
		}
		if err := checkMembers(data, reflect.TypeFor[CallRequest](), ""); err != nil {
			t.Fatal(err)
		}
	})
	decoded := testing.AllocsPerRun(200, func() {
		var req CallRequest
		if err := Decode(data, &req); err != nil {
			t.Fatal(err)
		}
	})
	if decoded > plain {
		t.Fatalf("Decode of a CallRequest allocates %.0f times, json.Unmarshal and checkMembers %.0f", decoded, plain)
	}
	// A struct decoded into that is not zero is still restored before the second decoding.
	req := CallRequest{Tool: "kept", TimeoutMs: 7}
	if err := Decode([]byte(`{"v":1.0,"id":"x"}`), &req); err != nil || req.V != 1 || req.Tool != "kept" || req.TimeoutMs != 7 {
		t.Fatalf("Decode into a set struct = %+v, %v", req, err)
	}
	req = CallRequest{}
	if err := Decode([]byte(`{"tool":"t","timeoutMs":5.0}`), &req); err != nil || req.TimeoutMs != 5 || req.Tool != "t" {
		t.Fatalf("Decode = %+v, %v", req, err)
	}
}

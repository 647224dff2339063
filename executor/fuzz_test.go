package executor

import (
	"encoding/json"
	"testing"

	"github.com/mcpstream/mcpstream/subjects"
)

// FuzzDecodeCall: any call request body decodes to a request or a bad_request, never a panic; an
// accepted request has an id and a tool within their bounds.
func FuzzDecodeCall(f *testing.F) {
	f.Add(`{"v":1,"id":"c1","tool":"kb__get_document","arguments":{"id":"POL-TRAVEL"},"principal":{"tenant":"acme","user":"alice","roles":["support"]}}`)
	f.Add(`{"id":"","tool":"x"}`)
	f.Add(`{"v":2,"id":"a","tool":"b","timeoutMs":-1}`)
	f.Add(`{"id":"a","tool":"b","approvalTimeoutMs":-2,"requestedAt":"not a time"}`)
	f.Add(`[]`)
	f.Add(`{"id":1}`)
	f.Fuzz(func(t *testing.T, data string) {
		req, bad := decodeCall([]byte(data))
		if bad != nil {
			if bad.Code != subjects.CodeBadRequest || bad.Message == "" {
				t.Fatalf("got %+v, want bad_request with a message", bad)
			}
			return
		}
		if req.ID == "" || len(req.ID) > maxCallID || req.Tool == "" || len(req.Tool) > maxToolName {
			t.Fatalf("accepted a request out of bounds: id %q tool %q", req.ID, req.Tool)
		}
		if req.Arguments != nil && !json.Valid(req.Arguments) {
			t.Fatalf("accepted invalid arguments %q", req.Arguments)
		}
	})
}

// FuzzValidateArguments: any inputSchema a server lists, with any arguments, gives nil,
// invalid_schema or invalid_arguments, never a panic.
func FuzzValidateArguments(f *testing.F) {
	f.Add(`{"type":"object","properties":{"id":{"type":"string","minLength":1}},"required":["id"]}`, `{"id":"x"}`)
	f.Add(`{"$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`, `{"next":{"next":{"next":1}}}`)
	f.Add(`{"oneOf":[{"required":["a"]},{"required":["b"]}],"anyOf":[{"type":"object"}]}`, `{"a":1,"b":2}`)
	f.Add(`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"n":{"type":"number","multipleOf":1e-300,"maximum":1e300}}}`, `{"n":1e299}`)
	f.Add(`{"properties":{"s":{"type":"string","pattern":"^(a+)+$","format":"email"}}}`, `{"s":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}`)
	f.Add(`{"$ref":"http://example.com/schema"}`, `{}`)
	f.Add(`true`, `[]`)
	f.Add(`{"properties":{"n":{"$ref":"#/definitions/n"}},"definitions":{"n":{"multipleOf":0}}}`, `{"n":1}`)
	f.Add(`{"type":"object"}`, `{"a":`)
	f.Fuzz(func(t *testing.T, schema, args string) {
		tl := &tool{Public: "s__t", InputSchema: json.RawMessage(schema)}
		got := validateArguments(tl, []byte(args))
		if got != nil && got.Code != subjects.CodeInvalidArguments && got.Code != subjects.CodeInvalidSchema {
			t.Fatalf("got code %q", got.Code)
		}
	})
}

// Package jsonscan finds the members of a JSON object in one pass over its bytes, without
// decoding or copying their values.
//
// It exists for checks that must see a document as every reader of it does — duplicate member
// names, names that encoding/json matches to a field only up to case while a case-sensitive
// reader (JavaScript, Python; MCP's JSON is case-sensitive) does not — and for finding one
// member of a large object (an MCP result's structuredContent) without copying the rest. The
// text given has already been checked to be JSON (json.Valid, or a successful json.Unmarshal):
// the scanner only guards itself against text that is not, reporting false.
package jsonscan

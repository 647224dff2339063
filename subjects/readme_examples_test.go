package subjects

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// TestReadmePayloadExamples: the payload examples of README's NATS API section decode as the
// consumers decode them: registry events with DecodeRegistry, a CallRequest with Decode, a
// CallResult strictly (no member the type does not have).
func TestReadmePayloadExamples(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "Payload examples")
	_, block, ok2 := strings.Cut(sec, "```json\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md has no json block under Payload examples")
	}
	dec := json.NewDecoder(strings.NewReader(block))
	n := 0
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("example %d: %v", n+1, err)
		}
		n++
		var head struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		}
		_ = json.Unmarshal(raw, &head)
		switch {
		case head.Type != "":
			if _, err := DecodeRegistry(raw); err != nil {
				t.Errorf("registry example %s: %v", raw, err)
			}
		case head.Status != "":
			var r CallResult
			d := json.NewDecoder(bytes.NewReader(raw))
			d.DisallowUnknownFields()
			if err := d.Decode(&r); err != nil || r.V != Version {
				t.Errorf("CallResult example %s: %v (v %d)", raw, err, r.V)
			}
		default:
			var r CallRequest
			if err := Decode(raw, &r); err != nil || r.V != Version || r.ID == "" || r.Tool == "" {
				t.Errorf("CallRequest example %s: %v", raw, err)
			}
		}
	}
	if n < 8 {
		t.Errorf("%d payload examples decoded, fewer than README shows", n)
	}
}

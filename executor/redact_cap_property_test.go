package executor

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRedactCapProperty: random JSON documents and text around the audit cap (and far over
// it: past the 2×, 4× and 8× cap the redactor reads), holding secrets as is, JSON-escaped,
// percent-escaped and as JSON text percent-escaped, adjacent and repeated, padded with white space and other secrets (which
// shrink once redacted), in keys and values: the payload is always valid UTF-8 JSON, and no
// part of a secret (its distinctive head) is left in it, decoded or not.
func TestRedactCapProperty(t *testing.T) {
	seeds := 1000
	if n, err := strconv.Atoi(os.Getenv("REDACT_PROP_SEEDS")); err == nil {
		seeds = n
	}
	fails := 0
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 91))
		var secrets []string
		for range 1 + rng.IntN(3) {
			n := 8 + rng.IntN(3)*rng.IntN(60)
			var b strings.Builder
			b.WriteString("Zq9~")
			for b.Len() < n {
				b.WriteByte("abcdefXYZ0123456789\"\\<>/ %ä"[rng.IntN(28)])
			}
			s := b.String()
			if !utf8.ValidString(s) {
				s = strings.ToValidUTF8(s, "x")
			}
			secrets = append(secrets, s)
		}
		r := newRedactor(secrets)
		capBytes := 40 + rng.IntN(1500)
		spell := func() string {
			s := secrets[rng.IntN(len(secrets))]
			if rng.IntN(4) == 0 {
				// JSON text percent-escaped (a query parameter holding JSON): "Z%5Cu00719~..."
				b, _ := json.Marshal(s)
				j := `Z\u0071` + string(b[2:len(b)-1])
				return strings.NewReplacer("%", "%25", `\`, "%5C", " ", "%20").Replace(j)
			}
			if rng.IntN(2) == 0 {
				s = strings.NewReplacer("%", "%25", " ", "%20").Replace(s)
			}
			b, _ := json.Marshal(s)
			return string(b[1 : len(b)-1])
		}
		content := func(n int) string {
			var b strings.Builder
			for b.Len() < n {
				switch rng.IntN(4) {
				case 0:
					b.WriteString(spell())
				case 1:
					b.WriteString(spell() + " ")
				default:
					b.WriteString([]string{"word ", "x", "ä", " "}[rng.IntN(4)])
				}
			}
			return b.String()
		}
		var raw string
		size := []int{capBytes / 2, capBytes, 2 * capBytes, 4 * capBytes, 8 * capBytes, 12 * capBytes}[rng.IntN(6)]
		switch rng.IntN(4) {
		case 0: // text
			raw = "log: " + content(size)
		case 1: // one long string
			raw = `{"content":[{"type":"text","text":"` + content(size) + `"}]}`
		case 2: // white space, then a string
			raw = `{"a":` + strings.Repeat(" ", rng.IntN(size+1)) + `"` + content(size) + `","b":1}`
		default: // many members, keys too
			var b strings.Builder
			b.WriteString("{")
			for i := 0; b.Len() < size; i++ {
				if i > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, `"%s%d":["%s"]`, content(rng.IntN(20)), i, content(rng.IntN(80)))
			}
			b.WriteString("}")
			raw = b.String()
			if rng.IntN(3) == 0 {
				raw = raw[:rng.IntN(len(raw))] // cut short
			}
		}
		out, _ := r.JSON([]byte(raw), capBytes)
		if len(out) == 0 {
			continue
		}
		var doc any
		if err := json.Unmarshal(out, &doc); err != nil || !utf8.Valid(out) {
			fails++
			t.Errorf("seed %d: payload not JSON: %v: %.200s", seed, err, out)
			continue
		}
		texts := []string{string(out)}
		if s, ok := doc.(string); ok {
			texts = append(texts, s)
		}
		for _, s := range texts {
			i := strings.Index(s, "Zq9~")
			if i < 0 {
				i = strings.Index(s, "Z%5Cu00719")
			}
			if i >= 0 {
				fails++
				if fails < 10 {
					t.Errorf("seed %d (cap %d, %d bytes): part of a secret left: ...%q", seed, capBytes, len(raw), s[max(0, i-40):min(len(s), i+40)])
				}
				break
			}
		}
	}
	t.Logf("%d seeds, %d failures", seeds, fails)
}

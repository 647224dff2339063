package executor

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The one-pass decoders against the decoders they stand for, on many structured documents
// (the fuzz targets only run their seeds outside -fuzz): nested objects and arrays with names
// spelled with escapes, lone and paired surrogates, invalid UTF-8, numbers at the edges of
// JSON's grammar, white space JSON does not allow, and now and then text that is not JSON.

func TestDecodeInstanceMatchesGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 40000 {
		var b strings.Builder
		genInstance(r, &b, 0)
		if r.IntN(50) == 0 {
			b.WriteString([]string{"x", "{}", " ", "\x00", ","}[r.IntN(5)])
		}
		checkDecodeInstance(t, b.String())
	}
}

func genInstance(r *rand.Rand, b *strings.Builder, depth int) {
	space := func() {
		for range r.IntN(2) {
			b.WriteString([]string{" ", "\t", "\n", "\r", "\f", "\v", "\u00a0"}[r.IntN(7)])
		}
	}
	space()
	k := r.IntN(10)
	if depth > 6 {
		k = 3 + r.IntN(7)
	}
	switch k {
	case 0, 1:
		b.WriteByte('{')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			genString(r, b)
			space()
			b.WriteByte(':')
			genInstance(r, b, depth+1)
		}
		if r.IntN(30) == 0 {
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case 2:
		b.WriteByte('[')
		for i := range r.IntN(4) {
			if i > 0 {
				b.WriteByte(',')
			}
			genInstance(r, b, depth+1)
		}
		b.WriteByte(']')
	case 3, 4, 5:
		genString(r, b)
	case 6, 7:
		b.WriteString([]string{"0", "-0", "-0.0", "1e400", "-1E-400", "123456789012345678901234567890", "0.1", "1.",
			"01", "-", "1e+1", "2E-0", "00", "-01", "1.e1", "9007199254740993"}[r.IntN(16)])
	default:
		b.WriteString([]string{"true", "false", "null", "tru", "nulll", "True", "NaN"}[r.IntN(7)])
	}
	space()
}

func genString(r *rand.Rand, b *strings.Builder) {
	parts := []string{"a", "id", `\"`, `\\`, `\/`, `\b`, `\u0000`, `\u00e9`, `\ud800`, `\udc00`, `\ud83d\ude00`,
		`\ud83d`, `\uD83D\uDE00`, `\u`, `\x`, "\xff", "\xed\xa0\x80", "\xc3\xa9", "\u2028", "\x01", "\x7f", `\U0041`,
		"\xf4\x90\x80\x80", "\xc0\x80", `\'`}
	b.WriteByte('"')
	for range r.IntN(4) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	if r.IntN(40) != 0 {
		b.WriteByte('"')
	}
}

func TestDecodeResultMatchesGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	names := []string{`"v"`, `"id"`, `"tenant"`, `"tool"`, `"status"`, `"attempts"`, `"duplicate"`, `"startedAt"`,
		`"finishedAt"`, `"result"`, `"error"`, `"ID"`, `"\u0069d"`, `"Result"`, `"x"`, `"id\u0000"`, `"ſtatus"`}
	values := []string{`1`, `-0`, `1.0`, `1e1`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775808`,
		`"a"`, `"\u0041"`, "\"\xff\"", `""`, `null`, `true`, `false`, `{}`, `{"a" : [1, "}"] }`, `[]`,
		`"2026-12-01T08:00:00Z"`, `"2026-12-01T08:00:00.123456789+01:00"`, `"2026-12-01T08:00:00+24:00"`,
		`"0000-01-01T00:00:00Z"`, `"2026-12-01t08:00:00z"`, `"2026-12-01T08:00:00.Z"`, `"2026-02-30T00:00:00Z"`,
		`{"code":"x","message":"y"}`, `{"code":1}`, `"ok"`, "\"a\u2028\""}
	for range 40000 {
		var b strings.Builder
		b.WriteString([]string{"{", " {", "{\n"}[r.IntN(3)])
		for i := range r.IntN(6) {
			if i > 0 {
				b.WriteString([]string{",", " ,", ", "}[r.IntN(3)])
			}
			b.WriteString(names[r.IntN(len(names))])
			b.WriteString([]string{":", " : "}[r.IntN(2)])
			b.WriteString(values[r.IntN(len(values))])
		}
		b.WriteString([]string{"}", "} ", "}x", "", ",}"}[min(r.IntN(40), 4)])
		checkDecodeResult(t, []byte(b.String()))
	}
}

package redact

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchSecrets are n secrets of the kinds a configuration holds: tokens, hex keys, passwords.
func benchSecrets(n int) []string {
	rng := rand.New(rand.NewPCG(7, 9))
	out := make([]string, n)
	for i := range out {
		b := make([]byte, 20)
		for j := range b {
			b[j] = byte(rng.IntN(256))
		}
		switch i % 3 {
		case 0:
			out[i] = "sk-" + base64.RawURLEncoding.EncodeToString(b)
		case 1:
			out[i] = fmt.Sprintf("%x", b)
		default:
			out[i] = fmt.Sprintf("pw/%d&x", rng.IntN(1e9))
		}
	}
	return out
}

// benchDocs are tool results that hold no secret: a 2 KB prose result, a 256 KB result with
// an image (a base64 blob), a 256 KB result of URLs with percent escapes.
func benchDocs() map[string][]byte {
	prose, _ := json.Marshal(strings.Repeat("Travel policy: economy class for flights under 6 hours, per diem as listed; hotels up to the city cap. ", 20))
	rng := rand.New(rand.NewPCG(1, 2))
	img := make([]byte, 192<<10)
	for i := range img {
		img[i] = byte(rng.IntN(256))
	}
	urls, _ := json.Marshal(strings.Repeat("see https://example.com/search?q=caf%C3%A9%20au%20lait&page=2 ", 256<<10/64))
	return map[string][]byte{
		"prose2K":   []byte(`{"content":[{"type":"text","text":` + string(prose) + `}],"isError":false}`),
		"image256K": []byte(`{"content":[{"type":"image","mimeType":"image/png","data":"` + base64.StdEncoding.EncodeToString(img) + `"}]}`),
		"urls256K":  []byte(`{"content":[{"type":"text","text":` + string(urls) + `}]}`),
	}
}

// BenchmarkJSON: the redaction of a clean tool result (the common case) with 1 and 30 secrets.
func BenchmarkJSON(b *testing.B) {
	for _, n := range []int{1, 30} {
		v := New(benchSecrets(n)...)
		for name, raw := range benchDocs() {
			b.Run(fmt.Sprintf("%s/secrets=%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				for b.Loop() {
					if _, changed := v.JSON(raw); changed {
						b.Fatal("changed")
					}
				}
			})
		}
	}
}

// BenchmarkString: String of a decoded 2 KB text without a secret (what Walk calls per string).
func BenchmarkString(b *testing.B) {
	s := strings.Repeat("Travel policy: economy class for flights under 6 hours, per diem as listed; hotels up to the city cap. ", 20)
	for _, n := range []int{1, 30} {
		v := New(benchSecrets(n)...)
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			b.ReportAllocs()
			for b.Loop() {
				if v.String(s) != s {
					b.Fatal("changed")
				}
			}
		})
	}
}

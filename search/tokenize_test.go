package search

import (
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"camelCase", "getLogs", []string{"get", "log", "getlog"}},
		{"camelCase stems", "createIssue", []string{"creat", "issu", "createissu"}},
		{"snake_case", "search_knowledge_base", []string{"search", "knowledg", "base"}},
		{"kebab-case", "list-component-examples", []string{"list", "component", "exampl"}},
		{"acronym run", "HTTPServer", []string{"http", "server", "httpserver"}},
		{"acronym plural", "APIs and CNNs", []string{"api", "cnn"}},
		{"letter/digit", "get-36kr-trending", []string{"get", "36", "kr", "36kr", "trend"}},
		{"short identifiers kept joined", "S3 mp3 24h", []string{"s3", "mp", "mp3", "24", "24h"}},
		{"plurals, -ing, -ed", "Issues issue tracking tracked", []string{"issu", "issu", "track", "track"}},
		{"news is not new", "news, new", []string{"news", "new"}},
		{"stop words", "the and of a to", nil},
		{"stem landing on a stop word", "using one", nil},
		{"stray letters", "Apple's x", []string{"appl"}},
		{"empty", "", nil},
		{"punctuation only", "!!! ... ---", nil},
		{"Han bigrams", "搜索关键词", []string{"搜", "搜索", "索", "索关", "关", "关键", "键", "键词", "词"}},
		{"Han mixed with Latin", "使用bing搜索", []string{"使", "使用", "用", "bing", "搜", "搜索", "索"}},
		{"Katakana", "カタカナ", []string{"カ", "カタ", "タ", "タカ", "カ", "カナ", "ナ"}},
		{"Hangul", "한국어", []string{"한", "한국", "국", "국어", "어"}},
		{"accented Latin", "Café Müller naïve", []string{"café", "müller", "naïve"}},
		{"combining mark", "e\u0301te", []string{"\u00e9te"}}, // composed (NFC)
		{"combining mark alone", "x\u0301yz", []string{"x\u0301yz"}},
		{"Greek and Cyrillic", "ΑΒΓ Привет", []string{"αβγ", "привет"}},
		{"path", "/root/markdown/report_v2.md", []string{"root", "markdown", "report", "v2", "md"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Tokenize(tt.in)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStem(t *testing.T) {
	tests := []struct{ in, want string }{
		{"caresses", "caress"}, {"ponies", "poni"}, {"cats", "cat"}, {"status", "status"},
		{"analysis", "analysis"}, {"agreed", "agre"}, {"plastered", "plaster"},
		{"motoring", "motor"}, {"sing", "sing"}, {"conflated", "conflat"}, {"hopping", "hop"},
		{"hoping", "hope"}, {"happy", "happi"}, {"caches", "cach"}, {"cache", "cach"},
		{"dishes", "dish"}, {"files", "file"}, {"file", "file"}, {"created", "creat"},
		{"news", "news"}, {"string", "string"},
	}
	for _, tt := range tests {
		if got := stem(tt.in); got != tt.want {
			t.Errorf("stem(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestTokenizeHostile feeds inputs a hostile server might put in a
// description: it must not panic, blow up memory or take long.
func TestTokenizeHostile(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	junk := make([]byte, 1<<20)
	rng.Read(junk)
	inputs := map[string]string{
		"10 MB of one letter":    strings.Repeat("a", 10<<20),
		"10 MB of short words":   strings.Repeat("ab ", 10<<20/3),
		"random bytes":           string(junk),
		"invalid UTF-8":          strings.Repeat("\xff\xfe\xc3", 100000),
		"one huge camelCase run": strings.Repeat("aB", 1<<20),
		"10 MB of Han":           strings.Repeat("中文", 10<<20/6),
		"combining marks":        strings.Repeat("e\u0301\u0301\u0301", 100000),
		"NULs and controls":      strings.Repeat("\x00\x01\x1b[31m", 100000),
		"spacing marks":          "क" + strings.Repeat("\u093e\u0903", 1<<20),
		"format characters":      strings.Repeat("ab\u00ad\u200d\u2060", 1<<20),
		"marks and digits":       strings.Repeat("1\u093e", 1<<20),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			toks := Tokenize(in)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %v", d)
			}
			size := 0
			for _, tk := range toks {
				size += len(tk)
				if len(tk) > 4*maxTokenBytes {
					t.Fatalf("token of %d bytes", len(tk))
				}
			}
			if size > 4*maxFieldBytes {
				t.Errorf("%d bytes of tokens from a field capped at %d bytes", size, maxFieldBytes)
			}
		})
	}
}

func TestLenCode(t *testing.T) {
	for n := 0; n <= 2*maxFieldTokens; n++ {
		c := lenCode(n)
		l := int(codeLen[c])
		if l > n || (n < 64 && l != n) {
			t.Fatalf("lenCode(%d) = %d ↦ %d", n, c, l)
		}
		if n <= maxFieldTokens && float64(n-l) > 0.03*float64(n) {
			t.Fatalf("lenCode(%d) ↦ %d: more than 3%% off", n, l)
		}
	}
	if codeLen[255] < maxFieldTokens {
		t.Errorf("largest code %d < %d", codeLen[255], maxFieldTokens)
	}
}

func TestIsTextPath(t *testing.T) {
	for word, want := range map[string]bool{
		"/root/markdown/report.md": true, "notes.txt,": true, "/root/code/": true, "./data": true,
		"C:\\work\\a.csv": true, "`/root/code/middleware.ts`": true,
		"/root/pdf/report.pdf": false, "sale.png": false, "/root/word/CV.docx.": false, "/x/Data.XLSX": false,
	} {
		if !isPath(word) {
			t.Errorf("isPath(%q) = false", word)
		}
		if got := isTextPath(word); got != want {
			t.Errorf("isTextPath(%q) = %v, want %v", word, got, want)
		}
	}
}

// TestLowerAndClauseWords: lower, which strings.ToLower now does in one allocation, is still
// unicode.ToLower of each rune (an invalid byte read as U+FFFD), as names and queries were
// lower-cased before; and isClauseWord, which lower-cases without allocating, agrees with a
// lookup of lower in clauseWords, including for runes whose lower case is ASCII (İ → i,
// Kelvin sign → k) and for words of any length.
func TestLowerAndClauseWords(t *testing.T) {
	asRunes := func(s string) string {
		b := make([]rune, 0, len(s))
		for _, r := range s {
			b = append(b, unicode.ToLower(r))
		}
		return string(b)
	}
	words := []string{"", "and", "AND", "Then", "afterwards", "AFTERWARDS", "afterwardss", "whİle", "fİnally",
		"Ｋ", "K\u212a", "ÉCOLE", "ß", "ẞ", "ΣΑΣ", "Straße", "\xff\xfeAnd", "an\xffd", "日本語", "ǅ", "İİİİİİİİİİİİİİİİ",
		"getLogs", "github__Create_Issue", strings.Repeat("A", 40)}
	for w := range clauseWords {
		words = append(words, w, strings.ToUpper(w), strings.ReplaceAll(strings.ToUpper(w), "I", "İ"))
	}
	rng := rand.New(rand.NewSource(1))
	alphabet := []rune("aAnNdDİi\u212akKtThHeE.é\xffß日")
	for range 2000 {
		var b strings.Builder
		for range rng.Intn(12) {
			b.WriteRune(alphabet[rng.Intn(len(alphabet))])
		}
		words = append(words, b.String())
	}
	for _, w := range words {
		if got, want := lower(w), asRunes(w); got != want {
			t.Errorf("lower(%q) = %q, want %q", w, got, want)
		}
		if got, want := isClauseWord(w), clauseWords[asRunes(w)]; got != want {
			t.Errorf("isClauseWord(%q) = %v, want %v", w, got, want)
		}
	}
}

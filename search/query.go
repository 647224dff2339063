package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Query parsing limits.
const (
	maxQueryTerms  = 256
	maxQueryChunks = 64
	maxChunkBytes  = 128
)

type queryTerm struct {
	text    string
	w       float64
	main    bool // a word of the query, not a related word
	implied bool // implied by the query's structure (a file operation)
}

type parsedQuery struct {
	terms  []queryTerm // words, then related and implied words
	chunks []string    // lower-cased identifier-like words, for exact name matches
	pairs  [][2]string // adjacent words (stop words skipped), for name proximity
	ops    [][]string  // file operations the query implies ("write file")
}

// parseQuery analyzes a query once: its terms with weights, the adjacent
// pairs for proximity, the identifier-like chunks for exact name matches.
func (c *config) parseQuery(text string) parsedQuery {
	text = truncate(text, maxQueryBytes)
	pq := parsedQuery{terms: make([]queryTerm, 0, 32)}
	index := make(map[string]int, 32)
	add := func(t string, w float64, main bool) int {
		if i, ok := index[t]; ok {
			pq.terms[i].w = max(pq.terms[i].w, w)
			pq.terms[i].main = pq.terms[i].main || main
			return i
		}
		if len(pq.terms) >= maxQueryTerms {
			return -1
		}
		index[t] = len(pq.terms)
		pq.terms = append(pq.terms, queryTerm{text: t, w: w, main: main})
		return len(pq.terms) - 1
	}

	// Words, clause by clause: path components count less (they are
	// arguments, not intent), and a clause naming a path together with a
	// verb of writing or reading implies that file operation.
	var ops [][]string
	wrote, read, paths := false, false, false
	prev := ""
	for _, clause := range splitClauses(text) {
		clausePath, clauseWrite, clauseRead := false, false, false
		for _, word := range strings.Fields(clause) {
			w := 1.0
			if isPath(word) {
				paths = true
				clausePath = clausePath || isTextPath(word)
				w = c.pathTokW
			}
			tokenize(word, maxQueryBytes, func(t string, joined bool) {
				add(t, w, true)
				if joined {
					return
				}
				clauseWrite = clauseWrite || contains(writeVerbs, t)
				clauseRead = clauseRead || contains(readVerbs, t)
				if prev != "" && prev != t && len(pq.pairs) < maxQueryTerms {
					pq.pairs = append(pq.pairs, [2]string{prev, t})
				}
				prev = t
			})
		}
		if clausePath && clauseWrite && !wrote {
			wrote = true
			ops = append(ops, writeFile)
		}
		if clausePath && clauseRead && !read {
			read = true
			ops = append(ops, readFile)
		}
	}
	if c.synonym > 0 {
		mains := len(pq.terms)
		for i := range mains {
			for _, r := range related[pq.terms[i].text] {
				if _, ok := index[r]; !ok {
					add(r, c.synonym*pq.terms[i].w, false)
				}
			}
		}
	}
	if c.fileOp {
		pq.ops = ops
	}
	if c.fileOp && c.fileOpW > 0 {
		for _, op := range ops {
			for _, t := range op {
				if i := add(t, c.fileOpW, false); i >= 0 {
					pq.terms[i].implied = true
				}
			}
		}
	}
	if paths && c.pathTermW > 0 {
		for _, t := range pathTerms {
			if _, ok := index[t]; !ok {
				add(t, c.pathTermW, false)
			}
		}
	}

	// Identifier-like chunks: letters, digits, '_', '-', '.'.
	for _, ch := range strings.FieldsFunc(text, func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' || r == '.')
	}) {
		ch = strings.Trim(ch, ".-")
		if ch == "" || len(ch) > maxChunkBytes || len(pq.chunks) >= maxQueryChunks {
			continue
		}
		pq.chunks = append(pq.chunks, lower(ch))
	}
	return pq
}

// truncate cuts s to at most n bytes at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// File operations implied by a verb in the same clause as a file path:
// "save the report to /root/report.md" asks for a file write.
var (
	writeVerbs = stems("save write export store output put generate create")
	readVerbs  = stems("read open load import parse")
	writeFile  = stems("write file")
	readFile   = stems("read file")
	// pathTerms are searched, at low weight, for any query naming a file.
	pathTerms = stems("file path")
)

func stems(words string) []string {
	var out []string
	for _, w := range strings.Fields(words) {
		out = append(out, Tokenize(w)...)
	}
	return out
}

// fileExts are extensions that make a bare word a file name (report.md).
var fileExts = map[string]bool{
	"txt": true, "md": true, "csv": true, "tsv": true, "json": true, "yaml": true, "yml": true,
	"xml": true, "html": true, "htm": true, "pdf": true, "doc": true, "docx": true, "xls": true,
	"xlsx": true, "ppt": true, "pptx": true, "png": true, "jpg": true, "jpeg": true, "gif": true,
	"svg": true, "webp": true, "mp3": true, "wav": true, "mp4": true, "zip": true, "tar": true,
	"gz": true, "log": true, "py": true, "go": true, "ts": true, "tsx": true, "jsx": true,
	"sql": true, "sh": true, "bib": true, "tex": true, "ipynb": true,
}

// binaryExts are extensions of files that a generic file tool does not
// read or write as text: documents, spreadsheets, slides, media, archives.
// Their formats have tools of their own (a PDF converter, a spreadsheet
// reader, a chart generator that saves a PNG).
var binaryExts = map[string]bool{
	"pdf": true, "doc": true, "docx": true, "xls": true, "xlsx": true, "ppt": true, "pptx": true,
	"png": true, "jpg": true, "jpeg": true, "gif": true, "webp": true, "mp3": true, "wav": true,
	"mp4": true, "zip": true, "tar": true, "gz": true,
}

// isTextPath reports whether a path (see isPath) names a text file or a
// folder rather than a file of a binary format.
func isTextPath(word string) bool {
	word = strings.Trim(word, "\"'`‘’“”()[]{}<>,;:!?")
	word = strings.TrimRight(word, ".")
	base := word[strings.LastIndexAny(word, "/\\")+1:]
	if i := strings.LastIndexByte(base, '.'); i > 0 && i < len(base)-1 {
		return !binaryExts[lower(base[i+1:])]
	}
	return true
}

// isPath reports whether a whitespace-delimited word looks like a file path
// or file name, not a URL or a domain: /root/a.md, C:\x\y, ./notes, report.md.
func isPath(word string) bool {
	if !strings.ContainsAny(word, "/\\.") {
		return false
	}
	word = strings.Trim(word, "\"'`‘’“”()[]{}<>,;:!?")
	word = strings.TrimRight(word, ".")
	if word == "" || strings.Contains(word, "://") || strings.HasPrefix(lower(word), "www.") {
		return false
	}
	if strings.ContainsAny(word, "/\\") {
		return strings.IndexFunc(word, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
	}
	if i := strings.LastIndexByte(word, '.'); i > 0 && i < len(word)-1 {
		return fileExts[lower(word[i+1:])]
	}
	return false
}

// clauseWords separate the requests of a compound query.
var clauseWords = map[string]bool{
	"and": true, "then": true, "also": true, "finally": true, "after": true,
	"afterwards": true, "plus": true, "while": true, "but": true,
}

// splitClauses cuts a request into clauses: at sentence and clause
// punctuation (a '.' or ':' only when followed by a space, so paths, versions
// and URLs stay whole) and before coordinating words such as "and" and
// "then". The clauses keep every word of text.
func splitClauses(text string) []string {
	var out []string
	start := 0
	cut := func(end int) {
		if c := strings.TrimSpace(text[start:end]); c != "" {
			out = append(out, c)
		}
		start = end
	}
	wordStart := -1
	for i, r := range text {
		sep := false
		switch r {
		case '\n', ';', '!', '?', ',', '。', '，', '；', '！', '？', '、':
			sep = true
		case '.', ':':
			next, _ := utf8.DecodeRuneInString(text[i+1:])
			sep = i+1 >= len(text) || unicode.IsSpace(next)
		}
		isWord := unicode.IsLetter(r)
		if isWord && wordStart < 0 {
			wordStart = i
		}
		if !isWord && wordStart >= 0 {
			if clauseWords[lower(text[wordStart:i])] {
				cut(wordStart)
			}
			wordStart = -1
		}
		if sep {
			cut(i)
		}
	}
	cut(len(text))
	return out
}

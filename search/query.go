package search

import (
	"slices"
	"strings"
	"sync"
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
	implied bool // implied by the query: a file operation, or a translation of one of its words
	// part is a single CJK character found only inside longer CJK runs of
	// the query (汽 and 车 of 汽车): it is scored, but a tool must match
	// more than such characters to clear the score floor, since a
	// character shared with another word (车 of 火车) is not the word.
	part bool
}

type parsedQuery struct {
	terms  []queryTerm // words, then translations, related and implied words
	chunks []string    // lower-cased identifier-like words, for exact name matches
	pairs  [][2]string // adjacent words (stop words skipped), for name proximity
	ops    []fileOp    // file operations the query implies ("write file")
	buf    *parseBuf   // the memory of terms, chunks and pairs (see release)
}

// parseBuf is the memory that parsing a query reuses from one query to the next: a search
// parses at least one query, and growing these anew each time was a good part of its
// allocations. The slices and the map are empty between uses.
type parseBuf struct {
	terms   []queryTerm
	chunks  []string
	pairs   [][2]string
	index   map[string]int // term → its place in terms
	words   []clauseWord
	clauses []string
}

// clauseWord is a term of a query, in order, as parseQuery reads it clause by clause.
type clauseWord struct {
	t        string
	verb     bool // may be a verb of a file operation
	absorbed bool // a verb of a file operation that a tool takes: it leaves the query's terms
}

var parseBufs = sync.Pool{New: func() any { return &parseBuf{index: make(map[string]int, 32)} }}

// release hands the memory of pq back for the next query: pq, and anything read from its
// terms, chunks or pairs, must not be used after.
func (pq *parsedQuery) release() {
	b := pq.buf
	if b == nil {
		return
	}
	b.terms, b.chunks, b.pairs = pq.terms[:0], pq.chunks[:0], pq.pairs[:0]
	b.words, b.clauses = b.words[:0], b.clauses[:0]
	clear(b.index)
	*pq = parsedQuery{}
	parseBufs.Put(b)
}

// fileOp is a file operation that a query implies.
type fileOp struct {
	words []string // the operation: writeFile or readFile
	verbs []string // the request's own verbs for it ("save", "export")
}

// key names the operation ("write file").
func (op fileOp) key() string { return strings.Join(op.words, " ") }

// query is what a search for the operation alone looks for: the request's
// verbs for it and its object ("save file").
func (op fileOp) query() string {
	return strings.Join(append(append([]string(nil), op.verbs...), op.words[1:]...), " ")
}

// parseQuery analyzes a query once: its terms with weights, the adjacent
// pairs for proximity, the identifier-like chunks for exact name matches and
// the file operations it implies. The verbs that express a file operation
// are taken out of its terms (the operation gets a place of its own, see
// placeFileOps), except for the operations named in unserved (by key), which
// no tool of the catalog can take. Its memory is pooled: the caller releases it (see release).
func (c *config) parseQuery(text string, unserved ...string) parsedQuery {
	text = nfc(truncate(text, maxQueryBytes))
	buf := parseBufs.Get().(*parseBuf)
	pq := parsedQuery{terms: buf.terms, chunks: buf.chunks, pairs: buf.pairs, buf: buf}
	index := buf.index
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
	// arguments, not intent), and a clause naming a text file or a folder
	// together with a verb of writing or reading implies that file
	// operation. The operation's verbs, and the words "file" and "path"
	// that any query naming a file otherwise searches for, are left to the
	// operation when a tool can take it.
	var ops []fileOp
	absorb := c.fileOp && !c.keepOpWords
	freePath := false    // a path that no file operation takes
	anyAbsorbed := false // a verb of a file operation is taken out
	words := buf.words   // the words of every clause
	prev := ""
	// CJK characters seen only as parts of longer runs, and those seen alone.
	cjkPart, cjkAlone := map[string]bool{}, map[string]bool{}
	buf.clauses = splitClauses(buf.clauses, text)
	for _, clause := range buf.clauses {
		textPaths, otherPaths := 0, 0
		first := len(words) // the clause's first word
		for word := range strings.FieldsSeq(clause) {
			w := 1.0
			if isPath(word) {
				if isTextPath(word) {
					textPaths++
				} else {
					otherPaths++
				}
				w = c.pathTokW
			}
			// A run of CJK characters is emitted as unigram, bigram,
			// unigram...: a unigram next to a bigram is part of a run.
			lastUni, afterBigram := "", false
			tokenize(word, maxQueryBytes, func(t string, kind termKind) {
				joined := kind != termWord
				add(t, w, true)
				switch r, n := utf8.DecodeRuneInString(t); {
				case isCJK(r) && n == len(t): // a unigram
					if lastUni != "" {
						cjkAlone[lastUni] = true // no bigram followed it
					}
					lastUni = ""
					if afterBigram {
						cjkPart[t] = true
					} else {
						lastUni = t
					}
					afterBigram = false
				case isCJK(r): // a bigram
					if lastUni != "" {
						cjkPart[lastUni] = true
					}
					lastUni, afterBigram = "", true
				default:
					if lastUni != "" {
						cjkAlone[lastUni] = true
					}
					lastUni, afterBigram = "", false
				}
				words = append(words, clauseWord{t: t, verb: w == 1 && !joined})
				if joined {
					return
				}
				if prev != "" && prev != t && len(pq.pairs) < maxQueryTerms {
					pq.pairs = append(pq.pairs, [2]string{prev, t})
				}
				prev = t
			})
			if lastUni != "" {
				cjkAlone[lastUni] = true
			}
		}
		served := false // the clause implies an operation that will be taken out
		var verbOf map[string]bool
		if textPaths > 0 {
			for _, kind := range [][2][]string{{writeFile, writeVerbs}, {readFile, readVerbs}} {
				op := fileOp{words: kind[0]}
				for _, cw := range words[first:] {
					if cw.verb && contains(kind[1], cw.t) && !contains(op.verbs, cw.t) {
						op.verbs = append(op.verbs, cw.t)
					}
				}
				if len(op.verbs) == 0 {
					continue
				}
				i := slices.IndexFunc(ops, func(o fileOp) bool { return o.key() == op.key() })
				if i < 0 {
					ops = append(ops, fileOp{words: op.words})
					i = len(ops) - 1
				}
				for _, v := range op.verbs {
					if !contains(ops[i].verbs, v) {
						ops[i].verbs = append(ops[i].verbs, v)
					}
				}
				if absorb && !contains(unserved, op.key()) {
					served = true
					if verbOf == nil {
						verbOf = map[string]bool{}
					}
					for _, v := range op.verbs {
						verbOf[v] = true
					}
				}
			}
		}
		for i := first; i < len(words) && len(verbOf) > 0; i++ {
			if words[i].verb && verbOf[words[i].t] {
				words[i].absorbed, anyAbsorbed = true, true
			}
		}
		if otherPaths > 0 || (textPaths > 0 && !served) {
			freePath = true
		}
	}
	buf.words = words
	if anyAbsorbed {
		// The verbs taken out leave the terms, unless the query also uses them otherwise.
		absorbed := map[string]bool{}
		kept := map[string]bool{}
		for _, cw := range words {
			if cw.absorbed {
				absorbed[cw.t] = true
			} else {
				kept[cw.t] = true
			}
		}
		terms := pq.terms[:0]
		clear(index)
		for _, t := range pq.terms {
			if absorbed[t.text] && !kept[t.text] {
				continue
			}
			index[t.text] = len(terms)
			terms = append(terms, t)
		}
		pq.terms = terms
	}

	for i := range pq.terms {
		pq.terms[i].part = cjkPart[pq.terms[i].text] && !cjkAlone[pq.terms[i].text]
	}

	// Translations and related words of the query's words.
	mains := len(pq.terms)
	if c.translation > 0 {
		for i := range mains {
			for _, tr := range translations[pq.terms[i].text] {
				if _, ok := index[tr.text]; !ok {
					if j := add(tr.text, c.translation*tr.share*pq.terms[i].w, false); j >= 0 {
						pq.terms[j].implied = true
					}
				}
			}
		}
	}
	if c.synonym > 0 {
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
			for _, t := range op.words {
				if i := add(t, c.fileOpW, false); i >= 0 {
					pq.terms[i].implied = true
				}
			}
		}
	}
	if freePath && c.pathTermW > 0 {
		for _, t := range pathTerms {
			if _, ok := index[t]; !ok {
				add(t, c.pathTermW, false)
			}
		}
	}

	// Identifier-like chunks: letters, digits, combining marks (they continue a word: see
	// classify), '_', '-', '.'; fullwidth forms read as ASCII, as tokenize reads them
	// (ｃｒｅａｔｅ＿ｉｓｓｕｅ is create_issue).
	for ch := range strings.FieldsFuncSeq(halfwidth(text), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == '_' || r == '-' || r == '.')
	}) {
		if len(pq.chunks) >= maxQueryChunks {
			break
		}
		ch = strings.Trim(ch, ".-")
		if ch == "" || len(ch) > maxChunkBytes {
			continue
		}
		pq.chunks = append(pq.chunks, lower(ch))
	}
	return pq
}

// halfwidth returns s with the fullwidth forms of ASCII (ＰＤＦ, ＿) as ASCII.
func halfwidth(s string) string {
	if !strings.ContainsFunc(s, isFullwidth) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isFullwidth(r) {
			return r - 0xFEE0
		}
		return r
	}, s)
}

// isFullwidth reports whether r is the fullwidth form of an ASCII character (U+FF01-U+FF5E).
func isFullwidth(r rune) bool { return r >= 0xFF01 && r <= 0xFF5E }

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
// or file name, not a URL, a domain or words joined by a slash (CI/CD):
// /root/a.md, C:\x\y, ./notes, notes/, report.md.
func isPath(word string) bool {
	if !hasPathByte(word) {
		return false
	}
	word = strings.Trim(word, "\"'`‘’“”()[]{}<>,;:!?")
	word = strings.TrimRight(word, ".")
	if word == "" || strings.Contains(word, "://") || len(word) >= 4 && strings.EqualFold(word[:4], "www.") {
		return false
	}
	if strings.ContainsAny(word, "/\\") {
		if strings.IndexFunc(word, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) < 0 {
			return false
		}
		// A slash between words is rarely a path: CI/CD, TCP/IP, A/B, and/or, 12/25/2026. A
		// path is rooted (/x, ~/x, ./x, C:\x), a folder (notes/), a file (notes/a.md), or
		// words in more components than two (src/main/notes).
		if rooted(word) || strings.HasSuffix(word, "/") || strings.HasSuffix(word, "\\") {
			return true
		}
		if hasFileExt(word[strings.LastIndexAny(word, "/\\")+1:]) {
			return true
		}
		return strings.Count(word, "/")+strings.Count(word, "\\") >= 2 && strings.IndexFunc(word, unicode.IsLetter) >= 0
	}
	return hasFileExt(word)
}

// hasPathByte reports whether s holds a '/', '\\' or '.' (as strings.ContainsAny does, a byte
// at a time: these bytes are never part of a longer UTF-8 sequence).
func hasPathByte(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || c == '\\' || c == '.' {
			return true
		}
	}
	return false
}

// hasFileExt reports whether a file name ends with a known extension (report.md).
func hasFileExt(name string) bool {
	i := strings.LastIndexByte(name, '.')
	return i > 0 && i < len(name)-1 && fileExts[lower(name[i+1:])]
}

// rooted reports whether a path starts at a root, the home or the current folder: /x, \x, ~/x,
// ./x, ../x, C:\x, C:/x.
func rooted(word string) bool {
	switch {
	case word[0] == '/', word[0] == '\\', word[0] == '~', word[0] == '.':
		return true
	case len(word) > 2 && word[1] == ':' && (word[2] == '\\' || word[2] == '/'):
		c := word[0] | 0x20
		return c >= 'a' && c <= 'z'
	}
	return false
}

// clauseWords separate the requests of a compound query.
var clauseWords = map[string]bool{
	"and": true, "then": true, "also": true, "finally": true, "after": true,
	"afterwards": true, "plus": true, "while": true, "but": true,
}

// maxClauseWord is the length of the longest of clauseWords.
var maxClauseWord = func() (n int) {
	for w := range clauseWords {
		n = max(n, len(w))
	}
	return n
}()

// isClauseWord reports whether word, lower-cased, is one of clauseWords, without allocating.
func isClauseWord(word string) bool {
	var stack [16]byte // room for maxClauseWord bytes and one rune more
	b := stack[:0]
	for _, r := range word {
		if b = utf8.AppendRune(b, unicode.ToLower(r)); len(b) > maxClauseWord {
			return false
		}
	}
	return clauseWords[string(b)]
}

// splitClauses appends to out the clauses of a request: it cuts it at sentence and clause
// punctuation (a '.' or ':' only when followed by a space, so paths, versions and URLs stay
// whole) and before coordinating words such as "and" and "then". The clauses keep every word
// of text.
func splitClauses(out []string, text string) []string {
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
			if isClauseWord(text[wordStart:i]) {
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

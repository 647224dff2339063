package executor

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/dlclark/regexp2/v2"
	regexp2syntax "github.com/dlclark/regexp2/v2/syntax"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Patterns of an inputSchema ("pattern", "patternProperties", "format": "regex") are ECMA-262
// regular expressions (JSON Schema says so, and MCP servers written in TypeScript use
// lookarounds, backreferences and \u escapes freely). Go's regexp compiles most of them, in
// linear time, and is tried first; a pattern it refuses is compiled by regexp2 in its ECMAScript
// mode instead of making the tool uncallable. regexp2 backtracks: a pattern such as ^(a+)+$ can
// take exponential time on a crafted value, which the step meter cannot see (a match is one
// library call). The matches of one validation therefore share ecmaMatchTimeout (each is cut
// off at what is left of it, or at regexp2's backtracking stack limit): past it the validation
// stops (a stopValidation panic, recovered by meteredSchema.run) and the call is refused
// invalid_arguments, since other values may match quickly. The definition stays usable: a
// cut-off per match alone let arguments of many strings, each matching a little within it,
// keep one validation running past the backstop and its grace, which gives the definition up
// for every caller.

// Go's regexp and ECMA-262 read some of what both compile differently: in ECMAScript "\s" is
// every Unicode space separator (Zs) plus \t \n \v \f \r, U+FEFF, U+2028 and U+2029 (Go's:
// [\t\n\f\r ]), "\S" the rest, and "." matches anything but \n, \r, U+2028 and U+2029 (Go's:
// anything but \n). goSyntax writes those three in Go's syntax with ECMAScript's meaning before
// Go compiles the pattern, so that "^\S+$" refuses a no-break space and "^.+$" a carriage
// return as ajv (and every ECMAScript validator) does. \d, \w, \b, ^ and $ mean the same in
// both (ASCII digits and word characters; ^ and $ at the ends of the text). What only Go reads
// (\Q...\E, POSIX classes, flag groups such as (?i)) keeps Go's meaning; a pattern with a
// flag group that turns s on ("(?s)", "(?is:", not in a class or \Q...\E) keeps Go's ".".

// ecmaSpaces is ECMAScript's \s as the members of a Go character class, and ecmaNonSpaces its
// complement (for "\S" inside a class): code point ranges computed from the same table.
var ecmaSpaces, ecmaNonSpaces = ecmaSpaceClasses()

func ecmaSpaceClasses() (in, out string) {
	spaces := []rune{'\t', '\n', '\v', '\f', '\r', '\ufeff', '\u2028', '\u2029'}
	for _, r := range unicode.Zs.R16 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			spaces = append(spaces, c)
		}
	}
	for _, r := range unicode.Zs.R32 {
		for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
			spaces = append(spaces, c)
		}
	}
	slices.Sort(spaces)
	spaces = slices.Compact(spaces)
	// Both are written as ranges only ("\x{20}-\x{20}", not "\x{20}"): after a range, a "-"
	// is a literal to Go, as it is after "\s" or "\S" ("[\s-z]" is the spaces, "-" and "z"),
	// where after a single "\x{feff}" it would begin the range "\x{feff}-z".
	var b, c strings.Builder
	next := rune(0) // the first code point not yet in the complement
	for i := 0; i < len(spaces); {
		lo, hi := spaces[i], spaces[i]
		for i++; i < len(spaces) && spaces[i] == hi+1; i++ {
			hi = spaces[i]
		}
		fmt.Fprintf(&b, `\x{%x}-\x{%x}`, lo, hi)
		if lo > next {
			fmt.Fprintf(&c, `\x{%x}-\x{%x}`, next, lo-1)
		}
		next = hi + 1
	}
	fmt.Fprintf(&c, `\x{%x}-\x{%x}`, next, unicode.MaxRune)
	return b.String(), c.String()
}

// ecmaDot is ECMAScript's "." (without the s flag) in Go's syntax.
const ecmaDot = `[^\n\r\x{2028}\x{2029}]`

// goDotAll is a Go flag group that turns s on ("(?s)", "(?is:"), at the start of the text:
// Go's own syntax, not ECMAScript's, whose "." is then left as it is. goSyntax looks for it
// where its scan finds a group, not in a class ("[(?s)]"), after an escaped "\(" or in
// \Q...\E.
var goDotAll = regexp.MustCompile(`^\(\?[imU]*s[imsU]*(-[imsU]*)?[:)]`)

// goSyntax rewrites ECMAScript's ".", "\s" and "\S" in pattern into Go's syntax (see above),
// scanning it as Go's parser does: escapes, character classes ("[:alpha:]" inside one is a
// POSIX class) and \Q...\E quoting. It reports false for a class that begins with "]" ("[]",
// "[^]"): ECMAScript's empty class and any character, where Go's class goes on to the next
// "]" ("^[^]+[ab]$" is a single class to Go); such a pattern is left to the ECMAScript engine
// unless ECMAScript's reading leaves a "]" outside a class ("[^]]": Go's meaning, see
// compilePattern).
func goSyntax(pattern string) (string, bool) {
	rewritten, ok, dotAll := rewriteGoSyntax(pattern, false)
	if ok && dotAll {
		rewritten, ok, _ = rewriteGoSyntax(pattern, true)
	}
	return rewritten, ok
}

// rewriteGoSyntax is goSyntax's scan, which leaves "." as it is if dotAll; it reports whether
// the pattern has a Go flag group that turns s on.
func rewriteGoSyntax(pattern string, dotAll bool) (_ string, ok, sawDotAll bool) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			switch n := pattern[i+1]; {
			case n == 's' && inClass:
				b.WriteString(ecmaSpaces)
			case n == 's':
				b.WriteString("[" + ecmaSpaces + "]")
			case n == 'S' && inClass:
				b.WriteString(ecmaNonSpaces)
			case n == 'S':
				b.WriteString("[^" + ecmaSpaces + "]")
			case n == 'Q' && !inClass: // literal text up to \E, or to the end
				end := len(pattern)
				if j := strings.Index(pattern[i+2:], `\E`); j >= 0 {
					end = i + 2 + j + 2
				}
				b.WriteString(pattern[i:end])
				i = end - 2
			default:
				b.WriteString(pattern[i : i+2])
			}
			i++
		case inClass && c == ']':
			inClass = false
			b.WriteByte(c)
		case inClass && c == '[' && strings.HasPrefix(pattern[i:], "[:"):
			end := i + 1
			if j := strings.Index(pattern[i+2:], ":]"); j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(pattern[i:end])
			i = end - 1
		case !inClass && c == '[':
			inClass = true
			j := i + 1
			if j < len(pattern) && pattern[j] == '^' {
				j++
			}
			if j < len(pattern) && pattern[j] == ']' {
				return "", false, false
			}
			b.WriteString(pattern[i:j])
			i = j - 1
		case !inClass && c == '.' && !dotAll:
			b.WriteString(ecmaDot)
		case !inClass && c == '(' && goDotAll.MatchString(pattern[i:]):
			sawDotAll = true
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true, sawDotAll
}

// ecmaLoneBracket reports whether pattern, read as ECMAScript reads it (a class ends at its
// first unescaped "]", so "[]" and "[^]" are whole classes), has a "]" outside any class.
func ecmaLoneBracket(pattern string) bool {
	inClass := false
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\':
			i++
		case c == '[':
			inClass = true
		case c == ']' && !inClass:
			return true
		case c == ']':
			inClass = false
		}
	}
	return false
}

// maxPatternRewriteGrowth bounds how many bytes goSyntax's rewriting may add to a pattern
// (about 400 \s or \S, or 2,700 .): past it the pattern keeps Go's meaning.
const maxPatternRewriteGrowth = 64 << 10

// goPattern is a pattern Go's regexp compiled (from goSyntax's rewriting of it); it is named
// as written.
type goPattern struct {
	re     *regexp.Regexp
	source string
}

func (p goPattern) String() string            { return p.source }
func (p goPattern) MatchString(s string) bool { return p.re.MatchString(s) }

// ecmaMatchTimeout bounds the time one validation spends matching patterns only the ECMAScript
// engine compiles.
const ecmaMatchTimeout = time.Second

// compilePattern is the compiler's regexp engine: Go's regexp (on goSyntax's rewriting), else
// regexp2 (ECMAScript), else Go's regexp on the pattern as written. The matches of a regexp2 pattern count against m's ECMAScript time (nil: each match has
// ecmaMatchTimeout of its own).
func compilePattern(pattern string, m *meteredSchema) (jsonschema.Regexp, error) {
	if len(pattern) > maxSchemaPatternBytes {
		return nil, patternNotCompiled{fmt.Sprintf("is %d bytes, longer than the %d bytes the executor compiles as a pattern", len(pattern), maxSchemaPatternBytes)}
	}
	insts := goProgSize(pattern)
	asGo, goErr := (*regexp.Regexp)(nil), errGoTooLarge
	if insts <= maxGoPatternInsts {
		asGo, goErr = regexp.Compile(pattern)
	}
	if goErr == nil {
		// (the pattern as written decides which engine: goSyntax only changes what it means)
		if rewritten, ok := goSyntax(pattern); ok {
			if len(rewritten)-len(pattern) > maxPatternRewriteGrowth {
				// Each \s, \S or . grows to a class of up to ~170 bytes, and compiling that
				// costs memory in proportion (a 1 MiB pattern of them: over 1 GB allocated):
				// a pattern with thousands of them, which only a hostile definition writes,
				// keeps Go's meaning, as before the rewriting, rather than that cost.
				return goPattern{asGo, pattern}, nil
			}
			if re, err := regexp.Compile(rewritten); err == nil {
				return goPattern{re, pattern}, nil
			}
		}
	}
	if goErr == nil && ecmaLoneBracket(pattern) {
		// "[^]]" is anything but "]" to Go (and PCRE, Python, Rust); to ECMAScript a lone "]"
		// after "[^]" is invalid with the u flag (ajv refuses it) and only Annex B reads "any
		// character, then ]". regexp2 compiles it even with its u flag.
		return goPattern{asGo, pattern}, nil
	}
	if n := foldSets(pattern, false); n > maxPatternFoldSets {
		if goErr == nil {
			return goPattern{asGo, pattern}, nil // (Go's parser reads them at no such cost)
		}
		return nil, patternNotCompiled{fmt.Sprintf("holds %d of '.', \\S, \\W, \\D, \\p or \\P with the i flag, more than the %d the executor compiles with its ECMAScript engine", n, maxPatternFoldSets)}
	}
	if groupDepth(pattern) > maxFormatRegexDepth {
		// regexp2's parser takes time with the cube of the nesting (see maxSchemaPatternBytes).
		if goErr == nil {
			return goPattern{asGo, pattern}, nil // (Go's parser is linear in it): Go's meaning
		}
		return nil, patternNotCompiled{fmt.Sprintf("nests groups more than %d levels deep, more than the executor compiles with its ECMAScript engine", maxFormatRegexDepth)}
	}
	// With the u flag, as ajv compiles patterns (\u{1F600}, surrogate pairs, \p{Script=Latin});
	// without it for what only Annex B's looser syntax reads (\#, \e, a{,3}).
	ecma, err2 := regexp2.Compile(pattern, regexp2.ECMAScript|regexp2.Unicode)
	if err2 != nil {
		ecma, err2 = regexp2.Compile(pattern, regexp2.ECMAScript)
	}
	if err2 != nil && goErr == nil {
		return goPattern{asGo, pattern}, nil // only Go's syntax reads it: Go's meaning
	}
	if err2 != nil && goErr == errGoTooLarge {
		return nil, patternNotCompiled{fmt.Sprintf("repeats into %d instructions of Go's engine, more than the %d the executor compiles (and its ECMAScript engine does not compile it)", insts, maxGoPatternInsts)}
	}
	if err2 != nil {
		return nil, fmt.Errorf("not an ECMA-262 regular expression: %w", err2)
	}
	ecma.MatchTimeout = ecmaMatchTimeout
	return ecmaPattern{ecma, m}, nil
}

// A pattern of the schema ("pattern", a "patternProperties" key: the server's) is compiled
// once per compiled copy of the definition, and more than once in each (the library checks it
// against the meta-schema's "format": "regex", then compiles it; checkMetaSchema again), before
// any call can be refused for it. Parsing costs what checkFormatRegex's bounds say, so the
// same bounds apply: a pattern regexp2 would parse that nests groups more than
// maxFormatRegexDepth levels (4 KiB of nested groups behind a lookahead took regexp2 a minute,
// the worker's and every copy's) is not compiled; Go's meaning is kept if Go's regexp
// compiles it (its parser is linear in the nesting), else the schema does not compile
// (patternNotCompiled: invalid_schema, as for any pattern that does not compile). No pattern
// longer than maxSchemaPatternBytes is compiled at all: real schemas' patterns are far
// shorter (a long alternation of names is a few KiB), and one pattern's parse stays well
// under a second (Go's parser on 16 KiB of Unicode classes: ~0.6 s). Within the bounds the
// parse is about linear in the pattern's size (~5 µs a byte for regexp2 at the depth bound,
// up to ~40 µs for Go's parser on one class of \p{L}), but for the sets regexp2 folds under
// the i flag and Go's expanded repetitions (see maxPatternFoldSets, maxGoPatternInsts); a
// definition's patterns together are bounded by maxDefinitionPatternBytes.
const maxSchemaPatternBytes = 16 << 10

// Go's regexp expands counted repetitions: "(abcdefghij…){1000}", 3 KiB, compiles into 3
// million instructions (2 s, 460 MB held by the compiled copy, and as much again in each
// copy). A pattern whose expansion would pass maxGoPatternInsts (goProgSize) is left to
// regexp2, which counts its loops instead of expanding them (ECMAScript's meaning), and not
// compiled if regexp2 does not compile it (patternNotCompiled). The expansion counts against
// the definition's maxDefinitionPatternBytes too, an instruction for goInstsPerByte bytes.
const (
	maxGoPatternInsts = 64 << 10
	goInstsPerByte    = 4
)

// errGoTooLarge stands for Go's error on a pattern compilePattern does not let Go compile.
var errGoTooLarge = errors.New("too many instructions once its repetitions are expanded")

// goProgSize is about how many instructions Go's regexp would compile pattern into, if it
// has a counted repetition ("{2}", "{1,9}"; 0 otherwise, or if Go's parser refuses it):
// from its parse, which expands nothing.
func goProgSize(pattern string) int {
	counted := false
	for i := 0; i+1 < len(pattern) && !counted; i++ {
		counted = pattern[i] == '{' && '0' <= pattern[i+1] && pattern[i+1] <= '9'
	}
	if !counted {
		return 0
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0
	}
	var size func(re *syntax.Regexp) int
	size = func(re *syntax.Regexp) int {
		switch re.Op {
		case syntax.OpLiteral:
			return len(re.Rune) + 1
		case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
			return size(re.Sub[0]) + 2
		case syntax.OpRepeat:
			n := re.Max
			if n < 0 {
				n = re.Min + 1 // (x{2,}: xx then x*)
			}
			return min(n+1, maxGoPatternInsts+1) * size(re.Sub[0]) // (Go's parser bounds the nested counts' product by 1000)
		case syntax.OpConcat, syntax.OpAlternate:
			n := len(re.Sub)
			for _, sub := range re.Sub {
				n += size(sub)
			}
			return min(n, 1<<40)
		}
		return 1
	}
	return size(re)
}

// patternNotCompiled is the error of a pattern of the schema compilePattern does not compile:
// its parse would cost too much; why names the bound.
type patternNotCompiled struct{ why string }

func (e patternNotCompiled) Error() string { return e.why }

// ecmaPattern is a pattern compiled by regexp2, for the compiled copy m (see meteredSchema):
// only the goroutine validating with m matches it.
type ecmaPattern struct {
	re *regexp2.Regexp
	m  *meteredSchema
}

func (p ecmaPattern) String() string { return p.re.String() }

// MatchString implements jsonschema.Regexp, which has no error to return: a match cut off
// stops the validation.
func (p ecmaPattern) MatchString(s string) bool {
	if p.m != nil {
		if p.m.ecmaLeft <= 0 {
			panic(stopValidation{pattern: p.re.String()})
		}
		p.re.MatchTimeout = p.m.ecmaLeft
		start := time.Now()
		defer func() { p.m.ecmaLeft -= time.Since(start) }()
	}
	ok, err := p.re.MatchString(s)
	if err != nil {
		panic(stopValidation{pattern: p.re.String()})
	}
	return ok
}

// A string of a value validated against "format": "regex" (asserted under drafts 4 to 7) is
// the caller's (or, in a result, the server's), not the schema's, and parsing a regular
// expression costs far more than its size: Go's parser takes ~30 ms for 1 KiB of Unicode
// classes ("[\p{L}\p{L}…]", superlinear: 40 s for 500 KB), and regexp2's, which decides what
// Go refuses (a lookahead), grows with the cube of the nesting of quantified groups
// ("(?=a)(a(a…)*)*": ~1 s for 1 KiB, a minute for 4 KiB). Such a check is bounded by count,
// not by time: a string over maxFormatRegexBytes, or whose groups nest more than
// maxFormatRegexDepth levels, or past the maxFormatRegexTotal bytes a validation parses as
// regular expressions (the library may check one string along several paths), is not parsed
// and fails the format (regexNotChecked), and the whole validation is no judgement (that
// failure could pass a "not", an "if" or a oneOf branch): the arguments are refused
// invalid_arguments at its path, a result is passed on unchecked (validationOutcome). The rest is parsed, not compiled: no matcher is built for
// a string that is only checked (Go's regexp compiles whatever its parser takes, regexp2
// whatever its parser takes but for internal errors), so the outcome is compilePattern's.
// Measured within these bounds (TestFormatRegexBounded's cases, 8 strings of 1 KiB each):
// ~25 ms a string at most (Go's parser on 1 KiB of Unicode classes; regexp2's sets under the
// i flag count as more bytes, see maxPatternFoldSets), ~0.3 s a validation,
// under what the step budget allows it; like every validation, one per worker at most.
const (
	maxFormatRegexBytes = 1 << 10
	maxFormatRegexTotal = 8 << 10
	maxFormatRegexDepth = 32
)

// formatRegexParsed, when set (tests), is told the size of each string parsed as a regular
// expression by checkFormatRegex.
var formatRegexParsed func(n int)

// regexNotChecked is the error of a string that checkFormatRegex does not parse: its text says
// why (a format failure's text, see issueText); s is the string.
type regexNotChecked struct{ why, s string }

func (e regexNotChecked) Error() string { return e.why }

// checkFormatRegex checks s for "format": "regex" in a validation on m (see maxFormatRegexBytes).
// A string not parsed is also remembered on m (the first one): its failure is not a judgement
// the schema may turn into a pass (see validationOutcome.regexUnchecked).
func checkFormatRegex(s string, m *meteredSchema) error {
	var nc regexNotChecked
	switch {
	case len(s) > maxFormatRegexBytes:
		nc = regexNotChecked{fmt.Sprintf("is %d bytes, longer than the %d bytes the executor checks as a 'regex'", len(s), maxFormatRegexBytes), s}
	case len(s) > m.regexLeft:
		nc = regexNotChecked{fmt.Sprintf("is not checked: the strings checked as a 'regex' add up to more than %d bytes in one value", maxFormatRegexTotal), s}
	default:
		m.regexLeft -= len(s)
		if groupDepth(s) > maxFormatRegexDepth {
			nc = regexNotChecked{fmt.Sprintf("nests groups more than %d levels deep, more than the executor checks as a 'regex'", maxFormatRegexDepth), s}
		}
	}
	if nc.why != "" {
		if m.regexUnchecked.why == "" {
			m.regexUnchecked = nc
		}
		return nc
	}
	if formatRegexParsed != nil {
		formatRegexParsed(len(s))
	}
	if _, err := syntax.Parse(s, syntax.Perl); err == nil {
		return nil
	}
	if f := foldSets(s, false) * foldSetBytes; f > 0 {
		// (regexp2's parse of those sets under the i flag: see maxPatternFoldSets)
		if f > m.regexLeft {
			nc = regexNotChecked{fmt.Sprintf("is not checked: the strings checked as a 'regex' add up to more than %d bytes in one value (each '.', \\S, \\W, \\D, \\p or \\P of one with the i flag that only ECMAScript reads counts as %d)", maxFormatRegexTotal, foldSetBytes), s}
			if m.regexUnchecked.why == "" {
				m.regexUnchecked = nc
			}
			return nc
		}
		m.regexLeft -= f
	}
	opts := regexp2syntax.ParseOptions{RegexOptions: regexp2syntax.RegexOptions(regexp2.ECMAScript | regexp2.Unicode)}
	if _, err := regexp2syntax.Parse(s, opts); err == nil {
		return nil
	}
	opts.RegexOptions = regexp2syntax.RegexOptions(regexp2.ECMAScript)
	if _, err := regexp2syntax.Parse(s, opts); err != nil {
		return fmt.Errorf("not an ECMA-262 regular expression: %w", err)
	}
	return nil
}

// groupDepth is how deeply the groups of s, an ECMAScript pattern, nest (parentheses outside
// character classes, escapes and (?#…) comments, which end at the first ")" as regexp2 reads
// them; a "]" closes a class, also right after its "[" as in ECMAScript). A "[" regexp2 does
// not read as a class hides the groups after it: in a comment (skipped), or in extended mode
// ("(?x)", whose "#" starts a comment to the end of the line), where every "(" outside an
// escape is counted as one more level instead.
func groupDepth(s string) int {
	if extendedMode(s) {
		n := 0
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '(':
				n++
			}
		}
		return n
	}
	depth, deepest, class := 0, 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			i++
		case class:
			class = c != ']'
		case c == '[':
			class = true
		case c == '(' && strings.HasPrefix(s[i:], "(?#"):
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				return deepest // (the rest is the comment)
			}
			i += end
		case c == '(':
			depth++
			deepest = max(deepest, depth)
		case c == ')':
			depth = max(depth-1, 0)
		}
	}
	return deepest
}

// extendedMode reports whether s may turn on regexp2's extended mode (an inline option group
// naming x: "(?x)", "(?ix:", "(?-x)" too).
func extendedMode(s string) bool { return inlineOption(s, 'x') }

// inlineOption reports whether s may turn the option o (a lower-case letter) on or off in an
// inline option group ("(?x)", "(?ix:", "(?-x)", in either case), wherever it is.
func inlineOption(s string, o byte) bool {
	for i := strings.Index(s, "(?"); i >= 0; {
		j := i + 2
		for j < len(s) && (s[j] == '-' || 'a' <= s[j] && s[j] <= 'z' || 'A' <= s[j] && s[j] <= 'Z') {
			if s[j]|0x20 == o {
				return true
			}
			j++
		}
		k := strings.Index(s[j:], "(?")
		if k < 0 {
			return false
		}
		i = j + k
	}
	return false
}

// regexUncheckedAt is where in inst the string s is that checkFormatRegex did not parse: the
// location of a failure of it in err if there is one, else the first place s is found (a
// string, or the object holding s as a member name), else the root.
func regexUncheckedAt(err error, inst any, s string) []string {
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		for _, is := range argumentIssues(ve) {
			if f, ok := is.kind.(*kind.Format); ok {
				if nc, ok := f.Err.(regexNotChecked); ok && nc.s == s {
					return is.at
				}
			}
		}
	}
	var find func(v any, at []string) ([]string, bool)
	find = func(v any, at []string) ([]string, bool) {
		switch v := v.(type) {
		case string:
			return at, v == s
		case map[string]any:
			if _, ok := v[s]; ok {
				return at, true
			}
			for _, k := range slices.Sorted(maps.Keys(v)) {
				if p, ok := find(v[k], append(at[:len(at):len(at)], k)); ok {
					return p, true
				}
			}
		case []any:
			for i, e := range v {
				if p, ok := find(e, append(at[:len(at):len(at)], strconv.Itoa(i))); ok {
					return p, true
				}
			}
		}
		return nil, false
	}
	at, _ := find(inst, nil)
	return at
}

// regexp2's parser, under the i flag ("(?i)", "(?i:…)"), adds the case equivalents of a set
// written as ".", \S, \W, \D, \p{…} or \P{…} one code point at a time: ~30 ms for each whose
// code points run to a million ("\S", \P{ASCII}), whatever the pattern's length or nesting (a
// 16 KiB pattern of \S behind a lookahead: minutes to compile; a caller's 1 KiB string checked
// as "format": "regex", ~15 s, run on past the backstop, which gave the definition up). A
// pattern regexp2 would parse with more than maxPatternFoldSets of them (foldSets) is not
// compiled, and each counts as foldSetBytes against a definition's maxDefinitionPatternBytes
// and a validation's maxFormatRegexTotal. Go's parser reads the same sets at no such cost,
// but for \p{…} and \P{…} under (?i) (~0.3 ms each, goFoldSetBytes).
//
// A definition's distinct patterns ("pattern", "patternProperties" keys) cost at most
// maxDefinitionPatternBytes a compile (patternCompiler): 26 patterns of 16 KiB of \p{L} fit in
// a 512 KiB definition and took ~50 s to compile, before its first call was answered and for
// every compiled copy; within the budget a compile parses under a second (~0.8 s for 32 KiB
// of \p{L}, ~0.5 s for two patterns of 8 \S under (?i)). Real definitions' patterns add up
// to a few KiB (a pattern written many times counts once).
const (
	maxPatternFoldSets        = 8
	foldSetBytes              = 2 << 10
	goFoldSetBytes            = 16
	maxDefinitionPatternBytes = 32 << 10
)

// foldSets is how many sets costly to a parser under the i flag s may hold (see
// maxPatternFoldSets): 0 if no inline option group of s names i, else every \p and \P, and
// unless onlyProperties every "." and every \S, \W and \D, wherever they are (in a class, a
// comment: counted all the same).
func foldSets(s string, onlyProperties bool) int {
	if !inlineOption(s, 'i') {
		return 0
	}
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			if e := s[i+1]; e == 'p' || e == 'P' || !onlyProperties && (e == 'S' || e == 'W' || e == 'D') {
				n++
			}
			i++
		case c == '.' && !onlyProperties:
			n++
		}
	}
	return n
}

// patternCompiler is the regexp engine of one compile of a definition (compilePattern for m):
// each distinct pattern is compiled once (the library asks again for the meta-schema's
// "format": "regex"), and what they cost (their bytes, and their foldSets for the engine that
// compiled each) adds up to at most maxDefinitionPatternBytes: the pattern that goes past it
// is refused (patternNotCompiled), and every one after it.
type patternCompiler struct {
	m    *meteredSchema
	left int
	done map[string]compiledPattern
}

type compiledPattern struct {
	re  jsonschema.Regexp
	err error
}

func newPatternCompiler(m *meteredSchema) *patternCompiler {
	return &patternCompiler{m: m, left: maxDefinitionPatternBytes, done: map[string]compiledPattern{}}
}

func (pc *patternCompiler) compile(pattern string) (jsonschema.Regexp, error) {
	if c, ok := pc.done[pattern]; ok {
		return c.re, c.err
	}
	var c compiledPattern
	if len(pattern) <= pc.left || len(pattern) > maxSchemaPatternBytes {
		c.re, c.err = compilePattern(pattern, pc.m)
	}
	cost := len(pattern)
	switch c.re.(type) {
	case ecmaPattern:
		cost += foldSets(pattern, false) * foldSetBytes
	case goPattern:
		cost += foldSets(pattern, true)*goFoldSetBytes + goProgSize(pattern)/goInstsPerByte
	}
	if c.err == nil && cost > pc.left {
		c = compiledPattern{err: patternNotCompiled{fmt.Sprintf("is not compiled: the definition's patterns add up to more than the %d bytes the executor compiles (each '.', \\S, \\W, \\D, \\p or \\P of a pattern with the i flag counts as more)", maxDefinitionPatternBytes)}}
	}
	pc.left -= min(cost, pc.left)
	pc.done[pattern] = c
	return c.re, c.err
}

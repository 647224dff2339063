package demoservers

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

var kbSpec = spec{
	title:       "Company Knowledge Base",
	description: "Company knowledge base: policies, handbooks and FAQs",
	instructions: "Use search_knowledge_base with a short natural-language query (English or Chinese) to find policy snippets, " +
		"then get_document with a result id to read the whole document.",
	toolsTTL:   300_000,
	toolsScope: mcp.CacheScopePublic,
	tools:      kbTools,
}

var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "by": true, "can": true,
	"do": true, "does": true, "for": true, "from": true, "how": true, "i": true, "in": true, "is": true, "it": true,
	"many": true, "me": true, "much": true, "my": true, "of": true, "on": true, "or": true, "our": true, "the": true,
	"to": true, "we": true, "what": true, "when": true, "where": true, "which": true, "who": true, "with": true,
	"you": true, "your": true,
}

// stem is a deliberately tiny English stemmer: plural endings only.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

// terms splits text into search terms: lowercased, stemmed words without
// stopwords, and character bigrams of Han runs (a single Han character
// stands for itself).
func terms(text string) []string {
	var out []string
	var word, han []rune
	flushWord := func() {
		if len(word) > 0 {
			w := strings.ToLower(string(word))
			if !stopwords[w] {
				out = append(out, stem(w))
			}
			word = word[:0]
		}
	}
	flushHan := func() {
		switch {
		case len(han) == 1:
			out = append(out, string(han))
		case len(han) > 1:
			for i := 0; i+1 < len(han); i++ {
				out = append(out, string(han[i:i+2]))
			}
		}
		han = han[:0]
	}
	for _, r := range text {
		switch {
		case unicode.Is(unicode.Han, r):
			flushWord()
			han = append(han, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			flushHan()
			word = append(word, r)
		default:
			flushWord()
			flushHan()
		}
	}
	flushWord()
	flushHan()
	return out
}

type kbIndexed struct {
	doc      kbDoc
	title    map[string]bool
	keywords map[string]bool
	content  map[string]int
}

type kbIndex struct {
	docs []kbIndexed
	byID map[string]*kbIndexed
	idf  map[string]float64
}

func newKBIndex(corpus []kbDoc) *kbIndex {
	ix := &kbIndex{byID: make(map[string]*kbIndexed), idf: make(map[string]float64)}
	df := make(map[string]int)
	for _, d := range corpus {
		e := kbIndexed{doc: d, title: map[string]bool{}, keywords: map[string]bool{}, content: map[string]int{}}
		seen := map[string]bool{}
		for _, t := range terms(d.Title) {
			e.title[t], seen[t] = true, true
		}
		for _, t := range terms(strings.Join(d.Keywords, " , ")) {
			e.keywords[t], seen[t] = true, true
		}
		for _, t := range terms(d.Content) {
			e.content[t]++
			seen[t] = true
		}
		for t := range seen {
			df[t]++
		}
		ix.docs = append(ix.docs, e)
	}
	for i := range ix.docs {
		ix.byID[ix.docs[i].doc.ID] = &ix.docs[i]
	}
	n := float64(len(corpus))
	for t, c := range df {
		ix.idf[t] = math.Log(1 + n/float64(c))
	}
	return ix
}

type kbResult struct {
	ID       string  `json:"id"`
	Title    string  `json:"title"`
	Category string  `json:"category"`
	Snippet  string  `json:"snippet"`
	Score    float64 `json:"score"`
}

// search scores every document against the query terms: a title hit counts 3,
// a keyword hit 2, and content occurrences up to 3, each weighted by the
// term's idf; the score is normalized to [0, 1].
func (ix *kbIndex) search(query string, topK int) []kbResult {
	qterms := slices.Compact(slices.Sorted(slices.Values(terms(query))))
	var maxScore float64
	for _, t := range qterms {
		maxScore += ix.idf[t] * 8
	}
	results := []kbResult{}
	if maxScore == 0 {
		return results
	}
	for _, e := range ix.docs {
		var s float64
		var matched []string
		for _, t := range qterms {
			w := 0.0
			if e.title[t] {
				w += 3
			}
			if e.keywords[t] {
				w += 2
			}
			w += float64(min(e.content[t], 3))
			if w > 0 {
				s += ix.idf[t] * w
				matched = append(matched, t)
			}
		}
		if s == 0 {
			continue
		}
		results = append(results, kbResult{
			ID:       e.doc.ID,
			Title:    e.doc.Title,
			Category: e.doc.Category,
			Snippet:  snippet(e.doc.Content, matched),
			Score:    math.Round(s/maxScore*1000) / 1000,
		})
	}
	slices.SortFunc(results, func(a, b kbResult) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if len(results) > topK {
		results = results[:topK]
	}
	return results
}

func sentences(text string) []string {
	var out []string
	for _, s := range strings.SplitAfter(text, ". ") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// snippet returns the sentence of content with the most matched terms.
func snippet(content string, matched []string) string {
	best, bestHits := "", -1
	for _, s := range sentences(content) {
		hits := 0
		st := terms(s)
		for _, t := range matched {
			if slices.Contains(st, t) {
				hits++
			}
		}
		if hits > bestHits {
			best, bestHits = s, hits
		}
	}
	if r := []rune(best); len(r) > 240 {
		best = string(r[:239]) + "…"
	}
	return best
}

const kbSearchSchema = `{
  "type": "object",
  "properties": {
    "results": {
      "type": "array",
      "description": "Best matching documents, highest score first.",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": "string", "description": "Document id, for get_document."},
          "title": {"type": "string", "description": "Document title."},
          "category": {"type": "string", "enum": ["policy", "handbook", "faq", "security"], "description": "Document category."},
          "snippet": {"type": "string", "description": "The most relevant passage of the document."},
          "score": {"type": "number", "minimum": 0, "maximum": 1, "description": "Relevance, 0 to 1."}
        },
        "required": ["id", "title", "category", "snippet", "score"]
      }
    }
  },
  "required": ["results"]
}`

const kbDocumentSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "Document id."},
    "title": {"type": "string", "description": "Document title."},
    "category": {"type": "string", "enum": ["policy", "handbook", "faq", "security"], "description": "Document category."},
    "updatedAt": {"type": "string", "format": "date", "description": "Date of the last revision."},
    "content": {"type": "string", "description": "Full text of the document."}
  },
  "required": ["id", "title", "category", "updatedAt", "content"]
}`

const kbSummarySchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "description": "Document id."},
    "title": {"type": "string", "description": "Document title."},
    "summary": {"type": "string", "description": "The document's leading sentences."}
  },
  "required": ["id", "title", "summary"]
}`

type kbSearchResult struct {
	Results []kbResult `json:"results"`
}

type kbDocument struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Category  string `json:"category"`
	UpdatedAt string `json:"updatedAt"`
	Content   string `json:"content"`
}

type kbSummary struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Summary string `json:"summary"`
}

func kbTools(Options) (base, extras []server.ServerTool) {
	ix := newKBIndex(kbCorpus)

	search := mcp.NewTool("search_knowledge_base",
		mcp.WithToolTitle("Search knowledge base"),
		mcp.WithDescription("Search the company knowledge base (policies, employee handbook, IT and HR FAQs) and return the most relevant passages. "+
			"Use it for questions such as the refund period for software, travel rules, security requirements or public holidays."),
		mcp.WithString("query", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(500),
			mcp.Description("What to look for, in a few words or a question, in English or Chinese, e.g. \"software refund period\".")),
		mcp.WithInteger("topK", mcp.Min(1), mcp.Max(20), mcp.DefaultNumber(5),
			mcp.Description("Maximum number of results (1-20, default 5).")),
		outputSchema(kbSearchSchema),
		annotate("Search knowledge base", readOnly),
	)
	type searchArgs struct {
		Query string `json:"query"`
		TopK  int    `json:"topK"`
	}
	searchHandler := typed(func(_ context.Context, a searchArgs) (*mcp.CallToolResult, error) {
		if a.TopK <= 0 {
			a.TopK = 5
		}
		res := ix.search(a.Query, a.TopK)
		text := fmt.Sprintf("No documents match %q.", a.Query)
		if len(res) > 0 {
			text = fmt.Sprintf("%d result(s) for %q; best: %s (%s).", len(res), a.Query, res[0].Title, res[0].ID)
		}
		return mcp.NewToolResultStructured(kbSearchResult{Results: res}, text), nil
	})

	getDoc := mcp.NewTool("get_document",
		mcp.WithToolTitle("Get document"),
		mcp.WithDescription("Return the full text of one knowledge base document by id (ids come from search_knowledge_base)."),
		mcp.WithString("id", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(100),
			mcp.Description("Document id, e.g. POL-REFUND-SW.")),
		outputSchema(kbDocumentSchema),
		annotate("Get document", readOnly),
	)
	type idArgs struct {
		ID           string `json:"id"`
		MaxSentences int    `json:"maxSentences"`
	}
	getDocHandler := typed(func(_ context.Context, a idArgs) (*mcp.CallToolResult, error) {
		e, ok := ix.byID[a.ID]
		if !ok {
			return mcp.NewToolResultError(fmt.Sprintf("document %s not found", a.ID)), nil
		}
		d := e.doc
		out := kbDocument{ID: d.ID, Title: d.Title, Category: d.Category, UpdatedAt: d.UpdatedAt, Content: d.Content}
		return mcp.NewToolResultStructured(out, d.Title+"\n\n"+d.Content), nil
	})

	summarize := mcp.NewTool("summarize_document",
		mcp.WithToolTitle("Summarize document"),
		mcp.WithDescription("Return a short extractive summary (the leading sentences) of one knowledge base document."),
		mcp.WithString("id", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(100),
			mcp.Description("Document id, e.g. POL-TRAVEL.")),
		mcp.WithInteger("maxSentences", mcp.Min(1), mcp.Max(5), mcp.DefaultNumber(2),
			mcp.Description("Number of sentences in the summary (1-5, default 2).")),
		outputSchema(kbSummarySchema),
		annotate("Summarize document", readOnly),
	)
	summarizeHandler := typed(func(_ context.Context, a idArgs) (*mcp.CallToolResult, error) {
		e, ok := ix.byID[a.ID]
		if !ok {
			return mcp.NewToolResultError(fmt.Sprintf("document %s not found", a.ID)), nil
		}
		if a.MaxSentences <= 0 {
			a.MaxSentences = 2
		}
		s := sentences(e.doc.Content)
		s = s[:min(len(s), a.MaxSentences)]
		out := kbSummary{ID: e.doc.ID, Title: e.doc.Title, Summary: strings.Join(s, " ")}
		return mcp.NewToolResultStructured(out, out.Summary), nil
	})

	base = []server.ServerTool{
		{Tool: search, Handler: searchHandler},
		{Tool: getDoc, Handler: getDocHandler},
	}
	extras = []server.ServerTool{{Tool: summarize, Handler: summarizeHandler}}
	return base, extras
}

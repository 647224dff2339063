package search

import "math"

// FieldWeights weighs the fields of a tool in BM25F. A zero field takes its
// default; a negative one switches the field off.
type FieldWeights struct {
	Name        float64 // the original tool name (default 3)
	Title       float64 // default 2
	Lead        float64 // the first sentence of the description (default 1.5)
	Description float64 // the rest of the description (default 1)
	Params      float64 // parameter names and descriptions (default 0.5)
	Server      float64 // the server name (default 1)
	Tags        float64 // default 0.5
}

// Config tunes ranking. Its zero value means defaults; in the float fields
// zero means "default" and a negative value means "off".
type Config struct {
	// K1 and B are the BM25 saturation and length-normalization parameters
	// (defaults 1.2 and 0.75); B applies to every field.
	K1, B float64
	// Fields weighs the tool fields.
	Fields FieldWeights
	// ServerWeight scales the first kind of server-level evidence: the
	// query scored with BM25 against the server's description, added to the
	// score of that server's tools that match the query (default 0.3).
	ServerWeight float64
	// ServerCoverageWeight scales the second: a tool's score is multiplied by
	// 1 + w·s, where s is the IDF-weighted share of the query's terms matched
	// by any tool of its server, so the tools of a server that covers a
	// compound request between them move up together (default 1).
	ServerCoverageWeight float64
	// ServerNameWeight multiplies a tool's score by 1 + w·c, where c is the
	// IDF-weighted share of its server name's terms in the query: naming a
	// service ("... from Wikipedia") favours its tools (default 0.5).
	ServerNameWeight float64
	// SynonymWeight is the query weight of related words from a small table
	// of generic software vocabulary (create/add/new, delete/remove, ...),
	// relative to 1 for the words of the query itself (default 0.3).
	SynonymWeight float64
	// TranslationWeight is the query weight of the dictionary translations
	// of the query's words between English and Chinese, for the words of
	// that table (news/新闻, search/搜索, ...), relative to the word itself
	// (default 1: a translation is the same word, for tools described in
	// the other language). They count toward the score floor like the
	// query's own words.
	TranslationWeight float64
	// NameCoverageWeight multiplies a tool's score by 1 + w·c, where c is the
	// IDF-weighted share of its name's terms that the query contains: a tool
	// whose whole name is in the query outranks one that shares a word with
	// it (default 0.5).
	NameCoverageWeight float64
	// ProximityWeight multiplies a tool's score by 1 + w·p, where p is the
	// share of adjacent word pairs of its name that are adjacent in the query
	// ("bar chart" for generate_bar_chart) (default 0.5).
	ProximityWeight float64
	// FileIntentWeight governs file intent: when a clause of the query names
	// a text file or a folder (report.md, /root/notes/, not report.pdf or
	// chart.png, whose formats have tools of their own) together with a verb
	// of writing (save, write, export, ...) or reading (read, open, load,
	// ...), the best tool named for that operation (write_file, save_file,
	// read_file) takes a place of its own at the top of the results, and
	// the words that expressed the operation leave the rest of the ranking
	// (see FileIntentKeepsWords). A negative value switches file intent off;
	// a positive one also adds the words "write file" or "read file" to the
	// query at that weight (default 0: they are not added). Path components
	// count half in any case, being arguments rather than intent.
	FileIntentWeight float64
	// FileIntentKeepsWords keeps in the query the words of a file operation
	// that file intent gives a place of its own. By default they leave it:
	// the operation's verbs ("save it to notes.md") and the words "file" and
	// "path" that a query naming a file otherwise searches for, when every
	// file it names is taken by such an operation. The need is met by the
	// tool placed for it, so these words no longer pull the tools that
	// merely write or read something (write_note, excel_write_to_sheet)
	// ahead of the tools for the rest of the request. They stay when no
	// tool of the catalog (or none that Query.Allow permits) is named for
	// the operation.
	FileIntentKeepsWords bool
	// MinIDF is the score floor: a tool is returned only if the distinct query
	// terms it contains (words of the query or implied by it, not related
	// words) have an IDF sum of at least this, so a query that shares only
	// very common words with the catalog returns nothing (default 1; on tiny
	// catalogs it is capped below the IDF of a term found in one tool).
	MinIDF float64
	// DefaultK is the result count of a Query with K = 0 (default 10); MaxK
	// caps K (default 200).
	DefaultK, MaxK int
	// VectorWeight is the weight of the vector ranking in the fusion with
	// the lexical one, when a Query has a Vector (see Query.Vector): a tool
	// scores 1/(60+r) for its lexical rank r plus VectorWeight/(60+v) for
	// its vector rank v (default 1: the two rankings weigh the same; a
	// negative value switches vectors off, and Query.Vector is ignored).
	VectorWeight float64
	// MinCosine is the least cosine similarity with Query.Vector of a tool
	// that enters the fusion through its vector: below it, a tool is found
	// by its words only (default 0.3; a negative value removes the floor).
	// It is the vector ranking's score floor: a tool that shares no word
	// with the query is returned only above it.
	MinCosine float64
	// VectorCandidates is how many tools, best cosine first, the vector
	// ranking brings to the fusion (default 50; 0 or negative: default).
	VectorCandidates int
}

// config is Config resolved, plus internal settings.
type config struct {
	k1, b       float64
	w           [numFields]float64
	server      float64
	synonym     float64
	translation float64
	coverage    float64
	minIDF      float64
	defK, maxK  int
	serverCover float64
	pathTermW   float64
	pathTokW    float64
	srvName     float64
	proximity   float64
	fileOp      bool    // file intent on
	keepOpWords bool    // the words of a file operation stay in the query
	fileOpW     float64 // query weight of the implied words (0: not added)
	rerankDepth int     // candidates reranked by coverage and proximity
	maxTerms    int     // query terms scored, the most informative (weight × IDF)
	vecW        float64 // weight of the vector ranking in the fusion (0: vectors off)
	minCos      float64 // least cosine of a vector candidate
	vecCands    int     // vector candidates fused
}

func resolve(c Config) config {
	pick := func(v, def float64) float64 {
		switch {
		case v == 0, math.IsNaN(v), math.IsInf(v, 0):
			return def
		case v < 0:
			return 0
		}
		return v
	}
	r := config{
		k1:          pick(c.K1, 1.2),
		b:           pick(c.B, 0.75),
		server:      pick(c.ServerWeight, 0.3),
		serverCover: pick(c.ServerCoverageWeight, 1),
		srvName:     pick(c.ServerNameWeight, 0.5),
		synonym:     pick(c.SynonymWeight, 0.3),
		translation: pick(c.TranslationWeight, 1),
		coverage:    pick(c.NameCoverageWeight, 0.5),
		proximity:   pick(c.ProximityWeight, 0.5),
		fileOp:      !(c.FileIntentWeight < 0),
		keepOpWords: c.FileIntentKeepsWords,
		fileOpW:     pick(c.FileIntentWeight, 0),
		minIDF:      pick(c.MinIDF, 1),
		defK:        c.DefaultK,
		maxK:        c.MaxK,
		pathTermW:   0.5,
		pathTokW:    0.5,
		rerankDepth: 50,
		maxTerms:    32,
		vecW:        pick(c.VectorWeight, 1),
		minCos:      pick(c.MinCosine, 0.3),
		vecCands:    c.VectorCandidates,
	}
	if r.minCos == 0 { // negative: no floor
		r.minCos = math.Inf(-1)
	}
	if r.vecCands <= 0 {
		r.vecCands = 50
	}
	r.w[fName] = pick(c.Fields.Name, 3)
	r.w[fTitle] = pick(c.Fields.Title, 2)
	r.w[fLead] = pick(c.Fields.Lead, 1.5)
	r.w[fDesc] = pick(c.Fields.Description, 1)
	r.w[fParams] = pick(c.Fields.Params, 0.5)
	r.w[fServer] = pick(c.Fields.Server, 1)
	r.w[fTags] = pick(c.Fields.Tags, 0.5)
	if r.b > 1 {
		r.b = 1
	}
	if r.defK <= 0 {
		r.defK = 10
	}
	if r.maxK <= 0 {
		r.maxK = 200
	}
	if r.defK > r.maxK {
		r.defK = r.maxK
	}
	return r
}

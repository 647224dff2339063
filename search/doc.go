// Package search is the lexical tool index behind the search_tools meta-tool:
// given a request in natural language, it finds the few relevant tools among
// a catalog of up to ~100k MCP tools, so the model only sees those.
//
// It is pure Go and does no I/O: it consumes Doc values (one per tool, built
// by the indexer from registry snapshots; see ParamsFromSchema) through
// Upsert and Remove, and produces ranked Hits from Search. It publishes and
// subscribes to no subject, acknowledges nothing, and owns no state besides
// memory: an indexer replica rebuilds it by replaying the catalog.
// `select:NAME[,NAME]` queries are resolved by the caller, not here.
//
// # Index
//
// Postings lists map each term (interned once) to the tools that contain it,
// with the term's frequency in each field of the tool (4 bits per field, 8
// bytes a posting): name, title, the first sentence of the description, the
// rest of it, parameter names and descriptions, server name, tags. Field
// lengths are one-byte codes. Server descriptions are indexed once per
// server, not per tool. A search touches only the postings of its terms, at
// most the 32 most informative (query weight × IDF) of a verbose request, and
// those of the operation ("write file", in the request's verbs: "save file")
// when the request implies a file operation (that search, the same for
// every unfiltered query with those verbs, is cached until the next write):
// no query scans the catalog. A removal costs the removed tool's own terms: its slot and its
// postings stay as tombstones that searches skip (document frequencies count live tools only,
// so scores are those of a fresh index) until compaction reclaims them, with unused terms,
// once removed slots are more than 1024 and a quarter of the live ones.
//
// Index is safe for concurrent use: searches share a read lock; Upsert,
// Remove, SetVector and ResetVectors take the write lock. Query.Allow runs
// under the read lock.
//
// # Text analysis
//
// Tokenize reads text in Unicode normalization form C (an accent spelled as a
// combining mark, e + U+0301, is the precomposed é), folds case (ΟΔΟΣ is οδος,
// FİLES is files), splits on non-alphanumerics (combining marks, the vowel
// signs of Indic scripts too, continue a word: खोजें; invisible format
// characters, a soft hyphen or a zero-width joiner, are ignored: docu + U+00AD + ment is
// document; a zero-width space is a break), camelCase and letter/digit boundaries (keeping the
// joined form too: getLogs → get, log, getlog; and a short identifier inside
// one, whose parts alone are dropped: listS3Buckets → s3), drops a small English stop list, and applies a light stemmer
// (Porter step 1 with a final-e rule) to ASCII words. Han, Hiragana, Katakana
// and Hangul runs become overlapping bigrams plus unigrams, so Chinese queries
// and descriptions match without a dictionary. Queries are also searched
// for the dictionary translations of their words between English and Chinese,
// for the words of the related-words table below (news/新闻, search/搜索,
// spreadsheet/电子表格: bigrams only, sharing the word's weight), so that the
// tools of servers described in Chinese, common among MCP servers, are found
// by requests in English and the other way round. Input is bounded (64 KiB and
// 4096 terms per field, 8 KiB per query, 48-byte terms): hostile descriptions
// cost little.
//
// # Ranking
//
// Search scores with BM25F (k1 = 1.2, b = 0.75; field weights name 3, title 2,
// lead sentence 1.5, description 1, parameters 0.5, server name 1, tags 0.5),
// then applies, all configurable in Config and measured on the real catalog
// in testdata/eval/retrieval (see the package tests):
//
//   - related words from a small table of generic software vocabulary
//     (create/add/new, delete/remove, fetch/get, doc/docx/word...) at 0.3 of a
//     query word's weight (Config.SynonymWeight), and the Chinese or English
//     translations of the query's words at its full weight
//     (Config.TranslationWeight): a translation is the same word, for a tool
//     described in the other language;
//   - server evidence: BM25 of the query against the server description, and
//     a boost for tools whose server's tools cover much of the query between
//     them (a compound request is usually served by one or two servers);
//   - multiplicative boosts for a tool whose name terms, or whose server name
//     terms, the query contains (IDF-weighted share), and whose adjacent name
//     words are adjacent in the query ("bar chart" → generate_bar_chart); the
//     joined form of a camelCase name whose parts are all words (getlog of
//     getLogs) is another spelling of them, not one more word: it counts
//     only when the query has it, and not in the name's length, so getLogs,
//     get_logs and get-logs rank alike;
//   - file intent: when a clause names a text file or a folder (report.md,
//     /root/notes/; not report.pdf or chart.png, whose formats have tools of
//     their own; not words joined by a slash, CI/CD or TCP/IP) with a verb of writing (save, write, export, ...) or of
//     reading (read, open, load, ...), the operation is a need of its own: the
//     best tool named for it (write_file, save_file, read_file: the words of
//     the operation or related words in its name) takes a place at the top,
//     after exact mentions, instead of competing through added query words
//     with the tools for the rest of the request. The words that expressed
//     the operation then leave the query (Config.FileIntentKeepsWords keeps
//     them): its verbs, and the words "file" and "path" otherwise searched
//     for any query naming a file, when every file named is taken by such an
//     operation. The need is met by the tool placed for it, so these words
//     no longer pull the tools that merely write or read something
//     (write_note, excel_write_to_sheet) ahead of those for the rest of the
//     request. They stay when no tool (that Query.Allow permits) is named
//     for the operation, which a search for the operation alone, in the
//     request's own verbs ("save file"), tells. Path components weigh half
//     (they are arguments, not intent);
//   - exact mentions of a public name (server__tool) or of a multi-word
//     original name (create_issue, 获取新闻; not search or 搜索) put those
//     tools first.
//
// A score floor drops tools whose matched query words are too common (their
// IDF sum is under Config.MinIDF): gibberish, stop words or a word found in
// most tools return nothing (translations count toward it as the words they
// translate; a character of a longer CJK word of the query does not count
// alone: 汽车, car, is not found in 火车, train, through 车). Ties are broken
// by ID, so results are deterministic. Name and server-name coverage and name
// proximity rerank the 50 best candidates by the other scores, whatever K: a
// larger K adds the next candidates after them, as they scored (reranking
// only raises a score), so the best K tools of a lexical search are the first
// K of its best K+n.
//
// Query.Allow filters before ranking: a rejected tool is never scored, never
// returned, and never takes one of the K places. One that is in the
// statistics (a tool the searcher may see that a request's own filter
// rejects) still counts among the query words its server's tools match
// between them (server coverage, a server statistic), so that a filter picks
// among the tools without changing their scores, as long as the tools it
// lets through are among the 50 best candidates without it, the query
// implies no file operation (whose tool is looked for among those it lets
// through) and the search is lexical (a fusion with vectors scores by rank).
// A tool the query names exactly keeps its place first, but its score, set
// above the best of the others', follows those the filter lets through.
// Collection statistics (IDF,
// average lengths, server statistics, the score floor) are those of the
// whole catalog, or with Query.Visible those of the tools the searcher may
// see: the search then ranks and scores exactly as over an index holding
// only those tools, so a tool it may not see weighs on nothing it is shown.
// The statistics of a visibility class (Query.VisibleKey) are computed once
// per generation of the index (a pass over every tool) and kept: for at most
// 256 classes, with at most 262,144 remembered document frequencies over all
// of them (a frequency not remembered is counted again), so that keys a
// client makes up cost searches time, not the index memory.
//
// On a small catalog the floor is lowered below the IDF of a word found in
// as many tools as a server has on average (at least three, at most 16 and
// half the catalog), so that a word picking out one server's tools still counts
// ("knowledge" in the four tools of a knowledge base among 11). A catalog of
// at most eight tools (or the part of one a searcher may see) has no floor
// but matching a query word: there every word is in most tools.
//
// # Vectors
//
// Search is optionally hybrid. The indexer may give tools an embedding
// (computed elsewhere: the package does no I/O), in Doc.Vector or later with
// SetVector, and a request one, in Query.Vector. Vectors are stored
// normalized to unit length; a zero, empty or non-finite vector is refused.
// The first vector stored fixes the index's dimension until ResetVectors (the
// embedding model changed) or until no tool has a vector: vectors of another
// dimension are refused, and a Query.Vector of another dimension is ignored.
// Tools are keyed by ID, as in Upsert and Remove; Upsert replaces the tool's
// vector with Doc.Vector (none if nil), Remove drops it.
//
// The vectors live in one contiguous []float32 (one row of Vectors() dims
// per tool that has one, rows packed: a removed row takes the last one), so
// a search scans them in order, by brute force: cosine is a dot product of
// unit vectors. A tool's record holds its row, the row its tool slot; both
// follow the slots through compaction. At 10k tools of 384 dimensions, the
// scan costs about 2 ms of one core (see BenchmarkSearch10kVector).
//
// With a usable Query.Vector (the index holds vectors of its dimension and
// Config.VectorWeight is not negative), Search fuses two rankings:
//
//   - the lexical ranking, exactly as without a vector (floor, filters,
//     boosts, exact mentions and file intent), to its reranked depth (at
//     least max(K, 50));
//   - the Config.VectorCandidates (50) tools of highest cosine with the
//     query vector, among those of cosine at least Config.MinCosine (0.3)
//     that pass the same filters as lexical candidates: Query.Allow (its
//     verdicts are shared with the lexical ranking, so it still runs at
//     most once per tool and query; a rejected tool takes no candidate
//     place), and removed tools have no vector. Ties go to the smaller ID.
//
// by weighted reciprocal rank fusion: a tool scores 1/(60 + its lexical rank)
// + VectorWeight/(60 + its vector rank), a ranking it is missing from adding
// nothing, and the fused ranking orders tools by that score, then by lexical
// score, then by ID. Hit.Score is that fused score. A tool that shares no
// word with the request (under the lexical score floor) can thus be
// returned, through its vector alone, when its cosine clears MinCosine: the
// vector ranking's own floor. The tools that the lexical ranking places
// first on their own keep their places: those the request names exactly,
// then the tool of each file operation (file intent): they are the
// request's explicit needs, and the fusion orders the rest after them. Their
// scores are raised above the others' so scores stay ordered (each adds
// (1+VectorWeight)/61, the highest fused score, per place from its own to
// the end of that head). With no usable vector, nothing of this applies: a
// search is byte for byte what it is in an index without vectors.
//
// # Evaluation
//
// Evaluate computes the group-aware metrics of
// testdata/eval/retrieval/PROVENANCE.md (recall@k, complete@k, nDCG@10, MRR).
package search

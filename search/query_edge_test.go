package search

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSearchFloorCJKCharacter: a Chinese query word that no tool contains
// returns nothing, even when one of its characters is in some tool: 汽车
// (car) shares 车 with 火车 (train), a different word. A single character,
// written alone, still counts.
func TestSearchFloorCJKCharacter(t *testing.T) {
	ix := New(Config{})
	descs := []string{
		"查询火车票余票信息", // train tickets
		"获取今日新闻头条",  // news headlines
		"Get the weather forecast for a city.",
		"Convert a document to PDF.",
		"List files in a directory.",
		"Send an email message.",
		"Translate text between languages.",
		"Create a calendar event.",
		"Search the web for pages.",
		"Play a music track.",
	}
	for i, d := range descs {
		ix.Upsert(Doc{ID: fmt.Sprintf("s%d__t%d", i, i), Server: fmt.Sprintf("s%d", i), Name: fmt.Sprintf("t%d", i), Description: d})
	}
	for _, q := range []string{"汽车", "股票价格", "天气预报"} {
		if hits := ix.Search(Query{Text: q}); len(hits) != 0 {
			t.Errorf("Search(%q) = %v, want nothing: no tool has any of its words", q, ids(hits))
		}
	}
	for _, q := range []string{"火车票", "车", "新闻", "火车 汽车"} {
		if hits := ix.Search(Query{Text: q}); len(hits) == 0 || hits[0].ID != "s0__t0" && hits[0].ID != "s1__t1" {
			t.Errorf("Search(%q) = %v, want the tool with that word first", q, ids(hits))
		}
	}
}

// TestFullwidthQuery: Chinese and Japanese input methods often type Latin letters and digits
// in their fullwidth forms (ＰＤＦ, ｍｐ３); they are the same words as their ASCII forms.
func TestFullwidthQuery(t *testing.T) {
	if got := Tokenize("ＧｉｔＨｕｂ　ＰＤＦ转换 ｍｐ３"); !slices.Contains(got, "github") || !slices.Contains(got, "pdf") || !slices.Contains(got, "mp3") {
		t.Errorf("Tokenize = %q, want github, pdf and mp3 among the terms", got)
	}
	ix := newSmall(t)
	if hits := ix.Search(Query{Text: "ＧｉｔＨｕｂ ｉｓｓｕｅ"}); len(hits) == 0 || !strings.HasPrefix(hits[0].ID, "github__") {
		t.Errorf("fullwidth query: got %v, want a github tool first", ids(hits))
	}
}

// TestLongCamelCaseName: a camelCase tool name longer than one term (48 bytes) is still split
// into its words; a long blob (a hash, base64) still yields nothing.
func TestLongCamelCaseName(t *testing.T) {
	const name = "getRepositoryContributorStatisticsForOrganization" // 49 characters
	got := Tokenize(name)
	for _, w := range []string{"repositori", "contributor", "statistic", "organization"} {
		if !slices.Contains(got, w) {
			t.Errorf("Tokenize(%q) = %q, want %q among the terms", name, got, w)
		}
	}
	ix := newSmall(t)
	ix.Upsert(Doc{ID: "gh__" + name, Server: "gh", Name: name, Description: "Statistics of an organization's repositories."})
	if hits := ix.Search(Query{Text: "repository contributor statistics"}); len(hits) == 0 || hits[0].ID != "gh__"+name {
		t.Errorf("search by the words of its name: %v", ids(hits))
	}
	for _, blob := range []string{
		"aGVsbG8gd29ybGQgdGhpcyBpcyBhIGJhc2U2NCBibG9iIG9mIHRleHQ",          // base64
		"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", // sha256
	} {
		if got := Tokenize(blob); len(got) != 0 {
			t.Errorf("Tokenize(%q) = %q, want nothing", blob, got)
		}
	}
}

// TestSlashWordsAreNotPaths: a slash between two words (CI/CD, TCP/IP, A/B, and/or, a date) is
// not a folder: with a verb of writing it implies no file write, so write_file does not take
// the first place from the tool the request is about, and the verb stays in the query. Paths
// still do: rooted, a folder, a file, or several components.
func TestSlashWordsAreNotPaths(t *testing.T) {
	ix := newSmall(t)
	ix.Upsert(Doc{ID: "charts__generate_network_diagram", Server: "charts", Name: "generate_network_diagram",
		Description: "Generate a network diagram image from nodes and links."})
	ix.Upsert(Doc{ID: "ci__create_pipeline", Server: "ci", Name: "create_pipeline",
		Description: "Create a CI/CD pipeline for a repository."})
	for q, want := range map[string]string{
		"Generate a TCP/IP network diagram":            "charts__generate_network_diagram",
		"create a CI/CD pipeline for my repo":          "ci__create_pipeline",
		"create an issue in gitlab about the A/B test": "gitlab__create_issue",
		"create an issue in gitlab on 12/25/2026":      "gitlab__create_issue",
		"save the notes to docs/":                      "fs__write_file",
		"write the notes into src/main/notes":          "fs__write_file",
		"save the notes to drafts/notes.md":            "fs__write_file",
		"save the notes to ~/notes":                    "fs__write_file",
	} {
		if got := ids(ix.Search(Query{Text: q, K: 3})); len(got) == 0 || got[0] != want {
			t.Errorf("%q → %v, want %s first", q, got, want)
		}
	}
	for word, want := range map[string]bool{
		"CI/CD": false, "TCP/IP": false, "A/B": false, "and/or": false, "12/25/2026": false, "read/write,": false,
		"docs/": true, "src/main/notes": true, "drafts/notes.md": true, "~/notes": true, "/tmp": true,
		"./data": true, "..\\data": true, "C:\\work": true, "D:/work": true, "x\\y\\z": true,
	} {
		if got := isPath(word); got != want {
			t.Errorf("isPath(%q) = %v, want %v", word, got, want)
		}
	}
}

// TestDecomposedAccents: text with accents spelled as combining marks (e + U+0301, as
// copied from some PDFs and macOS file names; Korean as conjoining jamo) reads as the same
// words as its precomposed form, both ways, and still splits at camelCase.
func TestDecomposedAccents(t *testing.T) {
	nfd := "Re\u0301server une table dans un cafe\u0301 pre\u0301fe\u0301re\u0301"
	nfc := "Réserver une table dans un café préféré"
	if a, b := Tokenize(nfd), Tokenize(nfc); !slices.Equal(a, b) {
		t.Errorf("Tokenize(NFD) = %q, Tokenize(NFC) = %q", a, b)
	}
	if a, b := Tokenize("cre\u0301erFichier"), Tokenize("créerFichier"); !slices.Equal(a, b) {
		t.Errorf("camelCase: Tokenize(NFD) = %q, Tokenize(NFC) = %q", a, b)
	}
	if a, b := Tokenize("\u1112\u1161\u11ab\u1100\u116e\u11a8"), Tokenize("한국"); !slices.Equal(a, b) {
		t.Errorf("Hangul: Tokenize(jamo) = %q, Tokenize(syllables) = %q", a, b)
	}
	for _, c := range []struct{ desc, query string }{{nfd, "café"}, {nfc, "cafe\u0301"}} {
		ix := newSmall(t)
		ix.Upsert(Doc{ID: "resto__book_table", Server: "resto", Name: "book_table", Description: c.desc})
		if got := ids(ix.Search(Query{Text: c.query, K: 3})); len(got) == 0 || got[0] != "resto__book_table" {
			t.Errorf("%q over %q → %v, want resto__book_table", c.query, c.desc, got)
		}
	}
}

// TestShortIdentifiersInsideCamelCase: a short identifier inside a camelCase name, whose
// parts alone are dropped (S3, EC2, K8s, X509), is a term of its own, as it is when written
// alone: "list s3 buckets" finds listS3Buckets first.
func TestShortIdentifiersInsideCamelCase(t *testing.T) {
	for name, want := range map[string]string{
		"listS3Buckets": "s3", "getEC2Instances": "ec2", "listK8sPods": Tokenize("k8s")[0],
		"getX509Cert": "x509", "uploadToS3": "s3", "getV2Config": "v2",
	} {
		if got := Tokenize(name); !slices.Contains(got, want) {
			t.Errorf("Tokenize(%q) = %q, want %q among them", name, got, want)
		}
	}
	// A number with longer words around it adds nothing: base64Encode is base, encode.
	if got := Tokenize("base64Encode"); !slices.Equal(got, []string{"base", "64", "encod", "base64encod"}) {
		t.Errorf("Tokenize(base64Encode) = %q", got)
	}
	ix := newSmall(t)
	for _, d := range []Doc{
		{ID: "aws__listS3Buckets", Server: "aws", Name: "listS3Buckets", Description: "List the buckets of the account."},
		{ID: "gcs__list_buckets", Server: "gcs", Name: "list_buckets", Description: "List the buckets of a project."},
		{ID: "kube__listK8sPods", Server: "kube", Name: "listK8sPods", Description: "List the pods of a namespace."},
		{ID: "podman__list_pods", Server: "podman", Name: "list_pods", Description: "List the pods."},
	} {
		ix.Upsert(d)
	}
	for q, want := range map[string]string{"list s3 buckets": "aws__listS3Buckets", "list k8s pods": "kube__listK8sPods"} {
		if got := ids(ix.Search(Query{Text: q, K: 3})); len(got) == 0 || got[0] != want {
			t.Errorf("%q → %v, want %s first", q, got, want)
		}
	}
}

// TestSingleCJKWordNameNotExact: a tool whose whole name is one common Chinese word (搜索,
// search) is not put first by a query that mentions the word, as a tool named "search" is
// not: an exact mention needs a name of two words at least. A longer Chinese name still is
// one (获取新闻, get news).
func TestSingleCJKWordNameNotExact(t *testing.T) {
	ix := newSmall(t)
	ix.Upsert(Doc{ID: "files__x1", Server: "files", Name: "搜索", Description: "在本地文件中搜索文本"})
	ix.Upsert(Doc{ID: "news__x2", Server: "news", Name: "获取新闻", Description: "获取今日新闻头条"})
	ix.Upsert(Doc{ID: "web__search", Server: "web", Name: "search", Description: "Search the web."})
	for q, want := range map[string]string{
		"搜索 新闻头条":               "news__x2", // search news headlines
		"search news headlines": "news__x2",
		"获取新闻，搜索":               "news__x2", // an exact mention of 获取新闻
	} {
		if got := ids(ix.Search(Query{Text: q, K: 3})); len(got) == 0 || got[0] != want {
			t.Errorf("%q → %v, want %s first", q, got, want)
		}
	}
	for name, want := range map[string]bool{"搜索": false, "search": false, "获取新闻": true, "get新闻": true, "create_issue": true} {
		if got := nameKey(name) != ""; got != want {
			t.Errorf("nameKey(%q) set: %v, want %v", name, got, want)
		}
	}
}

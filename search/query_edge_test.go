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

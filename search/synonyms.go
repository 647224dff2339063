package search

import "strings"

// relatedGroups is a small table of generic software and everyday request
// vocabulary: words a user and a tool author use for the same operation or
// object. It says nothing about any particular catalog. A query term also
// searches for the other members of its groups, at Config.SynonymWeight.
var relatedGroups = []string{
	// operations
	"create add new make generate insert build open",
	"delete remove erase destroy drop",
	"find search lookup query look seek",
	"fetch get retrieve obtain download",
	"read open load view",
	"write save store export persist",
	"update edit modify change set",
	"list enumerate browse",
	"show display view render",
	"run execute exec launch start invoke",
	"stop kill terminate cancel",
	"send post publish submit",
	"convert transform translate",
	"compare diff difference",
	"analyze analysis analyse inspect examine",
	"summarize summary overview",
	"calculate compute calculator evaluate math arithmetic",
	"plot chart graph visualize diagram",
	"recommend suggest recommendation",
	"merge combine join concatenate",
	"navigate browse visit go",
	"click press tap",
	"screenshot capture snapshot",
	"schedule plan",
	// objects
	"ticket issue bug",
	"image picture photo img png jpg jpeg",
	"document doc docx word",
	"spreadsheet sheet xlsx excel workbook",
	"presentation slide ppt pptx powerpoint deck",
	"markdown md",
	"pdf",
	"csv table",
	"file files",
	"directory folder dir",
	"repository repo",
	"message msg chat",
	"email mail",
	"web website site webpage page url link internet online",
	"news headline article",
	"paper article publication research",
	"location place address geo coordinate",
	"route direction directions navigation",
	"time date clock today tomorrow yesterday",
	"latest recent newest current",
	"history historical past previous",
	"user account profile",
	"config configuration setting settings",
	"library package dependency module lib",
	"version release",
	"note memo",
	"task todo",
	"video clip",
	"audio sound music",
	"trend trending popular",
}

// related maps a term to the other terms of its groups (stemmed forms).
var related = func() map[string][]string {
	m := map[string][]string{}
	for _, g := range relatedGroups {
		var terms []string
		for _, w := range strings.Fields(g) {
			for _, t := range Tokenize(w) {
				if !contains(terms, t) {
					terms = append(terms, t)
				}
			}
		}
		for _, a := range terms {
			for _, b := range terms {
				if a != b && !contains(m[a], b) {
					m[a] = append(m[a], b)
				}
			}
		}
	}
	return m
}()

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

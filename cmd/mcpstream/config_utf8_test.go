package main

import (
	"strings"
	"testing"
)

// TestConfigNotUTF8NamesTheLine: a file saved in another encoding (a Latin-1 "café" in a
// comment, say) was refused with yaml's "incomplete UTF-8 octet sequence" alone: no line, and
// nothing to say what to do. The message names the line and column of the first byte that is
// not UTF-8, and says to save the file as UTF-8. A UTF-16 file with its byte order mark is
// still read (yaml converts it).
func TestConfigNotUTF8NamesTheLine(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"latin-1 comment": {"servers: []\n# caf\xe9\n", "c.yaml:2: byte 0xe9 at column 6 is not UTF-8: save the file as UTF-8"},
		"key":             {"servers:\n  - {name: a, command: x}\n\xffkey: 1\n", "c.yaml:3: byte 0xff at column 1 is not UTF-8: save the file as UTF-8"},
		"after text":      {"servers:\n  - {name: é\xc3, command: x}\n", "c.yaml:2: byte 0xc3 at column 13 is not UTF-8: save the file as UTF-8"},
	} {
		_, err := parseConfig("c.yaml", []byte(tc.yaml), noEnv)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", name, err, tc.want)
		}
	}
	utf16 := []byte("\xff\xfes\x00e\x00r\x00v\x00e\x00r\x00s\x00:\x00 \x00[\x00]\x00\n\x00")
	if _, err := parseConfig("c.yaml", utf16, noEnv); err != nil {
		t.Errorf("UTF-16 with a byte order mark: %v", err)
	}
}

// TestConfigNotUTF8OnlyWhenYAMLSaysSo: the first byte that is not UTF-8 was named whatever
// yaml's error, so a tab that cannot start a token on line 2 was reported as a Latin-1 byte
// 300 lines below (yaml stops at the first problem it meets, and had not read that far). And a
// UTF-8 byte order mark, which no editor shows, was counted as a column of line 1.
func TestConfigNotUTF8OnlyWhenYAMLSaysSo(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"tab first": {"servers:\n\t- a\n" + strings.Repeat("# comment\n", 300) + "# caf\xe9\n",
			"c.yaml:2: found character that cannot start any token"},
		"byte order mark": {"\xef\xbb\xbfservers: [] # caf\xe9\n", "c.yaml:1: byte 0xe9 at column 18 is not UTF-8: save the file as UTF-8"},
	} {
		_, err := parseConfig("c.yaml", []byte(tc.yaml), noEnv)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", name, err, tc.want)
		}
	}
}

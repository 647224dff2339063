package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSearchEmbeddingsPortChecked: url.Parse takes a port of any digits, so a url with a port
// out of range (a typo: 80800) passed the load, and every request to the endpoint then failed
// to dial (embeddings_unavailable, retried without end) while the README says the
// configuration file's url is checked at load.
func TestSearchEmbeddingsPortChecked(t *testing.T) {
	for _, url := range []string{"http://127.0.0.1:80800/v1", "http://127.0.0.1:0/v1"} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte("servers: []\nsearch:\n  embeddings: {url: '"+url+"', model: m}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(path, lookupTest)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "field url") {
			t.Errorf("%s: loadConfig: %v, want a configuration error of the url", url, err)
		}
	}
}

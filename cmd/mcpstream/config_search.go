package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/mcpstream/mcpstream/embeddings"
	"github.com/mcpstream/mcpstream/registrysync"
)

// searchConfig is the search section of the configuration file.
type searchConfig struct {
	// Embeddings, when present, makes catalog search hybrid (lexical + vectors).
	Embeddings *embeddingsConfig `yaml:"embeddings"`
}

// embeddingsConfig is an OpenAI-compatible embeddings endpoint.
type embeddingsConfig struct {
	URL        string `yaml:"url"`        // base URL: POST URL/embeddings, e.g. https://api.openai.com/v1; may hold ${ENV_VAR}
	Model      string `yaml:"model"`      // e.g. text-embedding-3-small
	APIKey     string `yaml:"apiKey"`     // usually ${OPENAI_API_KEY}; sent as a bearer token
	Dimensions int    `yaml:"dimensions"` // optional: ask the model for this many dimensions
	Timeout    string `yaml:"timeout"`    // bound of one search request's embedding (default 2s)
}

// maxEmbeddingDimensions bounds search.embeddings.dimensions and eval's --embeddings-dimensions.
const maxEmbeddingDimensions = 16384

// resolveSearch validates the search section and builds its embedder (nil without one).
func (c *fileConfig) resolveSearch(lookup func(string) (string, bool)) error {
	if c.Search == nil || c.Search.Embeddings == nil {
		return nil
	}
	e := c.Search.Embeddings
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &configError{File: c.Path, Where: "search.embeddings", Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	// ${ENV_VAR} in the URL as in a server's (a host, a deployment path or a query parameter
	// that holds a credential): the resolved values are secrets, like the key.
	rawURL, urlSecrets, uerr := expandEnv(e.URL, lookup)
	u, err := url.Parse(rawURL)
	switch {
	case e.URL == "":
		bad("url", "required: the base URL of an OpenAI-compatible embeddings API (POST URL/embeddings)")
	case uerr != nil:
		bad("url", "%v", uerr)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		bad("url", "want an http(s) URL such as https://api.openai.com/v1")
	case !embeddings.ValidPort(u.Port()):
		// url.Parse takes any digits: every request would fail to dial, retried without end.
		bad("url", "the port must be from 1 to 65535")
	case strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/embeddings") &&
		!strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/deployments/embeddings"):
		// The endpoint's own URL: every request would go to .../embeddings/embeddings (404).
		// (A deployment may be named so: Azure's .../deployments/NAME is a base URL.)
		bad("url", "want the API's base URL, without /embeddings (POST URL/embeddings is sent), such as https://api.openai.com/v1")
	}
	if e.Model == "" {
		bad("model", "required, e.g. text-embedding-3-small")
	}
	if e.Dimensions < 0 || e.Dimensions > maxEmbeddingDimensions {
		bad("dimensions", "must be between 1 and %d (or absent)", maxEmbeddingDimensions)
	}
	key, secrets, kerr := expandEnv(e.APIKey, lookup)
	if kerr != nil {
		bad("apiKey", "%v", kerr)
	} else if strings.IndexFunc(key, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) >= 0 {
		// net/http refuses to send it: every request to the endpoint would fail.
		bad("apiKey", "holds a control character (a line break at the end of the variable's value?)")
	}
	timeout := time.Duration(0)
	if e.Timeout != "" {
		d, err := time.ParseDuration(e.Timeout)
		if err != nil || d <= 0 {
			bad("timeout", "want a positive duration such as 2s")
		}
		timeout = d
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// What the connectors would redact of such a URL (its password, credential-like query
	// parameters) and the resolved references: kept out of the client's errors and, with the
	// key, out of audit events.
	urlSecrets = registrysync.SecretValues(registrysync.ServerConfig{URL: rawURL, Secrets: urlSecrets})
	c.embedder = &embeddings.Client{BaseURL: rawURL, Model: e.Model, APIKey: key, Dimensions: e.Dimensions, Secrets: urlSecrets}
	c.embedTimeout = timeout
	c.embedSecrets = append(append(secrets, key), urlSecrets...)
	return nil
}

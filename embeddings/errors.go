package embeddings

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcpstream/mcpstream/redact"
)

// ErrEmbeddings is matched (errors.Is) by every error of this package.
var ErrEmbeddings = errors.New("embeddings")

// Error codes (Error.Code).
const (
	CodeUnavailable = "embeddings_unavailable" // transport failure, timeout, cancelled context, 5xx, 429, 408
	CodeRejected    = "embeddings_rejected"    // other non-2xx statuses: bad key, bad model...
	CodeMalformed   = "embeddings_malformed"   // a 2xx response that is not as specified
	CodeConfig      = "embeddings_config"      // missing BaseURL/Model, bad URL, negative settings
)

// Error is the error of every failed Embed call.
type Error struct {
	Code    string // one of the Code constants
	Message string // printable, at most 200 bytes of a response body, never the APIKey
	Status  int    // HTTP status when there was a response, else 0
	// RetryAfter is how long a 429 or 503 response asked to be left alone (its Retry-After
	// header, in seconds or as an HTTP date), at most an hour; 0 when it did not say.
	RetryAfter time.Duration

	cause error // the underlying error, if any: matched by Is
}

func (e *Error) Error() string { return "embeddings: " + e.Code + ": " + e.Message }

// Unwrap returns ErrEmbeddings.
func (e *Error) Unwrap() error { return ErrEmbeddings }

// Is reports whether the underlying error (transport, context, JSON) matches target, so that
// errors.Is(err, context.DeadlineExceeded) holds when the context expired.
func (e *Error) Is(target error) bool { return e.cause != nil && errors.Is(e.cause, target) }

// placeholder replaces the APIKey in messages.
const placeholder = "[redacted]"

// maxSnippet is the most bytes of a response body an error message quotes.
const maxSnippet = 200

// fail returns an *Error whose message is made printable and has the APIKey redacted.
func (c *Client) fail(code string, status int, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: c.clean(fmt.Sprintf(format, args...)), Status: status, cause: cause}
}

// clean returns s printable and without the APIKey (redacted before and after the characters
// are replaced, so neither the key nor a character-replaced copy of it remains).
func (c *Client) clean(s string) string {
	return c.redact(printable(c.redact(s)))
}

func (c *Client) redact(s string) string {
	if len(c.Secrets) > 0 {
		// Longest first, overlapping values together (package redact).
		s = redact.New(append([]string{c.APIKey}, c.Secrets...)...).String(s)
	}
	if c.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.APIKey, placeholder) // a key too short for redact.New too
}

// snippet returns the start of a response body for an error message: cleaned, then cut to
// maxSnippet bytes on a character boundary ("..." marks a cut). body may hold up to
// maxSnippet+len(APIKey) bytes, without a cut copy of the key at its end (statusError drops
// it), so every copy of the key left in it is whole and redacted.
func (c *Client) snippet(body []byte) string {
	s := strings.TrimSpace(c.clean(string(body)))
	if len(s) <= maxSnippet {
		return s
	}
	cut := maxSnippet
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// printable replaces white space by ' ' and every other non-printable character (control and
// format characters, invalid UTF-8) by '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == utf8.RuneError:
			return '?'
		case unicode.IsSpace(r):
			return ' '
		case !unicode.IsPrint(r):
			return '?'
		}
		return r
	}, s)
}

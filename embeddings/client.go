package embeddings

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpstream/mcpstream/redact"
)

const (
	defaultMaxBatch  = 64
	maxResponseBytes = 64 << 20 // larger responses are malformed
	maxDimensions    = 16384
	// perInputBytes is a response's room per input (and once more for the rest: "usage",
	// "model"...): an embedding of maxDimensions values of 64 bytes each (a float at full
	// precision, its separator, a pretty-printer's line and indentation). A response bigger
	// than its inputs can need is malformed, so a search request's embedding (two texts) is
	// not read into 64 MiB of memory.
	perInputBytes = maxDimensions * 64
)

// defaultHTTP is used when Client.HTTP is nil (shared, so connections are reused). Its timeout
// applies only to a context without a deadline (see embedBatch). It follows redirects within
// the endpoint's origin only (see sameOrigin).
var defaultHTTP = &http.Client{Timeout: 30 * time.Second, CheckRedirect: sameOrigin}

// maxRedirects is as many redirects as Go's client follows by default.
const maxRedirects = 10

// sameOrigin follows a redirect only within the origin (scheme, host and port) of the request
// first sent, and only one that keeps the method (a 307 or 308). Go's client copies
// Authorization onto a redirected request to the same host name on any port and scheme (https
// to http: the key in clear text), and a request body to any host; it follows a 301, 302 or 303
// with a GET without the body, which no embeddings endpoint answers (a 405 or 404 would be the
// call's error, saying nothing of the redirect). Another redirect is not followed, and the call
// fails with the redirect's status (CodeRejected, see statusError).
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects || origin(via[0].URL) != origin(req.URL) || req.Method != via[0].Method {
		return http.ErrUseLastResponse
	}
	return nil
}

// redirectRefused says why a redirect was not followed (see sameOrigin), from the request it
// answered and its target.
func redirectRefused(resp *http.Response, to *url.URL) string {
	switch {
	case resp.Request == nil || origin(resp.Request.URL) != origin(to):
		return "redirects are followed within the endpoint's origin only (set the final URL)"
	case resp.StatusCode == http.StatusMovedPermanently || resp.StatusCode == http.StatusFound ||
		resp.StatusCode == http.StatusSeeOther:
		return "only a 307 or 308 redirect is followed: this one would send the request again as a GET, without its body (set the final URL)"
	case resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect:
		return fmt.Sprintf("too many redirects within the endpoint's origin (a loop? at most %d are followed): set the final URL", maxRedirects)
	}
	return "only a 307 or 308 redirect is followed (set the final URL)"
}

// origin is u's scheme://host:port, the port made explicit.
func origin(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// Client calls POST BaseURL+"/embeddings". The zero value is not usable: BaseURL and Model
// are required. A Client is safe for concurrent use once its fields are set.
type Client struct {
	BaseURL    string       // e.g. "https://api.openai.com/v1" or "http://127.0.0.1:8080/v1" (trailing slash tolerated)
	Model      string       // e.g. "text-embedding-3-small"
	APIKey     string       // sent as "Authorization: Bearer KEY" when not empty; never appears in errors
	Dimensions int          // optional "dimensions" request field (0: not sent)
	MaxBatch   int          // inputs per request; 0 → 64
	HTTP       *http.Client // nil → a shared client; a 30s timeout when the context has no deadline; redirects within the endpoint's origin only

	// Secrets are other values that never appear in errors, replaced as APIKey is: those a
	// configuration resolved into BaseURL (${ENV} references), say.
	Secrets []string

	maxBody int64 // response size cap; 0 → perInputBytes per input and one more, at most maxResponseBytes (tests lower it)

	// batchCap is the batch size learned from the endpoint (0: none): a request refused HTTP
	// 413 whose halves were both embedded takes more inputs than the endpoint does per request
	// (text-embeddings-inference refuses more than its --max-client-batch-size, 32 by default,
	// so). Later requests send at most that many. Read and written with sync/atomic (a plain
	// int64: a Client value may be copied before use).
	batchCap int64
}

// Name identifies the vector space: "openai-compatible:" + Model, plus ":" + Dimensions when
// Dimensions > 0, plus "@" and 16 hex digits of a SHA-256 of the endpoint (scheme, host and
// path of BaseURL, without its user information and query, which may hold credentials): two
// endpoints may serve different models under one name (a local server's "text-embedding-3-small"
// is not OpenAI's). Vectors with different names must not be compared. The same name does not
// prove the same model: one may be replaced under its name (the indexer checks that too).
func (c *Client) Name() string {
	name := "openai-compatible:" + c.Model
	if c.Dimensions > 0 {
		name += ":" + strconv.Itoa(c.Dimensions)
	}
	endpoint := c.BaseURL
	if u, err := url.Parse(c.BaseURL); err == nil {
		endpoint = (&url.URL{Scheme: u.Scheme, Host: strings.ToLower(u.Host), Path: strings.TrimSuffix(u.Path, "/")}).String()
	}
	sum := sha256.Sum256([]byte(endpoint))
	return name + "@" + hex.EncodeToString(sum[:8])
}

// Embed returns one vector per text, in input order, sending at most MaxBatch texts per
// request. With no texts it returns nil, nil without a request (once the configuration is
// checked). Errors are *Error (see the package documentation); a failed batch fails the call.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	endpoint, err := c.endpoint()
	if err != nil {
		return nil, err
	}
	if len(texts) == 0 {
		return nil, nil
	}
	batch := c.MaxBatch
	if batch == 0 {
		batch = defaultMaxBatch
	}
	dim := c.Dimensions // 0: set by the first embedding received
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); {
		size := batch
		if learned := int(atomic.LoadInt64(&c.batchCap)); learned > 0 {
			size = min(size, learned) // (learned by an earlier batch of this call, too)
		}
		end := min(start+size, len(texts))
		vecs, err := c.embedHalving(ctx, endpoint, texts[start:end], start, &dim)
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
		start = end
	}
	return out, nil
}

// embedHalving embeds texts as embedBatch does, but a request of several texts refused HTTP
// 413 (too large: too many inputs, or too many bytes for a proxy) is sent again in two halves,
// each halved again if need be. When both halves go through, the larger one's size is kept as
// the batch size for later calls (batchCap). A text refused alone fails the call, as before,
// and teaches nothing: the caller tells such a text from the others (the indexer embeds each
// alone then).
func (c *Client) embedHalving(ctx context.Context, endpoint string, texts []string, offset int, dim *int) ([][]float32, error) {
	vecs, err := c.embedBatch(ctx, endpoint, texts, offset, dim)
	var e *Error
	if err == nil || len(texts) < 2 || !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge {
		return vecs, err
	}
	if learned := int(atomic.LoadInt64(&c.batchCap)); learned > 0 && learned < len(texts) {
		// Sent before the size was learned (by another call's batch, concurrently): in
		// batches of that size, which teaches nothing new.
		var out [][]float32
		for start := 0; start < len(texts); start += learned {
			end := min(start+learned, len(texts))
			vecs, err := c.embedHalving(ctx, endpoint, texts[start:end], offset+start, dim)
			if err != nil {
				return nil, err
			}
			out = append(out, vecs...)
		}
		return out, nil
	}
	half := len(texts) / 2
	first, err := c.embedHalving(ctx, endpoint, texts[:half], offset, dim)
	if err != nil {
		return nil, err
	}
	second, err := c.embedHalving(ctx, endpoint, texts[half:], offset+half, dim)
	if err != nil {
		return nil, err
	}
	size := int64(len(texts) - half) // the larger half: it went through
	for {
		cur := atomic.LoadInt64(&c.batchCap)
		if cur > 0 && cur <= size || atomic.CompareAndSwapInt64(&c.batchCap, cur, size) {
			break
		}
	}
	return append(first, second...), nil
}

// endpoint checks the configuration and returns the embeddings URL.
func (c *Client) endpoint() (string, error) {
	switch {
	case c.BaseURL == "":
		return "", c.fail(CodeConfig, 0, nil, "BaseURL is required")
	case c.Model == "":
		return "", c.fail(CodeConfig, 0, nil, "Model is required")
	case c.Dimensions < 0:
		return "", c.fail(CodeConfig, 0, nil, "Dimensions is negative (%d)", c.Dimensions)
	case c.Dimensions > maxDimensions:
		// Every response would be malformed: no embedding may have more.
		return "", c.fail(CodeConfig, 0, nil, "Dimensions is more than %d (%d)", maxDimensions, c.Dimensions)
	case c.MaxBatch < 0:
		return "", c.fail(CodeConfig, 0, nil, "MaxBatch is negative (%d)", c.MaxBatch)
	case strings.IndexFunc(c.APIKey, controlChar) >= 0:
		// net/http refuses to send such a header: every request would fail, as a transport
		// failure (worth retrying) rather than the configuration error it is.
		return "", c.fail(CodeConfig, 0, nil, "APIKey holds a control character (a line break read with it from a file?)")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		// The inner error: url.Error's text repeats the URL, which may hold a password.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", c.fail(CodeConfig, 0, err, "BaseURL is not a valid URL: %v", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", c.fail(CodeConfig, 0, nil, "BaseURL must be an http or https URL with a host")
	}
	if !ValidPort(u.Port()) {
		// url.Parse takes any digits: every request would fail to dial, a transport failure
		// (worth retrying) rather than the configuration error it is.
		return "", c.fail(CodeConfig, 0, nil, "BaseURL's port %s is not from 1 to 65535", u.Port())
	}
	return u.JoinPath("embeddings").String(), nil
}

// ValidPort reports whether port, a URL's port (url.URL.Port: digits or empty), is empty (the
// scheme's) or a TCP port from 1 to 65535: url.Parse takes any number of digits. The config
// loader checks the endpoint's URL with it.
func ValidPort(port string) bool {
	if port == "" {
		return true
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0
}

// controlChar reports whether r may not be in a header value (net/http's rule: a control
// character other than a tab).
func controlChar(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }

type request struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
	Dimensions     int      `json:"dimensions,omitempty"`
}

// embedBatch embeds texts (inputs offset.. of the call) in one request. *dim is the dimension
// every embedding must have (0: not known yet, set from the first one).
func (c *Client) embedBatch(ctx context.Context, endpoint string, texts []string, offset int, dim *int) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, c.fail(CodeUnavailable, 0, err, "%v", err)
	}
	body, err := json.Marshal(request{Model: c.Model, Input: texts, EncodingFormat: "float", Dimensions: c.Dimensions})
	if err != nil { // cannot happen with strings and ints
		return nil, c.fail(CodeConfig, 0, err, "encoding the request: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, c.fail(CodeConfig, 0, err, "building the request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
		if _, ok := ctx.Deadline(); ok {
			// The caller's deadline bounds the exchange, longer than the default timeout too:
			// a slow endpoint (CPU inference of a large batch) may need the minute it is given.
			noTimeout := *hc
			noTimeout.Timeout = 0
			hc = &noTimeout
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		// The *url.Error's text quotes the URL, whose query parameters (kept from BaseURL) may
		// hold a credential, and net/http strips only a password: quote it without them.
		var ue *url.Error
		if errors.As(err, &ue) {
			shown := url.URL{Scheme: req.URL.Scheme, Host: req.URL.Host, Path: req.URL.Path}
			err = fmt.Errorf("%s %q: %w", ue.Op, shown.String(), ue.Err)
		}
		return nil, c.transportError(ctx, 0, err)
	}
	defer resp.Body.Close()

	status := resp.StatusCode
	if status < 200 || status > 299 {
		return nil, c.statusError(resp)
	}
	limit := c.maxBody
	if limit <= 0 {
		limit = min(maxResponseBytes, int64(len(texts)+1)*perInputBytes)
	}
	if resp.ContentLength > limit {
		return nil, c.fail(CodeMalformed, status, nil, "response body of %d bytes exceeds %d bytes (the most %d inputs may take)", resp.ContentLength, limit, len(texts))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, c.transportError(ctx, status, fmt.Errorf("reading the response: %w", err))
	}
	if int64(len(data)) > limit {
		return nil, c.fail(CodeMalformed, status, nil, "response body exceeds %d bytes (the most %d inputs may take)", limit, len(texts))
	}
	vecs, err := decode(data, len(texts), offset, dim)
	if err != nil {
		return nil, c.fail(CodeMalformed, status, err, "%v", err)
	}
	return vecs, nil
}

// transportError is a CodeUnavailable error for a failed exchange. When the context ended, its
// error is matched too, whatever the transport made of it.
func (c *Client) transportError(ctx context.Context, status int, err error) *Error {
	cause := err
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		cause = fmt.Errorf("%w: %w", ctxErr, err)
	}
	return c.fail(CodeUnavailable, status, cause, "%v", cause)
}

// statusError is the error for a non-2xx response: unavailable for 5xx, 429 and 408 (worth
// retrying later), rejected for the others.
func (c *Client) statusError(resp *http.Response) *Error {
	code := CodeRejected
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
		code = CodeUnavailable
	}
	// A read error only shortens the quote. The body is read whole up to maxErrorBody, more
	// than is quoted, so that a JSON body can be decoded (see redactBody).
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// The read limit, or a read error (a connection lost mid-body), may have cut a copy of the
	// key: drop its start, which redaction would not find, and which cleaning (white space
	// trimmed, characters replaced) could move into the quoted part.
	body = c.dropKeyStart(body)
	msg := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		// Not followed (see sameOrigin): where it leads, without its query, which may hold
		// a credential, and cut as a body is (the Location may be as long as a header may).
		if to, err := resp.Location(); err == nil {
			shown := url.URL{Scheme: to.Scheme, Host: to.Host, Path: to.Path}
			msg += fmt.Sprintf(" to %q: %s", c.snippet([]byte(shown.String())), redirectRefused(resp, to))
		} else {
			msg += ": a redirect without a usable Location"
		}
	}
	if body, ok := c.redactBody(body); !ok {
		msg += ": (response body withheld: its JSON escapes may spell the API key)"
	} else if s := c.snippet(body); s != "" {
		msg += ": " + s
	}
	e := c.fail(code, resp.StatusCode, nil, "%s", msg)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return e
}

// maxRetryAfter bounds Error.RetryAfter: an endpoint's Retry-After may say anything.
const maxRetryAfter = time.Hour

// retryAfter parses a Retry-After value (delay-seconds or an HTTP date) into a delay from
// now, at most maxRetryAfter; 0 when it is absent, unusable or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		if n >= uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), maxRetryAfter)
}

// maxErrorBody is the most of an error response's body read for its quote.
const maxErrorBody = 64 << 10

// redactBody returns body without APIKey and Secrets in any JSON spelling. An endpoint that
// echoes the key in a JSON error body may escape its characters ("\/" for '/', "\u0073" for
// 's', as encoders other than Go's do), which a search for the key's bytes does not find: a
// JSON body is decoded and the key replaced in its strings. Text that cannot be decoded (not
// JSON, or JSON cut at the read limit) is redacted as text, escapes decoded (redact.Values.Text);
// if it may still spell the key with escapes once redacted, it cannot be checked: ok is false,
// and nothing of it may be quoted.
func (c *Client) redactBody(body []byte) (out []byte, ok bool) {
	v := redact.New(append([]string{c.APIKey}, c.Secrets...)...)
	if v.Empty() {
		return body, true
	}
	out, _ = v.JSON(body) // as text when it is not JSON
	if _, err := redact.Decode(body); err != nil && v.In(out) {
		return nil, false
	}
	return out, true
}

// dropKeyStart returns body without a trailing part that is the start of APIKey or of one of
// Secrets (a URL's credential the endpoint echoes), in any spelling redaction finds them in
// (redact.Values.PartialEnd: 3 bytes or more of one; of the key, any).
func (c *Client) dropKeyStart(body []byte) []byte {
	if len(c.Secrets) > 0 {
		body = body[:redact.New(append([]string{c.APIKey}, c.Secrets...)...).PartialEnd(string(body))]
	}
	for k := min(len(c.APIKey)-1, len(body)); k > 0; k-- {
		if bytes.HasSuffix(body, []byte(c.APIKey[:k])) {
			return body[:len(body)-k]
		}
	}
	return body
}

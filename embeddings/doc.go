// Package embeddings is a client for OpenAI-compatible embeddings servers: anything that
// implements POST {base}/embeddings (OpenAI, vLLM, Ollama's OpenAI API,
// text-embeddings-inference, LiteLLM...). The catalog indexer uses it, optionally, for hybrid
// search.
//
// # Consumes
//
// An HTTP endpoint, Client.BaseURL+"/embeddings" (query parameters of BaseURL are kept), and
// its responses, which are untrusted input. Each request is
//
//	{"model": Model, "input": [texts...], "encoding_format": "float", "dimensions": D}
//
// with at most Client.MaxBatch texts (64 by default; a request refused HTTP 413 is sent again
// in halves, and the size of halves that went through is the most sent from then on: the
// endpoint's own batch limit, text-embeddings-inference's --max-client-batch-size say),
// "dimensions" only when
// Client.Dimensions > 0, and "Authorization: Bearer APIKey" only when APIKey is not empty.
// Texts are sent as they are (an empty string too; invalid UTF-8 becomes U+FFFD, as
// encoding/json does). With Client.HTTP nil, a request is bounded by the context's deadline, or
// by 30 s when the context has none, and a redirect is followed only within the endpoint's
// origin (scheme, host and port; at most 10), and only a 307 or 308: Go's client would take
// Authorization along to any port of the same host name, over http too, and would follow a
// 301, 302 or 303 with a GET without the body. Another redirect fails the call
// (embeddings_rejected, naming the redirect's target without its query, and why it was not
// followed).
//
// # Produces
//
// Client.Embed returns one vector per text, in input order, whatever order the server listed
// them in (by "index"). A response is accepted only when its status is 2xx, its body is at most
// 1 MiB per input and 1 MiB more (64 bytes for each value an embedding may have; 64 MiB in
// all: a request of two texts is not read into 64 MiB of memory), it is JSON with exactly one
// "data" item per input (items past that count are counted, not decoded: a response of
// millions of tiny items costs no more memory than its body), every index is present, in range
// and unique, and every embedding is a non-empty array of numbers (no nulls, each within
// float32 range) with at most 16384 dimensions, all of the same dimension across the whole
// Embed call (across batches too), equal to Client.Dimensions when that is set. Nothing is
// kept between calls: no cache, no retries (the caller decides). Client.Name identifies the
// vector space, for use as a cache key: the model, the dimensions and (hashed) the endpoint's
// scheme, host and path. It cannot tell a model replaced under the same name at the same
// endpoint: a cache should check that (the indexer embeds a probe text).
//
// # Errors
//
// Every error Embed returns is an *Error, and errors.Is(err, ErrEmbeddings) holds. Its Code is
// one of:
//
//	embeddings_config       missing BaseURL or Model, BaseURL not an http(s) URL with a host
//	                        (and a port, if it has one, from 1 to 65535), negative
//	                        Dimensions or MaxBatch, Dimensions above 16384, an APIKey with a
//	                        control character other than a tab (checked before any request)
//	embeddings_unavailable  transport failure, timeout, context cancelled or expired, HTTP 5xx,
//	                        429 or 408 (worth retrying later)
//	embeddings_rejected     any other non-2xx status: bad key, unknown model, bad request, a
//	                        redirect to another origin...
//	embeddings_malformed    a 2xx response that is not as specified above
//
// Status is the HTTP status when there was a response (also for embeddings_malformed). For a
// 429 or 503, RetryAfter is how long its Retry-After header (seconds or an HTTP date) asks to be
// left alone, at most an hour (0 when absent, unusable or past): Embed does not wait, the caller
// decides. For a
// status error, Message holds the status and at most 200 bytes of the body. Messages are
// printable (control and other non-printable characters replaced) and never hold APIKey or
// Client.Secrets: they are replaced by "[redacted]" wherever they appear, in a JSON body also
// where it spells them with escapes (decoded first: "\/", "\u0073"); a body that may spell
// them so but cannot be decoded (not JSON, or cut at 64 KiB) is not quoted; a body cut short
// (the read limit, a lost connection) ending with the start of one is quoted without it. They quote the
// endpoint URL without the query parameters or password of BaseURL, which may hold a
// credential too.
//
// Error.Unwrap returns ErrEmbeddings. The underlying error, when there is one (the transport
// error, the context's error, a JSON error), is matched by Error.Is rather than unwrapped: with
// a cancelled or expired context, errors.Is(err, context.Canceled) or
// errors.Is(err, context.DeadlineExceeded) holds as well (as it does for an http.Client
// timeout). errors.As does not reach the underlying error; its text is in Message.
package embeddings

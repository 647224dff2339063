package embeddings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

type response struct {
	Data []struct {
		Index     *int   `json:"index"` // required: nil when absent or null
		Embedding vector `json:"embedding"`
	} `json:"data"`
}

// decode validates a response to n inputs (inputs offset.. of the call) and returns their
// vectors in input order. *dim is the dimension every embedding must have (0: set from the
// first one).
func decode(body []byte, n, offset int, dim *int) ([][]float32, error) {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding the response: %w", err)
	}
	if len(r.Data) != n {
		return nil, fmt.Errorf("response has %d embeddings for %d inputs", len(r.Data), n)
	}
	out := make([][]float32, n)
	for k, d := range r.Data {
		if d.Index == nil {
			return nil, fmt.Errorf("data[%d] has no index", k)
		}
		i := *d.Index
		switch {
		case i < 0 || i >= n:
			return nil, fmt.Errorf("data[%d] has index %d, want [0, %d)", k, i, n)
		case out[i] != nil:
			return nil, fmt.Errorf("data[%d] repeats index %d", k, i)
		case len(d.Embedding) == 0:
			return nil, fmt.Errorf("embedding of input %d is empty", offset+i)
		case *dim != 0 && len(d.Embedding) != *dim:
			return nil, fmt.Errorf("embedding of input %d has %d dimensions, want %d", offset+i, len(d.Embedding), *dim)
		}
		*dim = len(d.Embedding)
		out[i] = d.Embedding
	}
	return out, nil
}

// vector is an embedding: a JSON array of numbers, strictly (no null elements, which
// encoding/json would turn into zeros, and at most maxDimensions of them).
type vector []float32

var errNotNumbers = errors.New("embedding is not an array of numbers")

// UnmarshalJSON parses b, which json.Unmarshal has already checked to be one valid JSON value.
// So an element made only of number characters is a whole JSON number; any other element
// (null, string, array, object, true...) holds other characters and is refused.
func (v *vector) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' {
		return errNotNumbers
	}
	inner := bytes.TrimSpace(b[1 : len(b)-1])
	if len(inner) == 0 {
		*v = vector{}
		return nil
	}
	n := bytes.Count(inner, []byte{','}) + 1
	if n > maxDimensions {
		return fmt.Errorf("embedding has %d dimensions, more than %d", n, maxDimensions)
	}
	out := make(vector, 0, n)
	for len(inner) > 0 {
		elem := inner
		if i := bytes.IndexByte(inner, ','); i >= 0 {
			elem, inner = inner[:i], inner[i+1:]
		} else {
			inner = nil
		}
		elem = bytes.TrimSpace(elem)
		if !numberChars(elem) {
			return errNotNumbers
		}
		f, err := strconv.ParseFloat(string(elem), 32)
		if err != nil {
			return fmt.Errorf("embedding value %.40s is not a float32", elem)
		}
		out = append(out, float32(f))
	}
	*v = out
	return nil
}

// numberChars reports whether b is not empty and made only of characters of JSON numbers.
func numberChars(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			return false
		}
	}
	return len(b) > 0
}

package embeddings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// respItem is one element of a response's "data".
type respItem struct {
	Index     *int   `json:"index"` // required: nil when absent or null
	Embedding vector `json:"embedding"`
}

// decode validates a response to n inputs (inputs offset.. of the call) and returns their
// vectors in input order. *dim is the dimension every embedding must have (0: set from the
// first one). Items of "data" past the n wanted are counted, not built: a response of
// millions of tiny items would otherwise take far more memory than its body.
func decode(body []byte, n, offset int, dim *int) ([][]float32, error) {
	var r struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding the response: %w", err)
	}
	var items []respItem
	count := 0
	if data := bytes.TrimSpace(r.Data); len(data) > 0 && !bytes.Equal(data, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(data))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return nil, fmt.Errorf("decoding the response: data is not an array")
		}
		var skip json.RawMessage // reused: an item past the n wanted is only counted
		for dec.More() {
			var err error
			if count < n {
				items = append(items, respItem{})
				err = dec.Decode(&items[count])
			} else {
				err = dec.Decode(&skip)
			}
			if err != nil {
				return nil, fmt.Errorf("decoding the response: data[%d]: %w", count, err)
			}
			count++
		}
	}
	if count != n {
		return nil, fmt.Errorf("response has %d embeddings for %d inputs", count, n)
	}
	out := make([][]float32, n)
	for k, d := range items {
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

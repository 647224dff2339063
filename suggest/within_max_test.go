package suggest

import (
	"math"
	"testing"
)

// A max past any distance (math.MaxInt: no bound) is a bound like any other: it overflowed the
// band's upper edge (i+max) and Within panicked indexing its rows.
func TestWithinHugeMax(t *testing.T) {
	for _, max := range []int{math.MaxInt, math.MaxInt - 1, math.MaxInt / 2 * 2} {
		for _, c := range []struct {
			a, b string
			want int
		}{{"abc", "abd", 1}, {"", "abc", 3}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"same", "same", 0}} {
			if d, ok := Within(c.a, c.b, max); !ok || d != c.want {
				t.Errorf("Within(%q, %q, %d) = %d, %v; want %d, true", c.a, c.b, max, d, ok, c.want)
			}
			if d, ok := KeyWithin(c.a, c.b, max); !ok || d != c.want {
				t.Errorf("KeyWithin(%q, %q, %d) = %d, %v; want %d, true", c.a, c.b, max, d, ok, c.want)
			}
		}
	}
}

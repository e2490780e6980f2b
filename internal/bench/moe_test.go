package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// MoELinkBytes counts a token once per other destination rank, whatever
// the number of its experts there, and leaves out ids out of range.
func TestMoELinkBytes(t *testing.T) {
	for _, c := range []struct {
		name   string
		routes [][]int64
		k, e   int64
		want   int64
	}{
		{"one rank", [][]int64{{0, 1, 1, 0}}, 2, 2, 0},
		{"all local", [][]int64{{0, 1}, {2, 3}}, 2, 4, 0},
		// rank 0: t0 local, t1 to rank 1, t2 to rank 1 once (two experts there);
		// rank 1: t0 to rank 0, t1 local, t2 out of range.
		{"two ranks", [][]int64{{0, 1, 0, 2, 3, 3}, {1, 1, 2, 3, -1, 9}}, 2, 4, 2 * 10},
		// e = 5 on 2 ranks: experts 0-2 on rank 0, 3-4 on rank 1.
		{"e not a multiple", [][]int64{{3, 4, 2, 3}, {0, 0}}, 2, 5, 2 * 10},
		// Three ranks, k = 3: rank 0 sends t0 to ranks 1 and 2; rank 2
		// receives from 0 and 1, so its links carry the most.
		{"three ranks", [][]int64{{0, 1, 2}, {2, 2, 2}, {0, 0, 0}}, 3, 3, 2 * 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, MoELinkBytes(c.routes, c.k, c.e, 10))
		})
	}
}

func TestLinkNote(t *testing.T) {
	assert.Equal(t, "no link traffic", linkNote(0, 5, 370))
	// 37 MB in 200 us is 185 GB/s: half of 370.
	assert.Equal(t, "link 37.0 MB (busiest rank), 50% of 370 GB/s", linkNote(37e6, 200, 370))
}

// moeRouting is reproducible and in range.
func TestMoERouting(t *testing.T) {
	a, b := moeRouting(1, 64, 8, 16), moeRouting(1, 64, 8, 16)
	assert.Equal(t, a, b)
	assert.Len(t, a, 64*8)
	for _, x := range a {
		assert.True(t, x >= 0 && x < 16, "expert %d", x)
	}
	assert.NotEqual(t, a, moeRouting(0, 64, 8, 16), "every rank its own routing")
}

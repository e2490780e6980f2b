package irisimpl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// The launch's aliasing checks, pair by pair.
func TestAliasChecks(t *testing.T) {
	x := irisrt.Tensor{Ptr: 0x1000, DType: irismodel.F16, Len: 8}
	var ae *irisrt.AliasError
	require.ErrorAs(t, checkNoAlias("all_gather", "input", x.Slice(2, 2), "output", x), &ae)
	assert.True(t, errors.Is(ae, irisrt.ErrAlias))
	assert.Contains(t, ae.Error(), `"input"`)
	assert.NoError(t, checkNoAlias("op", "a", x.Slice(0, 4), "b", x.Slice(4, 4)))
	assert.NoError(t, checkInPlace("op", "a", x, "b", x), "the very same tensor runs in place")
	assert.NoError(t, checkInPlace("op", "a", x.Slice(0, 4), "b", x.Slice(4, 4)))
	require.ErrorAs(t, checkInPlace("op", "input", x.Slice(0, 4), "output", x.Slice(2, 4)), &ae)
	assert.True(t, ae.InPlace && errors.Is(ae, irisrt.ErrAlias))
	assert.Contains(t, ae.Error(), "overlap only in part")
	assert.Error(t, checkInPlace("op", "a", x.Slice(0, 4), "b", x.Slice(0, 3)), "same start, different length")
}

// TestOwnBlockCheck enumerates aliasing: own_block's cases in a world of
// 4 (a block of 3 elements, the whole of 12) for every rank and every
// placement of the block over the whole: exactly the rank's block, or
// disjoint, passes; any other overlap (another rank's block, a shifted
// one, a block of another length, the whole itself) is refused.
func TestOwnBlockCheck(t *testing.T) {
	const world, n = 4, 3
	whole := irisrt.Tensor{Ptr: 0x1000, DType: irismodel.F32, Len: world * n}
	for rank := range world {
		for start := -n; start <= world*n; start++ {
			for _, l := range []int64{n, n - 1, n + 1} {
				block := irisrt.Tensor{Ptr: whole.Ptr + gpu.DevicePtr(start*4), DType: irismodel.F32, Len: l}
				ok := !block.Overlaps(whole) || (start == rank*n && l == n)
				err := checkOwnBlock("all_gather", "input", block, "output", whole, rank, world)
				if ok != (err == nil) {
					t.Errorf("rank %d, block at element %d of %d elements: %v, want ok %v", rank, start, l, err, ok)
				}
				var ae *irisrt.AliasError
				if err != nil && (!errors.As(err, &ae) || !ae.OwnBlock || ae.Rank != rank || !errors.Is(err, irisrt.ErrAlias)) {
					t.Errorf("rank %d: %v, want an *irisrt.AliasError with OwnBlock and the rank", rank, err)
				}
			}
		}
	}
	err := checkOwnBlock("all_gather", "input", whole.Slice(0, n), "output", whole, 2, world)
	assert.ErrorContains(t, err, `"input" is not rank 2's own block of "output"`)
	assert.ErrorContains(t, err, "exactly output[2] (24 bytes from its start)")
	assert.NoError(t, checkOwnBlock("op", "input", whole, "output", whole, 0, 1), "a world of one: rank 0's block is the whole")
}

func TestBlocks(t *testing.T) {
	assert.Equal(t, 1, Blocks(0, 512, 16, 16))
	assert.Equal(t, 1, Blocks(1, 512, 16, 16))
	assert.Equal(t, 1, Blocks(512*16, 512, 16, 16))
	assert.Equal(t, 2, Blocks(512*16+1, 512, 16, 16))
	assert.Equal(t, 16, Blocks(1<<40, 512, 16, 16), "clamped to max, 64-bit sizes")
	assert.Equal(t, 1, Blocks(100, 0, 0, 0), "degenerate launch shapes do not divide by zero")
}

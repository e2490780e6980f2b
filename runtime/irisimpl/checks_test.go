package irisimpl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

func TestBlocks(t *testing.T) {
	assert.Equal(t, 1, Blocks(0, 512, 16, 16))
	assert.Equal(t, 1, Blocks(1, 512, 16, 16))
	assert.Equal(t, 1, Blocks(512*16, 512, 16, 16))
	assert.Equal(t, 2, Blocks(512*16+1, 512, 16, 16))
	assert.Equal(t, 16, Blocks(1<<40, 512, 16, 16), "clamped to max, 64-bit sizes")
	assert.Equal(t, 1, Blocks(100, 0, 0, 0), "degenerate launch shapes do not divide by zero")
}

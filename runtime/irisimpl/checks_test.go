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

// TestGrid enumerates the launch shape's cases: the spec's shape (min_blocks
// 1, or a size that gives min_blocks blocks anyway), smaller blocks below
// min_blocks, the clamps and the degenerate inputs.
func TestGrid(t *testing.T) {
	const KiB, MiB = 1 << 10, 1 << 20
	for _, c := range []struct {
		name                                     string
		bytes                                    int64
		threads, vectorBytes, minBlocks, maxBlks int
		blocks, perBlock                         int
	}{
		// min_blocks 1 (or 0, a descriptor without it): the spec's shape.
		{"0 bytes", 0, 512, 16, 1, 16, 1, 512},
		{"1 byte", 1, 512, 16, 1, 16, 1, 512},
		{"one block's bytes", 512 * 16, 512, 16, 1, 16, 1, 512},
		{"a byte more", 512*16 + 1, 512, 16, 1, 16, 2, 512},
		{"clamped to max, 64-bit sizes", 1 << 40, 512, 16, 1, 16, 16, 512},
		{"min_blocks 0 is 1", 8 * KiB, 512, 16, 0, 128, 1, 512},
		{"degenerate shapes do not divide by zero", 100, 0, 0, 0, 0, 1, 1},
		{"negative bytes", -5, 512, 16, 64, 128, 1, 512},
		// The Lamport variants' shape: 512 threads, 16-byte vectors, max 128, min 64.
		{"8 KiB: 512 vectors", 8 * KiB, 512, 16, 64, 128, 8, 64},
		{"64 KiB: 4096 vectors", 64 * KiB, 512, 16, 64, 128, 64, 64},
		{"128 KiB: 8192 vectors", 128 * KiB, 512, 16, 64, 128, 64, 128},
		{"256 KiB", 256 * KiB, 512, 16, 64, 128, 64, 256},
		{"512 KiB: 64 blocks anyway", 512 * KiB, 512, 16, 64, 128, 64, 512},
		{"2 MiB: clamped as before", 2 * MiB, 512, 16, 64, 128, 128, 512},
		{"0 bytes keeps the spec's shape", 0, 512, 16, 64, 128, 1, 512},
		// Sizes not a multiple of the vector or of 64 vectors.
		{"100 bytes: 7 vectors", 100, 512, 16, 64, 128, 1, 64},
		{"1 byte, min 64: 1 block of 64", 1, 512, 16, 64, 128, 1, 64},
		{"64 vectors and a byte", 64*16 + 1, 512, 16, 64, 128, 2, 64},
		{"4097 vectors: 65 threads rounds to 128", 64*KiB + 1, 512, 16, 64, 128, 33, 128},
		{"8 KiB - 1 byte, 4-byte vectors: 2048 vectors", 8*KiB - 1, 512, 4, 64, 128, 32, 64},
		{"a byte into the 64th block: 64 blocks anyway", 63*512*16 + 1, 512, 16, 64, 128, 64, 512},
		{"63 blocks: 504 threads round up to 512, so 63 blocks still", 63 * 512 * 16, 512, 16, 64, 128, 63, 512},
		// max_blocks lowered below min_blocks (ranks sharing a GPU):
		// min_blocks is clamped to it.
		{"min clamped to max: 64 KiB in 32 blocks", 64 * KiB, 512, 16, 64, 32, 32, 128},
		{"min clamped to max: 8 KiB", 8 * KiB, 512, 16, 64, 32, 8, 64},
		{"min clamped to max 1: the spec's shape", 64 * KiB, 512, 16, 64, 1, 1, 512},
		{"min = max", 64 * KiB, 512, 16, 128, 128, 64, 64},
		// Blocks never shrink below 64 threads nor grow past threads.
		{"64-thread spec: nothing to shrink", 8 * KiB, 64, 16, 64, 128, 8, 64},
		{"256-thread spec", 64 * KiB, 256, 16, 64, 128, 64, 64},
		{"256-thread spec, 1 MiB: its own shape", 1 * MiB, 256, 16, 64, 128, 128, 256},
		{"1024-thread spec, 8-byte vectors", 1 * MiB, 1024, 8, 256, 1024, 256, 512},
	} {
		b, th := Grid(c.bytes, c.threads, c.vectorBytes, c.minBlocks, c.maxBlks)
		assert.Equal(t, [2]int{c.blocks, c.perBlock}, [2]int{b, th}, "%s: blocks x threads", c.name)
	}
}

// TestGridMinBlocksOne: min_blocks 1 gives the grid of before (one block
// per threads*vectorBytes bytes, 1..maxBlocks, of the spec's threads) at
// every size; any min_blocks gives at least the blocks of before, a
// multiple of 64 threads up to the spec's, and at most min_blocks blocks
// where it shrinks them (only below min_blocks).
func TestGridMinBlocksOne(t *testing.T) {
	old := func(bytes int64, threads, vectorBytes, maxBlocks int) int {
		per := int64(threads) * int64(vectorBytes)
		n := int64(1)
		if bytes > 0 {
			n = (bytes-1)/per + 1
		}
		return int(min(n, int64(maxBlocks)))
	}
	sizes := []int64{0, 1, 15, 16, 17, 1000, 4095, 4096, 4097}
	for e := 12; e <= 40; e++ {
		sizes = append(sizes, 1<<e-1, 1<<e, 1<<e+1, 3<<e, 5<<e+3)
	}
	for _, bytes := range sizes {
		for _, threads := range []int{64, 128, 256, 512, 1024} {
			for _, vb := range []int{4, 8, 16} {
				for _, maxB := range []int{1, 4, 16, 128, 1024} {
					want := old(bytes, threads, vb, maxB)
					for _, minB := range []int{0, 1} {
						b, th := Grid(bytes, threads, vb, minB, maxB)
						require.Equal(t, [2]int{want, threads}, [2]int{b, th}, "%d bytes, %d threads, %d-byte vectors, max %d, min %d", bytes, threads, vb, maxB, minB)
					}
					for _, minB := range []int{2, 8, 64, 1024} {
						b, th := Grid(bytes, threads, vb, minB, maxB)
						require.GreaterOrEqual(t, b, want, "%d bytes, min %d: never fewer blocks", bytes, minB)
						require.LessOrEqual(t, b, maxB)
						require.True(t, th >= 64 && th <= threads && th%64 == 0, "%d threads", th)
						if th < threads {
							require.LessOrEqual(t, b, min(minB, maxB), "%d bytes, min %d: shrunk blocks, at most min_blocks of them", bytes, minB)
							require.Less(t, want, min(minB, maxB), "shrunk only below min_blocks")
							vectors := (bytes-1)/int64(vb) + 1
							require.True(t, th == 64 || (vectors-1)/int64(th-64)+1 > int64(min(minB, maxB)), "%d bytes, min %d: %d threads is the smallest multiple of 64 that has at most min_blocks blocks", bytes, minB, th)
						}
					}
				}
			}
		}
	}
}

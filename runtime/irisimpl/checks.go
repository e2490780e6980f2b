package irisimpl

import (
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Grid is the launch shape of a plan: blocks of threadsPerBlock threads,
// the same on every rank (block b pairs with block b on every peer). It is
// one block per threads*vectorBytes bytes, at least 1 and at most
// maxBlocks, of the spec's threads each; except that where that gives fewer
// than minBlocks blocks, the blocks shrink instead: threadsPerBlock is the
// smallest multiple of irismodel.ThreadStep (64) that covers the size's
// vectors (ceil(bytes/vectorBytes)) in minBlocks blocks, from 64 to
// threads, and blocks = ceil(vectors/threadsPerBlock), at most maxBlocks.
// minBlocks <= 1 (the spec's default) gives the spec's shape at every
// size; minBlocks is clamped to maxBlocks (which the runtime lowers where
// ranks share a GPU). A size of 0 bytes (an empty launch enqueues nothing;
// a collective without tensors sizes nothing) keeps the spec's shape, 1
// block of threads.
//
// Why: a latency-bound kernel's small message gets more SMs storing to the
// peers from many small blocks than from one or a few large ones. Measured
// on 4 H200s, the Lamport variants took up to 28% less time at 8-64 KiB
// with 64-thread blocks, but up to 60% more at 512 KiB-2 MiB than with
// 512-thread blocks; min_blocks gives the first shape at small sizes and
// the spec's at large ones. The kernels' __launch_bounds__(threads) holds:
// threadsPerBlock <= threads, and templates read blockDim.x.
func Grid(bytes int64, threads, vectorBytes, minBlocks, maxBlocks int) (blocks, threadsPerBlock int) {
	const step = irismodel.ThreadStep
	t, vb, maxB := int64(max(threads, 1)), int64(max(vectorBytes, 1)), int64(max(maxBlocks, 1))
	minB := min(int64(max(minBlocks, 1)), maxB)
	if bytes <= 0 {
		return 1, int(t)
	}
	vectors := (bytes-1)/vb + 1
	if n := (vectors-1)/t + 1; n >= minB || t <= step {
		return int(min(n, maxB)), int(t)
	}
	per := (vectors-1)/minB + 1 // vectors a block, for minB blocks
	per = min(max((per+step-1)/step*step, step), t)
	return int(min((vectors-1)/per+1, maxB)), int(per)
}

// checkNoAlias checks that ta and tb do not overlap.
func checkNoAlias(op, a string, ta irisrt.Tensor, b string, tb irisrt.Tensor) error {
	if ta.Overlaps(tb) {
		return &irisrt.AliasError{Op: op, A: a, B: b, TA: ta, TB: tb}
	}
	return nil
}

// checkInPlace checks that ta and tb are the same tensor or do not overlap
// (the rule of variants that run in place).
func checkInPlace(op, a string, ta irisrt.Tensor, b string, tb irisrt.Tensor) error {
	if ta.Overlaps(tb) && (ta.Ptr != tb.Ptr || ta.Bytes() != tb.Bytes()) {
		return &irisrt.AliasError{Op: op, A: a, B: b, TA: ta, TB: tb, InPlace: true}
	}
	return nil
}

// checkOwnBlock checks that ta (block) is exactly block rank of tb (whole),
// which holds world blocks of ta's size, or does not overlap it (the rule
// of aliasing: own_block).
func checkOwnBlock(op, block string, ta irisrt.Tensor, whole string, tb irisrt.Tensor, rank, world int) error {
	if !ta.Overlaps(tb) || (ta.Ptr == tb.Ptr+gpu.DevicePtr(int64(rank)*ta.Bytes()) && tb.Bytes() == int64(world)*ta.Bytes()) {
		return nil
	}
	return &irisrt.AliasError{Op: op, A: block, B: whole, TA: ta, TB: tb, OwnBlock: true, Rank: rank}
}

// checkParam reports whether v is a value of d on a world of world ranks
// (*irisrt.ParamError when not).
func checkParam(d *irismodel.ParamDesc, op string, v irismodel.Param, world int) error {
	if d.Accepts(v, world) {
		return nil
	}
	return &irisrt.ParamError{Op: op, Name: d.Name, Kind: d.Kind, Value: v, Range: d.Range(world)}
}

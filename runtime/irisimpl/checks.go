package irisimpl

import (
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Blocks is the grid size of a plan: one block per threads*vectorBytes bytes,
// at least 1 and at most maxBlocks, so that block b pairs with block b on
// every peer.
func Blocks(bytes int64, threads, vectorBytes, maxBlocks int) int {
	per := int64(max(threads, 1)) * int64(max(vectorBytes, 1))
	n := int64(1)
	if bytes > 0 {
		n = (bytes-1)/per + 1
	}
	return int(min(n, int64(max(maxBlocks, 1))))
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

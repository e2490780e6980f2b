// Package irisrt is irisgen's Go runtime: element types and tensors, the
// symmetric heap, in-process and multi-process worlds with their host
// rendezvous, plans (everything a launch needs, allocated before any capture),
// the interpreter of the descriptor tables that generated packages hand it
// (Table: their checks, kernel names, plan shapes, convenience calls and
// catalogue), the registry and loading of the code objects they embed, and
// the typed errors their launch wrappers return.
// It lives in runtime/irisrt, beside the platform layer (runtime/gpu) and the
// device header (runtime/include), and is named so that it does not shadow
// the standard library's runtime package.
//
// The generated wrappers in generated/collectives call exactly the API listed
// in docs/internals.md ("Runtime API that generated wrappers call").
//
// Plans and launches are collective: every rank makes the same calls in the
// same order. Each rank numbers its launch calls, and every kernel carries
// its number and a fingerprint of the launch, which the kernels compare
// where they meet (launch.go): a launch one rank refuses on the host makes
// its peers' kernels of it give up at once (*PeerRefusedError), launches
// that differ are found (*MismatchError), both world faults like a timeout
// (faults.go): close the world and start a new one. After a world, plan,
// group or graph is closed, every call that would reach the GPU returns a
// *ClosedError.
package irisrt

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor. The zero value is invalid, so a
// Tensor whose type was never set is caught by CheckTensor.
type DType uint8

// The element types. F32/F16/BF16 are data types of collectives, I32/I64 index
// types, U64 the type of barrier flags and epochs.
const (
	F32 DType = iota + 1
	F16
	BF16
	I32
	I64
	U64
)

var dtypeNames = [...]string{F32: "f32", F16: "f16", BF16: "bf16", I32: "i32", I64: "i64", U64: "u64"}

// Size is the size of one element in bytes (0 for an invalid DType).
func (d DType) Size() int64 {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case I64, U64:
		return 8
	}
	return 0
}

// Valid reports whether d is one of the defined element types.
func (d DType) Valid() bool { return d.Size() != 0 }

// String returns the spec spelling ("f32", "bf16", ...).
func (d DType) String() string {
	if d.Valid() {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType parses a spec spelling ("f32", "bf16", ...), case-insensitively.
func ParseDType(s string) (DType, error) {
	for d, n := range dtypeNames {
		if n != "" && strings.EqualFold(n, s) {
			return DType(d), nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want one of f32, f16, bf16, i32, i64, u64)", s)
}

// Barrier is how a launch is ordered against the peers' launches of the same
// plan. The zero value is BarrierDevice.
type Barrier uint8

// Barrier modes.
const (
	// BarrierDevice: the kernel synchronises with its peers through GPU
	// atomics on heap flags; capturable in a graph.
	BarrierDevice Barrier = iota
	// BarrierHost: stream synchronise + CPU rendezvous before and after the
	// kernel; not capturable.
	BarrierHost
	// BarrierNone: no barrier; the caller orders the ranks' launches.
	BarrierNone
)

var barrierNames = [...]string{"device", "host", "none"}

// String returns "device", "host" or "none".
func (b Barrier) String() string {
	if int(b) < len(barrierNames) {
		return barrierNames[b]
	}
	return fmt.Sprintf("barrier(%d)", uint8(b))
}

// ParseBarrier parses "device", "host" or "none".
func ParseBarrier(s string) (Barrier, error) {
	for i, n := range barrierNames {
		if strings.EqualFold(n, s) {
			return Barrier(i), nil
		}
	}
	return 0, fmt.Errorf("unknown barrier mode %q (want device, host or none)", s)
}

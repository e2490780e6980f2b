package irismodel

import (
	"fmt"
	"strings"
)

// DType is the element type of a tensor. The zero value is no type: a
// Tensor whose type was never set is refused by the launch checks, and in a
// TensorDesc or a kernel it means "the plan's data type" or "none".
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

// DTypes lists every element type, in the order of the constants.
func DTypes() []DType { return []DType{F32, F16, BF16, I32, I64, U64} }

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
	for _, d := range DTypes() {
		if strings.EqualFold(dtypeNames[d], s) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q (want one of f32, f16, bf16, i32, i64, u64)", s)
}

// JoinDTypes writes dtypes joined by sep, e.g. "i64 or i32".
func JoinDTypes(ds []DType, sep string) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, sep)
}

package irismodel

import (
	"fmt"
	"math"
	"strconv"
)

// ParamKind is the type of a collective's scalar launch parameter (the
// spec's params).
type ParamKind uint8

// The parameter kinds.
const (
	// ParamRank is a rank of the world: a launch checks 0 <= p < world.
	ParamRank ParamKind = iota + 1
	// ParamInt is a signed 64-bit integer: a launch checks Min <= p <= Max.
	ParamInt
	// ParamF32 is a 32-bit float (an epsilon, a scale), not range-checked.
	ParamF32
)

var paramKindNames = [...]string{ParamRank: "rank", ParamInt: "int", ParamF32: "f32"}

// ParamKinds lists every kind, in the order of the constants.
func ParamKinds() []ParamKind { return []ParamKind{ParamRank, ParamInt, ParamF32} }

// String returns the spec spelling: "rank", "int" or "f32".
func (k ParamKind) String() string {
	if k >= ParamRank && k <= ParamF32 {
		return paramKindNames[k]
	}
	return "ParamKind(" + strconv.Itoa(int(k)) + ")"
}

// ParamDesc is a scalar launch parameter of a collective. Every launch
// passes its value (so one plan serves every value, and a graph replays the
// value it captured); the kernel gets it after the sizes, 8 bytes each (an
// int64, or an f32 widened to a double).
type ParamDesc struct {
	Name string
	Kind ParamKind
	// Min and Max bound a ParamInt (math.MinInt64 and math.MaxInt64 where
	// the spec gives no bound).
	Min, Max int64
}

// Unbounded is an int parameter's descriptor without a range: Min and Max
// at the ends of int64.
func Unbounded(name string, kind ParamKind) ParamDesc {
	return ParamDesc{Name: name, Kind: kind, Min: math.MinInt64, Max: math.MaxInt64}
}

// Range describes the values a launch accepts, e.g. "0 <= root < 2 (world)"
// on 2 ranks, "0 <= root < world" for world 0 (any world), "1 <= k <= 64",
// "any int64", "any f32".
func (d *ParamDesc) Range(world int) string {
	switch {
	case d.Kind == ParamRank && world > 0:
		return fmt.Sprintf("0 <= %s < %d (world)", d.Name, world)
	case d.Kind == ParamRank:
		return "0 <= " + d.Name + " < world"
	case d.Kind == ParamF32:
		return "any f32"
	case d.Min != math.MinInt64 && d.Max != math.MaxInt64:
		return fmt.Sprintf("%d <= %s <= %d", d.Min, d.Name, d.Max)
	case d.Min != math.MinInt64:
		return fmt.Sprintf("%s >= %d", d.Name, d.Min)
	case d.Max != math.MaxInt64:
		return fmt.Sprintf("%s <= %d", d.Name, d.Max)
	}
	return "any int64"
}

// Accepts reports whether v is a value of d on a world of world ranks: an
// IntParam in range for a rank or int parameter, an F32Param for an f32 one.
func (d *ParamDesc) Accepts(v Param, world int) bool {
	switch d.Kind {
	case ParamRank:
		return v.kind == ParamInt && v.Int() >= 0 && v.Int() < int64(world)
	case ParamInt:
		return v.kind == ParamInt && v.Int() >= d.Min && v.Int() <= d.Max
	case ParamF32:
		return v.kind == ParamF32
	}
	return false
}

// Param is the value of a launch parameter as the generic launch paths take
// it: IntParam for rank and int parameters, F32Param for f32 ones. The
// generated Launch methods make them from their typed arguments.
type Param struct {
	kind ParamKind // ParamInt or ParamF32; 0: the zero Param, which no parameter takes
	bits uint64
}

// IntParam is the value v of a rank or int parameter.
func IntParam(v int64) Param { return Param{kind: ParamInt, bits: uint64(v)} }

// F32Param is the value v of an f32 parameter.
func F32Param(v float32) Param { return Param{kind: ParamF32, bits: uint64(math.Float32bits(v))} }

// Kind is ParamInt for an IntParam, ParamF32 for an F32Param, 0 for the
// zero Param.
func (p Param) Kind() ParamKind { return p.kind }

// Int is the value of an IntParam.
func (p Param) Int() int64 { return int64(p.bits) }

// F32 is the value of an F32Param.
func (p Param) F32() float32 { return math.Float32frombits(uint32(p.bits)) }

// Word is the parameter's 8 bytes in the kernel's argument struct: the
// int64, or the f32 as a double (exact both ways).
func (p Param) Word() uint64 {
	if p.kind == ParamF32 {
		return math.Float64bits(float64(p.F32()))
	}
	return p.bits
}

func (p Param) String() string {
	switch p.kind {
	case ParamInt:
		return strconv.FormatInt(p.Int(), 10)
	case ParamF32:
		return strconv.FormatFloat(float64(p.F32()), 'g', -1, 32)
	}
	return "no value"
}

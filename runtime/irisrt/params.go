package irisrt

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
	// ParamF32 is a 32-bit float, not range-checked.
	ParamF32
)

func (k ParamKind) String() string {
	switch k {
	case ParamRank:
		return "rank"
	case ParamInt:
		return "int"
	case ParamF32:
		return "f32"
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

// Range describes the values a launch accepts, e.g. "0 <= root < 2 (world)".
func (d *ParamDesc) Range(world int) string {
	switch {
	case d.Kind == ParamRank:
		return fmt.Sprintf("0 <= %s < %d (world)", d.Name, world)
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

// Param is the value of a launch parameter as the generic launch paths take
// it (VariantPlan.LaunchParams, Collective.RunParams): IntParam for rank and
// int parameters, F32Param for f32 ones. The generated Launch methods make
// them from their typed arguments.
type Param struct {
	kind ParamKind // ParamInt or ParamF32; 0: the zero Param, which no parameter takes
	bits uint64
}

// IntParam is the value v of a rank or int parameter.
func IntParam(v int64) Param { return Param{kind: ParamInt, bits: uint64(v)} }

// F32Param is the value v of an f32 parameter.
func F32Param(v float32) Param { return Param{kind: ParamF32, bits: uint64(math.Float32bits(v))} }

// Int is the value of an IntParam.
func (p Param) Int() int64 { return int64(p.bits) }

// F32 is the value of an F32Param.
func (p Param) F32() float32 { return math.Float32frombits(uint32(p.bits)) }

func (p Param) String() string {
	switch p.kind {
	case ParamInt:
		return strconv.FormatInt(p.Int(), 10)
	case ParamF32:
		return strconv.FormatFloat(float64(p.F32()), 'g', -1, 32)
	}
	return "no value"
}

// word is the parameter's 8 bytes in the kernel's argument struct: the
// int64, or the f32 as a double (exact both ways).
func (p Param) word() uint64 {
	if p.kind == ParamF32 {
		return math.Float64bits(float64(p.F32()))
	}
	return p.bits
}

// ParamError: a launch parameter is out of its range, or of the wrong kind.
// Nothing was launched.
type ParamError struct {
	Op    string // collective/variant
	Name  string // the parameter
	Kind  ParamKind
	Value Param
	Range string // what the launch accepts, e.g. "0 <= root < 2 (world)"
}

func (e *ParamError) Error() string {
	if want := map[ParamKind]ParamKind{ParamRank: ParamInt, ParamInt: ParamInt, ParamF32: ParamF32}[e.Kind]; e.Value.kind != want {
		ctor := "irisrt.IntParam"
		if want == ParamF32 {
			ctor = "irisrt.F32Param"
		}
		return fmt.Sprintf("%s: parameter %s is %s, but the launch passed %s: pass %s(...)", e.Op, e.Name, e.Kind, e.Value.describe(), ctor)
	}
	return fmt.Sprintf("%s: parameter %s = %s is out of range: the launch accepts %s", e.Op, e.Name, e.Value, e.Range)
}

func (p Param) describe() string {
	switch p.kind {
	case ParamInt:
		return "an IntParam"
	case ParamF32:
		return "an F32Param"
	}
	return "the zero Param"
}

// Is matches ErrParam.
func (e *ParamError) Is(target error) bool { return target == ErrParam }

// check reports whether v is a value of d on a world of world ranks.
func (d *ParamDesc) check(op string, v Param, world int) error {
	var ok bool
	switch d.Kind {
	case ParamRank:
		ok = v.kind == ParamInt && v.Int() >= 0 && v.Int() < int64(world)
	case ParamInt:
		ok = v.kind == ParamInt && v.Int() >= d.Min && v.Int() <= d.Max
	case ParamF32:
		ok = v.kind == ParamF32
	}
	if ok {
		return nil
	}
	return &ParamError{Op: op, Name: d.Name, Kind: d.Kind, Value: v, Range: d.Range(world)}
}

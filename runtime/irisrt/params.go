package irisrt

import (
	"fmt"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// ParamError: a launch parameter is out of its range, or of the wrong kind.
// Nothing was launched.
type ParamError struct {
	Op    string // collective/variant
	Name  string // the parameter
	Kind  irismodel.ParamKind
	Value irismodel.Param
	Range string // what the launch accepts, e.g. "0 <= root < 2 (world)"
}

func (e *ParamError) Error() string {
	if want := map[irismodel.ParamKind]irismodel.ParamKind{irismodel.ParamRank: irismodel.ParamInt, irismodel.ParamInt: irismodel.ParamInt, irismodel.ParamF32: irismodel.ParamF32}[e.Kind]; e.Value.Kind() != want {
		ctor := "irismodel.IntParam"
		if want == irismodel.ParamF32 {
			ctor = "irismodel.F32Param"
		}
		return fmt.Sprintf("%s: parameter %s is %s, but the launch passed %s: pass %s(...)", e.Op, e.Name, e.Kind, describe(e.Value), ctor)
	}
	return fmt.Sprintf("%s: parameter %s = %s is out of range: the launch accepts %s", e.Op, e.Name, e.Value, e.Range)
}

// describe names the kind of value v is, for the message.
func describe(v irismodel.Param) string {
	switch v.Kind() {
	case irismodel.ParamInt:
		return "an IntParam"
	case irismodel.ParamF32:
		return "an F32Param"
	}
	return "the zero Param"
}

// Is matches ErrParam.
func (e *ParamError) Is(target error) bool { return target == ErrParam }

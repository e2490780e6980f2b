package irisimpl

import (
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// rt is irisrt's plan core (runtime/internal/core), which irisrt hands over
// in its init; irisimpl imports irisrt, so that has run.
var rt = core.Get[*irisrt.Rank, *irisrt.Plan, irisrt.Tensor]()

// CtxBytes is the size of irisgen_ctx, the first member of every kernel's
// argument struct: the interpreter packs the tensors, sizes, parameters,
// index widths and address slots after it (docs/internals.md, "Kernel
// ABI").
const CtxBytes = core.CtxBytes

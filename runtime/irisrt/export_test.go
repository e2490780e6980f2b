package irisrt

import (
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// What the external tests (package irisrt_test: the plan core driven
// through runtime/irisimpl's interpreter, as generated code drives it) use
// inside.

var (
	NewPlan           = newPlan
	EachProcess       = eachProcess
	JoinFakeProcesses = joinFakeProcesses
	CloseAll          = closeAll
)

// Spec is the spec p was made from.
func (p *Plan) Spec() core.PlanSpec { return p.spec }

// LaunchNumbered and SkipNumbered launch (skip) p with its ctx alone as the
// next numbered launch.
func (p *Plan) LaunchNumbered(s gpu.Stream, mode irismodel.Barrier) error {
	return p.launchNumbered(s, mode, p.argsFor())
}
func (p *Plan) SkipNumbered(s gpu.Stream, mode irismodel.Barrier) error {
	return p.skipNumbered(s, mode)
}

// Check is the fingerprint of launch n of p in mode with the parameters.
func (p *Plan) Check(n uint32, mode irismodel.Barrier, ps []irismodel.Param) uint32 {
	return p.check(n, mode, ps)
}

// LoadKernel loads the kernel of s on r.
func (r *Rank) LoadKernel(s core.PlanSpec) error { _, err := r.function(&s); return err }

// WrapDevice replaces r's device with wrap of it (to trace its calls).
func (r *Rank) WrapDevice(wrap func(gpu.Device) gpu.Device) { r.dev = wrap(r.dev) }

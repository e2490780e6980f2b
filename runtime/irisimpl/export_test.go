package irisimpl

import (
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// What the external tests (package irisimpl_test) look at inside.

// Spec is the spec a plan was made from.
func Spec(p *irisrt.Plan) core.PlanSpec { return rt.Spec(p) }

// PlanBuffer is the address of a plan's workspace or staging buffer name.
func PlanBuffer(p *irisrt.Plan, name string) gpu.DevicePtr { return rt.Buffer(p, name) }

// Fingerprint is the check of launch n of p in mode with the parameters.
func Fingerprint(p *irisrt.Plan, n uint32, mode irismodel.Barrier, ps []irismodel.Param) uint32 {
	return core.Fingerprint(rt.ID(p), n, mode, ps)
}

// Prepare checks the table (Table.prepare); Usable adds the registration
// (Table.usable).
func (t *Table) Prepare() error { return t.prepare() }
func (t *Table) Usable() error  { return t.usable() }

// InferSizes is the convenience call's reading of the sizes.
func (c *Collective) InferSizes(sizes []int64, world int64, given []int64, ts []irisrt.Tensor) error {
	return c.inferSizes(sizes, world, given, ts)
}

// SizeNames are the names of the collective's sizes.
func (c *Collective) SizeNames() []string { return c.sizeNames() }

// LargestBytes is what the auto table compares.
func (c *Collective) LargestBytes(world int64, dt irismodel.DType, sizes []int64) int64 {
	return c.largestBytes(world, dt, sizes)
}

package irisimpl

import (
	"fmt"
	"slices"

	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Entry is one variant of a generated package as tools that pick variants
// at run time see it (irisgen bench and probe, programs that read a variant
// from a flag): its signature and rules, read from the package's Table,
// and a generic constructor.
type Entry struct {
	Collective string
	Variant    string
	DTypes     []irismodel.DType     // empty: no data type
	Ops        []string              // empty: does not reduce
	Sizes      []string              // size parameters, in order
	Params     []irismodel.ParamDesc // launch parameters, in launch order (AnyPlan.LaunchParams)
	Tensors    []TensorInfo          // user tensors, in launch order
	// Barriers are the modes a launch may ask for (default first);
	// Capturable those that may be captured.
	Barriers   []irismodel.Barrier
	Capturable []irismodel.Barrier

	v *Variant
}

// TensorInfo describes a user tensor of an Entry: the model's descriptor
// (name, direction, shape, fixed or index dtypes, optional, owner; its
// ElemType) and what the variant's rules make of it.
type TensorInfo struct {
	irismodel.TensorDesc
	// Remote reports whether peers touch it (placement import or heap).
	Remote bool
	// Heap reports whether it must be on the heap (peers write it, and not
	// at its owner's staging buffer: Plans.StageOut).
	Heap bool

	sizes []string // the collective's size names, for ShapeString
}

// ShapeString is the shape as the spec writes it, e.g. "[world, n]".
func (t TensorInfo) ShapeString() string { return t.Shape.String(t.sizes) }

// Entries lists every variant of t, in collective and spec order; nil when
// t is unusable (plans of it return the reason).
func (t *Table) Entries() []Entry {
	if t.prepare() != nil {
		return nil
	}
	var out []Entry
	for ci := range t.Collectives {
		c := &t.Collectives[ci]
		sizes := c.sizeNames()
		for vi := range c.Variants {
			v := &c.Variants[vi]
			e := Entry{Collective: c.Name, Variant: v.Name, DTypes: c.DTypes, Ops: c.Ops, Sizes: sizes, Params: c.Params,
				Barriers: v.Barriers, Capturable: v.Capturable, v: v}
			for _, ti := range c.user {
				e.Tensors = append(e.Tensors, TensorInfo{TensorDesc: c.Tensors[ti], Remote: v.Uses[ti] >= UseImport,
					Heap: v.Uses[ti] == UseHeap && !v.stagesOut(ti), sizes: sizes})
			}
			out = append(out, e)
		}
	}
	return out
}

// Lookup returns the Entry of collective/variant of t.
func (t *Table) Lookup(collective, variant string) (Entry, bool) {
	for _, e := range t.Entries() {
		if e.Collective == collective && e.Variant == variant {
			return e, true
		}
	}
	return Entry{}, false
}

// Descriptor is the variant's descriptor.
func (e Entry) Descriptor() *Variant { return e.v }

// New makes a plan of the variant (collective, like every plan): dt is
// ignored without DTypes, op without Ops; sizes are in Sizes order.
func (e Entry) New(r *irisrt.Rank, dt irismodel.DType, op string, sizes []int64) (AnyPlan, error) {
	p, err := newVariantPlan(r, e.v, dt, op, sizes)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// SampleParams are values of e's parameters for tools that launch any
// variant (a benchmark, the capture probe), nil when e has none. Sample 0:
// rank parameter i is rank i mod world (root 0; src 0, dst 1), an int its
// least value from 1 (a ring shift of +1), an f32 1. Sample 1 differs in
// every rank parameter and, where the range allows, every value: rank
// parameter i is rank i+1 mod world, an int its least value from -1, an f32
// 0.5.
func (e Entry) SampleParams(world, sample int) []irismodel.Param {
	if len(e.Params) == 0 {
		return nil
	}
	k := sample % 2
	ps := make([]irismodel.Param, len(e.Params))
	for i, d := range e.Params {
		switch d.Kind {
		case irismodel.ParamRank:
			ps[i] = irismodel.IntParam(int64((i + k) % max(world, 1)))
		case irismodel.ParamInt:
			ps[i] = irismodel.IntParam(min(max([]int64{1, -1}[k], d.Min), d.Max))
		default:
			ps[i] = irismodel.F32Param([]float32{1, 0.5}[k])
		}
	}
	return ps
}

// TensorsFor is what rank passes of ts for a launch with the parameters ps:
// ts, with the zero irisrt.Tensor for every tensor that only another rank uses.
func (e Entry) TensorsFor(rank int, ts []irisrt.Tensor, ps []irismodel.Param) []irisrt.Tensor {
	out := ts
	for i, ti := range e.Tensors {
		if ti.Owner == "" {
			continue
		}
		j := slices.IndexFunc(e.Params, func(d irismodel.ParamDesc) bool { return d.Name == ti.Owner })
		if j >= 0 && j < len(ps) && ps[j].Int() != int64(rank) {
			if &out[0] == &ts[0] {
				out = slices.Clone(ts)
			}
			out[i] = irisrt.Tensor{}
		}
	}
	return out
}

// Numel is the tensor's element count for a world size and the sizes in
// spec order; -1 when it does not fit in an int64.
func (t TensorInfo) Numel(world int, sizes []int64) int64 {
	n, ok := t.Shape.Numel(int64(world), 0, sizes)
	if !ok {
		return -1
	}
	return n
}

// Alloc allocates every tensor of e on r's heap for data type dt and the
// sizes, in spec order, each in its element type; free frees them.
// Collective, like every heap allocation.
func (e Entry) Alloc(r *irisrt.Rank, dt irismodel.DType, sizes []int64) (ts []irisrt.Tensor, free func(), err error) {
	free = func() {
		for _, t := range ts {
			r.Heap().Free(t)
		}
	}
	for _, ti := range e.Tensors {
		t, err := r.Heap().Alloc(ti.ElemType(dt), ti.Numel(r.World(), sizes))
		if err != nil {
			free()
			return nil, func() {}, fmt.Errorf("allocating %s: %w", ti.Name, err)
		}
		ts = append(ts, t)
	}
	return ts, free, nil
}

// Package moepair sets up the catalogue's moe_dispatch and moe_combine, from
// whichever generated package holds them (irisgen's, or a downstream one
// that names them in its catalogue key), as the pair they are used as: one
// plan each for the same sizes, the tensors of both (dispatch's outputs are
// combine's inputs of the same name), and the identity expert between
// them. The capture probe's and the benchmark's MoE scenarios use it.
package moepair

import (
	"errors"
	"fmt"
	"slices"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Dispatch and Combine are the collectives of the pair, each used through
// its Variant.
const (
	Dispatch = "moe_dispatch"
	Combine  = "moe_combine"
	Variant  = "push"
)

// Find returns the pair's variants among entries (one generated package's
// catalogue); ok is false when it lacks either.
func Find(entries []irisimpl.Entry) (dispatch, combine irisimpl.Entry, ok bool) {
	find := func(coll string) (irisimpl.Entry, bool) {
		i := slices.IndexFunc(entries, func(e irisimpl.Entry) bool { return e.Collective == coll && e.Variant == Variant })
		if i < 0 {
			return irisimpl.Entry{}, false
		}
		return entries[i], true
	}
	d, ok1 := find(Dispatch)
	c, ok2 := find(Combine)
	return d, c, ok1 && ok2
}

// Pair is one rank's dispatch and combine plans and their tensors.
type Pair struct {
	Dispatch, Combine irisimpl.AnyPlan
	// DispatchArgs and CombineArgs are each plan's tensors in spec order.
	DispatchArgs, CombineArgs []irisrt.Tensor
	// Tensors holds every tensor by name; a name both plans have is one
	// tensor (recv_ids, recv_weights, recv_src, recv_counts, send_slot).
	Tensors map[string]irisrt.Tensor
	order   []irisrt.Tensor // Tensors in allocation order
	k       int64
	r       *irisrt.Rank
}

// New makes the plans of the pair in entries for data type dt and sizes
// (t, h, k, e, cap) and allocates every tensor on r's heap, each in its own
// dtype (index tensors in their first). Collective, like the plans.
func New(r *irisrt.Rank, entries []irisimpl.Entry, dt irismodel.DType, sizes []int64) (*Pair, error) {
	disp, comb, ok := Find(entries)
	if !ok {
		return nil, fmt.Errorf("moe pair: the package has no %s/%s or %s/%s", Dispatch, Variant, Combine, Variant)
	}
	if len(sizes) != 5 {
		return nil, fmt.Errorf("moe pair: %d sizes, want 5 (t, h, k, e, cap)", len(sizes))
	}
	p := &Pair{Tensors: map[string]irisrt.Tensor{}, k: sizes[2], r: r}
	var err error
	if p.Dispatch, err = disp.New(r, dt, "", sizes); err != nil {
		return nil, fmt.Errorf("making the dispatch plan: %w", err)
	}
	if p.Combine, err = comb.New(r, dt, "", sizes); err != nil {
		p.Close()
		return nil, fmt.Errorf("making the combine plan: %w", err)
	}
	for _, x := range []struct {
		e    irisimpl.Entry
		args *[]irisrt.Tensor
	}{{disp, &p.DispatchArgs}, {comb, &p.CombineArgs}} {
		for _, ti := range x.e.Tensors {
			t, ok := p.Tensors[ti.Name]
			if !ok {
				if t, err = r.Heap().Alloc(ti.ElemType(dt), ti.Numel(r.World(), sizes)); err != nil {
					p.Close()
					return nil, fmt.Errorf("allocating %s: %w", ti.Name, err)
				}
				p.Tensors[ti.Name] = t
				p.order = append(p.order, t)
			}
			*x.args = append(*x.args, t)
		}
	}
	return p, nil
}

// Expert enqueues the identity expert on s: every one of the k planes of
// expert_out ([k, world, cap, h]) gets the received rows (recv_tokens,
// [world, cap, h]), so combine's output is each token times the sum of its
// weights. Device-to-device copies only: capturable.
func (p *Pair) Expert(s gpu.Stream) error {
	rows, out := p.Tensors["recv_tokens"], p.Tensors["expert_out"]
	for j := range p.k {
		if err := p.r.Device().CopyDtoDAsync(out.Slice(j*rows.Len, rows.Len).Ptr, rows.Ptr, rows.Bytes(), s); err != nil {
			return fmt.Errorf("identity expert: %w", err)
		}
	}
	return nil
}

// Launch enqueues dispatch, the identity expert and combine on s in mode.
func (p *Pair) Launch(s gpu.Stream, mode irismodel.Barrier) error {
	if err := p.Dispatch.LaunchTensors(s, p.DispatchArgs, mode); err != nil {
		return err
	}
	if err := p.Expert(s); err != nil {
		return err
	}
	return p.Combine.LaunchTensors(s, p.CombineArgs, mode)
}

// Close frees the tensors, newest first, and the plans (collective: every
// rank frees in the same order).
func (p *Pair) Close() error {
	var errs []error
	for i := len(p.order) - 1; i >= 0; i-- {
		errs = append(errs, p.r.Heap().Free(p.order[i]))
	}
	for _, pl := range []irisimpl.AnyPlan{p.Combine, p.Dispatch} {
		if pl != nil {
			errs = append(errs, pl.Close())
		}
	}
	return errors.Join(errs...)
}

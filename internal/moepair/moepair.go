// Package moepair sets up moe_dispatch and moe_combine from the generated
// catalogue as the pair they are used as: one plan each for the same sizes,
// the tensors of both, and the identity expert between them (combine reads
// the rows dispatch received). The capture probe and the benchmark use it.
package moepair

import (
	"errors"
	"fmt"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Pair is one rank's dispatch and combine plans and their tensors.
type Pair struct {
	Dispatch, Combine collectives.AnyPlan
	// DispatchArgs and CombineArgs are each plan's tensors in spec order.
	DispatchArgs, CombineArgs []irisrt.Tensor
	// Tensors holds every tensor by name (combine's expert_out is
	// dispatch's recv_tokens).
	Tensors map[string]irisrt.Tensor
	r       *irisrt.Rank
}

// New makes the plans for data type dt and sizes (t, h, k, e, cap) and
// allocates every tensor on r's heap, each in its own dtype (index tensors
// in their first). Collective, like the plans.
func New(r *irisrt.Rank, dt irisrt.DType, sizes []int64) (*Pair, error) {
	disp, ok1 := collectives.Lookup("moe_dispatch", "push")
	comb, ok2 := collectives.Lookup("moe_combine", "push")
	if !ok1 || !ok2 {
		return nil, errors.New("the catalogue has no moe_dispatch/push or moe_combine/push")
	}
	p := &Pair{Tensors: map[string]irisrt.Tensor{}, r: r}
	var err error
	if p.Dispatch, err = disp.New(r, dt, "", sizes); err != nil {
		return nil, fmt.Errorf("making the dispatch plan: %w", err)
	}
	if p.Combine, err = comb.New(r, dt, "", sizes); err != nil {
		p.Close()
		return nil, fmt.Errorf("making the combine plan: %w", err)
	}
	for _, x := range []struct {
		e    collectives.Entry
		args *[]irisrt.Tensor
	}{{disp, &p.DispatchArgs}, {comb, &p.CombineArgs}} {
		for _, ti := range x.e.Tensors {
			name := ti.Name
			if name == "expert_out" {
				name = "recv_tokens" // the identity expert
			}
			t, ok := p.Tensors[name]
			if !ok {
				if t, err = r.Heap().Alloc(ti.ElemType(dt), ti.Numel(r.World(), sizes)); err != nil {
					p.Close()
					return nil, fmt.Errorf("allocating %s: %w", name, err)
				}
				p.Tensors[name] = t
			}
			*x.args = append(*x.args, t)
		}
	}
	return p, nil
}

// Launch enqueues dispatch, then combine, on s in mode.
func (p *Pair) Launch(s gpu.Stream, mode irisrt.Barrier) error {
	if err := p.Dispatch.LaunchTensors(s, p.DispatchArgs, mode); err != nil {
		return err
	}
	return p.Combine.LaunchTensors(s, p.CombineArgs, mode)
}

// Close frees the tensors and the plans (collective).
func (p *Pair) Close() error {
	var errs []error
	for _, t := range p.Tensors {
		errs = append(errs, p.r.Heap().Free(t))
	}
	for _, pl := range []collectives.AnyPlan{p.Combine, p.Dispatch} {
		if pl != nil {
			errs = append(errs, pl.Close())
		}
	}
	return errors.Join(errs...)
}

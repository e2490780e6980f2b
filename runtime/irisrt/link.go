package irisrt

import "github.com/irisgen/irisgen/runtime/internal/core"

// The plan core, handed to the descriptor interpreter (runtime/irisimpl)
// without exporting it to users: making plans from a spec, packing and
// launching their arguments, numbering launches and refusals, and the
// launch checks that need the heap's books.
func init() {
	core.Set(core.Plans[*Rank, *Plan, Tensor]{
		NewPlan:          newPlan,
		Buffer:           (*Plan).buffer,
		Args:             (*Plan).argsFor,
		Staged:           (*Plan).staged,
		StageOut:         (*Plan).stageOut,
		Launch:           (*Plan).launch,
		ID:               func(p *Plan) uint64 { return p.id },
		Skip:             (*Plan).skip,
		Rank:             func(p *Plan) *Rank { return p.r },
		Spec:             func(p *Plan) core.PlanSpec { return p.spec },
		Closed:           (*Rank).isClosed,
		ClosedErr:        (*Rank).closedErr,
		NextLaunch:       (*Rank).nextLaunch,
		Refuse:           (*Rank).refuse,
		RefuseLaunch:     (*Plan).refuse,
		MaxBlocks:        func(r *Rank, maxBlocks int) int { return sharedMaxBlocks(maxBlocks, r.perGPU) },
		Cache:            func(r *Rank) *core.Cache { return &r.plans },
		CheckTensor:      checkTensor,
		CheckTensorOneOf: checkTensorOneOf,
		CheckLive:        checkLive,
		CheckHeap:        checkHeap,
	})
}

//go:build gpu

package gpu_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// The collectives with launch parameters (broadcast, reduce, gather,
// scatter, send_recv, shift): one plan serves every root, source,
// destination or offset, and a tensor only one rank uses is passed by that
// rank alone (the others pass the zero irisrt.Tensor).

// args are the values of one launch's parameters; each collective reads
// the ones it has.
type args struct {
	root, src, dst int
	offset         int64
}

func (a args) String() string {
	return fmt.Sprintf("root=%d src=%d dst=%d offset=%d", a.root, a.src, a.dst, a.offset)
}

// owner is the rank the parameter called name gives, -1 for "" (every
// rank uses the tensor).
func (a args) owner(name string) int {
	switch name {
	case "root":
		return a.root
	case "src":
		return a.src
	case "dst":
		return a.dst
	}
	return -1
}

// pplan is a plan of a collective with parameters, bound to args.
type pplan struct {
	launch func(s gpu.Stream, in, out irisrt.Tensor, a args, mode irismodel.Barrier) error
	close  func() error
}

// paramCase describes one variant to the suite.
type paramCase struct {
	coll, variant string
	reduces       bool
	inLen, outLen func(w int, n int64) int64
	newPlan       func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (pplan, error)
	// ref is output element i of rank `rank` for a, from in(p), the input
	// of rank p.
	ref func(in func(p int) []float32, w, rank int, op string, n, i int64, a args) float32
}

func (pc *paramCase) name() string { return pc.coll + "/" + pc.variant }

func (pc *paramCase) ops() []string {
	if pc.reduces {
		return []string{"sum", "max", "min"}
	}
	return []string{""}
}

// usesIn and usesOut report whether rank uses the tensors for a.
func (pc *paramCase) usesIn(rank int, a args) bool {
	return pc.inOwner() == "" || a.owner(pc.inOwner()) == rank
}

func (pc *paramCase) usesOut(rank int, a args) bool {
	return pc.outOwner() == "" || a.owner(pc.outOwner()) == rank
}

// assignments are the parameter values a case runs with on w ranks: every
// root; every (src, dst) pair, src == dst included, up to 4 ranks; the
// shifts 1, -1, 0 and w+1.
func (pc *paramCase) assignments(w int) []args {
	var out []args
	switch pc.coll {
	case "send_recv":
		for s := range w {
			for d := range w {
				if w <= 4 || d == (s+1)%w || d == s {
					out = append(out, args{src: s, dst: d})
				}
			}
		}
		slices.SortStableFunc(out, func(a, b args) int { // (0, 1) first: the large sizes take only the first
			return boolInt(b.src == 0 && b.dst == 1) - boolInt(a.src == 0 && a.dst == 1)
		})
	case "shift":
		for _, o := range []int64{1, -1, 0, int64(w) + 1} {
			out = append(out, args{offset: o})
		}
	default:
		for root := range w {
			out = append(out, args{root: root})
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bound is a plan of p whose launch passes the parameters launch reads
// from args.
func bound[P interface{ Close() error }](p P, err error, launch func(s gpu.Stream, in, out irisrt.Tensor, a args, m irismodel.Barrier) error) (pplan, error) {
	if err != nil {
		return pplan{}, err
	}
	return pplan{launch, p.Close}, nil
}

// rootPlan, pairPlan and shiftPlan bind the generated plans of the rooted
// collectives, of send_recv and of shift.
func rootPlan[P interface {
	Launch(s gpu.Stream, input, output irisrt.Tensor, root int, mode irismodel.Barrier) error
	Close() error
}](p P, err error) (pplan, error) {
	return bound(p, err, func(s gpu.Stream, in, out irisrt.Tensor, a args, m irismodel.Barrier) error {
		return p.Launch(s, in, out, a.root, m)
	})
}

func pairPlan[P interface {
	Launch(s gpu.Stream, input, output irisrt.Tensor, src, dst int, mode irismodel.Barrier) error
	Close() error
}](p P, err error) (pplan, error) {
	return bound(p, err, func(s gpu.Stream, in, out irisrt.Tensor, a args, m irismodel.Barrier) error {
		return p.Launch(s, in, out, a.src, a.dst, m)
	})
}

func shiftPlan[P interface {
	Launch(s gpu.Stream, input, output irisrt.Tensor, offset int64, mode irismodel.Barrier) error
	Close() error
}](p P, err error) (pplan, error) {
	return bound(p, err, func(s gpu.Stream, in, out irisrt.Tensor, a args, m irismodel.Barrier) error {
		return p.Launch(s, in, out, a.offset, m)
	})
}

func broadcastRef(in func(int) []float32, _, _ int, _ string, _, i int64, a args) float32 {
	return in(a.root)[i]
}

func reduceRef(in func(int) []float32, w, _ int, op string, _, i int64, _ args) float32 {
	return reduce(op, func(p int) float32 { return in(p)[i] }, w)
}

func gatherRef(in func(int) []float32, _, _ int, _ string, n, i int64, _ args) float32 {
	return in(int(i / n))[i%n]
}

func scatterRef(in func(int) []float32, _, rank int, _ string, n, i int64, a args) float32 {
	return in(a.root)[int64(rank)*n+i]
}

func sendRecvRef(in func(int) []float32, _, _ int, _ string, _, i int64, a args) float32 {
	return in(a.src)[i]
}

func shiftRef(in func(int) []float32, w, rank int, _ string, _, i int64, a args) float32 {
	from := ((int64(rank)-a.offset)%int64(w) + int64(w)) % int64(w)
	return in(int(from))[i]
}

func redOp(op string) collectives.ReduceOp { return collectives.ReduceOp(op) }

var paramCatalogue = []paramCase{
	{coll: "broadcast", variant: "push", inLen: nLen, outLen: nLen, ref: broadcastRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewBroadcastPushPlan(r, dt, n))
		}},
	{coll: "broadcast", variant: "pull", inLen: nLen, outLen: nLen, ref: broadcastRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewBroadcastPullPlan(r, dt, n))
		}},
	{coll: "broadcast", variant: "scatter_gather", inLen: nLen, outLen: nLen, ref: broadcastRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewBroadcastScatterGatherPlan(r, dt, n))
		}},
	{coll: "reduce", variant: "pull", reduces: true, inLen: nLen, outLen: nLen, ref: reduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (pplan, error) {
			return rootPlan(collectives.NewReducePullPlan(r, dt, redOp(op), n))
		}},
	{coll: "reduce", variant: "split", reduces: true, inLen: nLen, outLen: nLen, ref: reduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (pplan, error) {
			return rootPlan(collectives.NewReduceSplitPlan(r, dt, redOp(op), n))
		}},
	{coll: "reduce", variant: "relay", reduces: true, inLen: nLen, outLen: nLen, ref: reduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (pplan, error) {
			return rootPlan(collectives.NewReduceRelayPlan(r, dt, redOp(op), n))
		}},
	{coll: "gather", variant: "pull", inLen: nLen, outLen: wnLen, ref: gatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewGatherPullPlan(r, dt, n))
		}},
	{coll: "gather", variant: "push", inLen: nLen, outLen: wnLen, ref: gatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewGatherPushPlan(r, dt, n))
		}},
	{coll: "scatter", variant: "push", inLen: wnLen, outLen: nLen, ref: scatterRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewScatterPushPlan(r, dt, n))
		}},
	{coll: "scatter", variant: "pull", inLen: wnLen, outLen: nLen, ref: scatterRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewScatterPullPlan(r, dt, n))
		}},
	{coll: "send_recv", variant: "push", inLen: nLen, outLen: nLen, ref: sendRecvRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return pairPlan(collectives.NewSendRecvPushPlan(r, dt, n))
		}},
	{coll: "send_recv", variant: "pull", inLen: nLen, outLen: nLen, ref: sendRecvRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return pairPlan(collectives.NewSendRecvPullPlan(r, dt, n))
		}},
	{coll: "shift", variant: "push", inLen: nLen, outLen: nLen, ref: shiftRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return shiftPlan(collectives.NewShiftPushPlan(r, dt, n))
		}},
	{coll: "shift", variant: "pull", inLen: nLen, outLen: nLen, ref: shiftRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return shiftPlan(collectives.NewShiftPullPlan(r, dt, n))
		}},
	// The Lamport variants.
	{coll: "broadcast", variant: "lamport", inLen: nLen, outLen: nLen, ref: broadcastRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewBroadcastLamportPlan(r, dt, n))
		}},
	{coll: "broadcast", variant: "lamport_relay", inLen: nLen, outLen: nLen, ref: broadcastRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewBroadcastLamportRelayPlan(r, dt, n))
		}},
	{coll: "reduce", variant: "lamport", reduces: true, inLen: nLen, outLen: nLen, ref: reduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (pplan, error) {
			return rootPlan(collectives.NewReduceLamportPlan(r, dt, redOp(op), n))
		}},
	{coll: "reduce", variant: "lamport_relay", reduces: true, inLen: nLen, outLen: nLen, ref: reduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (pplan, error) {
			return rootPlan(collectives.NewReduceLamportRelayPlan(r, dt, redOp(op), n))
		}},
	{coll: "gather", variant: "lamport", inLen: nLen, outLen: wnLen, ref: gatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewGatherLamportPlan(r, dt, n))
		}},
	{coll: "scatter", variant: "lamport", inLen: wnLen, outLen: nLen, ref: scatterRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewScatterLamportPlan(r, dt, n))
		}},
	{coll: "send_recv", variant: "lamport", inLen: nLen, outLen: nLen, ref: sendRecvRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return pairPlan(collectives.NewSendRecvLamportPlan(r, dt, n))
		}},
	// The copy-engine variants.
	{coll: "broadcast", variant: "copy_push", inLen: nLen, outLen: nLen, ref: broadcastRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewBroadcastCopyPushPlan(r, dt, n))
		}},
	{coll: "gather", variant: "copy_push", inLen: nLen, outLen: wnLen, ref: gatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewGatherCopyPushPlan(r, dt, n))
		}},
	{coll: "scatter", variant: "copy_push", inLen: wnLen, outLen: nLen, ref: scatterRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return rootPlan(collectives.NewScatterCopyPushPlan(r, dt, n))
		}},
	{coll: "send_recv", variant: "copy_push", inLen: nLen, outLen: nLen, ref: sendRecvRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return pairPlan(collectives.NewSendRecvCopyPushPlan(r, dt, n))
		}},
	{coll: "shift", variant: "copy_push", inLen: nLen, outLen: nLen, ref: shiftRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (pplan, error) {
			return shiftPlan(collectives.NewShiftCopyPushPlan(r, dt, n))
		}},
}

// paramSizes are the element counts n of the matrix: 0 (a launch that
// enqueues nothing) and the catalogue's.
func paramSizes() []int64 { return append([]int64{0}, caseSizes()...) }

// check compares a rank's output with the reference: every case is a copy
// or a reduction in rank order in fp32, rounded once, so bit for bit.
func (pc *paramCase) check(got []float32, dt irismodel.DType, op string, w, rank int, n int64, a args, all func(int) []float32) error {
	ins := make([][]float32, w)
	for p := range ins {
		ins[p] = all(p)
	}
	in := func(p int) []float32 { return ins[p] }
	var bad error
	var once sync.Once
	parallel(int64(len(got)), func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			if want := pc.ref(in, w, rank, op, n, i, a); encode1(dt, want) != encode1(dt, got[i]) {
				once.Do(func() {
					bad = fmt.Errorf("element %d: got %g (bits %#x), want %g (bits %#x)", i, got[i], encode1(dt, got[i]), want, encode1(dt, want))
				})
				return
			}
		}
	})
	return bad
}

// paramRig is one case's plan and tensors on one rank: input and output
// on the heap or off it as the placement says, allocated on every rank
// (heap allocation is collective) though only their owners pass them.
type paramRig struct {
	pc      *paramCase
	p       pplan
	in, out irisrt.Tensor
	free    []func()
}

func newParamRig(r *irisrt.Rank, pc *paramCase, dt irismodel.DType, op string, n int64, pl placement) (*paramRig, error) {
	g := &paramRig{pc: pc}
	var err error
	if g.p, err = pc.newPlan(r, dt, op, n); err != nil {
		return nil, err
	}
	g.free = append(g.free, func() { g.p.close() })
	for _, x := range []struct {
		t    *irisrt.Tensor
		n    int64
		heap bool
	}{{&g.in, pc.inLen(r.World(), n), pl.heapIn}, {&g.out, pc.outLen(r.World(), n), pl.heapOut}} {
		var f func()
		if *x.t, f, err = tensor(r, dt, x.n, x.heap); err != nil {
			g.close()
			return nil, err
		}
		g.free = append(g.free, f)
	}
	return g, nil
}

func (g *paramRig) close() {
	for i := len(g.free) - 1; i >= 0; i-- {
		g.free[i]()
	}
}

// tensors are what rank passes for a: its tensors where it uses them, the
// zero Tensor where it does not.
func (g *paramRig) tensors(rank int, a args) (in, out irisrt.Tensor) {
	if g.pc.usesIn(rank, a) {
		in = g.in
	}
	if g.pc.usesOut(rank, a) {
		out = g.out
	}
	return in, out
}

// checkParamCase runs one case on one rank: for every assignment, rounds
// in the given modes, each with fresh inputs and the outputs poisoned.
func checkParamCase(r *irisrt.Rank, pc *paramCase, dt irismodel.DType, op string, n int64, pl placement, modes []irismodel.Barrier, as []args) error {
	w, me := r.World(), r.Rank()
	g, err := newParamRig(r, pc, dt, op, n, pl)
	if err != nil {
		return err
	}
	defer g.close()
	s := r.Stream()
	seed := uint64(len(pc.name())*7919) ^ uint64(n)
	round := 0
	for _, a := range as {
		in, out := g.tensors(me, a)
		if n == 0 {
			in, out = irisrt.Tensor{}, irisrt.Tensor{} // the zero Tensor stands for an empty one
		}
		for _, mode := range modes {
			if pc.noNone() && mode == irismodel.BarrierNone {
				continue
			}
			round++
			all := inputs(dt, g.in.Len, seed, uint64(round))
			if err := upload(r, g.in, encode(dt, all(me))); err != nil {
				return err
			}
			if err := r.Device().MemsetD8Async(g.out.Ptr, 0xA5, g.out.Bytes(), s); err != nil {
				return err
			}
			if mode == irismodel.BarrierNone { // the caller orders: inputs ready everywhere
				if err := r.HostBarrier(s); err != nil {
					return err
				}
			}
			if mode == irismodel.BarrierNone && pc.importIn() && !pl.heapIn && n > 0 {
				// Nothing would order the import before the peers' reads: the
				// ranks that import refuse; the others make the call refused
				// too (see refuseToo).
				if pc.usesIn(me, a) {
					var pe *irisrt.PlacementError
					if err := g.p.launch(s, in, out, a, mode); !errors.As(err, &pe) || !pe.Unordered {
						return fmt.Errorf("%s %s: import in mode none: got %v, want an unordered *irisrt.PlacementError", a, mode, err)
					}
				} else if err := refuseToo(func(m irismodel.Barrier) error { return g.p.launch(s, in, out, a, m) }); err != nil {
					return err
				}
				if err := r.HostBarrier(s); err != nil {
					return err
				}
				continue
			}
			if err := g.p.launch(s, in, out, a, mode); err != nil {
				return fmt.Errorf("%s %s: %w", a, mode, err)
			}
			if mode == irismodel.BarrierNone { // ... and the call complete everywhere
				if err := r.HostBarrier(s); err != nil {
					return err
				}
			}
			if err := syncCheck(r, s); err != nil {
				return fmt.Errorf("%s %s: %w", a, mode, err)
			}
			if pc.usesOut(me, a) && n > 0 {
				b, err := download(r, g.out)
				if err != nil {
					return err
				}
				if err := pc.check(decode(dt, b), dt, op, w, me, n, a, all); err != nil {
					return fmt.Errorf("rank %d %s %s: %w", me, a, mode, err)
				}
			}
			// Nobody uploads the next round's input before every rank's
			// kernel is done with this one.
			if err := r.HostBarrier(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// placements are the allocations a case is checked with: both tensors on
// the heap, and each off it where its rule allows.
func (pc *paramCase) placements() []placement {
	out := []placement{{true, true}}
	if pc.importIn() || !pc.heapOut() {
		out = append(out, placement{heapIn: false, heapOut: pc.heapOut()})
	}
	return out
}

// runParamMatrix runs every case x dtype x op x size x placement x
// assignment on one rank and counts the cases. n = 0 launches with the
// zero Tensor everywhere and must enqueue nothing; above 1 Mi elements only
// the first assignment, placement and mode run.
func runParamMatrix(r *irisrt.Rank, only func(pc *paramCase) bool, count *int) error {
	for i := range paramCatalogue {
		pc := &paramCatalogue[i]
		if only != nil && !only(pc) || !variantSelected(pc.name()) {
			continue
		}
		for _, dt := range dataTypes() {
			for _, op := range pc.ops() {
				for _, n := range paramSizes() {
					pls, modes, as := pc.placements(), allModes, pc.assignments(r.World())
					if n > 1<<20 {
						pls, modes, as = pls[:1], allModes[:1], as[:1]
					}
					for _, pl := range pls {
						if err := checkParamCase(r, pc, dt, op, n, pl, modes, as); err != nil {
							return fmt.Errorf("%s %s %s n=%d %s: %w", pc.name(), dt, op, n, pl, err)
						}
						*count++
					}
				}
			}
		}
	}
	return nil
}

// TestParamCollectives checks every variant with parameters x dtype x op
// at every size, from every root (every pair, several shifts), against the
// CPU reference, in the in-process world.
func TestParamCollectives(t *testing.T) {
	eachVariantCase(t, paramCatalogue, (*paramCase).name, runParamMatrix, func(pc *paramCase, world int) string {
		return fmt.Sprintf("sizes %v, parameters %v", paramSizes(), pc.assignments(world))
	})
}

// checkParamRules checks, on the real launch path, what a launch with
// parameters refuses before anything reaches the stream (the output keeps
// its poison): a rank parameter outside the world on every rank (-1 and
// world); a one-rank tensor wrong on its owner (another dtype), and off the
// heap where peers write it. A wrong tensor on a rank that does not use it
// is ignored: the launch goes ahead and is right.
func checkParamRules(r *irisrt.Rank, pc *paramCase) error {
	tracef(r, "rules %s", pc.name())
	const n = 4096 + 3
	dt, op, w, me := irismodel.BF16, pc.ops()[0], r.World(), r.Rank()
	g, err := newParamRig(r, pc, dt, op, n, placement{true, true})
	if err != nil {
		return err
	}
	defer g.close()
	s := r.Stream()
	poisoned := func() error {
		if err := syncCheck(r, s); err != nil {
			return err
		}
		b, err := download(r, g.out)
		if err != nil {
			return err
		}
		for i, x := range b {
			if x != 0xA5 {
				return fmt.Errorf("a refused launch wrote the output (byte %d is %#x)", i, x)
			}
		}
		return nil
	}
	if err := r.Device().MemsetD8Async(g.out.Ptr, 0xA5, g.out.Bytes(), s); err != nil {
		return err
	}
	base := pc.assignments(w)[0]
	var bad []args
	if pc.coll == "shift" {
		bad = nil // any offset is valid
	} else {
		for _, x := range []int{-1, w} {
			a := base
			switch pc.coll {
			case "send_recv":
				a.src = x
				bad = append(bad, a)
				a = base
				a.dst = x
			default:
				a.root = x
			}
			bad = append(bad, a)
		}
	}
	for _, a := range bad {
		var pe *irisrt.ParamError
		if err := g.p.launch(s, g.in, g.out, a, irismodel.BarrierDevice); !errors.As(err, &pe) {
			return fmt.Errorf("%s: got %v, want *irisrt.ParamError", a, err)
		}
	}
	if err := poisoned(); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	// A one-rank tensor of another dtype, and an output peers write off the
	// heap: refused on the owner; the others make the call refused too
	// (see refuseToo); every rank where every rank uses the output.
	off, freeOff, err := tensor(r, dt, g.out.Len, false)
	if err != nil {
		return err
	}
	defer freeOff()
	var (
		de *irisrt.DTypeError
		pl *irisrt.PlacementError
	)
	in, out := g.tensors(me, base)
	for _, c := range []struct {
		what    string
		owner   string // who launches: "" every rank
		skip    bool
		in, out irisrt.Tensor
		target  any
	}{
		{"input of another dtype", pc.inOwner(), pc.inOwner() == "", irisrt.Tensor{Ptr: g.in.Ptr, DType: irismodel.F32, Len: g.in.Len / 2}, out, &de},
		{"output of another dtype", pc.outOwner(), pc.outOwner() == "", in, irisrt.Tensor{Ptr: g.out.Ptr, DType: irismodel.F32, Len: g.out.Len / 2}, &de},
		{"output off the heap", pc.outOwner(), !pc.heapOut(), in, off, &pl},
	} {
		if c.skip {
			continue
		}
		if c.owner == "" || base.owner(c.owner) == me {
			if err := g.p.launch(s, c.in, c.out, base, irismodel.BarrierDevice); !errors.As(err, c.target) {
				return fmt.Errorf("%s: got %v, want %T", c.what, err, c.target)
			}
		} else if err := refuseAlongside(pc, base, func(a args, m irismodel.Barrier) error { return g.p.launch(s, c.in, c.out, a, m) }); err != nil {
			return err
		}
		if err := poisoned(); err != nil {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
	}
	// Garbage where a rank does not use a tensor: ignored.
	all := inputs(dt, g.in.Len, 0x5eed, 0)
	if err := upload(r, g.in, encode(dt, all(me))); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	garbage := irisrt.Tensor{Ptr: 8, DType: irismodel.U64, Len: 3}
	if !pc.usesIn(me, base) {
		in = garbage
	}
	if !pc.usesOut(me, base) {
		out = garbage
	}
	if err := g.p.launch(s, in, out, base, irismodel.BarrierDevice); err != nil {
		return fmt.Errorf("garbage where this rank uses no tensor: %w", err)
	}
	if err := syncCheck(r, s); err != nil {
		return err
	}
	if pc.usesOut(me, base) {
		b, err := download(r, g.out)
		if err != nil {
			return err
		}
		if err := pc.check(decode(dt, b), dt, op, w, me, n, base, all); err != nil {
			return fmt.Errorf("garbage where a rank uses no tensor: rank %d: %w", me, err)
		}
	}
	return r.HostBarrier(s)
}

// TestParamRules checks the refusals of launches with parameters on the
// real launch path.
func TestParamRules(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		// every variant: refusals only; the shard that runs TestParamRules runs it whole
		for i := range paramCatalogue {
			pc := &paramCatalogue[i]
			t.Run(pc.name(), func(t *testing.T) {
				if err := w.Run(func(r *irisrt.Rank) error { return checkParamRules(r, pc) }); err != nil {
					t.Fatal(err)
				}
				cases.add(1)
			})
		}
	})
}

// paramBackToBack launches a plan `rounds` times with no host sync, the
// parameters changing every launch (the root, the pair or the shift turns
// round): before every launch new input is copied into the input tensor
// on the stream, after it the output is copied away; all results are
// checked at the end. A kernel that found last launch's root's address, or
// let a rank overwrite an input a slow peer still reads, fails here.
func paramBackToBack(r *irisrt.Rank, pc *paramCase, dt irismodel.DType, n int64, rounds int) error {
	tracef(r, "back to back %s %s n=%d, %d rounds", pc.name(), dt, n, rounds)
	w, me := r.World(), r.Rank()
	op := pc.ops()[0]
	g, err := newParamRig(r, pc, dt, op, n, placement{true, true})
	if err != nil {
		return err
	}
	defer g.close()
	pool, freePool, err := tensor(r, dt, g.in.Len*int64(rounds), false)
	if err != nil {
		return err
	}
	defer freePool()
	results, freeResults, err := tensor(r, dt, g.out.Len*int64(rounds), false)
	if err != nil {
		return err
	}
	defer freeResults()
	as := pc.assignments(w)
	seed := uint64(0xb2b) ^ uint64(n)
	all := make([]func(int) []float32, rounds)
	host := make([]byte, 0, pool.Bytes())
	for k := range rounds {
		all[k] = inputs(dt, g.in.Len, seed, uint64(k))
		host = append(host, encode(dt, all[k](me))...)
	}
	if err := upload(r, pool, host); err != nil {
		return err
	}
	// The output is poisoned once: a rank that does not use it in a round
	// gets back what the round before left.
	if err := r.Device().MemsetD8Async(g.out.Ptr, 0xA5, g.out.Bytes(), r.Stream()); err != nil {
		return err
	}
	if err := r.HostBarrier(r.Stream()); err != nil {
		return err
	}
	dev, s := r.Device(), r.Stream()
	for k := range rounds {
		a := as[k%len(as)]
		in, out := g.tensors(me, a)
		if err := dev.CopyDtoDAsync(g.in.Ptr, pool.Slice(int64(k)*g.in.Len, g.in.Len).Ptr, g.in.Bytes(), s); err != nil {
			return err
		}
		if err := g.p.launch(s, in, out, a, irismodel.BarrierDevice); err != nil {
			return fmt.Errorf("launch %d (%s): %w", k, a, err)
		}
		if err := dev.CopyDtoDAsync(results.Slice(int64(k)*g.out.Len, g.out.Len).Ptr, g.out.Ptr, g.out.Bytes(), s); err != nil {
			return err
		}
	}
	if err := syncCheck(r, s); err != nil {
		return err
	}
	b, err := download(r, results)
	if err != nil {
		return err
	}
	got := decode(dt, b)
	for k := range rounds {
		a := as[k%len(as)]
		if !pc.usesOut(me, a) {
			continue
		}
		if err := pc.check(got[int64(k)*g.out.Len:int64(k+1)*g.out.Len], dt, op, w, me, n, a, all[k]); err != nil {
			return fmt.Errorf("rank %d launch %d of %d (%s): %w", me, k, rounds, a, err)
		}
	}
	return r.HostBarrier(s)
}

// TestParamBackToBack runs 100 launches of every variant with parameters,
// changing them every launch, with fresh data on the stream before each and
// no host sync in between.
func TestParamBackToBack(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		for i := range paramCatalogue {
			pc := &paramCatalogue[i]
			if !variantSelected(pc.name()) {
				continue
			}
			for _, dt := range []irismodel.DType{irismodel.BF16, irismodel.F32} {
				for _, n := range []int64{4096 + 3, 1 << 18} {
					t.Run(fmt.Sprintf("%s/%s/n=%d", pc.name(), dt, n), func(t *testing.T) {
						if err := w.Run(func(r *irisrt.Rank) error { return paramBackToBack(r, pc, dt, n, rounds(100)) }); err != nil {
							t.Fatal(err)
						}
						cases.add(100)
					})
				}
			}
		}
	})
}

// paramReplays captures one launch of pc with a and replays it `rounds`
// times with fresh input copied in before every replay, checking every
// result: a graph replays the parameters it captured.
func paramReplays(r *irisrt.Rank, pc *paramCase, a args, rounds int) error {
	const n = 4096 + 3
	dt, op, w, me := irismodel.BF16, pc.ops()[0], r.World(), r.Rank()
	// An input peers read lives off the heap, so the captured launch
	// includes its import copy.
	g, err := newParamRig(r, pc, dt, op, n, placement{heapIn: !pc.importIn(), heapOut: true})
	if err != nil {
		return err
	}
	defer g.close()
	s := r.Stream()
	in, out := g.tensors(me, a)
	exec, err := r.Capture(s, func() error {
		var ce *irisrt.CaptureError
		if err := g.p.launch(s, in, out, a, irismodel.BarrierHost); !errors.As(err, &ce) {
			return fmt.Errorf("host-barrier launch while capturing: got %v, want *irisrt.CaptureError", err)
		}
		return g.p.launch(s, in, out, a, irismodel.BarrierDevice)
	})
	if err != nil {
		return fmt.Errorf("capture with %s: %w", a, err)
	}
	defer exec.Destroy()
	for k := range rounds {
		all := inputs(dt, g.in.Len, 0x6a7^uint64(len(pc.name())), uint64(k))
		if err := upload(r, g.in, encode(dt, all(me))); err != nil {
			return err
		}
		if err := r.Device().MemsetD8Async(g.out.Ptr, 0xA5, g.out.Bytes(), s); err != nil {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if err := exec.Replay(s); err != nil {
			return fmt.Errorf("replay %d of the graph captured with %s: %w", k, a, err)
		}
		if pc.usesOut(me, a) {
			b, err := download(r, g.out)
			if err != nil {
				return err
			}
			if err := pc.check(decode(dt, b), dt, op, w, me, n, a, all); err != nil {
				return fmt.Errorf("rank %d replay %d of the graph captured with %s: %w", me, k, a, err)
			}
		}
	}
	return r.HostBarrier(s)
}

// paramCaptureRank is the capture suite of the collectives with
// parameters on one rank: capture with the first parameters, replay with
// fresh data (their results); capture again with the second, replay (the
// second's results). It returns the replays it checked.
func paramCaptureRank(r *irisrt.Rank) (int, error) {
	replays, n := 0, rounds(20)
	for i := range paramCatalogue {
		pc := &paramCatalogue[i]
		if !variantSelected(pc.name()) {
			continue
		}
		as := pc.assignments(r.World())
		for _, a := range as[:min(2, len(as))] { // a world of 1 has one root
			tracef(r, "replays %s with %s: %d rounds", pc.name(), a, n)
			if err := paramReplays(r, pc, a, n); err != nil {
				return replays, fmt.Errorf("%s: %w", pc.name(), err)
			}
			replays += n
		}
	}
	return replays, nil
}

// TestParamCapture: a graph replays the parameters it captured; capturing
// again with others gives their results.
func TestParamCapture(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		counts := make([]int, w.Size())
		if err := w.Run(func(r *irisrt.Rank) (err error) {
			counts[r.Rank()], err = paramCaptureRank(r)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		cases.add(counts[0])
	})
}

// TestParamLargeOffsets runs every variant with parameters once with its
// tensors past the first GiB of the heap (the published offsets are 64-bit).
func TestParamLargeOffsets(t *testing.T) {
	if os.Getenv("IRISGEN_TEST_QUICK") != "" {
		t.Skip("IRISGEN_TEST_QUICK: large runs left out")
	}
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		for i := range paramCatalogue {
			pc := &paramCatalogue[i]
			if !variantSelected(pc.name()) {
				continue
			}
			t.Run(pc.name(), func(t *testing.T) {
				err := w.Run(func(r *irisrt.Rank) error {
					pad, err := r.Heap().Alloc(irismodel.F32, (1<<30)/4)
					if err != nil {
						return err
					}
					defer r.Heap().Free(pad)
					as := pc.assignments(r.World())
					return checkParamCase(r, pc, irismodel.F32, pc.ops()[0], 1<<22+3, placement{true, true}, allModes[:1], as[len(as)-1:])
				})
				if err != nil {
					t.Fatal(err)
				}
				cases.add(1)
			})
		}
	})
}

// paramMatrixRank runs the matrix of the collectives with parameters as
// one rank of the multi-process world and returns the cases it checked.
func paramMatrixRank(r *irisrt.Rank) (int, error) {
	var cases int
	err := runParamMatrix(r, nil, &cases)
	return cases, err
}

// paramRestRank runs the other checks of the collectives with parameters
// as one rank of the multi-process world and returns the cases it
// checked: one a variant's rules, the back-to-back launches and the
// replays. (Apart from the matrix so that a shard can run the matrix
// alone: initcheck-params-d, whose tool cannot replay the copy-engine
// variants' graphs.)
func paramRestRank(r *irisrt.Rank) (int, error) {
	var cases int
	for i := range paramCatalogue {
		pc := &paramCatalogue[i]
		if !variantSelected(pc.name()) {
			continue
		}
		if err := checkParamRules(r, pc); err != nil {
			return cases, fmt.Errorf("%s rules: %w", pc.name(), err)
		}
		if err := paramBackToBack(r, pc, irismodel.BF16, 4096+3, rounds(100)); err != nil {
			return cases, fmt.Errorf("%s back to back: %w", pc.name(), err)
		}
		cases += 1 + rounds(100)
	}
	replays, err := paramCaptureRank(r)
	return cases + replays, err
}

// refuseToo makes, on a rank whose call a test knows a peer refuses, the
// same call refused here too (an unknown barrier mode, refused before
// anything reaches the stream), so that no rank launches: a launch is
// collective and numbered in call order on every rank, and a launch that
// went ahead while a peer refused it would give up with a
// *irisrt.PeerRefusedError, a world fault (TestFaultRefusedLaunch), and
// one skipped would put the rank's later launches out of step with its
// peers'.
func refuseToo(launch func(mode irismodel.Barrier) error) error {
	var be *irisrt.BarrierModeError
	if err := launch(irismodel.Barrier(99)); !errors.As(err, &be) {
		return fmt.Errorf("a call refused alongside a peer's refusal: got %v, want *irisrt.BarrierModeError", err)
	}
	return nil
}

// refuseAlongside is refuseToo for a call a peer refuses in mode device.
// A copy-engine launch refused in mode device still enqueues its two
// barriers (without the copies) to meet the peers' launch, whose stream
// waits have no time limit; so the peers refuse theirs in mode device too
// (a rank parameter out of range), and their barriers meet.
func refuseAlongside(pc *paramCase, base args, launch func(a args, mode irismodel.Barrier) error) error {
	if !pc.copyEngine() {
		return refuseToo(func(m irismodel.Barrier) error { return launch(base, m) })
	}
	a := base
	if pc.coll == "send_recv" {
		a.src = -1
	} else {
		a.root = -1
	}
	var pe *irisrt.ParamError
	if err := launch(a, irismodel.BarrierDevice); !errors.As(err, &pe) {
		return fmt.Errorf("a copy-engine call refused in mode device alongside a peer's refusal: got %v, want *irisrt.ParamError", err)
	}
	return nil
}

// copyEngine reports whether the variant is a copy-engine one.
func (pc *paramCase) copyEngine() bool {
	for _, e := range collectives.Catalogue {
		if e.Collective == pc.coll && e.Variant == pc.variant {
			return e.Descriptor().Engine == irismodel.EngineCopy
		}
	}
	return false
}

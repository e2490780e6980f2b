//go:build gpu

package gpu_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// launcher is what every generated plan of a two-tensor collective offers.
type launcher interface {
	Launch(s gpu.Stream, input, output irisrt.Tensor, mode irismodel.Barrier) error
	Close() error
}

// variantCase describes one collective variant to the suite: its shapes,
// its placement rules as the spec declares them, how to make its plan and
// its CPU reference.
type variantCase struct {
	coll, variant string
	reduces       bool
	// ordered: a reduction in rank order in fp32, rounded once, so the
	// result equals the reference bit for bit. Otherwise sums are checked
	// within (world+1)*eps*sum|x| (one rounding per step, at most world).
	ordered bool
	inLen   func(w int, n int64) int64
	outLen  func(w int, n int64) int64
	newPlan func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error)
	// ref is output element i of rank `rank`, reduced with op (fp32 in rank
	// order), from in(p), the input of rank p.
	ref func(in func(p int) []float32, w, rank int, op string, n, i int64) float32
}

func nLen(_ int, n int64) int64  { return n }
func wnLen(w int, n int64) int64 { return int64(w) * n }

func reduce(op string, xs func(p int) float32, w int) float32 {
	acc := xs(0)
	for p := 1; p < w; p++ {
		x := xs(p)
		switch op {
		case "sum":
			acc += x
		case "max":
			acc = max(acc, x)
		case "min":
			acc = min(acc, x)
		}
	}
	return acc
}

func allReduceRef(in func(int) []float32, w, _ int, op string, _, i int64) float32 {
	return reduce(op, func(p int) float32 { return in(p)[i] }, w)
}

func reduceScatterRef(in func(int) []float32, w, rank int, op string, n, i int64) float32 {
	return reduce(op, func(p int) float32 { return in(p)[int64(rank)*n+i] }, w)
}

func allGatherRef(in func(int) []float32, _, _ int, _ string, n, i int64) float32 {
	return in(int(i / n))[i%n]
}

func allToAllRef(in func(int) []float32, _, rank int, _ string, n, i int64) float32 {
	return in(int(i / n))[int64(rank)*n+i%n]
}

func newBarrier(r *irisrt.Rank) (*collectives.BarrierDevicePlan, error) {
	return collectives.NewBarrierDevicePlan(r)
}

func arOp(op string) collectives.AllReduceOp     { return collectives.AllReduceOp(op) }
func rsOp(op string) collectives.ReduceScatterOp { return collectives.ReduceScatterOp(op) }
func asLauncher[P launcher](p P, err error) (launcher, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

var catalogue = []variantCase{
	{coll: "all_reduce", variant: "one_shot", reduces: true, ordered: true, inLen: nLen, outLen: nLen, ref: allReduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllReduceOneShotPlan(r, dt, arOp(op), n))
		}},
	{coll: "all_reduce", variant: "one_shot_staged", reduces: true, ordered: true, inLen: nLen, outLen: nLen, ref: allReduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllReduceOneShotStagedPlan(r, dt, arOp(op), n))
		}},
	{coll: "all_reduce", variant: "one_shot_push", reduces: true, ordered: true, inLen: nLen, outLen: nLen, ref: allReduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllReduceOneShotPushPlan(r, dt, arOp(op), n))
		}},
	{coll: "all_reduce", variant: "one_shot_lamport", reduces: true, ordered: true, inLen: nLen, outLen: nLen, ref: allReduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllReduceOneShotLamportPlan(r, dt, arOp(op), n))
		}},
	{coll: "all_reduce", variant: "two_shot", reduces: true, ordered: true, inLen: nLen, outLen: nLen, ref: allReduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllReduceTwoShotPlan(r, dt, arOp(op), n))
		}},
	{coll: "all_reduce", variant: "atomic", reduces: true, inLen: nLen, outLen: nLen, ref: allReduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllReduceAtomicPlan(r, dt, arOp(op), n))
		}},
	{coll: "all_reduce", variant: "spinlock", reduces: true, inLen: nLen, outLen: nLen, ref: allReduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllReduceSpinlockPlan(r, dt, arOp(op), n))
		}},
	{coll: "all_reduce", variant: "ring", reduces: true, inLen: nLen, outLen: nLen, ref: allReduceRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllReduceRingPlan(r, dt, arOp(op), n))
		}},
	{coll: "reduce_scatter", variant: "pull", reduces: true, ordered: true, inLen: wnLen, outLen: nLen, ref: reduceScatterRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewReduceScatterPullPlan(r, dt, rsOp(op), n))
		}},
	{coll: "reduce_scatter", variant: "lamport", reduces: true, ordered: true, inLen: wnLen, outLen: nLen, ref: reduceScatterRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (launcher, error) {
			return asLauncher(collectives.NewReduceScatterLamportPlan(r, dt, rsOp(op), n))
		}},
	{coll: "all_gather", variant: "push", inLen: nLen, outLen: wnLen, ref: allGatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllGatherPushPlan(r, dt, n))
		}},
	{coll: "all_gather", variant: "pull", inLen: nLen, outLen: wnLen, ref: allGatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllGatherPullPlan(r, dt, n))
		}},
	{coll: "all_gather", variant: "ring", inLen: nLen, outLen: wnLen, ref: allGatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllGatherRingPlan(r, dt, n))
		}},
	{coll: "all_gather", variant: "lamport", inLen: nLen, outLen: wnLen, ref: allGatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllGatherLamportPlan(r, dt, n))
		}},
	{coll: "all_to_all", variant: "push", inLen: wnLen, outLen: wnLen, ref: allToAllRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllToAllPushPlan(r, dt, n))
		}},
	{coll: "all_to_all", variant: "push_overlap", inLen: wnLen, outLen: wnLen, ref: allToAllRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllToAllPushOverlapPlan(r, dt, n))
		}},
	{coll: "all_to_all", variant: "pull", inLen: wnLen, outLen: wnLen, ref: allToAllRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllToAllPullPlan(r, dt, n))
		}},
	{coll: "all_to_all", variant: "lamport", inLen: wnLen, outLen: wnLen, ref: allToAllRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllToAllLamportPlan(r, dt, n))
		}},
	// The copy-engine variants: no kernel, the copies and stream memory
	// operations on the launch stream.
	{coll: "all_gather", variant: "copy_push", inLen: nLen, outLen: wnLen, ref: allGatherRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllGatherCopyPushPlan(r, dt, n))
		}},
	{coll: "all_to_all", variant: "copy_push", inLen: wnLen, outLen: wnLen, ref: allToAllRef,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, _ string, n int64) (launcher, error) {
			return asLauncher(collectives.NewAllToAllCopyPushPlan(r, dt, n))
		}},
}

func (vc *variantCase) name() string { return vc.coll + "/" + vc.variant }

func (vc *variantCase) ops() []string {
	if vc.reduces {
		return []string{"sum", "max", "min"}
	}
	return []string{""}
}

// placement says where a case's tensors live.
type placement struct{ heapIn, heapOut bool }

func (pl placement) String() string {
	return fmt.Sprintf("heap_in=%v,heap_out=%v", pl.heapIn, pl.heapOut)
}

// placements are the allocations a variant is checked with: both tensors on
// the heap, and each tensor off the heap where its rule allows (an imported
// input, an output written only locally).
func (vc *variantCase) placements() []placement {
	out := []placement{{true, true}}
	if vc.importIn() || !vc.heapOut() {
		out = append(out, placement{heapIn: false, heapOut: vc.heapOut()})
	}
	return out
}

// tensor allocates a tensor on the heap or in plain device memory.
func tensor(r *irisrt.Rank, dt irismodel.DType, n int64, onHeap bool) (irisrt.Tensor, func(), error) {
	if onHeap {
		t, err := r.Heap().Alloc(dt, n)
		return t, func() { r.Heap().Free(t) }, err
	}
	ptr, err := r.Device().Alloc(max(n, 1)*dt.Size(), false)
	if err != nil {
		return irisrt.Tensor{}, nil, err
	}
	return irisrt.Tensor{Ptr: ptr, DType: dt, Len: n}, func() { r.Device().Free(ptr) }, nil
}

// checkResult compares a rank's output with the reference. Copies and ordered
// reductions must match bit for bit; other sums within their bound.
func (vc *variantCase) checkResult(got []float32, dt irismodel.DType, op string, w, rank int, n int64, all func(int) []float32) error {
	// Every rank's input resolved once: the loop below reads them per element.
	ins := make([][]float32, w)
	for p := range ins {
		ins[p] = all(p)
	}
	in := func(p int) []float32 { return ins[p] }
	exact := vc.ordered || !vc.reduces || op != "sum"
	var bad error
	var once sync.Once
	parallel(int64(len(got)), func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			want := vc.ref(in, w, rank, op, n, i)
			var ok bool
			if exact {
				ok = encode1(dt, want) == encode1(dt, got[i])
			} else {
				var mag float64
				for p := 0; p < w; p++ {
					if vc.coll == "reduce_scatter" {
						mag += math.Abs(float64(in(p)[int64(rank)*n+i]))
					} else {
						mag += math.Abs(float64(in(p)[i]))
					}
				}
				ok = math.Abs(float64(got[i])-float64(want)) <= float64(w+1)*(eps(dt)*mag+tiny(dt))
			}
			if !ok {
				once.Do(func() {
					bad = fmt.Errorf("element %d: got %g (bits %#x), want %g (bits %#x)%s", i, got[i], encode1(dt, got[i]), want, encode1(dt, want),
						map[bool]string{true: ", exact match required", false: ", beyond the tolerance"}[exact])
				})
				return
			}
		}
	})
	return bad
}

// inputs returns a memoising accessor of every rank's input of one round,
// safe for concurrent use (the parallel checks read it).
func inputs(dt irismodel.DType, length int64, seed, round uint64) func(int) []float32 {
	var mu sync.Mutex
	cache := map[int][]float32{}
	return func(p int) []float32 {
		mu.Lock()
		defer mu.Unlock()
		if v, ok := cache[p]; ok {
			return v
		}
		v := values(dt, length, stream(seed, uint64(p), round))
		cache[p] = v
		return v
	}
}

// checkCase runs rounds of one case on one rank, each with fresh inputs and
// a poisoned output, in the given barrier modes.
func checkCase(r *irisrt.Rank, vc *variantCase, dt irismodel.DType, op string, n int64, pl placement, modes []irismodel.Barrier) error {
	w, me := r.World(), r.Rank()
	p, err := vc.newPlan(r, dt, op, n)
	if err != nil {
		return err
	}
	defer p.Close()
	in, freeIn, err := tensor(r, dt, vc.inLen(w, n), pl.heapIn)
	if err != nil {
		return err
	}
	defer freeIn()
	out, freeOut, err := tensor(r, dt, vc.outLen(w, n), pl.heapOut)
	if err != nil {
		return err
	}
	defer freeOut()
	s := r.Stream()
	seed := uint64(len(vc.name())*7919) ^ uint64(n)
	for round, mode := range modes {
		all := inputs(dt, in.Len, seed, uint64(round))
		if err := upload(r, in, encode(dt, all(me))); err != nil {
			return err
		}
		if err := r.Device().MemsetD8Async(out.Ptr, 0xA5, out.Bytes(), s); err != nil {
			return err
		}
		if mode == irismodel.BarrierNone { // the caller orders: inputs ready everywhere
			if err := r.HostBarrier(s); err != nil {
				return err
			}
		}
		if mode == irismodel.BarrierNone && vc.importIn() && !pl.heapIn {
			// Nothing would order the import before the peers' reads.
			var pe *irisrt.PlacementError
			if err := p.Launch(s, in, out, mode); !errors.As(err, &pe) || !pe.Unordered {
				return fmt.Errorf("round %d: import in mode none: got %v, want an unordered *irisrt.PlacementError", round, err)
			}
			if err := r.HostBarrier(s); err != nil {
				return err
			}
			continue
		}
		if err := p.Launch(s, in, out, mode); err != nil {
			return fmt.Errorf("round %d (%s): %w", round, mode, err)
		}
		if mode == irismodel.BarrierNone { // ... and the call complete everywhere
			if err := r.HostBarrier(s); err != nil {
				return err
			}
		}
		if err := syncCheck(r, s); err != nil {
			return fmt.Errorf("round %d (%s): %w", round, mode, err)
		}
		b, err := download(r, out)
		if err != nil {
			return err
		}
		if err := vc.checkResult(decode(dt, b), dt, op, w, me, n, all); err != nil {
			return fmt.Errorf("rank %d round %d (%s): %w", me, round, mode, err)
		}
		// Nobody uploads the next round's input before every rank's kernel
		// is done with this one.
		if err := r.HostBarrier(s); err != nil {
			return err
		}
	}
	return nil
}

var allModes = []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone, irismodel.BarrierDevice}

// caseSizes are the per-rank element counts n of the matrix. The full
// sizes hold one that is no multiple of the vector width and large enough
// for the kernels that cut it into slices (broadcast scatter_gather: 4 to 32
// of at least 4 MiB on 4 ranks) to cut it unevenly.
func caseSizes() []int64 {
	sizes := []int64{1, 7, 4096 + 3, 1 << 20}
	if os.Getenv("IRISGEN_TEST_QUICK") == "" {
		sizes = append(sizes, 9<<20+5, 64<<20)
	}
	return sizes
}

// runMatrix runs every variant x dtype x op x size x placement on one rank
// and counts the cases.
func runMatrix(r *irisrt.Rank, only func(vc *variantCase) bool, count *int) error {
	for i := range catalogue {
		vc := &catalogue[i]
		if only != nil && !only(vc) || !variantSelected(vc.name()) {
			continue
		}
		for _, dt := range dataTypes() {
			for _, op := range vc.ops() {
				for _, n := range caseSizes() {
					pls := vc.placements()
					modes := allModes
					if n > 1<<20 {
						pls, modes = pls[:1], allModes[:1]
					}
					for _, pl := range pls {
						if err := checkCase(r, vc, dt, op, n, pl, modes); err != nil {
							return fmt.Errorf("%s %s %s n=%d %s: %w", vc.name(), dt, op, n, pl, err)
						}
						*count++
					}
				}
			}
		}
	}
	return nil
}

// TestCatalogue checks every collective x variant x dtype x op at every size
// against the CPU reference, in the in-process world.
func TestCatalogue(t *testing.T) {
	eachVariantCase(t, catalogue, (*variantCase).name, runMatrix, func(vc *variantCase, _ int) string {
		return fmt.Sprintf("dtypes %s; ops %v; sizes %v", dtypeNames(), vc.ops(), caseSizes())
	})
}

// backToBack launches a plan `rounds` times with no host sync: before every
// launch new input is copied into the input tensor on the stream, after it
// the output is copied away; all results are checked at the end. A kernel
// that let a rank overwrite an input a slow peer still reads, or reused
// flags wrongly, fails here. With several ranks (groups of one world rank,
// sharing its stream) every round launches one plan on each, in turn.
func backToBack(rs []*irisrt.Rank, vc *variantCase, dt irismodel.DType, op string, n int64, rounds int) error {
	for _, r := range rs {
		tracef(r, "back to back %s %s %s n=%d, %d rounds", vc.name(), dt, op, n, rounds)
	}
	type lane struct {
		r                 *irisrt.Rank
		in, out, pool, rx irisrt.Tensor
		p                 launcher
		all               []func(int) []float32
	}
	var lanes []*lane
	var frees []func()
	defer func() {
		for i := len(frees) - 1; i >= 0; i-- {
			frees[i]()
		}
	}()
	for i, r := range rs {
		w, me := r.World(), r.Rank()
		p, err := vc.newPlan(r, dt, op, n)
		if err != nil {
			return err
		}
		frees = append(frees, func() { p.Close() })
		l := &lane{r: r, p: p}
		lanes = append(lanes, l)
		inLen, outLen := vc.inLen(w, n), vc.outLen(w, n)
		// Input and output on the heap; the rounds' inputs and results
		// anywhere (only this rank's copies touch them).
		for _, x := range []struct {
			t      *irisrt.Tensor
			n      int64
			onHeap bool
		}{{&l.in, inLen, true}, {&l.out, outLen, true}, {&l.pool, inLen * int64(rounds), false}, {&l.rx, outLen * int64(rounds), false}} {
			var free func()
			if *x.t, free, err = tensor(r, dt, x.n, x.onHeap); err != nil {
				return err
			}
			frees = append(frees, free)
		}
		seed := uint64(0xb2b+i) ^ uint64(n)
		l.all = make([]func(int) []float32, rounds)
		host := make([]byte, 0, l.pool.Bytes())
		for k := range rounds {
			l.all[k] = inputs(dt, inLen, seed, uint64(k))
			host = append(host, encode(dt, l.all[k](me))...)
		}
		if err := upload(r, l.pool, host); err != nil {
			return err
		}
		if err := r.HostBarrier(r.Stream()); err != nil {
			return err
		}
	}
	for k := range rounds {
		for _, l := range lanes {
			dev, s := l.r.Device(), l.r.Stream()
			if err := dev.CopyDtoDAsync(l.in.Ptr, l.pool.Slice(int64(k)*l.in.Len, l.in.Len).Ptr, l.in.Bytes(), s); err != nil {
				return err
			}
			if err := l.p.Launch(s, l.in, l.out, irismodel.BarrierDevice); err != nil {
				return fmt.Errorf("launch %d: %w", k, err)
			}
			if err := dev.CopyDtoDAsync(l.rx.Slice(int64(k)*l.out.Len, l.out.Len).Ptr, l.out.Ptr, l.out.Bytes(), s); err != nil {
				return err
			}
		}
	}
	for i, l := range lanes {
		r := l.r
		if err := syncCheck(r, r.Stream()); err != nil {
			return err
		}
		b, err := download(r, l.rx)
		if err != nil {
			return err
		}
		got := decode(dt, b)
		for k := range rounds {
			if err := vc.checkResult(got[int64(k)*l.out.Len:int64(k+1)*l.out.Len], dt, op, r.World(), r.Rank(), n, l.all[k]); err != nil {
				return fmt.Errorf("rank %d (lane %d) launch %d of %d: %w", r.Rank(), i, k, rounds, err)
			}
		}
		if err := r.HostBarrier(r.Stream()); err != nil {
			return err
		}
	}
	return nil
}

// TestBackToBack runs 100 launches of every variant with fresh data on the
// stream before each and no host sync in between.
func TestBackToBack(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		for i := range catalogue {
			vc := &catalogue[i]
			if !variantSelected(vc.name()) {
				continue
			}
			for _, dt := range []irismodel.DType{irismodel.BF16, irismodel.F32} {
				for _, n := range []int64{4096 + 3, 1 << 18} {
					op := vc.ops()[0]
					t.Run(fmt.Sprintf("%s/%s/%s/n=%d", vc.name(), dt, op, n), func(t *testing.T) {
						if err := w.Run(func(r *irisrt.Rank) error { return backToBack([]*irisrt.Rank{r}, vc, dt, op, n, rounds(100)) }); err != nil {
							t.Fatal(err)
						}
						cases.add(100)
					})
				}
			}
		}
	})
}

// TestLargeOffsets runs every variant once with tensors past the first GiB of
// the heap and more than 1 GiB of data per rank (64-bit offsets everywhere).
func TestLargeOffsets(t *testing.T) {
	if os.Getenv("IRISGEN_TEST_QUICK") != "" {
		t.Skip("IRISGEN_TEST_QUICK: large runs left out")
	}
	opts := defaultOpts()
	// 1 GiB of padding, 1.25 GiB of tensors, and the largest workspace:
	// one_shot_lamport's 3 x world x 0.625 GiB.
	opts.HeapBytes = int64(3+2*slices.Max(worldSizes(t))) << 30
	cases := countCases(t)
	eachWorld(t, opts, func(t *testing.T, w *irisrt.World) {
		for i := range catalogue {
			vc := &catalogue[i]
			if !variantSelected(vc.name()) {
				continue
			}
			t.Run(vc.name(), func(t *testing.T) {
				err := w.Run(func(r *irisrt.Rank) error {
					pad, err := r.Heap().Alloc(irismodel.F32, (1<<30)/4) // push everything past 1 GiB
					if err != nil {
						return err
					}
					defer r.Heap().Free(pad)
					// 1.25 GiB of f32 input+output per rank.
					n := int64(5<<28) / 4 / (vc.inLen(w.Size(), 1) + vc.outLen(w.Size(), 1))
					return checkCase(r, vc, irismodel.F32, vc.ops()[0], n, placement{true, true}, allModes[:1])
				})
				if err != nil {
					t.Fatal(err)
				}
				cases.add(1)
			})
		}
	})
}

// TestPlacementAndAliasing checks the derived rules on the real launch path:
// a remote-written output off the heap is refused with a *PlacementError
// and nothing is launched (the buffer keeps its poison); forbidden aliasing
// is refused with an *AliasError; variants that allow aliasing refuse a
// partial overlap and reduce in place correctly.
func TestPlacementAndAliasing(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		// every variant: refusals only, nothing replayed; the shards run it whole
		for i := range catalogue {
			vc := &catalogue[i]
			t.Run(vc.name(), func(t *testing.T) {
				if err := w.Run(func(r *irisrt.Rank) error { return checkRules(r, vc) }); err != nil {
					t.Fatal(err)
				}
				cases.add(1)
			})
		}
	})
}

// ownBlockVariant reports whether vc's variant runs in place with its input
// as the rank's own block of its output (aliasing: own_block), from the
// catalogue's descriptor.
func ownBlockVariant(vc *variantCase) bool {
	for _, e := range collectives.Catalogue {
		if e.Collective == vc.coll && e.Variant == vc.variant {
			return slices.ContainsFunc(e.Descriptor().AliasPairs(), func(p irisimpl.AliasPair) bool { return p.OwnBlock })
		}
	}
	return false
}

func checkRules(r *irisrt.Rank, vc *variantCase) error {
	const n = 4096 + 3
	dt, op, w := irismodel.BF16, vc.ops()[0], r.World()
	p, err := vc.newPlan(r, dt, op, n)
	if err != nil {
		return err
	}
	defer p.Close()
	in, freeIn, err := tensor(r, dt, vc.inLen(w, n), true)
	if err != nil {
		return err
	}
	defer freeIn()
	out, freeOut, err := tensor(r, dt, vc.outLen(w, n), true)
	if err != nil {
		return err
	}
	defer freeOut()
	s := r.Stream()
	if vc.heapOut() {
		off, free, err := tensor(r, dt, out.Len, false)
		if err != nil {
			return err
		}
		defer free()
		if err := r.Device().MemsetD8Async(off.Ptr, 0x5A, off.Bytes(), s); err != nil {
			return err
		}
		var pe *irisrt.PlacementError
		if err := p.Launch(s, in, off, irismodel.BarrierDevice); !errors.As(err, &pe) {
			return fmt.Errorf("output off the heap: got %v, want *irisrt.PlacementError", err)
		}
		if err := syncCheck(r, s); err != nil {
			return err
		}
		b, err := download(r, off)
		if err != nil {
			return err
		}
		for i, x := range b {
			if x != 0x5A {
				return fmt.Errorf("refused launch wrote the off-heap output (byte %d is %#x)", i, x)
			}
		}
	}
	own := ownBlockVariant(vc)
	if !vc.aliasAllow() {
		a, b := out.Slice(0, min(in.Len, out.Len)), out // the input inside the output
		if in.Len > out.Len {
			a, b = in, in.Slice(0, out.Len) // the output inside the input
		}
		if own {
			a = out.Slice(1, in.Len) // block 0 is rank 0's own: off every block
		}
		var ae *irisrt.AliasError
		if err := p.Launch(s, a, b, irismodel.BarrierDevice); !errors.As(err, &ae) {
			return fmt.Errorf("input and output overlapping: got %v, want *irisrt.AliasError", err)
		}
		if !own {
			return nil
		}
		// In place (aliasing: own_block): the input is this rank's block
		// of the output.
		block := out.Slice(int64(r.Rank())*in.Len, in.Len)
		if err := inPlaceRound(r, p, vc, dt, op, n, block, out, 98); err != nil {
			return fmt.Errorf("in place, the input as output[%d]: %w", r.Rank(), err)
		}
		return nil
	}
	// A shifted overlap is refused even where in place is allowed.
	buf, freeBuf, err := tensor(r, dt, max(in.Len, out.Len)+1, true)
	if err != nil {
		return err
	}
	defer freeBuf()
	var ae *irisrt.AliasError
	if err := p.Launch(s, buf.Slice(0, in.Len), buf.Slice(1, out.Len), irismodel.BarrierDevice); !errors.As(err, &ae) || !ae.InPlace {
		return fmt.Errorf("input and output overlapping in part: got %v, want *irisrt.AliasError (in place)", err)
	}
	// In place: output = input.
	if err := inPlaceRound(r, p, vc, dt, op, n, out, out, 99); err != nil {
		return fmt.Errorf("in place: %w", err)
	}
	return nil
}

// inPlaceRound uploads this rank's input of round seed into in (which lies
// in out), launches p on (in, out) in mode device and checks out against
// vc's reference.
func inPlaceRound(r *irisrt.Rank, p launcher, vc *variantCase, dt irismodel.DType, op string, n int64, in, out irisrt.Tensor, seed uint64) error {
	s := r.Stream()
	all := inputs(dt, in.Len, seed, 0)
	if err := upload(r, in, encode(dt, all(r.Rank()))); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if err := p.Launch(s, in, out, irismodel.BarrierDevice); err != nil {
		return err
	}
	if err := syncCheck(r, s); err != nil {
		return err
	}
	b, err := download(r, out)
	if err != nil {
		return err
	}
	if err := vc.checkResult(decode(dt, b), dt, op, r.World(), r.Rank(), n, all); err != nil {
		return err
	}
	return r.HostBarrier(s)
}

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
	"github.com/irisgen/irisgen/internal/launch"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// The fused all_reduce + residual add + RMSNorm (all_reduce_rmsnorm) and the
// unfused path's second kernel (residual_rmsnorm), against a CPU reference:
// per row of hidden elements, s = the sum over ranks of input in rank order
// in fp32 (this rank's input alone for residual_rmsnorm); the new residual
// x = s + residual rounded once to the dtype, which must match bit for bit;
// output = x * rsqrt(mean(x^2) + eps) * weight, within one rounding to the
// dtype plus 2^-16 relative for the fp32 arithmetic (rsqrtf, the order of
// the sum of squares).

// normLauncher is what every generated plan of the two collectives offers.
type normLauncher interface {
	Launch(s gpu.Stream, input, residual, weight, output irisrt.Tensor, eps float32, mode irismodel.Barrier) error
	Close() error
}

// normCase describes one variant to the suite.
type normCase struct {
	coll, variant string
	// sums: the input is summed over the ranks; else this rank's alone.
	sums bool
	// roundSum: the sum is rounded to the dtype before the residual is
	// added (two_shot gathers the rounded sums in output).
	roundSum bool
	modes    []irismodel.Barrier // the rounds of a case, in the modes the variant allows
	newPlan  func(r *irisrt.Rank, dt irismodel.DType, tokens, hidden int64) (normLauncher, error)
	// auto: launched through the auto variant, which picked variant (whose
	// rules and reference the case keeps).
	auto bool
}

func (nc *normCase) name() string {
	if nc.auto {
		return nc.coll + "/auto picking " + nc.variant
	}
	return nc.coll + "/" + nc.variant
}

func asNorm[P normLauncher](p P, err error) (normLauncher, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

var normCatalogue = []normCase{
	{coll: "all_reduce_rmsnorm", variant: "one_shot", sums: true, modes: allModes,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, t, h int64) (normLauncher, error) {
			return asNorm(collectives.NewAllReduceRmsnormOneShotPlan(r, dt, t, h))
		}},
	{coll: "all_reduce_rmsnorm", variant: "one_shot_lamport", sums: true, modes: allModes,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, t, h int64) (normLauncher, error) {
			return asNorm(collectives.NewAllReduceRmsnormOneShotLamportPlan(r, dt, t, h))
		}},
	{coll: "all_reduce_rmsnorm", variant: "two_shot", sums: true, roundSum: true, modes: allModes,
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, t, h int64) (normLauncher, error) {
			return asNorm(collectives.NewAllReduceRmsnormTwoShotPlan(r, dt, t, h))
		}},
	{coll: "residual_rmsnorm", variant: "local", modes: []irismodel.Barrier{irismodel.BarrierNone, irismodel.BarrierNone},
		newPlan: func(r *irisrt.Rank, dt irismodel.DType, t, h int64) (normLauncher, error) {
			return asNorm(collectives.NewResidualRmsnormLocalPlan(r, dt, t, h))
		}},
}

// normTokens and normHidden are the sizes of the matrix: the issue's, and
// hidden sizes whose rows are not all 16-byte aligned alike or are shorter
// than a block (scalar heads and tails, blocks with idle threads).
func normTokens() []int64 {
	if os.Getenv("IRISGEN_TEST_QUICK") != "" {
		return []int64{1, 7, 128}
	}
	return []int64{1, 7, 128, 2048}
}

var normHidden = []int64{4096, 7168, 8192, 4096 + 3, 40}

// normEps are the eps of the rounds, in turn.
var normEps = []float32{1e-5, 1e-6}

// normData is one round's tensors of every rank, memoised.
type normData struct {
	in, res, wt func(p int) []float32
	eps         float32
}

func newNormData(dt irismodel.DType, t, h int64, seed, round uint64) normData {
	return normData{
		in:  inputs(dt, t*h, seed, round),
		res: inputs(dt, t*h, seed^0x7e5, round),
		wt:  inputs(dt, h, seed^0x3e1, round),
		eps: normEps[round%uint64(len(normEps))],
	}
}

// check compares rank me's residual and output after the launch with the
// reference.
func (nc *normCase) check(dt irismodel.DType, w, me int, t, h int64, d normData, gotRes, gotOut []float32) error {
	ins := make([][]float32, w)
	for p := range ins {
		ins[p] = d.in(p)
	}
	res0, wt := d.res(me), d.wt(me)
	var bad error
	var once sync.Once
	fail := func(err error) { once.Do(func() { bad = err }) }
	// Over the CPUs by elements; each part checks the rows that start in it.
	parallel(t*h, func(lo, hi int64) {
		x := make([]float32, h)
		for row := (lo + h - 1) / h; row*h < hi; row++ {
			ss := 0.0
			for j := range h {
				i := row*h + j
				s := ins[me][i]
				if nc.sums {
					s = ins[0][i]
					for p := 1; p < w; p++ {
						s += ins[p][i]
					}
				}
				if nc.roundSum {
					s = quantize(dt, s)
				}
				x[j] = quantize(dt, s+res0[i])
				if encode1(dt, gotRes[i]) != encode1(dt, x[j]) {
					fail(fmt.Errorf("residual row %d element %d: got %g (bits %#x), want %g (bits %#x), exact match required",
						row, j, gotRes[i], encode1(dt, gotRes[i]), x[j], encode1(dt, x[j])))
					return
				}
				ss += float64(x[j]) * float64(x[j])
			}
			scale := 1 / math.Sqrt(ss/float64(h)+float64(d.eps))
			for j := range h {
				i := row*h + j
				want := float64(x[j]) * scale * float64(wt[j])
				if diff := math.Abs(float64(gotOut[i]) - want); !(diff <= (eps(dt)+0x1p-16)*math.Abs(want)+tiny(dt)) {
					fail(fmt.Errorf("output row %d element %d: got %g, want %g (eps %g), beyond the tolerance", row, j, gotOut[i], want, d.eps))
					return
				}
			}
		}
	})
	return bad
}

// normPlacement says which tensors live on the heap.
type normPlacement struct{ heap bool }

func (pl normPlacement) String() string {
	if pl.heap {
		return "on the heap"
	}
	return "off the heap where allowed"
}

// placements: every tensor on the heap; every tensor off it that its rule
// allows (an input peers read is then staged).
func (nc *normCase) placements() []normPlacement {
	return []normPlacement{{true}, {false}}
}

// normRig is one case's plan and tensors on one rank.
type normRig struct {
	nc               *normCase
	dt               irismodel.DType
	t, h             int64
	p                normLauncher
	in, res, wt, out irisrt.Tensor
	free             []func()
	offIn, offOut    bool // input, output off the heap
}

func newNormRig(r *irisrt.Rank, nc *normCase, dt irismodel.DType, t, h int64, pl normPlacement) (*normRig, error) {
	g := &normRig{nc: nc, dt: dt, t: t, h: h}
	var err error
	if g.p, err = nc.newPlan(r, dt, t, h); err != nil {
		return nil, err
	}
	g.free = append(g.free, func() { g.p.Close() })
	g.offIn, g.offOut = !pl.heap, !pl.heap && !nc.heapOut()
	for _, x := range []struct {
		t    *irisrt.Tensor
		n    int64
		heap bool
	}{{&g.in, t * h, !g.offIn}, {&g.res, t * h, pl.heap}, {&g.wt, h, pl.heap}, {&g.out, t * h, !g.offOut}} {
		var f func()
		if *x.t, f, err = tensor(r, dt, x.n, x.heap); err != nil {
			g.close()
			return nil, err
		}
		g.free = append(g.free, f)
	}
	return g, nil
}

func (g *normRig) close() {
	for i := len(g.free) - 1; i >= 0; i-- {
		g.free[i]()
	}
}

// upload writes round d's input, residual and weight of rank me and
// poisons the output.
func (g *normRig) upload(r *irisrt.Rank, s gpu.Stream, d normData) error {
	me := r.Rank()
	for _, x := range []struct {
		t irisrt.Tensor
		v []float32
	}{{g.in, d.in(me)}, {g.res, d.res(me)}, {g.wt, d.wt(me)}} {
		if err := upload(r, x.t, encode(g.dt, x.v)); err != nil {
			return err
		}
	}
	return r.Device().MemsetD8Async(g.out.Ptr, 0xA5, g.out.Bytes(), s)
}

// verify downloads residual and output and checks them against d.
func (g *normRig) verify(r *irisrt.Rank, d normData) error {
	rb, err := download(r, g.res)
	if err != nil {
		return err
	}
	ob, err := download(r, g.out)
	if err != nil {
		return err
	}
	return g.nc.check(g.dt, r.World(), r.Rank(), g.t, g.h, d, decode(g.dt, rb), decode(g.dt, ob))
}

// checkNormCase runs rounds of one case on one rank, each with fresh
// tensors, a poisoned output and the next eps, in the given modes.
func checkNormCase(r *irisrt.Rank, nc *normCase, dt irismodel.DType, t, h int64, pl normPlacement, modes []irismodel.Barrier) error {
	g, err := newNormRig(r, nc, dt, t, h, pl)
	if err != nil {
		return err
	}
	defer g.close()
	s := r.Stream()
	seed := uint64(len(nc.name())*7919) ^ uint64(t*h)
	for round, mode := range modes {
		d := newNormData(dt, t, h, seed, uint64(round))
		if err := g.upload(r, s, d); err != nil {
			return err
		}
		if mode == irismodel.BarrierNone { // the caller orders: inputs ready everywhere
			if err := r.HostBarrier(s); err != nil {
				return err
			}
		}
		if mode == irismodel.BarrierNone && nc.importIn() && g.offIn {
			// Nothing would order the import before the peers' reads.
			var pe *irisrt.PlacementError
			if err := g.p.Launch(s, g.in, g.res, g.wt, g.out, d.eps, mode); !errors.As(err, &pe) || !pe.Unordered {
				return fmt.Errorf("round %d: import in mode none: got %v, want an unordered *irisrt.PlacementError", round, err)
			}
			if err := r.HostBarrier(s); err != nil {
				return err
			}
			continue
		}
		if err := g.p.Launch(s, g.in, g.res, g.wt, g.out, d.eps, mode); err != nil {
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
		if err := g.verify(r, d); err != nil {
			return fmt.Errorf("rank %d round %d (%s, eps %g): %w", r.Rank(), round, mode, d.eps, err)
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
	}
	return nil
}

// checkNormSize runs nc at dt, t tokens and h hidden in every placement
// and every mode the variant allows (more than 128 tokens: on the heap in
// its first mode only) and counts the cases.
func checkNormSize(r *irisrt.Rank, nc *normCase, dt irismodel.DType, t, h int64, count *int) error {
	pls, modes := nc.placements(), nc.modes
	if t > 128 {
		pls, modes = pls[:1], modes[:1]
	}
	for _, pl := range pls {
		if err := checkNormCase(r, nc, dt, t, h, pl, modes); err != nil {
			return fmt.Errorf("%s %s tokens=%d hidden=%d %s: %w", nc.name(), dt, t, h, pl, err)
		}
		*count++
	}
	return nil
}

// runNormMatrix runs every case x dtype x tokens x hidden x placement on
// one rank, in every mode the variant allows (the largest token count on
// the heap and in its first mode only), and counts the cases.
func runNormMatrix(r *irisrt.Rank, only func(nc *normCase) bool, count *int) error {
	for i := range normCatalogue {
		nc := &normCatalogue[i]
		if only != nil && !only(nc) || !variantSelected(nc.name()) {
			continue
		}
		for _, dt := range dataTypes() {
			for _, t := range normTokens() {
				for _, h := range normHidden {
					if err := checkNormSize(r, nc, dt, t, h, count); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// TestRMSNorm checks every variant of all_reduce_rmsnorm and
// residual_rmsnorm x dtype x size x placement in every barrier mode it
// allows, with both eps, against the CPU reference, in the in-process
// world.
func TestRMSNorm(t *testing.T) {
	eachVariantCase(t, normCatalogue, (*normCase).name, runNormMatrix, func(nc *normCase, _ int) string {
		return fmt.Sprintf("dtypes %s; tokens %v; hidden %v; modes %v; eps %v", dtypeNames(), normTokens(), normHidden, nc.modes, normEps)
	})
}

// autoNorm launches all_reduce_rmsnorm's auto variant through the
// convenience call (the rank's plan cache), as a program that names no
// variant does.
type autoNorm struct {
	r  *irisrt.Rank
	dt irismodel.DType
}

func (a autoNorm) Launch(s gpu.Stream, input, residual, weight, output irisrt.Tensor, eps float32, mode irismodel.Barrier) error {
	return collectives.AllReduceRmsnorm(a.r, s, collectives.AllReduceRmsnormAuto, a.dt, input, residual, weight, output, eps, mode)
}

func (autoNorm) Close() error { return nil }

// autoNormCase is the case of the variant auto picks on w ranks for dt and
// these sizes (specs/tuning/all_reduce_rmsnorm.yaml), launched through
// auto: its rules and its reference are the picked variant's.
func autoNormCase(w int, dt irismodel.DType, t, h int64) (*normCase, error) {
	v := string(collectives.AllReduceRmsnormChoose(w, t*h*dt.Size()))
	// every variant: finds the one auto picked
	for i := range normCatalogue {
		if nc := normCatalogue[i]; nc.coll == "all_reduce_rmsnorm" && nc.variant == v {
			nc.auto = true
			nc.newPlan = func(r *irisrt.Rank, dt irismodel.DType, _, _ int64) (normLauncher, error) {
				return autoNorm{r, dt}, nil
			}
			return &nc, nil
		}
	}
	return nil, fmt.Errorf("auto picks all_reduce_rmsnorm/%q, which the suite does not know", v)
}

// TestRMSNormAuto checks all_reduce_rmsnorm's auto variant through the
// convenience call at every dtype and token count of TestRMSNorm (hidden
// 7168 and 4099, both placements, every mode; the largest token count on
// the heap in its first mode), against the reference of the variant it
// picks: the tuning table's boundaries and the convenience call's plan
// cache on GPUs.
func TestRMSNormAuto(t *testing.T) {
	if !variantSelected("all_reduce_rmsnorm/auto") {
		t.Skip("all_reduce_rmsnorm/auto is not selected (IRISGEN_TEST_VARIANTS)")
	}
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		counts := make([]int, w.Size())
		err := w.Run(func(r *irisrt.Rank) error {
			for _, dt := range dataTypes() {
				for _, tok := range normTokens() {
					for _, h := range []int64{7168, 4096 + 3} {
						nc, err := autoNormCase(r.World(), dt, tok, h)
						if err != nil {
							return err
						}
						if err := checkNormSize(r, nc, dt, tok, h, &counts[r.Rank()]); err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		cases.add(counts[0])
	})
}

// checkNormRules checks on the real launch path what the rules refuse
// before anything is enqueued (the output keeps its poison) and what they
// allow: an output peers write off the heap; two written tensors that
// overlap; an input overlapping a written tensor (refused under aliasing
// forbid; under allow refused in part, and right in place); a barrier mode
// the variant lacks.
func checkNormRules(r *irisrt.Rank, nc *normCase) error {
	const t, h = 7, 4096 + 3
	dt := irismodel.BF16
	g, err := newNormRig(r, nc, dt, t, h, normPlacement{true})
	if err != nil {
		return err
	}
	defer g.close()
	s, mode := r.Stream(), nc.modes[0]
	d := newNormData(dt, t, h, 0x5eed, 0)
	if err := g.upload(r, s, d); err != nil {
		return err
	}
	poisoned := func(what string) error {
		if err := syncCheck(r, s); err != nil {
			return err
		}
		b, err := download(r, g.out)
		if err != nil {
			return err
		}
		for i, x := range b {
			if x != 0xA5 {
				return fmt.Errorf("%s: a refused launch wrote the output (byte %d is %#x)", what, i, x)
			}
		}
		return nil
	}
	buf, freeBuf, err := tensor(r, dt, 2*t*h+1, true)
	if err != nil {
		return err
	}
	defer freeBuf()
	var (
		ae *irisrt.AliasError
		pe *irisrt.PlacementError
		be *irisrt.BarrierModeError
	)
	type refusal struct {
		what             string
		in, res, wt, out irisrt.Tensor
		mode             irismodel.Barrier
		target           any
		inPlace          bool
	}
	cases := []refusal{
		{what: "residual and output the same tensor", in: g.in, res: g.out, wt: g.wt, out: g.out, mode: mode, target: &ae},
		{what: "residual and output overlapping in part", in: g.in, res: buf.Slice(0, t*h), wt: g.wt, out: buf.Slice(1, t*h), mode: mode, target: &ae},
		{what: "input overlapping the output in part", in: buf.Slice(0, t*h), res: g.res, wt: g.wt, out: buf.Slice(1, t*h), mode: mode, target: &ae, inPlace: nc.aliasAllow()},
	}
	if !nc.aliasAllow() {
		cases = append(cases, refusal{what: "input and output the same tensor", in: g.out, res: g.res, wt: g.wt, out: g.out, mode: mode, target: &ae})
	}
	if nc.heapOut() {
		off, free, err := tensor(r, dt, t*h, false)
		if err != nil {
			return err
		}
		defer free()
		cases = append(cases, refusal{what: "output off the heap", in: g.in, res: g.res, wt: g.wt, out: off, mode: mode, target: &pe})
	}
	if !slices.Contains(nc.modes, irismodel.BarrierDevice) {
		cases = append(cases, refusal{what: "barrier mode device", in: g.in, res: g.res, wt: g.wt, out: g.out, mode: irismodel.BarrierDevice, target: &be})
	}
	for _, c := range cases {
		if err := g.p.Launch(s, c.in, c.res, c.wt, c.out, d.eps, c.mode); !errors.As(err, c.target) {
			return fmt.Errorf("%s: got %v, want %T", c.what, err, c.target)
		}
		if c.inPlace && !ae.InPlace {
			return fmt.Errorf("%s: got %v, want an in-place *irisrt.AliasError", c.what, ae)
		}
		if err := poisoned(c.what); err != nil {
			return err
		}
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if !nc.aliasAllow() {
		return nil
	}
	// In place: the input is the output tensor, then the residual tensor
	// (which then holds this rank's input, so residual = input).
	for _, asRes := range []bool{false, true} {
		d := newNormData(dt, t, h, 0x1a7e, 1+boolUint(asRes))
		if err := g.upload(r, s, d); err != nil {
			return err
		}
		if err := syncCheck(r, s); err != nil { // the poison is in before the input goes over it
			return err
		}
		in := g.out
		if asRes {
			in, d.res = g.res, d.in
		}
		if err := upload(r, in, encode(dt, d.in(r.Rank()))); err != nil {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if err := g.p.Launch(s, in, g.res, g.wt, g.out, d.eps, mode); err != nil {
			return fmt.Errorf("in place (input as residual: %v): %w", asRes, err)
		}
		if err := syncCheck(r, s); err != nil {
			return err
		}
		if err := g.verify(r, d); err != nil {
			return fmt.Errorf("in place (input as residual: %v): %w", asRes, err)
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
	}
	return nil
}

func boolUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestRMSNormRules checks the refusals and the in-place launches of
// all_reduce_rmsnorm and residual_rmsnorm on the real launch path.
func TestRMSNormRules(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		// every variant: refusals only; no shard splits the rmsnorm variants
		for i := range normCatalogue {
			nc := &normCatalogue[i]
			t.Run(nc.name(), func(t *testing.T) {
				if err := w.Run(func(r *irisrt.Rank) error { return checkNormRules(r, nc) }); err != nil {
					t.Fatal(err)
				}
				cases.add(1)
			})
		}
	})
}

// normBackToBack launches a plan `rounds` times with no host sync: before
// every launch fresh input and residual are copied in on the stream, after
// it residual and output are copied away; all results are checked at the
// end, the eps turning every launch. A Lamport slot reused too early, or an
// input overwritten while a slow peer still reads it, fails here.
func normBackToBack(r *irisrt.Rank, nc *normCase, dt irismodel.DType, t, h int64, rounds int) error {
	w, me := r.World(), r.Rank()
	g, err := newNormRig(r, nc, dt, t, h, normPlacement{true})
	if err != nil {
		return err
	}
	defer g.close()
	n := t * h
	pools := make([]irisrt.Tensor, 4) // inputs, residuals; residuals after, outputs
	for i := range pools {
		var free func()
		if pools[i], free, err = tensor(r, dt, n*int64(rounds), false); err != nil {
			return err
		}
		defer free()
	}
	seed := uint64(0xb2b) ^ uint64(n)
	ds := make([]normData, rounds)
	hostIn, hostRes := make([]byte, 0, pools[0].Bytes()), make([]byte, 0, pools[1].Bytes())
	for k := range rounds {
		ds[k] = newNormData(dt, t, h, seed, uint64(k))
		ds[k].wt = newNormData(dt, t, h, seed, 0).wt // one weight for all launches
		hostIn = append(hostIn, encode(dt, ds[k].in(me))...)
		hostRes = append(hostRes, encode(dt, ds[k].res(me))...)
	}
	if err := upload(r, pools[0], hostIn); err != nil {
		return err
	}
	if err := upload(r, pools[1], hostRes); err != nil {
		return err
	}
	if err := upload(r, g.wt, encode(dt, ds[0].wt(me))); err != nil {
		return err
	}
	if err := r.HostBarrier(r.Stream()); err != nil {
		return err
	}
	dev, s, mode := r.Device(), r.Stream(), nc.modes[0]
	for k := range rounds {
		at := func(p irisrt.Tensor) gpu.DevicePtr { return p.Slice(int64(k)*n, n).Ptr }
		if err := dev.CopyDtoDAsync(g.in.Ptr, at(pools[0]), g.in.Bytes(), s); err != nil {
			return err
		}
		if err := dev.CopyDtoDAsync(g.res.Ptr, at(pools[1]), g.res.Bytes(), s); err != nil {
			return err
		}
		if err := g.p.Launch(s, g.in, g.res, g.wt, g.out, ds[k].eps, mode); err != nil {
			return fmt.Errorf("launch %d: %w", k, err)
		}
		if err := dev.CopyDtoDAsync(at(pools[2]), g.res.Ptr, g.res.Bytes(), s); err != nil {
			return err
		}
		if err := dev.CopyDtoDAsync(at(pools[3]), g.out.Ptr, g.out.Bytes(), s); err != nil {
			return err
		}
	}
	if err := syncCheck(r, s); err != nil {
		return err
	}
	rb, err := download(r, pools[2])
	if err != nil {
		return err
	}
	ob, err := download(r, pools[3])
	if err != nil {
		return err
	}
	gotRes, gotOut := decode(dt, rb), decode(dt, ob)
	for k := range rounds {
		if err := nc.check(dt, w, me, t, h, ds[k], gotRes[int64(k)*n:int64(k+1)*n], gotOut[int64(k)*n:int64(k+1)*n]); err != nil {
			return fmt.Errorf("rank %d launch %d of %d: %w", me, k, rounds, err)
		}
	}
	return r.HostBarrier(s)
}

// normB2B is a back-to-back case.
type normB2B struct {
	dt   irismodel.DType
	t, h int64
}

// normB2BSizes are the back-to-back cases (the 128-token one left out with
// IRISGEN_TEST_QUICK).
func normB2BSizes() []normB2B {
	cs := []normB2B{{irismodel.BF16, 7, 4096 + 3}, {irismodel.F32, 7, 4096 + 3}}
	if os.Getenv("IRISGEN_TEST_QUICK") == "" {
		cs = append(cs, normB2B{irismodel.BF16, 128, 7168})
	}
	return cs
}

// TestRMSNormBackToBack runs 100 launches of every variant with fresh data
// on the stream before each and no host sync in between.
func TestRMSNormBackToBack(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		for i := range normCatalogue {
			nc := &normCatalogue[i]
			if !variantSelected(nc.name()) {
				continue
			}
			for _, c := range normB2BSizes() {
				t.Run(fmt.Sprintf("%s/%s/tokens=%d/hidden=%d", nc.name(), c.dt, c.t, c.h), func(t *testing.T) {
					if err := w.Run(func(r *irisrt.Rank) error { return normBackToBack(r, nc, c.dt, c.t, c.h, rounds(100)) }); err != nil {
						t.Fatal(err)
					}
					cases.add(100)
				})
			}
		}
	})
}

// normReplays captures one launch with eps and replays it `rounds` times
// with fresh input and residual uploaded before every replay (every 5th
// round launched eagerly instead, with the same eps), checking every
// result: a graph replays the eps it captured.
func normReplays(r *irisrt.Rank, nc *normCase, eps float32, rounds int) error {
	const t, h = 7, 7168
	dt := irismodel.BF16
	// An input peers read lives off the heap, so the captured launch
	// includes its import copy.
	g, err := newNormRig(r, nc, dt, t, h, normPlacement{heap: !nc.importIn()})
	if err != nil {
		return err
	}
	defer g.close()
	s, mode := r.Stream(), nc.modes[0]
	exec, err := r.Capture(s, func() error {
		if mode != irismodel.BarrierNone {
			var ce *irisrt.CaptureError
			if err := g.p.Launch(s, g.in, g.res, g.wt, g.out, eps, irismodel.BarrierHost); !errors.As(err, &ce) {
				return fmt.Errorf("host-barrier launch while capturing: got %v, want *irisrt.CaptureError", err)
			}
		}
		return g.p.Launch(s, g.in, g.res, g.wt, g.out, eps, mode)
	})
	if err != nil {
		return fmt.Errorf("capture with eps %g: %w", eps, err)
	}
	defer exec.Destroy()
	for k := range rounds {
		d := newNormData(dt, t, h, 0x6a7^uint64(len(nc.name())), uint64(k))
		d.eps = eps // the round's eps is the captured one
		if err := g.upload(r, s, d); err != nil {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if k%5 == 4 {
			if err := g.p.Launch(s, g.in, g.res, g.wt, g.out, eps, mode); err != nil {
				return fmt.Errorf("eager round %d: %w", k, err)
			}
			err = syncCheck(r, s)
		} else {
			err = exec.Replay(s)
		}
		if err != nil {
			return fmt.Errorf("round %d of the graph captured with eps %g: %w", k, eps, err)
		}
		if err := g.verify(r, d); err != nil {
			return fmt.Errorf("rank %d round %d of the graph captured with eps %g: %w", r.Rank(), k, eps, err)
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
	}
	return nil
}

// normCaptureRank is the capture suite of the two collectives on one rank:
// a graph captured with eps 1e-5, replayed with fresh data; then a second
// captured with 1e-6. It returns the rounds it checked.
func normCaptureRank(r *irisrt.Rank) (int, error) {
	checked := 0
	// every variant: no shard splits the rmsnorm variants
	for i := range normCatalogue {
		nc := &normCatalogue[i]
		for _, eps := range normEps {
			if err := normReplays(r, nc, eps, rounds(20)); err != nil {
				return checked, fmt.Errorf("%s: %w", nc.name(), err)
			}
			checked += rounds(20)
		}
	}
	return checked, nil
}

// TestRMSNormCapture: a graph replays the launch and the eps it captured,
// with fresh data, beside eager launches of the same plan.
func TestRMSNormCapture(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		counts := make([]int, w.Size())
		if err := w.Run(func(r *irisrt.Rank) (err error) {
			counts[r.Rank()], err = normCaptureRank(r)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		cases.add(counts[0])
	})
}

// TestRMSNormProcessWorld runs the checks of TestRMSNorm, TestRMSNormRules,
// TestRMSNormBackToBack (its first case) and TestRMSNormCapture in the
// multi-process world: in the parent it starts this test binary once per
// rank the way `irisgen run` does, and in each child it joins the world
// and runs them as one rank.
func TestRMSNormProcessWorld(t *testing.T) {
	if os.Getenv("RANK") != "" {
		r, err := irisrt.JoinProcessWorld(defaultOpts())
		if err != nil {
			t.Fatalf("JoinProcessWorld: %v", err)
		}
		defer r.Close()
		cases, err := normProcessRank(r)
		countCases(t).add(cases)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rank %d of %d: %d cases of all_reduce_rmsnorm and residual_rmsnorm (matrix, rules, back-to-back launches, capture rounds) passed", r.Rank(), r.World(), cases)
		return
	}
	for _, n := range worldSizes(t) {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			args := []string{os.Args[0], "-test.run", "^TestRMSNormProcessWorld$", "-test.v", "-test.count=1"}
			if err := launch.Run(n, args, os.Stdout, os.Stderr, launch.Options{}); err != nil {
				t.Fatalf("%d ranks: %v", n, err)
			}
		})
	}
}

// normProcessRank runs the checks of all_reduce_rmsnorm and
// residual_rmsnorm as one rank of the multi-process world and returns the
// cases it checked: the matrix's, one a variant's rules, the back-to-back
// launches and the capture rounds.
func normProcessRank(r *irisrt.Rank) (int, error) {
	var cases int
	if err := runNormMatrix(r, nil, &cases); err != nil {
		return cases, err
	}
	for i := range normCatalogue {
		nc := &normCatalogue[i]
		if !variantSelected(nc.name()) {
			continue
		}
		if err := checkNormRules(r, nc); err != nil {
			return cases, fmt.Errorf("%s rules: %w", nc.name(), err)
		}
		c := normB2BSizes()[0]
		if err := normBackToBack(r, nc, c.dt, c.t, c.h, rounds(100)); err != nil {
			return cases, fmt.Errorf("%s back to back: %w", nc.name(), err)
		}
		cases += 1 + 100
	}
	rounds, err := normCaptureRank(r)
	return cases + rounds, err
}

package tests

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/internal/bench"
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/internal/probe"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// What the rule table derives for all_reduce_rmsnorm and residual_rmsnorm,
// stated here a second time from the variants' designs (docs/collectives.md):
// where each tensor may live, which pairs may be the same memory, the
// barrier modes and which of them capture.
func TestRMSNormDerivedRules(t *testing.T) {
	cs, _ := catalogueIR(t)
	find := func(name string) *ir.Collective {
		i := slices.IndexFunc(cs, func(c *ir.Collective) bool { return c.Name == name })
		if i < 0 {
			t.Fatalf("%s is not in the catalogue", name)
		}
		return cs[i]
	}
	type want struct {
		placement map[string]ir.Placement
		inPlace   [][2]string // the pairs that may be the same tensor; every other pair must not overlap
		barriers  []irismodel.Barrier
	}
	fused := []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone}
	cases := map[string]want{
		// Peers read input: imported; everything else is this rank's.
		"all_reduce_rmsnorm/one_shot": {placement: map[string]ir.Placement{
			"input": ir.PlaceImport, "residual": ir.PlaceAny, "weight": ir.PlaceAny, "output": ir.PlaceAny, "lamport": ir.PlacePlan}, barriers: fused},
		// Peers write only the plan's slots: every user tensor anywhere,
		// and an input may be a written tensor itself.
		"all_reduce_rmsnorm/one_shot_lamport": {placement: map[string]ir.Placement{
			"input": ir.PlaceAny, "residual": ir.PlaceAny, "weight": ir.PlaceAny, "output": ir.PlaceAny, "lamport": ir.PlacePlan},
			inPlace:  [][2]string{{"input", "residual"}, {"input", "output"}, {"residual", "weight"}, {"weight", "output"}},
			barriers: fused},
		// Peers read input and write output (the gathered sums).
		"all_reduce_rmsnorm/two_shot": {placement: map[string]ir.Placement{
			"input": ir.PlaceImport, "residual": ir.PlaceAny, "weight": ir.PlaceAny, "output": ir.PlaceHeap, "lamport": ir.PlacePlan}, barriers: fused},
		"residual_rmsnorm/local": {placement: map[string]ir.Placement{
			"input": ir.PlaceAny, "residual": ir.PlaceAny, "weight": ir.PlaceAny, "output": ir.PlaceAny}, barriers: []irismodel.Barrier{irismodel.BarrierNone}},
	}
	seen := 0
	for _, name := range []string{"all_reduce_rmsnorm", "residual_rmsnorm"} {
		c := find(name)
		if len(c.Params) != 1 || c.Params[0].Name != "eps" || c.Params[0].Kind != irismodel.ParamF32 {
			t.Errorf("%s: parameters %v, want eps f32", name, c.Params)
		}
		if !slices.Equal(c.Symbols, []string{"tokens", "hidden"}) {
			t.Errorf("%s: sizes %v, want [tokens hidden]", name, c.Symbols)
		}
		for _, v := range c.Variants {
			label := name + "/" + v.Name
			w, ok := cases[label]
			if !ok {
				t.Errorf("%s: a variant this test does not know: state its rules here", label)
				continue
			}
			seen++
			for _, u := range v.Uses {
				if got := u.Placement; got != w.placement[u.Tensor.Name] {
					t.Errorf("%s: %s placed %s, want %s", label, u.Tensor.Name, got, w.placement[u.Tensor.Name])
				}
			}
			var pairs int
			for _, pr := range v.AliasPairs() {
				pairs++
				in := slices.ContainsFunc(w.inPlace, func(p [2]string) bool { return p == [2]string{pr[0].Name, pr[1].Name} })
				if got := v.InPlace(pr[0], pr[1]); got != in {
					t.Errorf("%s: %s and %s in place: %v, want %v", label, pr[0].Name, pr[1].Name, got, in)
				}
			}
			// input, residual, weight, output: every pair but (input, weight).
			if pairs != 5 {
				t.Errorf("%s: %d alias pairs, want 5", label, pairs)
			}
			if !slices.Equal(v.Barriers, w.barriers) {
				t.Errorf("%s: barrier modes %v, want %v", label, v.Barriers, w.barriers)
			}
			for _, cp := range v.Capture {
				if cp.Capturable != (cp.Mode != irismodel.BarrierHost) {
					t.Errorf("%s: mode %s capturable %v", label, cp.Mode, cp.Capturable)
				}
			}
			for _, k := range v.Kernels {
				if want := fmt.Sprintf("irisgen_%s_%s_%s", name, v.Name, k.DType); k.Name != want {
					t.Errorf("%s: kernel %s, want %s", label, k.Name, want)
				}
			}
			if len(v.Kernels) != 3 {
				t.Errorf("%s: %d kernels, want one per dtype (f32, f16, bf16)", label, len(v.Kernels))
			}
		}
	}
	if seen != len(cases) {
		t.Errorf("%d variants in the catalogue, %d stated here", seen, len(cases))
	}
}

// rmsnormLauncher is what every plan of the two collectives offers.
type rmsnormLauncher interface {
	Launch(s gpu.Stream, input, residual, weight, output irisrt.Tensor, eps float32, mode irismodel.Barrier) error
	Close() error
}

// TestRMSNormLaunchArgs launches every variant on the fake platform and
// reads back what the kernel would get: its name, the grid (sized by the
// largest tensor), the tensor pointers in spec order (the Lamport slots
// only where the variant uses them, a staged copy of an input peers read
// that is off the heap), tokens and hidden, and eps as the double of the
// float32 given, a fresh value every launch; and the convenience call,
// which reads tokens from input and hidden from weight and refuses an
// input that is not whole rows.
func TestRMSNormLaunchArgs(t *testing.T) {
	fake := fakegpu.New(2)
	w := fakeWorld(t, 2, fake, fakeKernels(fake))
	const tokens, hidden = 3, 4096 + 3
	type variant struct {
		name      string
		remote    bool // peers read input: staged off the heap
		lamport   bool
		mode      irismodel.Barrier
		maxBlocks int
		plan      func(r *irisrt.Rank, dt irismodel.DType) (rmsnormLauncher, error)
	}
	variants := []variant{
		{"all_reduce_rmsnorm_one_shot", true, false, irismodel.BarrierDevice, 128, func(r *irisrt.Rank, dt irismodel.DType) (rmsnormLauncher, error) {
			return collectives.NewAllReduceRmsnormOneShotPlan(r, dt, tokens, hidden)
		}},
		{"all_reduce_rmsnorm_one_shot_lamport", false, true, irismodel.BarrierDevice, 128, func(r *irisrt.Rank, dt irismodel.DType) (rmsnormLauncher, error) {
			return collectives.NewAllReduceRmsnormOneShotLamportPlan(r, dt, tokens, hidden)
		}},
		{"all_reduce_rmsnorm_two_shot", true, false, irismodel.BarrierDevice, 128, func(r *irisrt.Rank, dt irismodel.DType) (rmsnormLauncher, error) {
			return collectives.NewAllReduceRmsnormTwoShotPlan(r, dt, tokens, hidden)
		}},
		{"residual_rmsnorm_local", false, false, irismodel.BarrierNone, 1024, func(r *irisrt.Rank, dt irismodel.DType) (rmsnormLauncher, error) {
			return collectives.NewResidualRmsnormLocalPlan(r, dt, tokens, hidden)
		}},
	}
	last := func(r *irisrt.Rank) (fakegpu.Launch, bool) {
		ls := fake.Launches()
		for i := len(ls) - 1; i >= 0; i-- {
			if ls[i].Device == r.Device().Ordinal() {
				return ls[i], true
			}
		}
		return fakegpu.Launch{}, false
	}
	u64 := func(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[irisimpl.CtxBytes+8*i:]) }
	// minBlocks: each variant's descriptor MinBlocks, by kernel prefix.
	minBlocks := map[string]int{}
	for _, e := range collectives.Catalogue {
		minBlocks[e.Collective+"_"+e.Variant] = e.Descriptor().MinBlocks
	}
	for _, v := range variants {
		if _, ok := minBlocks[v.name]; !ok {
			t.Fatalf("no variant %s in the catalogue", v.name)
		}
	}
	err := w.Run(func(r *irisrt.Rank) error {
		s := r.Stream()
		for _, v := range variants {
			for _, dt := range []irismodel.DType{irismodel.F32, irismodel.F16, irismodel.BF16} {
				p, err := v.plan(r, dt)
				if err != nil {
					return err
				}
				ts, free, err := allocTensors(r, dt, []int64{tokens * hidden, tokens * hidden, hidden, tokens * hidden}, v.remote)
				if err != nil {
					return err
				}
				for _, eps := range []float32{1e-5, 1e-6, 0.25} {
					if err := r.HostBarrier(s); err != nil {
						return err
					}
					if err := p.Launch(s, ts[0], ts[1], ts[2], ts[3], eps, v.mode); err != nil {
						return fmt.Errorf("%s %s: %w", v.name, dt, err)
					}
					l, ok := last(r)
					if !ok {
						return fmt.Errorf("%s %s: nothing launched", v.name, dt)
					}
					if want := "irisgen_" + v.name + "_" + dt.String(); l.Function != want {
						return fmt.Errorf("launched %s, want %s", l.Function, want)
					}
					// 512 threads, 16-byte vectors, max_blocks as the spec has
					// them; min_blocks as the descriptor has it (the grid
					// then shrinks the blocks of small sizes).
					if want, threads := irisimpl.Grid(tokens*hidden*dt.Size(), 512, 16, minBlocks[v.name], v.maxBlocks); int(l.Block.X) != threads || int(l.Grid.X) != want {
						return fmt.Errorf("%s %s: grid %d x %d threads, want %d x %d", v.name, dt, l.Grid.X, l.Block.X, want, threads)
					}
					for i := range 4 {
						got, want := u64(l.Args, i), uint64(ts[i].Ptr)
						if i == 0 && v.remote { // the kernel reads the plan's staged copy
							if got == want || got == 0 {
								return fmt.Errorf("%s %s: input off the heap passed as %#x, not staged", v.name, dt, got)
							}
							continue
						}
						if got != want {
							return fmt.Errorf("%s %s: tensor %d at %#x, want %#x", v.name, dt, i, got, want)
						}
					}
					nt := 4
					if v.name != "residual_rmsnorm_local" {
						nt = 5
						if got := u64(l.Args, 4); (got != 0) != v.lamport {
							return fmt.Errorf("%s: lamport slots at %#x", v.name, got)
						}
					}
					if got := [2]uint64{u64(l.Args, nt), u64(l.Args, nt+1)}; got != [2]uint64{tokens, hidden} {
						return fmt.Errorf("%s: sizes %v, want [%d %d]", v.name, got, tokens, hidden)
					}
					if got := math.Float64frombits(u64(l.Args, nt+2)); got != float64(eps) {
						return fmt.Errorf("%s: eps %g, want %g", v.name, got, float64(eps))
					}
				}
				free()
				if err := p.Close(); err != nil {
					return err
				}
			}
		}
		// The convenience call: sizes from the tensors.
		dt := irismodel.BF16
		ts, free, err := allocTensors(r, dt, []int64{tokens * hidden, tokens * hidden, hidden, tokens * hidden}, false)
		if err != nil {
			return err
		}
		defer free()
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if err := collectives.AllReduceRmsnorm(r, s, collectives.AllReduceRmsnormOneShot, dt, ts[0], ts[1], ts[2], ts[3], 1e-6, irismodel.BarrierDevice); err != nil {
			return fmt.Errorf("convenience call: %w", err)
		}
		l, _ := last(r)
		if got := [3]uint64{u64(l.Args, 5), u64(l.Args, 6), u64(l.Args, 7)}; got != [3]uint64{tokens, hidden, math.Float64bits(float64(float32(1e-6)))} {
			return fmt.Errorf("convenience call: sizes and eps %v", got)
		}
		short := ts[2].Slice(0, hidden-1) // the rows of input are not whole rows of weight
		var se *irisrt.ShapeError
		if err := collectives.AllReduceRmsnorm(r, s, collectives.AllReduceRmsnormOneShot, dt, ts[0], ts[1], short, ts[3], 1e-6, irismodel.BarrierDevice); !errors.As(err, &se) {
			return fmt.Errorf("convenience call with a weight shorter than a row: got %v, want *irisrt.ShapeError", err)
		}
		return r.HostBarrier(s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// allocTensors allocates tensors of the given lengths; with offHeap the
// first (an input peers read) lives off the heap, so launches stage it.
func allocTensors(r *irisrt.Rank, dt irismodel.DType, lens []int64, offHeap bool) ([]irisrt.Tensor, func(), error) {
	var ts []irisrt.Tensor
	var frees []func()
	free := func() {
		for _, f := range frees {
			f()
		}
	}
	for i, n := range lens {
		if i == 0 && offHeap {
			ptr, err := r.Device().Alloc(n*dt.Size(), false)
			if err != nil {
				free()
				return nil, nil, err
			}
			ts = append(ts, irisrt.Tensor{Ptr: ptr, DType: dt, Len: n})
			frees = append(frees, func() { r.Device().Free(ptr) })
			continue
		}
		x, err := r.Heap().Alloc(dt, n)
		if err != nil {
			free()
			return nil, nil, err
		}
		ts = append(ts, x)
		frees = append(frees, func() { r.Heap().Free(x) })
	}
	return ts, free, nil
}

// TestProbeRMSNormOnFake runs the capture probe's plumbing for
// all_reduce_rmsnorm and residual_rmsnorm on the fake platform (which runs
// no kernel: eager and replay agree): every mode with both values of eps,
// the capturable ones captured and replayed, host refused.
func TestProbeRMSNormOnFake(t *testing.T) {
	p := fakegpu.New(2)
	w := fakeWorld(t, 2, p, fakeKernels(p))
	results := make([][]probe.Result, 2)
	err := w.Run(func(r *irisrt.Rank) error {
		var err error
		results[r.Rank()], err = probe.RunRank(r, probe.Config{Entries: collectives.Catalogue, N: 4096 + 3, Replays: 2, Collectives: []string{"all_reduce_rmsnorm", "residual_rmsnorm"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, res := range results[0] {
		if res.Failed || res.Claimed != (res.Mode != irismodel.BarrierHost) || res.Captured != res.Claimed || (res.Claimed && res.Replays != 2) {
			t.Errorf("%s/%s %s %s: %+v", res.Collective, res.Variant, res.Params, res.Mode, res)
		}
		seen[res.Params]++
	}
	// 3 variants x 3 modes + residual_rmsnorm's one mode, each with both eps.
	if seen["eps=1"] != 10 || seen["eps=0.5"] != 10 || len(results[0]) != 20 {
		t.Errorf("probed %v (%d results), want 10 with each eps", seen, len(results[0]))
	}
}

// TestRMSNormBenchOnFake runs the bench of all_reduce_rmsnorm on the fake
// platform (no kernel runs; the times are the fake's): a row for every
// variant, tokens and mode, and one unfused row each, the fastest of the
// all_reduce variants not slow by design, whose launches are each
// all_reduce's followed by residual_rmsnorm's; the speed-up table covers
// every size.
func TestRMSNormBenchOnFake(t *testing.T) {
	fake := fakegpu.New(2)
	w := fakeWorld(t, 2, fake, fakeKernels(fake))
	defer func(ts []int64) { bench.RMSNormTokens = ts }(bench.RMSNormTokens)
	bench.RMSNormTokens = []int64{1, 7, 64} // the fake's heap is small
	rows, err := bench.RunOn(w, bench.Config{Entries: collectives.Catalogue, Collectives: []string{"all_reduce_rmsnorm"}, Modes: []string{"eager", "graph"}, Warmup: 1, Repeats: 1}, "fake", "today")
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range rows {
		if r.Collective != "all_reduce_rmsnorm" || r.DType != "bf16" || r.World != 2 || r.Bytes%(bench.RMSNormHidden*2) != 0 {
			t.Errorf("row %+v", r)
		}
		count[r.Impl+" "+r.Variant]++
		if r.Impl == bench.UnfusedImpl && !strings.HasPrefix(r.Note, "all_reduce ") {
			t.Errorf("unfused row without its all_reduce: %+v", r)
		}
	}
	cells := 2 * len(bench.RMSNormTokens)
	for _, s := range []string{"irisgen one_shot", "irisgen one_shot_lamport", "irisgen two_shot", bench.UnfusedImpl + " all_reduce+residual_rmsnorm"} {
		if count[s] != cells {
			t.Errorf("%s: %d rows, want %d", s, count[s], cells)
		}
	}
	// Every all_reduce launch of the unfused path is followed by a
	// residual_rmsnorm one on the same device.
	ls := fake.Launches()
	pairs := 0
	for i, l := range ls {
		if !strings.HasPrefix(l.Function, "irisgen_all_reduce_") || strings.HasPrefix(l.Function, "irisgen_all_reduce_rmsnorm") {
			continue
		}
		next := slices.IndexFunc(ls[i+1:], func(m fakegpu.Launch) bool { return m.Device == l.Device })
		if next < 0 || ls[i+1+next].Function != "irisgen_residual_rmsnorm_local_bf16" {
			t.Fatalf("launch %d (%s) is not followed by residual_rmsnorm", i, l.Function)
		}
		pairs++
	}
	if pairs == 0 {
		t.Error("no unfused launch")
	}
	table := bench.FusionTable(rows)
	if n := strings.Count(table, "\n| 2 |"); n != cells {
		t.Errorf("the speed-up table has %d rows, want %d:\n%s", n, cells, table)
	}
}

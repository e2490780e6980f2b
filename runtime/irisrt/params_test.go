package irisrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// rootedTable is a hand-built descriptor with launch parameters of every
// kind and tensors only one rank uses: input only on rank root, output
// only on rank dst, shared on every rank. pull lets peers read input (an
// import, exchanged), push lets them write output (on the heap,
// exchanged).
func rootedTable(importPath string) *Table {
	return &Table{
		ImportPath: importPath, KernelsCommand: "make rooted-kernels",
		Embedded: fstest.MapFS{"kernels/rooted.fake": {Data: []byte("rooted image of " + importPath)}},
		Collectives: []Collective{{
			Name: "rooted", SpecHash: "h3", DTypes: []irismodel.DType{irismodel.F32},
			Sizes: []SizeParam{{Name: "n", From: 2}},
			Params: []irismodel.ParamDesc{
				{Name: "root", Kind: irismodel.ParamRank},
				{Name: "k", Kind: irismodel.ParamInt, Min: 1, Max: 4},
				{Name: "eps", Kind: irismodel.ParamF32},
				{Name: "dst", Kind: irismodel.ParamRank},
				{Name: "shift", Kind: irismodel.ParamInt, Min: math.MinInt64, Max: math.MaxInt64},
			},
			Tensors: []irismodel.TensorDesc{
				{Name: "input", Dir: irismodel.In, Shape: []irismodel.Dim{irismodel.DimSize(0)}, Owner: "root"},
				{Name: "output", Dir: irismodel.Out, Shape: []irismodel.Dim{irismodel.DimWorld, irismodel.DimSize(0)}, Owner: "dst"},
				{Name: "shared", Dir: irismodel.In, Shape: []irismodel.Dim{irismodel.DimSize(0)}},
			},
			Variants: []Variant{
				{Name: "pull", Uses: []Use{UseImport, UseLocal, UseLocal},
					Barriers: allModes, Capturable: deviceNone, Threads: 64, MaxBlocks: 4, VectorBytes: 16},
				{Name: "push", Uses: []Use{UseLocal, UseHeap, UseLocal},
					Barriers: allModes, Capturable: deviceNone, Threads: 64, MaxBlocks: 4, VectorBytes: 16},
			},
		}},
	}
}

func rootedWorld(t *testing.T, n int, p *fakegpu.Platform) (*World, *Table) {
	t.Helper()
	t.Setenv("IRISGEN_KERNELS", "")
	tab := rootedTable("example.com/" + t.Name())
	Register(tab)
	if p == nil {
		p = fakegpu.New(n)
	}
	p.AddModule(tab.Embedded.(fstest.MapFS)["kernels/rooted.fake"].Data, []string{"irisgen_rooted_pull_f32", "irisgen_rooted_push_f32"},
		map[string][]byte{irismodel.SpecHashSymbol("rooted"): append([]byte("h3"), 0)})
	return newFakeWorld(t, n, Options{Platform: p}), tab
}

// params is the parameters of one rooted launch.
func rootedParams(root, k int64, eps float32, dst int64) []irismodel.Param {
	return []irismodel.Param{irismodel.IntParam(root), irismodel.IntParam(k), irismodel.F32Param(eps), irismodel.IntParam(dst), irismodel.IntParam(-3)}
}

func TestParamValues(t *testing.T) {
	assert.Equal(t, int64(-5), irismodel.IntParam(-5).Int())
	assert.Equal(t, float32(0.25), irismodel.F32Param(0.25).F32())
	assert.Equal(t, "-5", irismodel.IntParam(-5).String())
	assert.Equal(t, "1e-06", irismodel.F32Param(1e-6).String())
	assert.Equal(t, "no value", irismodel.Param{}.String())
	assert.Equal(t, math.Float64bits(0.25), irismodel.F32Param(0.25).Word(), "an f32 reaches the kernel as a double")
	assert.Equal(t, uint64(1<<64-5), irismodel.IntParam(-5).Word())
	for k, want := range map[irismodel.ParamKind]string{irismodel.ParamRank: "rank", irismodel.ParamInt: "int", irismodel.ParamF32: "f32", 9: "ParamKind(9)"} {
		assert.Equal(t, want, k.String())
	}
	rank := irismodel.ParamDesc{Name: "root", Kind: irismodel.ParamRank}
	assert.Equal(t, "0 <= root < 4 (world)", rank.Range(4))
	for _, c := range []struct {
		d    irismodel.ParamDesc
		want string
	}{
		{irismodel.ParamDesc{Name: "k", Kind: irismodel.ParamInt, Min: 1, Max: 4}, "1 <= k <= 4"},
		{irismodel.ParamDesc{Name: "k", Kind: irismodel.ParamInt, Min: 1, Max: math.MaxInt64}, "k >= 1"},
		{irismodel.ParamDesc{Name: "k", Kind: irismodel.ParamInt, Min: math.MinInt64, Max: 4}, "k <= 4"},
		{irismodel.ParamDesc{Name: "k", Kind: irismodel.ParamInt, Min: math.MinInt64, Max: math.MaxInt64}, "any int64"},
		{irismodel.ParamDesc{Name: "eps", Kind: irismodel.ParamF32}, "any f32"},
	} {
		assert.Equal(t, c.want, c.d.Range(2))
	}
}

// TestParamChecks enumerates the range checks of every kind at and past
// each bound, the kind checks and the count: every refusal is a typed
// *ParamError (or a count error) before anything is launched.
func TestParamChecks(t *testing.T) {
	fake := fakegpu.New(2)
	w, tab := rootedWorld(t, 2, fake)
	pull := &tab.Collectives[0].Variants[0]
	require.NoError(t, w.Run(func(r *Rank) error {
		p, err := NewPlanOf[VariantPlan](r, pull, irismodel.F32, "", 8)
		require.NoError(t, err)
		defer p.Close()
		ts, _ := rootedTensors(t, r, 8)
		if r.Rank() == 1 {
			return r.HostBarrier(r.Stream()) // rank 0 alone checks; nothing launches
		}
		fake.ClearLaunches()
		for _, c := range []struct {
			name string
			ps   []irismodel.Param
			want string // "" accepted
		}{
			{"root below", rootedParams(-1, 1, 0, 0), "rooted/pull: parameter root = -1 is out of range: the launch accepts 0 <= root < 2 (world)"},
			{"root at world", rootedParams(2, 1, 0, 0), "parameter root = 2 is out of range: the launch accepts 0 <= root < 2 (world)"},
			{"dst at world", rootedParams(0, 1, 0, 2), "parameter dst = 2 is out of range"},
			{"k below min", rootedParams(0, 0, 0, 0), "parameter k = 0 is out of range: the launch accepts 1 <= k <= 4"},
			{"k above max", rootedParams(0, 5, 0, 0), "parameter k = 5 is out of range: the launch accepts 1 <= k <= 4"},
			{"k wrong kind", []irismodel.Param{irismodel.IntParam(0), irismodel.F32Param(1), irismodel.F32Param(0), irismodel.IntParam(0), irismodel.IntParam(0)}, "parameter k is int, but the launch passed an F32Param: pass irismodel.IntParam(...)"},
			{"eps wrong kind", []irismodel.Param{irismodel.IntParam(0), irismodel.IntParam(1), irismodel.IntParam(0), irismodel.IntParam(0), irismodel.IntParam(0)}, "parameter eps is f32, but the launch passed an IntParam: pass irismodel.F32Param(...)"},
			{"root zero Param", []irismodel.Param{{}, irismodel.IntParam(1), irismodel.F32Param(0), irismodel.IntParam(0), irismodel.IntParam(0)}, "parameter root is rank, but the launch passed the zero Param: pass irismodel.IntParam(...)"},
			{"shift any", []irismodel.Param{irismodel.IntParam(0), irismodel.IntParam(1), irismodel.F32Param(0), irismodel.IntParam(0), irismodel.IntParam(math.MinInt64)}, ""},
			{"lowest bounds", rootedParams(0, 1, float32(math.Inf(-1)), 0), ""},
			{"highest bounds", rootedParams(1, 4, float32(math.NaN()), 1), ""},
		} {
			err := p.LaunchParams(r.Stream(), ts, c.ps, irismodel.BarrierDevice)
			if c.want == "" {
				require.NoError(t, err, c.name)
				continue
			}
			var pe *ParamError
			require.ErrorAs(t, err, &pe, c.name)
			assert.True(t, errors.Is(err, ErrParam), c.name)
			assert.Contains(t, err.Error(), c.want, c.name)
		}
		assert.Len(t, fake.Launches(), 3, "only the accepted launches launched")
		require.EqualError(t, p.LaunchTensors(r.Stream(), ts, irismodel.BarrierDevice), "rooted/pull: 0 parameters, want 5 (root, k, eps, dst, shift): launch with LaunchParams")
		require.EqualError(t, p.LaunchParams(r.Stream(), ts, rootedParams(0, 1, 0, 0)[:4], irismodel.BarrierDevice), "rooted/pull: 4 parameters, want 5 (root, k, eps, dst, shift): launch with LaunchParams")
		assert.Len(t, fake.Launches(), 3)
		return r.HostBarrier(r.Stream())
	}))
}

// rootedTensors allocates input, output and shared for n on r's heap
// (collective), and an output off the heap.
func rootedTensors(t *testing.T, r *Rank, n int64) (ts []Tensor, offOut Tensor) {
	t.Helper()
	for _, l := range []int64{n, int64(r.World()) * n, n} {
		x, err := r.Heap().Alloc(irismodel.F32, l)
		require.NoError(t, err)
		ts = append(ts, x)
	}
	ptr, err := r.Device().Alloc(int64(r.World())*n*4, false)
	require.NoError(t, err)
	return ts, Tensor{Ptr: ptr, DType: irismodel.F32, Len: int64(r.World()) * n}
}

// TestOwnedTensors: a tensor only one rank uses is checked on that rank
// only; elsewhere whatever the caller passes is ignored and the kernel gets
// a null pointer; a variant whose peers touch it gets the address slots.
// Every rank packs the parameters after the sizes.
func TestOwnedTensors(t *testing.T) {
	fake := fakegpu.New(2)
	w, tab := rootedWorld(t, 2, fake)
	pull, push := &tab.Collectives[0].Variants[0], &tab.Collectives[0].Variants[1]
	const n = 8
	le := binary.LittleEndian
	args := make([][]byte, 2)
	var mine atomic.Int32
	fake.OnLaunch(func(l fakegpu.Launch) error {
		args[l.Device] = l.Args
		mine.Add(1)
		return nil
	})
	require.NoError(t, w.Run(func(r *Rank) error {
		s := r.Stream()
		pp, err := NewPlanOf[VariantPlan](r, pull, irismodel.F32, "", n)
		require.NoError(t, err)
		defer pp.Close()
		ph, err := NewPlanOf[VariantPlan](r, push, irismodel.F32, "", n)
		require.NoError(t, err)
		defer ph.Close()
		assert.Equal(t, []Buffer{{"address slots of input", 8}}, pp.Plan().Spec().Workspace, "pull exchanges input: a slot per block")
		assert.Equal(t, []Buffer{{"input", n * 4}}, pp.Plan().Spec().Staging)
		assert.Equal(t, []Buffer{{"address slots of output", 8}}, ph.Plan().Spec().Workspace, "push exchanges output")
		ts, offOut := rootedTensors(t, r, n)
		if r.Rank() == 0 {
			ts[1] = offOut // output is rank 1's (dst): off the heap here, ignored
		}
		bad := Tensor{Ptr: ts[0].Ptr, DType: irismodel.BF16, Len: 3}
		var de *DTypeError
		var pe *PlacementError
		switch r.Rank() {
		case 0: // root of input, not dst of output (which is off this rank's heap)
			require.ErrorAs(t, pp.LaunchParams(s, []Tensor{bad, ts[1], ts[2]}, rootedParams(0, 1, 0.5, 1), irismodel.BarrierDevice), &de, "the root's input is checked")
			require.NoError(t, ph.LaunchParams(s, []Tensor{ts[0], {}, ts[2]}, rootedParams(0, 1, 0.5, 1), irismodel.BarrierDevice), "output is rank 1's: none given")
		case 1: // dst of output, not root of input
			require.NoError(t, pp.LaunchParams(s, []Tensor{bad, ts[1], ts[2]}, rootedParams(0, 1, 0.5, 1), irismodel.BarrierDevice), "another rank's input is ignored")
			require.NoError(t, ph.LaunchParams(s, []Tensor{{}, ts[1], ts[2]}, rootedParams(0, 1, 0.5, 1), irismodel.BarrierDevice))
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		// Off the heap, output is refused on its owner only.
		err = ph.LaunchParams(s, ts, rootedParams(0, 1, 0.5, 0), irismodel.BarrierDevice)
		if r.Rank() == 0 {
			require.ErrorAs(t, err, &pe)
			assert.Contains(t, err.Error(), `tensor "output"`)
			return r.HostBarrier(s)
		}
		require.NoError(t, err)
		return r.HostBarrier(s)
	}))

	// The last launches: push with root 0 and dst 0, rank 1 only; before
	// it, both ranks' pull and push.
	fake.ClearLaunches()
	args = make([][]byte, 2)
	require.NoError(t, w.Run(func(r *Rank) error {
		s := r.Stream()
		pp, err := NewPlanOf[VariantPlan](r, pull, irismodel.F32, "", n)
		require.NoError(t, err)
		defer pp.Close()
		ts, _ := rootedTensors(t, r, n)
		off, err := r.Device().Alloc(n*4, false)
		require.NoError(t, err)
		input := ts[0]
		if r.Rank() == 1 {
			input = Tensor{Ptr: off, DType: irismodel.F32, Len: n} // the root's input off the heap: staged
		}
		require.NoError(t, pp.LaunchParams(s, []Tensor{input, ts[1], ts[2]}, rootedParams(1, 3, 0.5, 0), irismodel.BarrierHost))
		a := args[r.Rank()]
		require.Len(t, a, CtxBytes+8*(3+1+5+2), "3 tensors, 1 size, 5 parameters, 2 slot pointers")
		inPtr := uint64(0)
		if r.Rank() == 1 {
			inPtr = uint64(pp.Plan().Buffer("input")) // staged on the root
		}
		outPtr := uint64(0)
		if r.Rank() == 0 {
			outPtr = uint64(ts[1].Ptr)
		}
		want := []uint64{inPtr, outPtr, uint64(ts[2].Ptr), n, 1, 3, math.Float64bits(0.5), 0, uint64(1<<64 - 3),
			uint64(pp.Plan().Buffer("address slots of input")), 0}
		for i, x := range want {
			assert.Equal(t, x, le.Uint64(a[CtxBytes+8*i:]), "rank %d argument %d", r.Rank(), i)
		}
		return nil
	}))
}

// TestEmptyLaunch: a size of 0 makes a valid plan (one block) whose
// launches make every check and enqueue nothing: no kernel, no staging
// copy, no host barrier; the zero Tensor stands for an empty one.
func TestEmptyLaunch(t *testing.T) {
	fake := fakegpu.New(2)
	w, tab := rootedWorld(t, 2, fake)
	pull := &tab.Collectives[0].Variants[0]
	require.NoError(t, w.Run(func(r *Rank) error {
		s := r.Stream()
		p, err := NewPlanOf[VariantPlan](r, pull, irismodel.F32, "", 0)
		require.NoError(t, err)
		defer p.Close()
		assert.Equal(t, 1, p.Plan().Spec().Blocks)
		off, err := r.Device().Alloc(16, false)
		require.NoError(t, err)
		ps := rootedParams(0, 1, 0, 1)
		for _, mode := range allModes {
			require.NoError(t, p.LaunchParams(s, []Tensor{{}, {}, {}}, ps, mode), "zero tensors, %s", mode)
			require.NoError(t, p.LaunchParams(s, []Tensor{{Ptr: off, DType: irismodel.F32}, {}, {}}, ps, mode), "an empty tensor off the heap, %s", mode)
		}
		var pe *ParamError
		require.ErrorAs(t, p.LaunchParams(s, []Tensor{{}, {}, {}}, rootedParams(5, 1, 0, 1), irismodel.BarrierDevice), &pe, "parameters are still checked")
		var se *ShapeError
		require.ErrorAs(t, p.LaunchParams(s, []Tensor{{}, {}, {Ptr: off, DType: irismodel.F32, Len: 1}}, ps, irismodel.BarrierDevice), &se, "so are lengths")
		var me *BarrierModeError
		require.ErrorAs(t, p.LaunchParams(s, []Tensor{{}, {}, {}}, ps, irismodel.Barrier(7)), &me, "and the mode")
		// Host mode is refused while capturing, as for any size.
		require.NoError(t, r.Device().BeginCapture(s, gpu.CaptureRelaxed))
		var ce *CaptureError
		require.ErrorAs(t, p.LaunchParams(s, []Tensor{{}, {}, {}}, ps, irismodel.BarrierHost), &ce)
		require.NoError(t, p.LaunchParams(s, []Tensor{{}, {}, {}}, ps, irismodel.BarrierDevice), "captured: nothing")
		g, err := r.Device().EndCapture(s)
		require.NoError(t, err)
		require.NoError(t, r.Device().DestroyGraph(g))
		return nil
	}))
	assert.Empty(t, fake.Launches(), "nothing launched")
}

// TestParamsLaunchAllocatesNothing: the launch path with parameters and
// tensors only one rank uses allocates nothing, on the owner (with a
// staging copy) and elsewhere.
func TestParamsLaunchAllocatesNothing(t *testing.T) {
	p := fakegpu.New(2)
	q := quietPlatform{p, &atomic.Int64{}, &atomic.Int64{}}
	t.Setenv("IRISGEN_KERNELS", "")
	tab := rootedTable("example.com/" + t.Name())
	Register(tab)
	p.AddModule(tab.Embedded.(fstest.MapFS)["kernels/rooted.fake"].Data, []string{"irisgen_rooted_pull_f32", "irisgen_rooted_push_f32"},
		map[string][]byte{irismodel.SpecHashSymbol("rooted"): append([]byte("h3"), 0)})
	w := newFakeWorld(t, 2, Options{Platform: q})
	require.NoError(t, w.Run(func(r *Rank) error {
		pl, err := NewPlanOf[VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "", 16)
		if err != nil {
			return err
		}
		ts, _ := rootedTensors(t, r, 16)
		off, err := r.Device().Alloc(64, false)
		require.NoError(t, err)
		ts[0] = Tensor{Ptr: off, DType: irismodel.F32, Len: 16} // staged on the root
		launch := func() error {
			return pl.LaunchParams(r.Stream(), ts, []irismodel.Param{irismodel.IntParam(0), irismodel.IntParam(2), irismodel.F32Param(1), irismodel.IntParam(1), irismodel.IntParam(7)}, irismodel.BarrierDevice)
		}
		require.NoError(t, launch())
		if allocs := testing.AllocsPerRun(100, func() { require.NoError(t, launch()) }); allocs != 0 {
			return fmt.Errorf("rank %d: %v allocations a launch", r.Rank(), allocs)
		}
		return nil
	}))
	assert.Equal(t, int64(2*102), q.launches.Load())
	assert.Equal(t, int64(102), q.copies.Load(), "rank 0 staged its input every time, rank 1 never")
}

// TestOwnedTableRules: the table refuses owners that are not rank
// parameters, workspace or optional owned tensors, bad parameters, and a
// size read from an owned tensor.
func TestOwnedTableRules(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(c *Collective)
		want string
	}{
		{"owner not a parameter", func(c *Collective) { c.Tensors[0].Owner = "nobody" }, `owned by "nobody", which is not a rank parameter`},
		{"owner an int", func(c *Collective) { c.Tensors[0].Owner = "k" }, `owned by "k", which is not a rank parameter`},
		{"owned workspace", func(c *Collective) {
			c.Tensors = append(c.Tensors, irismodel.TensorDesc{Name: "ws", Dir: irismodel.Workspace, Shape: []irismodel.Dim{4}, Owner: "root"})
			for i := range c.Variants {
				c.Variants[i].Uses = append(c.Variants[i].Uses, Unused)
			}
		}, "is a workspace or optional"},
		{"owned optional", func(c *Collective) { c.Tensors[0].Optional = true }, "is a workspace or optional"},
		{"size from an owned tensor", func(c *Collective) { c.Sizes[0].From = 0 }, "which only rank root passes"},
		{"size from an optional tensor", func(c *Collective) { c.Tensors[2].Optional = true }, "read from tensor shared, which a launch may leave out"},
		{"unnamed parameter", func(c *Collective) { c.Params[1].Name = "" }, "parameter 1 has no name"},
		{"unknown kind", func(c *Collective) { c.Params[1].Kind = 0 }, "parameter k has unknown kind 0"},
		{"empty range", func(c *Collective) { c.Params[1].Min = 5 }, "parameter k has min 5 above max 4"},
		{"twice", func(c *Collective) { c.Params[1].Name = "root" }, "parameter root is declared twice"},
	} {
		tab := rootedTable("example.com/" + t.Name() + "/" + c.name)
		c.edit(&tab.Collectives[0])
		err := tab.prepare()
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
	e, ok := rootedTable("example.com/"+t.Name()).Lookup("rooted", "push")
	require.True(t, ok)
	assert.Equal(t, []string{"root", "k", "eps", "dst", "shift"}, func() (ns []string) {
		for _, p := range e.Params {
			ns = append(ns, p.Name)
		}
		return
	}())
	assert.Equal(t, "root", e.Tensors[0].Owner)
	assert.Equal(t, "dst", e.Tensors[1].Owner)
	assert.Empty(t, e.Tensors[2].Owner)
}

// TestSampleParams: tools' sample values of every kind, and what a rank
// passes for them.
func TestSampleParams(t *testing.T) {
	e, ok := rootedTable("example.com/"+t.Name()).Lookup("rooted", "pull")
	require.True(t, ok)
	assert.Equal(t, []irismodel.Param{irismodel.IntParam(0), irismodel.IntParam(1), irismodel.F32Param(1), irismodel.IntParam(1), irismodel.IntParam(1)}, e.SampleParams(2, 0))
	assert.Equal(t, []irismodel.Param{irismodel.IntParam(1), irismodel.IntParam(1), irismodel.F32Param(0.5), irismodel.IntParam(0), irismodel.IntParam(-1)}, e.SampleParams(2, 1), "k's range starts at 1")
	assert.Equal(t, []irismodel.Param{irismodel.IntParam(1), irismodel.IntParam(1), irismodel.F32Param(0.5), irismodel.IntParam(0), irismodel.IntParam(-1)}, e.SampleParams(4, 1))
	ts := []Tensor{{Ptr: 1, DType: irismodel.F32, Len: 1}, {Ptr: 2, DType: irismodel.F32, Len: 1}, {Ptr: 3, DType: irismodel.F32, Len: 1}}
	ps := e.SampleParams(2, 0) // root 0, dst 1
	assert.Equal(t, []Tensor{ts[0], {}, ts[2]}, e.TensorsFor(0, ts, ps), "rank 0 is the root, not dst")
	assert.Equal(t, []Tensor{{}, ts[1], ts[2]}, e.TensorsFor(1, ts, ps))
	assert.Equal(t, []Tensor{{Ptr: 1, DType: irismodel.F32, Len: 1}, {Ptr: 2, DType: irismodel.F32, Len: 1}, {Ptr: 3, DType: irismodel.F32, Len: 1}}, ts, "ts is not changed")
	d, ok := demoTable("example.com/"+t.Name()+"/demo").Lookup("demo", "push")
	require.True(t, ok)
	assert.Nil(t, d.SampleParams(2, 0))
	assert.Equal(t, ts, d.TensorsFor(1, ts, nil))
}

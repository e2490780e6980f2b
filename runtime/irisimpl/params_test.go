package irisimpl_test

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
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/internal/fixtures"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// TestParamChecks enumerates the range checks of every kind at and past
// each bound, the kind checks and the count: every refusal is a typed
// *ParamError (or a count error) before anything is launched.
func TestParamChecks(t *testing.T) {
	fake := fakegpu.New(2)
	w, tab := fixtures.RootedWorld(t, 2, fake)
	pull := &tab.Collectives[0].Variants[0]
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		p, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, pull, irismodel.F32, "", 8)
		require.NoError(t, err)
		defer p.Close()
		ts, _ := fixtures.RootedTensors(t, r, 8)
		if r.Rank() == 1 {
			return r.HostBarrier(r.Stream()) // rank 0 alone checks; nothing launches
		}
		fake.ClearLaunches()
		for _, c := range []struct {
			name string
			ps   []irismodel.Param
			want string // "" accepted
		}{
			{"root below", fixtures.RootedParams(-1, 1, 0, 0), "rooted/pull: parameter root = -1 is out of range: the launch accepts 0 <= root < 2 (world)"},
			{"root at world", fixtures.RootedParams(2, 1, 0, 0), "parameter root = 2 is out of range: the launch accepts 0 <= root < 2 (world)"},
			{"dst at world", fixtures.RootedParams(0, 1, 0, 2), "parameter dst = 2 is out of range"},
			{"k below min", fixtures.RootedParams(0, 0, 0, 0), "parameter k = 0 is out of range: the launch accepts 1 <= k <= 4"},
			{"k above max", fixtures.RootedParams(0, 5, 0, 0), "parameter k = 5 is out of range: the launch accepts 1 <= k <= 4"},
			{"k wrong kind", []irismodel.Param{irismodel.IntParam(0), irismodel.F32Param(1), irismodel.F32Param(0), irismodel.IntParam(0), irismodel.IntParam(0)}, "parameter k is int, but the launch passed an F32Param: pass irismodel.IntParam(...)"},
			{"eps wrong kind", []irismodel.Param{irismodel.IntParam(0), irismodel.IntParam(1), irismodel.IntParam(0), irismodel.IntParam(0), irismodel.IntParam(0)}, "parameter eps is f32, but the launch passed an IntParam: pass irismodel.F32Param(...)"},
			{"root zero Param", []irismodel.Param{{}, irismodel.IntParam(1), irismodel.F32Param(0), irismodel.IntParam(0), irismodel.IntParam(0)}, "parameter root is rank, but the launch passed the zero Param: pass irismodel.IntParam(...)"},
			{"shift any", []irismodel.Param{irismodel.IntParam(0), irismodel.IntParam(1), irismodel.F32Param(0), irismodel.IntParam(0), irismodel.IntParam(math.MinInt64)}, ""},
			{"lowest bounds", fixtures.RootedParams(0, 1, float32(math.Inf(-1)), 0), ""},
			{"highest bounds", fixtures.RootedParams(1, 4, float32(math.NaN()), 1), ""},
		} {
			err := p.LaunchParams(r.Stream(), ts, c.ps, irismodel.BarrierDevice)
			if c.want == "" {
				require.NoError(t, err, c.name)
				continue
			}
			var pe *irisrt.ParamError
			require.ErrorAs(t, err, &pe, c.name)
			assert.True(t, errors.Is(err, irisrt.ErrParam), c.name)
			assert.Contains(t, err.Error(), c.want, c.name)
		}
		assert.Len(t, fake.Launches(), 3, "only the accepted launches launched")
		require.EqualError(t, p.LaunchTensors(r.Stream(), ts, irismodel.BarrierDevice), "rooted/pull: 0 parameters, want 5 (root, k, eps, dst, shift): launch with LaunchParams")
		require.EqualError(t, p.LaunchParams(r.Stream(), ts, fixtures.RootedParams(0, 1, 0, 0)[:4], irismodel.BarrierDevice), "rooted/pull: 4 parameters, want 5 (root, k, eps, dst, shift): launch with LaunchParams")
		assert.Len(t, fake.Launches(), 3)
		return r.HostBarrier(r.Stream())
	}))
}

// TestOwnedTensors: a tensor only one rank uses is checked on that rank
// only; elsewhere whatever the caller passes is ignored and the kernel gets
// a null pointer; a variant whose peers touch it gets the address slots.
// Every rank packs the parameters after the sizes.
func TestOwnedTensors(t *testing.T) {
	fake := fakegpu.New(2)
	w, tab := fixtures.RootedWorld(t, 2, fake)
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
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		s := r.Stream()
		pp, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, pull, irismodel.F32, "", n)
		require.NoError(t, err)
		defer pp.Close()
		ph, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, push, irismodel.F32, "", n)
		require.NoError(t, err)
		defer ph.Close()
		assert.Equal(t, []core.Buffer{{Name: "address slots of input", Bytes: 8}}, irisimpl.Spec(pp.Plan()).Workspace, "pull exchanges input: a slot per block")
		assert.Equal(t, []core.Buffer{{Name: "input", Bytes: n * 4}}, irisimpl.Spec(pp.Plan()).Staging)
		assert.Equal(t, []core.Buffer{{Name: "address slots of output", Bytes: 8}}, irisimpl.Spec(ph.Plan()).Workspace, "push exchanges output")
		ts, offOut := fixtures.RootedTensors(t, r, n)
		if r.Rank() == 0 {
			ts[1] = offOut // output is rank 1's (dst): off the heap here, ignored
		}
		bad := irisrt.Tensor{Ptr: ts[0].Ptr, DType: irismodel.BF16, Len: 3}
		var de *irisrt.DTypeError
		var pe *irisrt.PlacementError
		switch r.Rank() {
		case 0: // root of input, not dst of output (which is off this rank's heap)
			require.ErrorAs(t, pp.LaunchParams(s, []irisrt.Tensor{bad, ts[1], ts[2]}, fixtures.RootedParams(0, 1, 0.5, 1), irismodel.BarrierDevice), &de, "the root's input is checked")
			require.NoError(t, ph.LaunchParams(s, []irisrt.Tensor{ts[0], {}, ts[2]}, fixtures.RootedParams(0, 1, 0.5, 1), irismodel.BarrierDevice), "output is rank 1's: none given")
		case 1: // dst of output, not root of input
			require.NoError(t, pp.LaunchParams(s, []irisrt.Tensor{bad, ts[1], ts[2]}, fixtures.RootedParams(0, 1, 0.5, 1), irismodel.BarrierDevice), "another rank's input is ignored")
			require.NoError(t, ph.LaunchParams(s, []irisrt.Tensor{{}, ts[1], ts[2]}, fixtures.RootedParams(0, 1, 0.5, 1), irismodel.BarrierDevice))
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		// Off the heap, output is refused on its owner only.
		err = ph.LaunchParams(s, ts, fixtures.RootedParams(0, 1, 0.5, 0), irismodel.BarrierDevice)
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
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		s := r.Stream()
		pp, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, pull, irismodel.F32, "", n)
		require.NoError(t, err)
		defer pp.Close()
		ts, _ := fixtures.RootedTensors(t, r, n)
		off, err := r.Device().Alloc(n*4, false)
		require.NoError(t, err)
		input := ts[0]
		if r.Rank() == 1 {
			input = irisrt.Tensor{Ptr: off, DType: irismodel.F32, Len: n} // the root's input off the heap: staged
		}
		require.NoError(t, pp.LaunchParams(s, []irisrt.Tensor{input, ts[1], ts[2]}, fixtures.RootedParams(1, 3, 0.5, 0), irismodel.BarrierHost))
		a := args[r.Rank()]
		require.Len(t, a, core.CtxBytes+8*(3+1+5+2), "3 tensors, 1 size, 5 parameters, 2 slot pointers")
		inPtr := uint64(0)
		if r.Rank() == 1 {
			inPtr = uint64(irisimpl.PlanBuffer(pp.Plan(), "input")) // staged on the root
		}
		outPtr := uint64(0)
		if r.Rank() == 0 {
			outPtr = uint64(ts[1].Ptr)
		}
		want := []uint64{inPtr, outPtr, uint64(ts[2].Ptr), n, 1, 3, math.Float64bits(0.5), 0, uint64(1<<64 - 3),
			uint64(irisimpl.PlanBuffer(pp.Plan(), "address slots of input")), 0}
		for i, x := range want {
			assert.Equal(t, x, le.Uint64(a[core.CtxBytes+8*i:]), "rank %d argument %d", r.Rank(), i)
		}
		return nil
	}))
}

// TestEmptyLaunch: a size of 0 makes a valid plan (one block) whose
// launches make every check and enqueue nothing: no kernel, no staging
// copy, no host barrier; the zero Tensor stands for an empty one.
func TestEmptyLaunch(t *testing.T) {
	fake := fakegpu.New(2)
	w, tab := fixtures.RootedWorld(t, 2, fake)
	pull := &tab.Collectives[0].Variants[0]
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		s := r.Stream()
		p, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, pull, irismodel.F32, "", 0)
		require.NoError(t, err)
		defer p.Close()
		assert.Equal(t, 1, irisimpl.Spec(p.Plan()).Blocks)
		off, err := r.Device().Alloc(16, false)
		require.NoError(t, err)
		ps := fixtures.RootedParams(0, 1, 0, 1)
		for _, mode := range fixtures.AllModes {
			require.NoError(t, p.LaunchParams(s, []irisrt.Tensor{{}, {}, {}}, ps, mode), "zero tensors, %s", mode)
			require.NoError(t, p.LaunchParams(s, []irisrt.Tensor{{Ptr: off, DType: irismodel.F32}, {}, {}}, ps, mode), "an empty tensor off the heap, %s", mode)
		}
		var pe *irisrt.ParamError
		require.ErrorAs(t, p.LaunchParams(s, []irisrt.Tensor{{}, {}, {}}, fixtures.RootedParams(5, 1, 0, 1), irismodel.BarrierDevice), &pe, "parameters are still checked")
		var se *irisrt.ShapeError
		require.ErrorAs(t, p.LaunchParams(s, []irisrt.Tensor{{}, {}, {Ptr: off, DType: irismodel.F32, Len: 1}}, ps, irismodel.BarrierDevice), &se, "so are lengths")
		var me *irisrt.BarrierModeError
		require.ErrorAs(t, p.LaunchParams(s, []irisrt.Tensor{{}, {}, {}}, ps, irismodel.Barrier(7)), &me, "and the mode")
		// Host mode is refused while capturing, as for any size.
		require.NoError(t, r.Device().BeginCapture(s, gpu.CaptureRelaxed))
		var ce *irisrt.CaptureError
		require.ErrorAs(t, p.LaunchParams(s, []irisrt.Tensor{{}, {}, {}}, ps, irismodel.BarrierHost), &ce)
		require.NoError(t, p.LaunchParams(s, []irisrt.Tensor{{}, {}, {}}, ps, irismodel.BarrierDevice), "captured: nothing")
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
	q := fakegpu.NewQuiet(p)
	t.Setenv("IRISGEN_KERNELS", "")
	tab := fixtures.RootedTable(fixtures.Path(t))
	irisimpl.Register(tab)
	p.AddModule(tab.Embedded.(fstest.MapFS)["kernels/rooted.fake"].Data, []string{"irisgen_rooted_pull_f32", "irisgen_rooted_push_f32"},
		map[string][]byte{irismodel.SpecHashSymbol("rooted"): append([]byte("h3"), 0)})
	w := fixtures.NewFakeWorld(t, 2, irisrt.Options{Platform: q})
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		pl, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "", 16)
		if err != nil {
			return err
		}
		ts, _ := fixtures.RootedTensors(t, r, 16)
		off, err := r.Device().Alloc(64, false)
		require.NoError(t, err)
		ts[0] = irisrt.Tensor{Ptr: off, DType: irismodel.F32, Len: 16} // staged on the root
		launch := func() error {
			return pl.LaunchParams(r.Stream(), ts, []irismodel.Param{irismodel.IntParam(0), irismodel.IntParam(2), irismodel.F32Param(1), irismodel.IntParam(1), irismodel.IntParam(7)}, irismodel.BarrierDevice)
		}
		require.NoError(t, launch())
		if allocs := testing.AllocsPerRun(100, func() { require.NoError(t, launch()) }); allocs != 0 {
			return fmt.Errorf("rank %d: %v allocations a launch", r.Rank(), allocs)
		}
		return nil
	}))
	assert.Equal(t, int64(2*102), q.Launches.Load())
	assert.Equal(t, int64(102), q.Copies.Load(), "rank 0 staged its input every time, rank 1 never")
}

// TestOwnedTableRules: the table refuses owners that are not rank
// parameters, workspace or optional owned tensors, bad parameters, and a
// size read from an owned tensor.
func TestOwnedTableRules(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(c *irisimpl.Collective)
		want string
	}{
		{"owner not a parameter", func(c *irisimpl.Collective) { c.Tensors[0].Owner = "nobody" }, `owned by "nobody", which is not a rank parameter`},
		{"owner an int", func(c *irisimpl.Collective) { c.Tensors[0].Owner = "k" }, `owned by "k", which is not a rank parameter`},
		{"owned workspace", func(c *irisimpl.Collective) {
			c.Tensors = append(c.Tensors, irismodel.TensorDesc{Name: "ws", Dir: irismodel.Workspace, Shape: []irismodel.Dim{4}, Owner: "root"})
			for i := range c.Variants {
				c.Variants[i].Uses = append(c.Variants[i].Uses, irisimpl.Unused)
			}
		}, "is a workspace or optional"},
		{"owned optional", func(c *irisimpl.Collective) { c.Tensors[0].Optional = true }, "is a workspace or optional"},
		{"size from an owned tensor", func(c *irisimpl.Collective) { c.Sizes[0].From = 0 }, "which only rank root passes"},
		{"size from an optional tensor", func(c *irisimpl.Collective) { c.Tensors[2].Optional = true }, "read from tensor shared, which a launch may leave out"},
		{"unnamed parameter", func(c *irisimpl.Collective) { c.Params[1].Name = "" }, "parameter 1 has no name"},
		{"unknown kind", func(c *irisimpl.Collective) { c.Params[1].Kind = 0 }, "parameter k has unknown kind 0"},
		{"empty range", func(c *irisimpl.Collective) { c.Params[1].Min = 5 }, "parameter k has min 5 above max 4"},
		{"twice", func(c *irisimpl.Collective) { c.Params[1].Name = "root" }, "parameter root is declared twice"},
	} {
		tab := fixtures.RootedTable(fixtures.Path(t, c.name))
		c.edit(&tab.Collectives[0])
		err := tab.Prepare()
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
	e, ok := fixtures.RootedTable(fixtures.Path(t)).Lookup("rooted", "push")
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
	e, ok := fixtures.RootedTable(fixtures.Path(t)).Lookup("rooted", "pull")
	require.True(t, ok)
	assert.Equal(t, []irismodel.Param{irismodel.IntParam(0), irismodel.IntParam(1), irismodel.F32Param(1), irismodel.IntParam(1), irismodel.IntParam(1)}, e.SampleParams(2, 0))
	assert.Equal(t, []irismodel.Param{irismodel.IntParam(1), irismodel.IntParam(1), irismodel.F32Param(0.5), irismodel.IntParam(0), irismodel.IntParam(-1)}, e.SampleParams(2, 1), "k's range starts at 1")
	assert.Equal(t, []irismodel.Param{irismodel.IntParam(1), irismodel.IntParam(1), irismodel.F32Param(0.5), irismodel.IntParam(0), irismodel.IntParam(-1)}, e.SampleParams(4, 1))
	ts := []irisrt.Tensor{{Ptr: 1, DType: irismodel.F32, Len: 1}, {Ptr: 2, DType: irismodel.F32, Len: 1}, {Ptr: 3, DType: irismodel.F32, Len: 1}}
	ps := e.SampleParams(2, 0) // root 0, dst 1
	assert.Equal(t, []irisrt.Tensor{ts[0], {}, ts[2]}, e.TensorsFor(0, ts, ps), "rank 0 is the root, not dst")
	assert.Equal(t, []irisrt.Tensor{{}, ts[1], ts[2]}, e.TensorsFor(1, ts, ps))
	assert.Equal(t, []irisrt.Tensor{{Ptr: 1, DType: irismodel.F32, Len: 1}, {Ptr: 2, DType: irismodel.F32, Len: 1}, {Ptr: 3, DType: irismodel.F32, Len: 1}}, ts, "ts is not changed")
	d, ok := fixtures.DemoTable(fixtures.Path(t, "demo")).Lookup("demo", "push")
	require.True(t, ok)
	assert.Nil(t, d.SampleParams(2, 0))
	assert.Equal(t, ts, d.TensorsFor(1, ts, nil))
}

// TestAutoChoiceAlike (issue 25 family 11): the auto variant is chosen
// from what every rank knows alike, the shapes and the sizes, not the
// tensors each passes: the root, which alone passes a root-only output,
// and the other ranks, which pass the zero Tensor, choose the same
// variant, make the same plan and launch it.
func TestAutoChoiceAlike(t *testing.T) {
	fake := fakegpu.New(2)
	t.Setenv("IRISGEN_KERNELS", "")
	tab := fixtures.RootedTable(fixtures.Path(t))
	c := &tab.Collectives[0]
	// input and shared hold 8 f32 (32 bytes), output [world, 8] (64):
	// only the ranks that pass output would see more than 32 bytes.
	c.Auto = []irismodel.AutoRule{{MaxBytes: 32, Variant: "pull"}, {Variant: "push"}}
	irisimpl.Register(tab)
	fake.AddModule(tab.Embedded.(fstest.MapFS)["kernels/rooted.fake"].Data, []string{"irisgen_rooted_pull_f32", "irisgen_rooted_push_f32"},
		map[string][]byte{irismodel.SpecHashSymbol("rooted"): append([]byte("h3"), 0)})
	w := fixtures.NewFakeWorld(t, 2, irisrt.Options{Platform: fake})
	assert.Equal(t, "push", c.Choose(2, c.LargestBytes(2, irismodel.F32, []int64{8})))
	assert.Equal(t, "pull", c.Choose(2, c.LargestBytes(2, irismodel.F32, []int64{4})))
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		ts, _ := fixtures.RootedTensors(t, r, 8)
		if r.Rank() != 0 {
			ts[0], ts[1] = irisrt.Tensor{}, irisrt.Tensor{} // root 0's input, dst 0's output
		}
		return c.RunParams(r, r.Stream(), irismodel.AutoVariant, irismodel.F32, "", nil, ts, fixtures.RootedParams(0, 1, 0.5, 0), irismodel.BarrierDevice)
	}))
	ls := fake.Launches()
	require.Len(t, ls, 2)
	for _, l := range ls {
		assert.Equal(t, "irisgen_rooted_push_f32", l.Function, "rank %d", l.Device)
	}
}

package irisimpl_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/internal/fixtures"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTableRules(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*irisimpl.Table)
		want string
	}{
		{"no variants", func(t *irisimpl.Table) { t.Collectives[1].Variants = nil }, "no name or no variants"},
		{"bad dtype", func(t *irisimpl.Table) { t.Collectives[0].DTypes = []irismodel.DType{irismodel.F32, 99} }, "invalid dtype 99"},
		{"bad dir", func(t *irisimpl.Table) { t.Collectives[0].Tensors[0].Dir = "sideways" }, `unknown dir "sideways"`},
		{"empty shape", func(t *irisimpl.Table) { t.Collectives[0].Tensors[0].Shape = nil }, "empty shape"},
		{"blocks in a user tensor", func(t *irisimpl.Table) { t.Collectives[0].Tensors[0].Shape = []irismodel.Dim{irismodel.DimBlocks} }, "only workspace shapes may use blocks"},
		{"unknown size", func(t *irisimpl.Table) { t.Collectives[0].Tensors[0].Shape = []irismodel.Dim{irismodel.DimSize(2)} }, "neither a constant nor a known symbol"},
		{"zero dim", func(t *irisimpl.Table) { t.Collectives[0].Tensors[0].Shape = []irismodel.Dim{0} }, "neither a constant"},
		{"no data type", func(t *irisimpl.Table) { t.Collectives[0].DTypes = nil }, "takes the plan's data type"},
		{"index types", func(t *irisimpl.Table) {
			t.Collectives[0].Tensors[2].Index = []irismodel.DType{irismodel.I32, irismodel.I64}
		}, "do not start with its dtype"},
		{"size from a workspace", func(t *irisimpl.Table) { t.Collectives[0].Sizes[0].From = 4 }, "not a user tensor"},
		{"size from the wrong tensor", func(t *irisimpl.Table) { t.Collectives[0].Sizes[0].From = 2 }, "names it 0 times"},
		{"uses", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].Uses = []irisimpl.Use{irisimpl.UseLocal} }, "1 uses for 6 tensors"},
		{"bad use", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].Uses[0] = 9 }, "unknown use 9"},
		{"no modes", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].Barriers = nil }, "no barrier modes"},
		{"bad mode", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].Barriers = []irismodel.Barrier{7} }, "unknown barrier mode 7"},
		{"capturable not a mode", func(t *irisimpl.Table) {
			t.Collectives[0].Variants[1].Capturable = []irismodel.Barrier{irismodel.BarrierNone}
		}, "capturable mode none"},
		{"launch shape", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].Threads = 0 }, "launch shape 0 threads"},
		{"threads past the block limit", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].Threads = irismodel.MaxThreads + 1 }, "launch shape 1025 threads"},
		{"blocks past the limit", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].MaxBlocks = irismodel.MaxBlocks + 1 }, "1025 blocks"},
		{"min blocks past max blocks", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].MinBlocks = 5 }, "MinBlocks 5, want 0 or 1..MaxBlocks (4)"},
		{"negative min blocks", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].MinBlocks = -1 }, "MinBlocks -1"},
		{"auto names unknown", func(t *irisimpl.Table) { t.Collectives[0].Auto[1].Variant = "ring" }, `unknown variant "ring"`},
		{"own block on a kernel", func(t *irisimpl.Table) { t.Collectives[0].Variants[0].OwnBlock = true }, "OwnBlock on a kernel variant, or with InPlace"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab := fixtures.DemoTable(fixtures.Path(t))
			c.edit(tab)
			irisimpl.Register(tab)
			err := tab.Usable()
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "regenerate the package")
			assert.Nil(t, tab.Entries(), "an unusable table lists nothing")
			w := fixtures.NewFakeWorld(t, 1, irisrt.Options{})
			_, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](w.Rank(0), &tab.Collectives[0].Variants[0], irismodel.F32, "sum", 8, 2)
			require.ErrorContains(t, err, c.want, "plans of it fail with the reason")
		})
	}
	require.NoError(t, fixtures.DemoTable("ok").Prepare())
}

func TestKernelNames(t *testing.T) {
	tab := fixtures.DemoTable("example.com/names")
	require.NoError(t, tab.Prepare())
	var got []string
	for _, v := range []*irisimpl.Variant{&tab.Collectives[0].Variants[0], &tab.Collectives[0].Variants[1]} {
		for _, dt := range []irismodel.DType{irismodel.F32, irismodel.BF16} {
			for _, op := range []string{"sum", "max"} {
				got = append(got, v.Kernel(dt, op))
			}
		}
	}
	assert.Equal(t, fixtures.DemoKernels, got)
	assert.Equal(t, "irisgen_bar_device", tab.Collectives[1].Variants[0].Kernel(0, ""))
	assert.Equal(t, "demo/pull", tab.Collectives[0].Variants[1].Label())
}

func TestConstructorChecks(t *testing.T) {
	w, tab, _ := fixtures.DemoWorld(t, 1)
	r := w.Rank(0)
	push := &tab.Collectives[0].Variants[0]
	_, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, push, irismodel.F16, "sum", 8, 2)
	var ue *irisrt.UnsupportedError
	require.ErrorAs(t, err, &ue)
	assert.True(t, errors.Is(err, irisrt.ErrUnsupported))
	assert.Equal(t, "demo/push: dtype f16 is not supported; the spec allows f32, bf16", err.Error())
	_, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](r, push, irismodel.F32, "min", 8, 2)
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "demo/push: op min is not supported; the spec allows sum, max", err.Error())
	_, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](r, push, irismodel.F32, "sum", 8)
	require.EqualError(t, err, "demo/push: 1 sizes, want 2 (n, k)")
	_, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](r, push, irismodel.F32, "sum", 8, -1)
	require.EqualError(t, err, "demo/push: size parameter k = -1, want >= 0")
	_, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](r, push, irismodel.F32, "sum", 1<<62, 2)
	var se *irisrt.ShapeError
	require.ErrorAs(t, err, &se, "shape overflow is a typed error")
	require.ErrorContains(t, err, `tensor "input": shape [n] does not fit in 2^63 bytes`)
	_, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](r, nil, irismodel.F32, "sum", 8, 2)
	require.ErrorContains(t, err, "never registered")
	assert.Equal(t, r.Heap().Size()-core.ControlBytes, r.Heap().FreeBytesLeft(), "refused constructors allocate nothing")

	// Without dtypes and ops both are ignored.
	b, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[1].Variants[0], irismodel.BF16, "max")
	require.NoError(t, err)
	assert.Equal(t, "irisgen_bar_device", irisimpl.Spec(b.Plan()).Kernel)
	require.NoError(t, b.Close())
}

// TestPlanShape: the grid follows the largest user tensor, workspace is
// sized with blocks and world and allocated only where the variant uses it,
// staging holds the imported tensor, and the plan carries the package.
func TestPlanShape(t *testing.T) {
	w, tab, _ := fixtures.DemoWorld(t, 2)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		// push: output [world, n] of f32 is the largest: 2*1000*4 bytes of
		// 256*16-byte blocks: 2 blocks (at most 4).
		p, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "max", 1000, 3)
		require.NoError(t, err)
		s := irisimpl.Spec(p.Plan())
		assert.Equal(t, core.PlanSpec{Package: tab.ImportPath, Embedded: tab.Embedded, KernelsCommand: tab.KernelsCommand, Op: "demo", Variant: "push", Module: "demo", SpecHash: "h1",
			Kernel: "irisgen_demo_push_f32_max", Threads: 256, Blocks: 2, Barriers: fixtures.AllModes, Capturable: fixtures.DeviceNone,
			Workspace: []core.Buffer{{Name: "scratch", Bytes: 2 * 2 * 4 * 8}}, Sizes: []int64{1000, 3}}, s)
		assert.True(t, r.Heap().Contains(irisimpl.PlanBuffer(p.Plan(), "scratch"), 2*2*4*8))
		// pull, bf16: 2*1000*2 bytes of 512*4-byte blocks: 2; staging for
		// input; neither workspace.
		q, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[1], irismodel.BF16, "sum", 1000, 3)
		require.NoError(t, err)
		s = irisimpl.Spec(q.Plan())
		assert.Equal(t, 2, s.Blocks)
		assert.Equal(t, "irisgen_demo_pull_bf16_sum", s.Kernel)
		assert.Empty(t, s.Workspace)
		assert.Equal(t, []core.Buffer{{Name: "input", Bytes: 2000}}, s.Staging)
		// Clamped to MaxBlocks.
		big, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "sum", 1<<20, 3)
		require.NoError(t, err)
		assert.Equal(t, 4, irisimpl.Spec(big.Plan()).Blocks)
		return errors.Join(big.Close(), q.Close(), p.Close())
	}))
}

// TestPlanShapeSharedGPUs: when ranks share GPUs every plan's grid is cut
// to max_blocks / (ranks on a GPU), so the ranks' grids of one kernel fit
// on the GPU together; enumerated over the ways ranks can share.
func TestPlanShapeSharedGPUs(t *testing.T) {
	t.Setenv("IRISGEN_KERNELS", "")
	for _, c := range []struct{ gpus, world, push, pull int }{
		{2, 2, 4, 8}, {1, 2, 2, 4}, {1, 3, 1, 2}, {2, 3, 2, 4}, {1, 4, 1, 2}, {1, 8, 1, 1}, {4, 8, 2, 4},
	} {
		tab := fixtures.DemoTable(fixtures.Path(t, fmt.Sprintf("%d-%d", c.gpus, c.world)))
		irisimpl.Register(tab)
		p := fakegpu.New(c.gpus)
		fixtures.AddDemoModules(p, tab)
		w := fixtures.NewFakeWorld(t, c.world, irisrt.Options{Platform: p, ShareGPUs: true})
		require.NoError(t, w.Run(func(r *irisrt.Rank) error {
			for i, want := range []int{c.push, c.pull} {
				pl, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[i], irismodel.F32, "sum", 1<<14, 3)
				if err != nil {
					return err
				}
				assert.Equal(t, want, irisimpl.Spec(pl.Plan()).Blocks, "%d GPUs, world %d, variant %d", c.gpus, c.world, i)
				if err := pl.Close(); err != nil {
					return err
				}
			}
			return nil
		}))
	}
}

// TestPlanShapeMinBlocks: with MinBlocks, a plan below it launches
// smaller blocks (its PlanSpec's Threads, the launch's block), sizes its
// workspace with the grid it launches, and keeps the spec's shape where the
// size gives MinBlocks blocks anyway; where ranks share a GPU, MinBlocks is
// clamped to the lowered largest grid. Enumerated over those cases.
func TestPlanShapeMinBlocks(t *testing.T) {
	t.Setenv("IRISGEN_KERNELS", "")
	for _, c := range []struct {
		gpus, world int
		n, k        int64
		blocks      int
		threads     uint32
	}{
		// push: 256 threads, 16-byte vectors, max 4 blocks, min 4; output
		// [world, n] of f32 is the largest tensor.
		{2, 2, 1000, 3, 4, 128},    // 8000 bytes, 500 vectors: 2 blocks of 256 before
		{2, 2, 64, 3, 1, 64},       // 512 bytes, 32 vectors: 1 block either way, of 64 threads at least
		{2, 2, 2048, 3, 4, 256},    // 16 KiB, 1024 vectors: 4 blocks of 256 anyway
		{2, 2, 1 << 14, 3, 4, 256}, // 128 KiB: clamped to max_blocks as before
		{2, 2, 0, 0, 1, 256},       // nothing to launch: the spec's shape
		{1, 2, 1000, 3, 2, 256},    // shared GPU: max 2, so min 2: 2 blocks of 256 already
		{1, 2, 200, 3, 2, 64},      // shared GPU: 100 vectors, min 2: 2 blocks of 64
	} {
		what := fmt.Sprintf("%d GPUs, world %d, n %d", c.gpus, c.world, c.n)
		tab := fixtures.DemoTable(fixtures.Path(t, fmt.Sprintf("%d-%d-%d", c.gpus, c.world, c.n)))
		tab.Collectives[0].Variants[0].MinBlocks = 4
		irisimpl.Register(tab)
		p := fakegpu.New(c.gpus)
		fixtures.AddDemoModules(p, tab)
		w := fixtures.NewFakeWorld(t, c.world, irisrt.Options{Platform: p, ShareGPUs: c.world > c.gpus})
		require.NoError(t, w.Run(func(r *irisrt.Rank) error {
			pl, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "sum", c.n, c.k)
			if err != nil {
				return err
			}
			s := irisimpl.Spec(pl.Plan())
			assert.Equal(t, [2]int{c.blocks, int(c.threads)}, [2]int{s.Blocks, s.Threads}, "%s: blocks x threads", what)
			assert.Equal(t, []core.Buffer{{Name: "scratch", Bytes: int64(c.blocks) * int64(c.world) * 4 * 8}}, s.Workspace, "%s: workspace [blocks, world, 4]", what)
			if c.n == 0 {
				return pl.Close()
			}
			ts := fixtures.DemoTensors(t, r, c.n, c.k, true, true, false, false)
			return errors.Join(pl.LaunchTensors(r.Stream(), ts, irismodel.BarrierDevice), r.Device().StreamSynchronize(r.Stream()), pl.Close())
		}), what)
		if c.n == 0 {
			continue
		}
		ls := p.Launches()
		require.Len(t, ls, c.world, what)
		for _, l := range ls {
			assert.Equal(t, gpu.Dim3{X: uint32(c.blocks), Y: 1, Z: 1}, l.Grid, what)
			assert.Equal(t, gpu.Dim3{X: c.threads, Y: 1, Z: 1}, l.Block, what)
		}
	}
}

// TestDependentLaunches: a plan launches its kernel as a programmatic
// dependent where the device does them, plainly where it does not and where
// ranks share a GPU (a rank's next kernel, resident early, could hold the
// room a peer's kernel needs); enumerated over those cases.
func TestDependentLaunches(t *testing.T) {
	t.Setenv("IRISGEN_KERNELS", "")
	for _, c := range []struct {
		gpus, world int
		on, want    bool
	}{
		{1, 1, true, true}, {2, 2, true, true}, {1, 1, false, false}, {1, 2, true, false}, {2, 4, true, false},
	} {
		what := fmt.Sprintf("%d GPUs, world %d, dependent launches %v", c.gpus, c.world, c.on)
		tab := fixtures.DemoTable(fixtures.Path(t, fmt.Sprintf("%d-%d-%v", c.gpus, c.world, c.on)))
		irisimpl.Register(tab)
		p := fakegpu.New(c.gpus)
		p.SetDependentLaunches(c.on)
		fixtures.AddDemoModules(p, tab)
		w := fixtures.NewFakeWorld(t, c.world, irisrt.Options{Platform: p, ShareGPUs: c.world > c.gpus})
		require.NoError(t, w.Run(func(r *irisrt.Rank) error {
			pl, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "sum", 16, 4)
			if err != nil {
				return err
			}
			ts := fixtures.DemoTensors(t, r, 16, 4, true, true, false, false)
			return errors.Join(pl.LaunchTensors(r.Stream(), ts, irismodel.BarrierDevice), r.Device().StreamSynchronize(r.Stream()), pl.Close())
		}), what)
		ls := p.Launches()
		require.Len(t, ls, c.world, what)
		for _, l := range ls {
			assert.Equal(t, c.want, l.Dependent, "%s: device %d", what, l.Device)
		}
	}
}

// TestLaunchChecks enumerates the launch rules of both variants: each
// refusal comes back typed, in the documented order, with nothing launched;
// what passes is launched with the arguments in the kernel's layout.
func TestLaunchChecks(t *testing.T) {
	w, tab, fake := fixtures.DemoWorld(t, 1)
	r := w.Rank(0)
	s := r.Stream()
	push, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "sum", 16, 4)
	require.NoError(t, err)
	ts := fixtures.DemoTensors(t, r, 16, 4, true, true, false, false)
	in, out, ids, scale := ts[0], ts[1], ts[2], ts[3]
	with := func(i int, x irisrt.Tensor) []irisrt.Tensor {
		c := append([]irisrt.Tensor(nil), ts...)
		c[i] = x
		return c
	}
	offHeap := fixtures.DemoTensors(t, r, 16, 4, false, false, false, false)
	// A hand-made tensor into heap memory that is no live allocation: input is
	// only touched locally, so no placement rule looks at it, and checkLive
	// must.
	freed, err := r.Heap().Alloc(irismodel.F32, 16)
	require.NoError(t, err)
	require.NoError(t, r.Heap().Free(freed))
	byHand := irisrt.Tensor{Ptr: freed.Ptr, DType: irismodel.F32, Len: 16}
	fake.ClearLaunches()
	var (
		de *irisrt.DTypeError
		se *irisrt.ShapeError
		pe *irisrt.PlacementError
		ae *irisrt.AliasError
		me *irisrt.BarrierModeError
		ce *irisrt.CaptureError
		lv *irisrt.LiveError
	)
	for _, c := range []struct {
		name   string
		ts     []irisrt.Tensor
		mode   irismodel.Barrier
		target any
		want   string
	}{
		{"count", ts[:3], irismodel.BarrierDevice, nil, "demo/push: 3 tensors, want 4 (input, output, ids, scale)"},
		{"dtype", with(0, irisrt.Tensor{Ptr: in.Ptr, DType: irismodel.BF16, Len: 16}), irismodel.BarrierDevice, &de, `tensor "input" has dtype bf16, want f32`},
		{"length", with(1, out.Slice(0, 15)), irismodel.BarrierDevice, &se, `tensor "output" has 15 elements, want 16`},
		{"nil", with(0, irisrt.Tensor{DType: irismodel.F32, Len: 16}), irismodel.BarrierDevice, &se, "nil device pointer"},
		{"index dtype", with(2, irisrt.Tensor{Ptr: ids.Ptr, DType: irismodel.F32, Len: 4}), irismodel.BarrierDevice, &de, "want i64 or i32"},
		{"index length", with(2, irisrt.Tensor{Ptr: ids.Ptr, DType: irismodel.I32, Len: 5}), irismodel.BarrierDevice, &se, `tensor "ids" has 5 elements, want 4`},
		{"optional given wrong", with(3, irisrt.Tensor{Ptr: scale.Ptr, DType: irismodel.F32, Len: 3}), irismodel.BarrierDevice, &se, `tensor "scale" has 3 elements`},
		{"heap", with(1, offHeap[1]), irismodel.BarrierDevice, &pe, `tensor "output"`},
		{"dtype before heap", with(1, irisrt.Tensor{Ptr: offHeap[1].Ptr, DType: irismodel.BF16, Len: 16}), irismodel.BarrierDevice, &de, `"output" has dtype bf16`},
		{"alias forbidden", with(0, out.Slice(0, 16)), irismodel.BarrierDevice, &ae, `tensors "input"`},
		{"heap before alias", []irisrt.Tensor{offHeap[1], offHeap[1], ids, scale}, irismodel.BarrierDevice, &pe, `tensor "output"`},
		{"mode", ts, irismodel.Barrier(9), &me, "not supported"},
		{"freed heap memory, local tensor", with(0, byHand), irismodel.BarrierDevice, &lv, `tensor "input"`},
	} {
		err := push.LaunchTensors(s, c.ts, c.mode)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
		if c.target != nil {
			assert.True(t, errors.As(err, c.target), "%s: %T", c.name, err)
		}
	}
	assert.Empty(t, fake.Launches(), "refused launches launch nothing")

	// Passing launches: the optional tensor left out, ids as i32.
	i32ids := irisrt.Tensor{Ptr: ids.Ptr, DType: irismodel.I32, Len: 4}
	require.NoError(t, push.LaunchTensors(s, []irisrt.Tensor{in, out, i32ids, {}}, irismodel.BarrierNone))
	require.NoError(t, push.LaunchTensors(s, ts, irismodel.BarrierDevice))
	ls := fake.Launches()
	require.Len(t, ls, 2)
	le := binary.LittleEndian
	a := ls[0].Args
	assert.Equal(t, "irisgen_demo_push_f32_sum", ls[0].Function)
	assert.Equal(t, gpu.Dim3{X: 1, Y: 1, Z: 1}, ls[0].Grid)
	assert.Equal(t, gpu.Dim3{X: 256, Y: 1, Z: 1}, ls[0].Block)
	require.Len(t, a, core.CtxBytes+6*8+2*8+8, "6 tensor pointers, 2 sizes, 1 index width")
	for i, want := range []uint64{uint64(in.Ptr), uint64(out.Ptr), uint64(ids.Ptr), 0, uint64(irisimpl.PlanBuffer(push.Plan(), "scratch")), 0, 16, 4, 4} {
		assert.Equal(t, want, le.Uint64(a[core.CtxBytes+8*i:]), "argument %d", i)
	}
	assert.Equal(t, uint32(0), le.Uint32(a[core.CtxOffBarrier:]), "mode none")
	a = ls[1].Args
	assert.Equal(t, uint64(scale.Ptr), le.Uint64(a[core.CtxBytes+3*8:]), "the optional tensor given")
	assert.Equal(t, uint64(8), le.Uint64(a[core.CtxBytes+8*8:]), "i64 ids")
	assert.Equal(t, uint32(1), le.Uint32(a[core.CtxOffBarrier:]), "mode device")

	// pull: in place allowed, input imported.
	pull, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[1], irismodel.F32, "sum", 16, 4)
	require.NoError(t, err)
	buf := fixtures.DemoTensors(t, r, 33, 4, true, true, true, true)[1] // 33 elements
	fake.ClearLaunches()
	err = pull.LaunchTensors(s, []irisrt.Tensor{buf.Slice(1, 16), buf.Slice(0, 16), ids, scale}, irismodel.BarrierDevice)
	require.ErrorAs(t, err, &ae)
	assert.True(t, ae.InPlace, "a partial overlap is refused where in place is allowed")
	err = pull.LaunchTensors(s, []irisrt.Tensor{buf.Slice(0, 16), buf.Slice(0, 16), ids, scale}, irismodel.BarrierNone)
	require.ErrorAs(t, err, &me, "pull does not support mode none")
	require.NoError(t, pull.LaunchTensors(s, []irisrt.Tensor{buf.Slice(0, 16), buf.Slice(0, 16), ids, scale}, irismodel.BarrierDevice), "the same tensor is fine")
	require.NoError(t, fake.Write(offHeap[0].Ptr, bytes.Repeat([]byte{7}, 64)))
	require.NoError(t, pull.LaunchTensors(s, []irisrt.Tensor{offHeap[0], buf.Slice(16, 16), ids, scale}, irismodel.BarrierHost))
	ls = fake.Launches()
	require.Len(t, ls, 2)
	assert.Equal(t, uint64(buf.Ptr), le.Uint64(ls[0].Args[core.CtxBytes:]), "on the heap: used as it is")
	assert.Equal(t, uint64(irisimpl.PlanBuffer(pull.Plan(), "input")), le.Uint64(ls[1].Args[core.CtxBytes:]), "off the heap: staged")
	staged, err := fake.Read(irisimpl.PlanBuffer(pull.Plan(), "input"), 64)
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte{7}, 64), staged)
	for i := 4; i < 6; i++ {
		assert.Zero(t, le.Uint64(ls[1].Args[core.CtxBytes+8*i:]), "workspace %d is unused by pull", i)
	}

	// Host mode and capture.
	defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
	require.NoError(t, r.Device().BeginCapture(s, gpu.CaptureGlobal))
	require.ErrorAs(t, push.LaunchTensors(s, ts, irismodel.BarrierHost), &ce)
	require.NoError(t, push.LaunchTensors(s, ts, irismodel.BarrierDevice), "device mode is captured")
	_, err = r.Device().EndCapture(s)
	require.NoError(t, err)
	require.NoError(t, errors.Join(pull.Close(), push.Close()))
	err = (&irisimpl.VariantPlan{}).LaunchTensors(s, nil, irismodel.BarrierDevice)
	require.ErrorContains(t, err, "never made")

	bar, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[1].Variants[0], 0, "")
	require.NoError(t, err)
	require.EqualError(t, bar.LaunchTensors(s, ts[:1], irismodel.BarrierDevice), "bar/device takes no tensors, got 1")
	require.NoError(t, bar.LaunchTensors(s, nil, irismodel.BarrierDevice))
	require.NoError(t, bar.Close())
}

// TestRun: the convenience path reads sizes from the tensors, takes the
// given ones in order, resolves auto, caches one plan per variant, dtype,
// op and sizes, and refuses to make one while capturing.
func TestRun(t *testing.T) {
	w, tab, fake := fixtures.DemoWorld(t, 2)
	demo := &tab.Collectives[0]
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		s := r.Stream()
		ts := fixtures.DemoTensors(t, r, 16, 4, true, true, true, true)
		require.NoError(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{4}, ts, irismodel.BarrierDevice))
		require.NoError(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{4}, ts, irismodel.BarrierDevice))
		assert.Equal(t, 1, irisimpl.CachedPlans(r), "one plan for the same call")
		require.NoError(t, demo.Run(r, s, "push", irismodel.F32, "max", []int64{4}, ts, irismodel.BarrierDevice))
		assert.Equal(t, 2, irisimpl.CachedPlans(r), "another op is another plan")
		// auto: 64 bytes is the largest tensor here (output [2, 8] f32): pull.
		small := fixtures.DemoTensors(t, r, 8, 2, true, true, true, true)
		require.NoError(t, demo.Run(r, s, irismodel.AutoVariant, irismodel.F32, "sum", []int64{2}, small, irismodel.BarrierDevice))
		assert.Equal(t, 3, irisimpl.CachedPlans(r))
		require.ErrorContains(t, demo.Run(r, s, "ring", irismodel.F32, "sum", []int64{4}, ts, irismodel.BarrierDevice), `demo: unknown variant "ring" (variants: push, pull, auto)`)
		require.EqualError(t, demo.Run(r, s, "push", irismodel.F32, "sum", nil, ts, irismodel.BarrierDevice), "demo: 0 sizes given, want 1")
		require.EqualError(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{4}, ts[:2], irismodel.BarrierDevice), "demo: 2 tensors, want 4 (input, output, ids, scale)")
		// k given wrong: the plan is made for k=5 and the launch refuses ids of 4.
		var se *irisrt.ShapeError
		require.ErrorAs(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{5}, ts, irismodel.BarrierDevice), &se)

		// Capture: a cached plan launches, a new one is refused.
		require.NoError(t, r.Device().BeginCapture(s, gpu.CaptureRelaxed))
		require.NoError(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{4}, ts, irismodel.BarrierDevice))
		var ce *irisrt.CaptureError
		require.ErrorAs(t, demo.Run(r, s, "push", irismodel.BF16, "sum", []int64{4}, ts, irismodel.BarrierDevice), &ce)
		assert.Contains(t, ce.Error(), "demo/push")
		_, err := r.Device().EndCapture(s)
		require.NoError(t, err)
		return r.HostBarrier(s)
	}))
	var names []string
	for _, l := range fake.Launches() {
		if l.Device == 0 {
			names = append(names, l.Function)
		}
	}
	require.GreaterOrEqual(t, len(names), 4, "%v", names)
	assert.Equal(t, []string{"irisgen_demo_push_f32_sum", "irisgen_demo_push_f32_sum", "irisgen_demo_push_f32_max", "irisgen_demo_pull_f32_sum"}, names[:4])
}

// TestInferSizes enumerates how the convenience call reads sizes: from a
// tensor alone, divided by world and constants, in rounds that depend on
// each other (moe_dispatch's chain), and 0 (refused by the plan) where a
// divisor is 0.
func TestInferSizes(t *testing.T) {
	c := &irisimpl.Collective{
		Name: "chain", DTypes: []irismodel.DType{irismodel.F32},
		Sizes: []irisimpl.SizeParam{{Name: "t", From: 0}, {Name: "h", From: 1}, {Name: "e", From: -1}, {Name: "cap", From: 2}},
		Tensors: []irismodel.TensorDesc{
			{Name: "tokens", Dir: irismodel.In, Shape: []irismodel.Dim{irismodel.DimSize(0), irismodel.DimSize(1)}},
			{Name: "recv", Dir: irismodel.Out, Shape: []irismodel.Dim{irismodel.DimWorld, irismodel.DimSize(3), irismodel.DimSize(1)}},
			{Name: "src", Dir: irismodel.Out, Shape: []irismodel.Dim{2, irismodel.DimWorld, irismodel.DimSize(3)}},
		},
		Variants: []irisimpl.Variant{{Name: "v", Uses: []irisimpl.Use{irisimpl.UseLocal, irisimpl.UseHeap, irisimpl.UseHeap}, Barriers: fixtures.DeviceOnly, Threads: 64, MaxBlocks: 1, VectorBytes: 16}},
	}
	tab := &irisimpl.Table{ImportPath: "example.com/infer", Collectives: []irisimpl.Collective{*c}}
	require.NoError(t, tab.Prepare())
	c = &tab.Collectives[0]
	sizes := make([]int64, 4)
	// world 4, cap 5, h 6, t 7, e 9.
	ts := []irisrt.Tensor{{Len: 7 * 6}, {Len: 4 * 5 * 6}, {Len: 2 * 4 * 5}}
	require.NoError(t, c.InferSizes(sizes, 4, []int64{9}, ts))
	assert.Equal(t, []int64{7, 6, 9, 5}, sizes)
	ts[2].Len = 3 // cap 0: h and t are 0 too, and the plan refuses them
	require.NoError(t, c.InferSizes(sizes, 4, []int64{9}, ts))
	assert.Equal(t, []int64{0, 0, 9, 0}, sizes)
	require.EqualError(t, c.InferSizes(sizes, 4, nil, ts), "chain: 0 sizes given, want 1")
}

// TestRegistry: a conflict of import paths fails the plans of both tables
// and no other; registering a table again is no conflict.
func TestRegistry(t *testing.T) {
	dup, otherPath := fixtures.Path(t, "dup"), fixtures.Path(t, "other")
	a, b := fixtures.DemoTable(dup), fixtures.DemoTable(dup)
	irisimpl.Register(a)
	irisimpl.Register(a)
	require.NoError(t, a.Usable())
	assert.Same(t, a, irisimpl.Registered(dup))
	irisimpl.Register(b)
	for _, tab := range []*irisimpl.Table{a, b} {
		err := tab.Usable()
		require.ErrorContains(t, err, `two generated packages in this program register the import path "`+dup+`"`)
		assert.Contains(t, err.Error(), "go generate")
	}
	w := fixtures.NewFakeWorld(t, 1, irisrt.Options{})
	_, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](w.Rank(0), &b.Collectives[1].Variants[0], 0, "")
	require.ErrorContains(t, err, "register the import path")
	require.ErrorContains(t, b.Collectives[1].Run(w.Rank(0), w.Rank(0).Stream(), "device", 0, "", nil, nil, irismodel.BarrierDevice), "register the import path")
	other := fixtures.DemoTable(otherPath)
	irisimpl.Register(other)
	require.NoError(t, other.Usable())
	assert.Nil(t, irisimpl.Registered("example.com/never"))
	// Tables lists each import path once, sorted: the first registration
	// of a conflicting path.
	var paths []string
	for _, tab := range irisimpl.Tables() {
		paths = append(paths, tab.ImportPath)
	}
	assert.True(t, slices.IsSorted(paths), "%v", paths)
	dups := 0
	for _, p := range paths {
		if p == dup {
			dups++
		}
	}
	assert.Equal(t, 1, dups, "%v", paths)
	assert.Contains(t, paths, otherPath)
	assert.Contains(t, irisimpl.Tables(), a)
}

// TestKernelSources: Options.Kernels, then $IRISGEN_KERNELS, then the
// package's embedded code objects; two packages with a collective of the
// same name each get their own module; errors name the package's command.
func TestKernelSources(t *testing.T) {
	t.Setenv("IRISGEN_KERNELS", "")
	a, b := fixtures.DemoTable(fixtures.Path(t, "a")), fixtures.DemoTable(fixtures.Path(t, "b"))
	b.Collectives[1].SpecHash = "h2-b" // same collective name, other spec
	irisimpl.Register(a)
	irisimpl.Register(b)
	p := fakegpu.New(1)
	fixtures.AddDemoModules(p, a)
	p.AddModule(b.Embedded.(fstest.MapFS)["kernels/bar.fake"].Data, []string{"irisgen_bar_device"}, map[string][]byte{irismodel.SpecHashSymbol("bar"): []byte("h2-b\x00")})
	w := fixtures.NewFakeWorld(t, 1, irisrt.Options{Platform: p})
	r := w.Rank(0)
	loadedFrom := func() []string {
		var out []string
		for _, l := range p.Launches() {
			out = append(out, l.Function)
		}
		return out
	}
	for _, tab := range []*irisimpl.Table{a, b} {
		pl, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[1].Variants[0], 0, "")
		require.NoError(t, err, tab.ImportPath)
		require.NoError(t, pl.LaunchTensors(r.Stream(), nil, irismodel.BarrierDevice))
		require.NoError(t, pl.Close())
	}
	// b's bar has another spec hash than a's: had the two shared one
	// module per collective name, b's plan would have found it stale.
	assert.Len(t, loadedFrom(), 2, "one module per (package, collective)")

	// $IRISGEN_KERNELS comes first; a stale one there is an error naming
	// the package's command.
	dir := t.TempDir()
	t.Setenv("IRISGEN_KERNELS", dir)
	stale := []byte("stale bar")
	p.AddModule(stale, []string{"irisgen_bar_device"}, map[string][]byte{irismodel.SpecHashSymbol("bar"): []byte("old\x00")})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bar.fake"), stale, 0o644))
	w2 := fixtures.NewFakeWorld(t, 1, irisrt.Options{Platform: p})
	_, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](w2.Rank(0), &a.Collectives[1].Variants[0], 0, "")
	var ke *irisrt.KernelError
	require.ErrorAs(t, err, &ke)
	assert.True(t, ke.Stale)
	assert.Contains(t, err.Error(), "of "+a.ImportPath+" is stale")
	assert.Contains(t, err.Error(), "`make demo-kernels`")
	// Not there: the embedded one.
	require.NoError(t, os.Remove(filepath.Join(dir, "bar.fake")))
	w3 := fixtures.NewFakeWorld(t, 1, irisrt.Options{Platform: p})
	pl, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](w3.Rank(0), &a.Collectives[1].Variants[0], 0, "")
	require.NoError(t, err)
	require.NoError(t, pl.Close())

	// Missing everywhere: every place looked in, and the command.
	c := fixtures.DemoTable(fixtures.Path(t, "c"))
	c.Embedded = fstest.MapFS{"kernels/README.txt": {Data: []byte("placeholder")}}
	irisimpl.Register(c)
	_, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](w3.Rank(0), &c.Collectives[1].Variants[0], 0, "")
	require.ErrorAs(t, err, &ke)
	for _, want := range []string{filepath.Join(dir, "bar.fake") + " ($IRISGEN_KERNELS)", "kernels/bar.fake embedded in " + c.ImportPath,
		"run `make demo-kernels` and rebuild the program"} {
		assert.Contains(t, err.Error(), want)
	}
	// Options.Kernels comes before everything.
	w4 := fixtures.NewFakeWorld(t, 1, irisrt.Options{Platform: p, Kernels: fstest.MapFS{"bar.fake": {Data: stale}}})
	_, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](w4.Rank(0), &a.Collectives[1].Variants[0], 0, "")
	require.ErrorAs(t, err, &ke)
	assert.True(t, ke.Stale)
}

func TestEntries(t *testing.T) {
	w, tab, _ := fixtures.DemoWorld(t, 2)
	es := tab.Entries()
	require.Len(t, es, 3)
	e, ok := tab.Lookup("demo", "pull")
	require.True(t, ok)
	_, ok = tab.Lookup("demo", "ring")
	require.False(t, ok)
	assert.Equal(t, "demo", e.Collective)
	assert.Equal(t, []string{"n", "k"}, e.Sizes)
	assert.Equal(t, []string{"sum", "max"}, e.Ops)
	assert.Equal(t, fixtures.DeviceHost, e.Barriers)
	assert.Equal(t, fixtures.DeviceOnly, e.Capturable)
	assert.Same(t, &tab.Collectives[0].Variants[1], e.Descriptor())
	var got []string
	for _, ti := range e.Tensors {
		got = append(got, fmt.Sprintf("%s %s %s remote=%v heap=%v opt=%v numel=%d elem=%s", ti.Name, ti.Dir, ti.ShapeString(), ti.Remote, ti.Heap,
			ti.Optional, ti.Numel(2, []int64{10, 3}), ti.ElemType(irismodel.BF16)))
	}
	assert.Equal(t, []string{
		"input in [n] remote=true heap=false opt=false numel=10 elem=bf16",
		"output out [world, n] remote=false heap=false opt=false numel=20 elem=bf16",
		"ids in [k] remote=false heap=false opt=false numel=3 elem=i64",
		"scale in [k] remote=false heap=false opt=true numel=3 elem=f32",
	}, got)
	assert.Equal(t, []irismodel.DType{irismodel.I64, irismodel.I32}, e.Tensors[2].Index)
	assert.Equal(t, int64(-1), e.Tensors[1].Numel(2, []int64{1 << 62, 1}), "overflow")
	push, _ := tab.Lookup("demo", "push")
	assert.True(t, push.Tensors[1].Heap && push.Tensors[1].Remote)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		ts, free, err := e.Alloc(r, irismodel.F32, []int64{10, 3})
		require.NoError(t, err)
		defer free()
		p, err := e.New(r, irismodel.F32, "sum", []int64{10, 3})
		require.NoError(t, err)
		require.NoError(t, p.LaunchTensors(r.Stream(), ts, irismodel.BarrierDevice))
		_, err = e.New(r, irismodel.F16, "sum", []int64{10, 3})
		require.ErrorIs(t, err, irisrt.ErrUnsupported)
		return p.Close()
	}))
	assert.Equal(t, "[2, world, blocks, 7]", irismodel.Shape{2, irismodel.DimWorld, irismodel.DimBlocks, 7}.String(tab.Collectives[0].SizeNames()))
	assert.Equal(t, []irisimpl.AliasPair{{"input", "output", false, false}, {"output", "ids", false, false}, {"output", "scale", false, false}}, tab.Collectives[0].Variants[0].AliasPairs())
	assert.Equal(t, []irisimpl.AliasPair{{"input", "output", true, false}, {"output", "ids", true, false}, {"output", "scale", true, false}}, tab.Collectives[0].Variants[1].AliasPairs(),
		"pull runs in place: each dir-in tensor may be the very output")
}

// TestPlansMustAgreeOnSizes (issue 25 family 11): ranks that make a plan
// of one variant for other sizes fail on every rank, with the plans named
// (not a heap mismatch, although their buffers differ too), where the
// grids and buffers agree (n 1000 and 1001) and where they do not.
func TestPlansMustAgreeOnSizes(t *testing.T) {
	w, tab, _ := fixtures.DemoWorld(t, 2)
	for _, ns := range [][2]int64{{1000, 1001}, {1000, 100000}} {
		errs := make([]error, 2)
		_ = w.Run(func(r *irisrt.Rank) error {
			_, errs[r.Rank()] = irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "sum", ns[r.Rank()], 3)
			return nil
		})
		for k, err := range errs {
			var we *irisrt.WorldError
			require.ErrorAs(t, err, &we, "rank %d, sizes %v", k, ns)
			assert.Equal(t, 1-k, we.Peer)
			assert.Contains(t, err.Error(), fmt.Sprintf("sizes [%d 3]", ns[1-k]))
			assert.Contains(t, err.Error(), "(variant, dtype, op, sizes)")
		}
		require.NoError(t, w.Run(func(r *irisrt.Rank) error { return r.HostBarrier(r.Stream()) }), "nothing left allocated")
	}
}

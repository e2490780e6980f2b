package irisrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	allModes    = []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone}
	deviceNone  = []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierNone}
	deviceHost  = []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost}
	deviceOnly  = []irismodel.Barrier{irismodel.BarrierDevice}
	demoKernels = []string{
		"irisgen_demo_push_f32_sum", "irisgen_demo_push_f32_max", "irisgen_demo_push_bf16_sum", "irisgen_demo_push_bf16_max",
		"irisgen_demo_pull_f32_sum", "irisgen_demo_pull_f32_max", "irisgen_demo_pull_bf16_sum", "irisgen_demo_pull_bf16_max",
	}
)

// demoTable is a hand-built descriptor with every kind of entry the
// generator writes: dtypes and ops, a size read from a tensor and one
// given, an index tensor of two dtypes, an optional tensor, a workspace
// shaped by blocks and world, one a variant leaves unused, placements any,
// import and heap, both aliasing rules, an auto table, and a collective
// without tensors.
func demoTable(importPath string) *Table {
	return &Table{
		ImportPath: importPath, KernelsCommand: "make demo-kernels",
		Embedded: fstest.MapFS{
			"kernels/demo.fake": {Data: []byte("demo image of " + importPath)},
			"kernels/bar.fake":  {Data: []byte("bar image of " + importPath)},
		},
		Collectives: []Collective{{
			Name: "demo", SpecHash: "h1", DTypes: []irismodel.DType{irismodel.F32, irismodel.BF16}, Ops: []string{"sum", "max"},
			Sizes: []SizeParam{{Name: "n", From: 0}, {Name: "k", From: -1}},
			Tensors: []irismodel.TensorDesc{
				{Name: "input", Dir: irismodel.In, Shape: []irismodel.Dim{irismodel.DimSize(0)}},
				{Name: "output", Dir: irismodel.Out, Shape: []irismodel.Dim{irismodel.DimWorld, irismodel.DimSize(0)}},
				{Name: "ids", Dir: irismodel.In, Shape: []irismodel.Dim{irismodel.DimSize(1)}, DType: irismodel.I64, Index: []irismodel.DType{irismodel.I64, irismodel.I32}},
				{Name: "scale", Dir: irismodel.In, Shape: []irismodel.Dim{irismodel.DimSize(1)}, DType: irismodel.F32, Optional: true},
				{Name: "scratch", Dir: irismodel.Workspace, Shape: []irismodel.Dim{irismodel.DimBlocks, irismodel.DimWorld, 4}, DType: irismodel.U64},
				{Name: "spare", Dir: irismodel.Workspace, Shape: []irismodel.Dim{irismodel.DimSize(0)}},
			},
			Variants: []Variant{
				{Name: "push", Uses: []Use{UseLocal, UseHeap, UseLocal, UseLocal, UseHeap, Unused},
					Barriers: allModes, Capturable: deviceNone, Threads: 256, MaxBlocks: 4, VectorBytes: 16},
				{Name: "pull", Uses: []Use{UseImport, UseLocal, UseLocal, UseLocal, Unused, Unused}, InPlace: true,
					Barriers: deviceHost, Capturable: deviceOnly, Threads: 512, MaxBlocks: 8, VectorBytes: 4},
			},
			Auto: []irismodel.AutoRule{{World: 2, MaxBytes: 64, Variant: "pull"}, {Variant: "push"}},
		}, {
			Name: "bar", SpecHash: "h2",
			Variants: []Variant{{Name: "device", Barriers: deviceHost, Capturable: deviceOnly, Threads: 64, MaxBlocks: 1, VectorBytes: 16}},
		}},
	}
}

// addDemoModules teaches the fake platform the code objects t embeds.
func addDemoModules(p *fakegpu.Platform, t *Table) {
	for _, c := range []struct {
		file, module, hash string
		kernels            []string
	}{{"kernels/demo.fake", "demo", "h1", demoKernels}, {"kernels/bar.fake", "bar", "h2", []string{"irisgen_bar_device"}}} {
		image := t.Embedded.(fstest.MapFS)[c.file].Data
		p.AddModule(image, c.kernels, map[string][]byte{irismodel.SpecHashSymbol(c.module): append([]byte(c.hash), 0)})
	}
}

// demoWorld registers a fresh demo table under a path of the test's own and
// starts a fake world of n ranks that finds its code objects embedded.
func demoWorld(t *testing.T, n int) (*World, *Table, *fakegpu.Platform) {
	t.Helper()
	t.Setenv("IRISGEN_KERNELS", "")
	tab := demoTable("example.com/" + t.Name())
	Register(tab)
	p := fakegpu.New(n)
	addDemoModules(p, tab)
	return newFakeWorld(t, n, Options{Platform: p}), tab, p
}

// demoTensors allocates demo's user tensors for n and k on r: on the heap
// where onHeap says so.
func demoTensors(t *testing.T, r *Rank, n, k int64, onHeap ...bool) []Tensor {
	t.Helper()
	specs := []struct {
		dt  irismodel.DType
		len int64
	}{{irismodel.F32, n}, {irismodel.F32, int64(r.World()) * n}, {irismodel.I64, k}, {irismodel.F32, k}}
	var ts []Tensor
	for i, s := range specs {
		if onHeap[i] {
			x, err := r.Heap().Alloc(s.dt, s.len)
			require.NoError(t, err)
			ts = append(ts, x)
			continue
		}
		ptr, err := r.Device().Alloc(s.len*s.dt.Size(), false)
		require.NoError(t, err)
		ts = append(ts, Tensor{Ptr: ptr, DType: s.dt, Len: s.len})
	}
	return ts
}

func TestTableRules(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Table)
		want string
	}{
		{"no variants", func(t *Table) { t.Collectives[1].Variants = nil }, "no name or no variants"},
		{"bad dtype", func(t *Table) { t.Collectives[0].DTypes = []irismodel.DType{irismodel.F32, 99} }, "invalid dtype 99"},
		{"bad dir", func(t *Table) { t.Collectives[0].Tensors[0].Dir = "sideways" }, `unknown dir "sideways"`},
		{"empty shape", func(t *Table) { t.Collectives[0].Tensors[0].Shape = nil }, "empty shape"},
		{"blocks in a user tensor", func(t *Table) { t.Collectives[0].Tensors[0].Shape = []irismodel.Dim{irismodel.DimBlocks} }, "only workspace shapes may use blocks"},
		{"unknown size", func(t *Table) { t.Collectives[0].Tensors[0].Shape = []irismodel.Dim{irismodel.DimSize(2)} }, "neither a constant nor a known symbol"},
		{"zero dim", func(t *Table) { t.Collectives[0].Tensors[0].Shape = []irismodel.Dim{0} }, "neither a constant"},
		{"no data type", func(t *Table) { t.Collectives[0].DTypes = nil }, "takes the plan's data type"},
		{"index types", func(t *Table) { t.Collectives[0].Tensors[2].Index = []irismodel.DType{irismodel.I32, irismodel.I64} }, "do not start with its dtype"},
		{"size from a workspace", func(t *Table) { t.Collectives[0].Sizes[0].From = 4 }, "not a user tensor"},
		{"size from the wrong tensor", func(t *Table) { t.Collectives[0].Sizes[0].From = 2 }, "names it 0 times"},
		{"uses", func(t *Table) { t.Collectives[0].Variants[0].Uses = []Use{UseLocal} }, "1 uses for 6 tensors"},
		{"bad use", func(t *Table) { t.Collectives[0].Variants[0].Uses[0] = 9 }, "unknown use 9"},
		{"no modes", func(t *Table) { t.Collectives[0].Variants[0].Barriers = nil }, "no barrier modes"},
		{"bad mode", func(t *Table) { t.Collectives[0].Variants[0].Barriers = []irismodel.Barrier{7} }, "unknown barrier mode 7"},
		{"capturable not a mode", func(t *Table) { t.Collectives[0].Variants[1].Capturable = []irismodel.Barrier{irismodel.BarrierNone} }, "capturable mode none"},
		{"launch shape", func(t *Table) { t.Collectives[0].Variants[0].Threads = 0 }, "launch shape 0 threads"},
		{"auto names unknown", func(t *Table) { t.Collectives[0].Auto[1].Variant = "ring" }, `unknown variant "ring"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			tab := demoTable("example.com/" + t.Name())
			c.edit(tab)
			Register(tab)
			err := tab.usable()
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Contains(t, err.Error(), "regenerate the package")
			assert.Nil(t, tab.Entries(), "an unusable table lists nothing")
			w := newFakeWorld(t, 1, Options{})
			_, err = NewPlanOf[VariantPlan](w.Rank(0), &tab.Collectives[0].Variants[0], irismodel.F32, "sum", 8, 2)
			require.ErrorContains(t, err, c.want, "plans of it fail with the reason")
		})
	}
	require.NoError(t, demoTable("ok").prepare())
}

func TestKernelNames(t *testing.T) {
	tab := demoTable("example.com/names")
	require.NoError(t, tab.prepare())
	var got []string
	for _, v := range []*Variant{&tab.Collectives[0].Variants[0], &tab.Collectives[0].Variants[1]} {
		for _, dt := range []irismodel.DType{irismodel.F32, irismodel.BF16} {
			for _, op := range []string{"sum", "max"} {
				got = append(got, v.Kernel(dt, op))
			}
		}
	}
	assert.Equal(t, demoKernels, got)
	assert.Equal(t, "irisgen_bar_device", tab.Collectives[1].Variants[0].Kernel(0, ""))
	assert.Equal(t, "demo/pull", tab.Collectives[0].Variants[1].Label())
}

func TestConstructorChecks(t *testing.T) {
	w, tab, _ := demoWorld(t, 1)
	r := w.Rank(0)
	push := &tab.Collectives[0].Variants[0]
	_, err := NewPlanOf[VariantPlan](r, push, irismodel.F16, "sum", 8, 2)
	var ue *UnsupportedError
	require.ErrorAs(t, err, &ue)
	assert.True(t, errors.Is(err, ErrUnsupported))
	assert.Equal(t, "demo/push: dtype f16 is not supported; the spec allows f32, bf16", err.Error())
	_, err = NewPlanOf[VariantPlan](r, push, irismodel.F32, "min", 8, 2)
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, "demo/push: op min is not supported; the spec allows sum, max", err.Error())
	_, err = NewPlanOf[VariantPlan](r, push, irismodel.F32, "sum", 8)
	require.EqualError(t, err, "demo/push: 1 sizes, want 2 (n, k)")
	_, err = NewPlanOf[VariantPlan](r, push, irismodel.F32, "sum", 8, -1)
	require.EqualError(t, err, "demo/push: size parameter k = -1, want >= 0")
	_, err = NewPlanOf[VariantPlan](r, push, irismodel.F32, "sum", 1<<62, 2)
	var se *ShapeError
	require.ErrorAs(t, err, &se, "shape overflow is a typed error")
	require.ErrorContains(t, err, `tensor "input": shape [n] does not fit in 2^63 bytes`)
	_, err = NewPlanOf[VariantPlan](r, nil, irismodel.F32, "sum", 8, 2)
	require.ErrorContains(t, err, "never registered")
	assert.Equal(t, r.Heap().Size()-ControlBytes, r.Heap().FreeBytesLeft(), "refused constructors allocate nothing")

	// Without dtypes and ops both are ignored.
	b, err := NewPlanOf[VariantPlan](r, &tab.Collectives[1].Variants[0], irismodel.BF16, "max")
	require.NoError(t, err)
	assert.Equal(t, "irisgen_bar_device", b.Plan().Spec().Kernel)
	require.NoError(t, b.Close())
}

// TestPlanShape: the grid follows the largest user tensor, workspace is
// sized with blocks and world and allocated only where the variant uses it,
// staging holds the imported tensor, and the plan carries the package.
func TestPlanShape(t *testing.T) {
	w, tab, _ := demoWorld(t, 2)
	require.NoError(t, w.Run(func(r *Rank) error {
		// push: output [world, n] of f32 is the largest: 2*1000*4 bytes of
		// 256*16-byte blocks: 2 blocks (at most 4).
		p, err := NewPlanOf[VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "max", 1000, 3)
		require.NoError(t, err)
		s := p.Plan().Spec()
		assert.Equal(t, PlanSpec{Package: tab.ImportPath, Op: "demo", Variant: "push", Module: "demo", SpecHash: "h1",
			Kernel: "irisgen_demo_push_f32_max", Threads: 256, Blocks: 2, Barriers: allModes, Capturable: deviceNone,
			Workspace: []Buffer{{"scratch", 2 * 2 * 4 * 8}}, Sizes: []int64{1000, 3}}, s)
		assert.True(t, r.Heap().Contains(p.Plan().Buffer("scratch"), 2*2*4*8))
		// pull, bf16: 2*1000*2 bytes of 512*4-byte blocks: 2; staging for
		// input; neither workspace.
		q, err := NewPlanOf[VariantPlan](r, &tab.Collectives[0].Variants[1], irismodel.BF16, "sum", 1000, 3)
		require.NoError(t, err)
		s = q.Plan().Spec()
		assert.Equal(t, 2, s.Blocks)
		assert.Equal(t, "irisgen_demo_pull_bf16_sum", s.Kernel)
		assert.Empty(t, s.Workspace)
		assert.Equal(t, []Buffer{{"input", 2000}}, s.Staging)
		// Clamped to MaxBlocks.
		big, err := NewPlanOf[VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "sum", 1<<20, 3)
		require.NoError(t, err)
		assert.Equal(t, 4, big.Plan().Spec().Blocks)
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
		tab := demoTable(fmt.Sprintf("example.com/%s/%d-%d", t.Name(), c.gpus, c.world))
		Register(tab)
		p := fakegpu.New(c.gpus)
		addDemoModules(p, tab)
		w := newFakeWorld(t, c.world, Options{Platform: p, ShareGPUs: true})
		require.NoError(t, w.Run(func(r *Rank) error {
			for i, want := range []int{c.push, c.pull} {
				pl, err := NewPlanOf[VariantPlan](r, &tab.Collectives[0].Variants[i], irismodel.F32, "sum", 1<<14, 3)
				if err != nil {
					return err
				}
				assert.Equal(t, want, pl.Plan().Spec().Blocks, "%d GPUs, world %d, variant %d", c.gpus, c.world, i)
				if err := pl.Close(); err != nil {
					return err
				}
			}
			return nil
		}))
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
		tab := demoTable(fmt.Sprintf("example.com/%s/%d-%d-%v", t.Name(), c.gpus, c.world, c.on))
		Register(tab)
		p := fakegpu.New(c.gpus)
		p.SetDependentLaunches(c.on)
		addDemoModules(p, tab)
		w := newFakeWorld(t, c.world, Options{Platform: p, ShareGPUs: c.world > c.gpus})
		require.NoError(t, w.Run(func(r *Rank) error {
			pl, err := NewPlanOf[VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "sum", 16, 4)
			if err != nil {
				return err
			}
			ts := demoTensors(t, r, 16, 4, true, true, false, false)
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
	w, tab, fake := demoWorld(t, 1)
	r := w.Rank(0)
	s := r.Stream()
	push, err := NewPlanOf[VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "sum", 16, 4)
	require.NoError(t, err)
	ts := demoTensors(t, r, 16, 4, true, true, false, false)
	in, out, ids, scale := ts[0], ts[1], ts[2], ts[3]
	with := func(i int, x Tensor) []Tensor {
		c := append([]Tensor(nil), ts...)
		c[i] = x
		return c
	}
	offHeap := demoTensors(t, r, 16, 4, false, false, false, false)
	// A hand-made tensor into heap memory that is no live allocation: input is
	// only touched locally, so no placement rule looks at it, and CheckLive
	// must.
	freed, err := r.Heap().Alloc(irismodel.F32, 16)
	require.NoError(t, err)
	require.NoError(t, r.Heap().Free(freed))
	byHand := Tensor{Ptr: freed.Ptr, DType: irismodel.F32, Len: 16}
	fake.ClearLaunches()
	var (
		de *DTypeError
		se *ShapeError
		pe *PlacementError
		ae *AliasError
		me *BarrierModeError
		ce *CaptureError
		lv *LiveError
	)
	for _, c := range []struct {
		name   string
		ts     []Tensor
		mode   irismodel.Barrier
		target any
		want   string
	}{
		{"count", ts[:3], irismodel.BarrierDevice, nil, "demo/push: 3 tensors, want 4 (input, output, ids, scale)"},
		{"dtype", with(0, Tensor{Ptr: in.Ptr, DType: irismodel.BF16, Len: 16}), irismodel.BarrierDevice, &de, `tensor "input" has dtype bf16, want f32`},
		{"length", with(1, out.Slice(0, 15)), irismodel.BarrierDevice, &se, `tensor "output" has 15 elements, want 16`},
		{"nil", with(0, Tensor{DType: irismodel.F32, Len: 16}), irismodel.BarrierDevice, &se, "nil device pointer"},
		{"index dtype", with(2, Tensor{Ptr: ids.Ptr, DType: irismodel.F32, Len: 4}), irismodel.BarrierDevice, &de, "want i64 or i32"},
		{"index length", with(2, Tensor{Ptr: ids.Ptr, DType: irismodel.I32, Len: 5}), irismodel.BarrierDevice, &se, `tensor "ids" has 5 elements, want 4`},
		{"optional given wrong", with(3, Tensor{Ptr: scale.Ptr, DType: irismodel.F32, Len: 3}), irismodel.BarrierDevice, &se, `tensor "scale" has 3 elements`},
		{"heap", with(1, offHeap[1]), irismodel.BarrierDevice, &pe, `tensor "output"`},
		{"dtype before heap", with(1, Tensor{Ptr: offHeap[1].Ptr, DType: irismodel.BF16, Len: 16}), irismodel.BarrierDevice, &de, `"output" has dtype bf16`},
		{"alias forbidden", with(0, out.Slice(0, 16)), irismodel.BarrierDevice, &ae, `tensors "input"`},
		{"heap before alias", []Tensor{offHeap[1], offHeap[1], ids, scale}, irismodel.BarrierDevice, &pe, `tensor "output"`},
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
	i32ids := Tensor{Ptr: ids.Ptr, DType: irismodel.I32, Len: 4}
	require.NoError(t, push.LaunchTensors(s, []Tensor{in, out, i32ids, {}}, irismodel.BarrierNone))
	require.NoError(t, push.LaunchTensors(s, ts, irismodel.BarrierDevice))
	ls := fake.Launches()
	require.Len(t, ls, 2)
	le := binary.LittleEndian
	a := ls[0].Args
	assert.Equal(t, "irisgen_demo_push_f32_sum", ls[0].Function)
	assert.Equal(t, gpu.Dim3{X: 1, Y: 1, Z: 1}, ls[0].Grid)
	assert.Equal(t, gpu.Dim3{X: 256, Y: 1, Z: 1}, ls[0].Block)
	require.Len(t, a, CtxBytes+6*8+2*8+8, "6 tensor pointers, 2 sizes, 1 index width")
	for i, want := range []uint64{uint64(in.Ptr), uint64(out.Ptr), uint64(ids.Ptr), 0, uint64(push.Plan().Buffer("scratch")), 0, 16, 4, 4} {
		assert.Equal(t, want, le.Uint64(a[CtxBytes+8*i:]), "argument %d", i)
	}
	assert.Equal(t, uint32(0), le.Uint32(a[ctxOffBarrier:]), "mode none")
	a = ls[1].Args
	assert.Equal(t, uint64(scale.Ptr), le.Uint64(a[CtxBytes+3*8:]), "the optional tensor given")
	assert.Equal(t, uint64(8), le.Uint64(a[CtxBytes+8*8:]), "i64 ids")
	assert.Equal(t, uint32(1), le.Uint32(a[ctxOffBarrier:]), "mode device")

	// pull: in place allowed, input imported.
	pull, err := NewPlanOf[VariantPlan](r, &tab.Collectives[0].Variants[1], irismodel.F32, "sum", 16, 4)
	require.NoError(t, err)
	buf := demoTensors(t, r, 33, 4, true, true, true, true)[1] // 33 elements
	fake.ClearLaunches()
	err = pull.LaunchTensors(s, []Tensor{buf.Slice(1, 16), buf.Slice(0, 16), ids, scale}, irismodel.BarrierDevice)
	require.ErrorAs(t, err, &ae)
	assert.True(t, ae.InPlace, "a partial overlap is refused where in place is allowed")
	err = pull.LaunchTensors(s, []Tensor{buf.Slice(0, 16), buf.Slice(0, 16), ids, scale}, irismodel.BarrierNone)
	require.ErrorAs(t, err, &me, "pull does not support mode none")
	require.NoError(t, pull.LaunchTensors(s, []Tensor{buf.Slice(0, 16), buf.Slice(0, 16), ids, scale}, irismodel.BarrierDevice), "the same tensor is fine")
	require.NoError(t, fake.Write(offHeap[0].Ptr, bytesOf(7, 64)))
	require.NoError(t, pull.LaunchTensors(s, []Tensor{offHeap[0], buf.Slice(16, 16), ids, scale}, irismodel.BarrierHost))
	ls = fake.Launches()
	require.Len(t, ls, 2)
	assert.Equal(t, uint64(buf.Ptr), le.Uint64(ls[0].Args[CtxBytes:]), "on the heap: used as it is")
	assert.Equal(t, uint64(pull.Plan().Buffer("input")), le.Uint64(ls[1].Args[CtxBytes:]), "off the heap: staged")
	staged, err := fake.Read(pull.Plan().Buffer("input"), 64)
	require.NoError(t, err)
	assert.Equal(t, bytesOf(7, 64), staged)
	for i := 4; i < 6; i++ {
		assert.Zero(t, le.Uint64(ls[1].Args[CtxBytes+8*i:]), "workspace %d is unused by pull", i)
	}

	// Host mode and capture.
	require.NoError(t, r.Device().BeginCapture(s, gpu.CaptureGlobal))
	require.ErrorAs(t, push.LaunchTensors(s, ts, irismodel.BarrierHost), &ce)
	require.NoError(t, push.LaunchTensors(s, ts, irismodel.BarrierDevice), "device mode is captured")
	_, err = r.Device().EndCapture(s)
	require.NoError(t, err)
	require.NoError(t, errors.Join(pull.Close(), push.Close()))
	err = (&VariantPlan{}).LaunchTensors(s, nil, irismodel.BarrierDevice)
	require.ErrorContains(t, err, "never made")

	bar, err := NewPlanOf[VariantPlan](r, &tab.Collectives[1].Variants[0], 0, "")
	require.NoError(t, err)
	require.EqualError(t, bar.LaunchTensors(s, ts[:1], irismodel.BarrierDevice), "bar/device takes no tensors, got 1")
	require.NoError(t, bar.LaunchTensors(s, nil, irismodel.BarrierDevice))
	require.NoError(t, bar.Close())
}

// TestRun: the convenience path reads sizes from the tensors, takes the
// given ones in order, resolves auto, caches one plan per variant, dtype,
// op and sizes, and refuses to make one while capturing.
func TestRun(t *testing.T) {
	w, tab, fake := demoWorld(t, 2)
	demo := &tab.Collectives[0]
	require.NoError(t, w.Run(func(r *Rank) error {
		s := r.Stream()
		ts := demoTensors(t, r, 16, 4, true, true, true, true)
		require.NoError(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{4}, ts, irismodel.BarrierDevice))
		require.NoError(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{4}, ts, irismodel.BarrierDevice))
		assert.Equal(t, 1, r.PlanCache().Len(), "one plan for the same call")
		require.NoError(t, demo.Run(r, s, "push", irismodel.F32, "max", []int64{4}, ts, irismodel.BarrierDevice))
		assert.Equal(t, 2, r.PlanCache().Len(), "another op is another plan")
		// auto: 64 bytes is the largest tensor here (output [2, 8] f32): pull.
		small := demoTensors(t, r, 8, 2, true, true, true, true)
		require.NoError(t, demo.Run(r, s, irismodel.AutoVariant, irismodel.F32, "sum", []int64{2}, small, irismodel.BarrierDevice))
		assert.Equal(t, 3, r.PlanCache().Len())
		require.ErrorContains(t, demo.Run(r, s, "ring", irismodel.F32, "sum", []int64{4}, ts, irismodel.BarrierDevice), `demo: unknown variant "ring" (variants: push, pull, auto)`)
		require.EqualError(t, demo.Run(r, s, "push", irismodel.F32, "sum", nil, ts, irismodel.BarrierDevice), "demo: 0 sizes given, want 1")
		require.EqualError(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{4}, ts[:2], irismodel.BarrierDevice), "demo: 2 tensors, want 4 (input, output, ids, scale)")
		// k given wrong: the plan is made for k=5 and the launch refuses ids of 4.
		var se *ShapeError
		require.ErrorAs(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{5}, ts, irismodel.BarrierDevice), &se)

		// Capture: a cached plan launches, a new one is refused.
		require.NoError(t, r.Device().BeginCapture(s, gpu.CaptureRelaxed))
		require.NoError(t, demo.Run(r, s, "push", irismodel.F32, "sum", []int64{4}, ts, irismodel.BarrierDevice))
		var ce *CaptureError
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
	assert.Equal(t, []string{"irisgen_demo_push_f32_sum", "irisgen_demo_push_f32_sum", "irisgen_demo_push_f32_max", "irisgen_demo_pull_f32_sum"}, names[:4])
}

// TestInferSizes enumerates how the convenience call reads sizes: from a
// tensor alone, divided by world and constants, in rounds that depend on
// each other (moe_dispatch's chain), and 0 (refused by the plan) where a
// divisor is 0.
func TestInferSizes(t *testing.T) {
	c := &Collective{
		Name: "chain", DTypes: []irismodel.DType{irismodel.F32},
		Sizes: []SizeParam{{Name: "t", From: 0}, {Name: "h", From: 1}, {Name: "e", From: -1}, {Name: "cap", From: 2}},
		Tensors: []irismodel.TensorDesc{
			{Name: "tokens", Dir: irismodel.In, Shape: []irismodel.Dim{irismodel.DimSize(0), irismodel.DimSize(1)}},
			{Name: "recv", Dir: irismodel.Out, Shape: []irismodel.Dim{irismodel.DimWorld, irismodel.DimSize(3), irismodel.DimSize(1)}},
			{Name: "src", Dir: irismodel.Out, Shape: []irismodel.Dim{2, irismodel.DimWorld, irismodel.DimSize(3)}},
		},
		Variants: []Variant{{Name: "v", Uses: []Use{UseLocal, UseHeap, UseHeap}, Barriers: deviceOnly, Threads: 64, MaxBlocks: 1, VectorBytes: 16}},
	}
	tab := &Table{ImportPath: "example.com/infer", Collectives: []Collective{*c}}
	require.NoError(t, tab.prepare())
	c = &tab.Collectives[0]
	sizes := make([]int64, 4)
	// world 4, cap 5, h 6, t 7, e 9.
	ts := []Tensor{{Len: 7 * 6}, {Len: 4 * 5 * 6}, {Len: 2 * 4 * 5}}
	require.NoError(t, c.inferSizes(sizes, 4, []int64{9}, ts))
	assert.Equal(t, []int64{7, 6, 9, 5}, sizes)
	ts[2].Len = 3 // cap 0: h and t are 0 too, and the plan refuses them
	require.NoError(t, c.inferSizes(sizes, 4, []int64{9}, ts))
	assert.Equal(t, []int64{0, 0, 9, 0}, sizes)
	require.EqualError(t, c.inferSizes(sizes, 4, nil, ts), "chain: 0 sizes given, want 1")
}

// TestRegistry: a conflict of import paths fails the plans of both tables
// and no other; registering a table again is no conflict.
func TestRegistry(t *testing.T) {
	a, b := demoTable("example.com/dup"), demoTable("example.com/dup")
	Register(a)
	Register(a)
	require.NoError(t, a.usable())
	assert.Same(t, a, Registered("example.com/dup"))
	Register(b)
	for _, tab := range []*Table{a, b} {
		err := tab.usable()
		require.ErrorContains(t, err, `two generated packages in this program register the import path "example.com/dup"`)
		assert.Contains(t, err.Error(), "go generate")
	}
	w := newFakeWorld(t, 1, Options{})
	_, err := NewPlanOf[VariantPlan](w.Rank(0), &b.Collectives[1].Variants[0], 0, "")
	require.ErrorContains(t, err, "register the import path")
	require.ErrorContains(t, b.Collectives[1].Run(w.Rank(0), w.Rank(0).Stream(), "device", 0, "", nil, nil, irismodel.BarrierDevice), "register the import path")
	other := demoTable("example.com/other")
	Register(other)
	require.NoError(t, other.usable())
	assert.Nil(t, Registered("example.com/never"))
	// Tables lists each import path once, sorted: the first registration
	// of a conflicting path.
	var paths []string
	for _, tab := range Tables() {
		paths = append(paths, tab.ImportPath)
	}
	assert.True(t, slices.IsSorted(paths), "%v", paths)
	assert.Equal(t, 1, strings.Count(strings.Join(paths, " "), "example.com/dup"))
	assert.Contains(t, paths, "example.com/other")
	assert.Contains(t, Tables(), a)
}

// TestKernelSources: Options.Kernels, then $IRISGEN_KERNELS, then the
// package's embedded code objects; two packages with a collective of the
// same name each get their own module; errors name the package's command.
func TestKernelSources(t *testing.T) {
	t.Setenv("IRISGEN_KERNELS", "")
	a, b := demoTable("example.com/ks/a"), demoTable("example.com/ks/b")
	b.Collectives[1].SpecHash = "h2-b" // same collective name, other spec
	Register(a)
	Register(b)
	p := fakegpu.New(1)
	addDemoModules(p, a)
	p.AddModule(b.Embedded.(fstest.MapFS)["kernels/bar.fake"].Data, []string{"irisgen_bar_device"}, map[string][]byte{irismodel.SpecHashSymbol("bar"): []byte("h2-b\x00")})
	w := newFakeWorld(t, 1, Options{Platform: p})
	r := w.Rank(0)
	loadedFrom := func() []string {
		var out []string
		for _, l := range p.Launches() {
			out = append(out, l.Function)
		}
		return out
	}
	for _, tab := range []*Table{a, b} {
		pl, err := NewPlanOf[VariantPlan](r, &tab.Collectives[1].Variants[0], 0, "")
		require.NoError(t, err, tab.ImportPath)
		require.NoError(t, pl.LaunchTensors(r.Stream(), nil, irismodel.BarrierDevice))
		require.NoError(t, pl.Close())
	}
	assert.Len(t, loadedFrom(), 2)
	r.kernels.mu.Lock()
	assert.Len(t, r.kernels.mods, 2, "one module per (package, collective)")
	r.kernels.mu.Unlock()

	// $IRISGEN_KERNELS comes first; a stale one there is an error naming
	// the package's command.
	dir := t.TempDir()
	t.Setenv("IRISGEN_KERNELS", dir)
	stale := []byte("stale bar")
	p.AddModule(stale, []string{"irisgen_bar_device"}, map[string][]byte{irismodel.SpecHashSymbol("bar"): []byte("old\x00")})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bar.fake"), stale, 0o644))
	w2 := newFakeWorld(t, 1, Options{Platform: p})
	_, err := NewPlanOf[VariantPlan](w2.Rank(0), &a.Collectives[1].Variants[0], 0, "")
	var ke *KernelError
	require.ErrorAs(t, err, &ke)
	assert.True(t, ke.Stale)
	assert.Contains(t, err.Error(), "of example.com/ks/a is stale")
	assert.Contains(t, err.Error(), "`make demo-kernels`")
	// Not there: the embedded one.
	require.NoError(t, os.Remove(filepath.Join(dir, "bar.fake")))
	w3 := newFakeWorld(t, 1, Options{Platform: p})
	pl, err := NewPlanOf[VariantPlan](w3.Rank(0), &a.Collectives[1].Variants[0], 0, "")
	require.NoError(t, err)
	require.NoError(t, pl.Close())

	// Missing everywhere: every place looked in, and the command.
	c := demoTable("example.com/ks/c")
	c.Embedded = fstest.MapFS{"kernels/README.txt": {Data: []byte("placeholder")}}
	Register(c)
	_, err = NewPlanOf[VariantPlan](w3.Rank(0), &c.Collectives[1].Variants[0], 0, "")
	require.ErrorAs(t, err, &ke)
	for _, want := range []string{filepath.Join(dir, "bar.fake") + " ($IRISGEN_KERNELS)", "kernels/bar.fake embedded in example.com/ks/c",
		"run `make demo-kernels` and rebuild the program"} {
		assert.Contains(t, err.Error(), want)
	}
	// Options.Kernels comes before everything.
	w4 := newFakeWorld(t, 1, Options{Platform: p, Kernels: fstest.MapFS{"bar.fake": {Data: stale}}})
	_, err = NewPlanOf[VariantPlan](w4.Rank(0), &a.Collectives[1].Variants[0], 0, "")
	require.ErrorAs(t, err, &ke)
	assert.True(t, ke.Stale)
}

func TestEntries(t *testing.T) {
	w, tab, _ := demoWorld(t, 2)
	es := tab.Entries()
	require.Len(t, es, 3)
	e, ok := tab.Lookup("demo", "pull")
	require.True(t, ok)
	_, ok = tab.Lookup("demo", "ring")
	require.False(t, ok)
	assert.Equal(t, "demo", e.Collective)
	assert.Equal(t, []string{"n", "k"}, e.Sizes)
	assert.Equal(t, []string{"sum", "max"}, e.Ops)
	assert.Equal(t, deviceHost, e.Barriers)
	assert.Equal(t, deviceOnly, e.Capturable)
	assert.Same(t, &tab.Collectives[0].Variants[1], e.Descriptor())
	var got []string
	for _, ti := range e.Tensors {
		got = append(got, fmt.Sprintf("%s %s %s remote=%v heap=%v opt=%v numel=%d elem=%s", ti.Name, ti.Dir, ti.Shape, ti.Remote, ti.Heap,
			ti.Optional, ti.Numel(2, []int64{10, 3}), ti.ElemType(irismodel.BF16)))
	}
	assert.Equal(t, []string{
		"input in [n] remote=true heap=false opt=false numel=10 elem=bf16",
		"output out [world, n] remote=false heap=false opt=false numel=20 elem=bf16",
		"ids in [k] remote=false heap=false opt=false numel=3 elem=i64",
		"scale in [k] remote=false heap=false opt=true numel=3 elem=f32",
	}, got)
	assert.Equal(t, []irismodel.DType{irismodel.I64, irismodel.I32}, e.Tensors[2].IndexDTypes)
	assert.Equal(t, int64(-1), e.Tensors[1].Numel(2, []int64{1 << 62, 1}), "overflow")
	push, _ := tab.Lookup("demo", "push")
	assert.True(t, push.Tensors[1].Heap && push.Tensors[1].Remote)
	require.NoError(t, w.Run(func(r *Rank) error {
		ts, free, err := e.Alloc(r, irismodel.F32, []int64{10, 3})
		require.NoError(t, err)
		defer free()
		p, err := e.New(r, irismodel.F32, "sum", []int64{10, 3})
		require.NoError(t, err)
		require.NoError(t, p.LaunchTensors(r.Stream(), ts, irismodel.BarrierDevice))
		_, err = e.New(r, irismodel.F16, "sum", []int64{10, 3})
		require.ErrorIs(t, err, ErrUnsupported)
		return p.Close()
	}))
	assert.Equal(t, "[2, world, blocks, 7]", irismodel.Shape{2, irismodel.DimWorld, irismodel.DimBlocks, 7}.String(tab.Collectives[0].sizeNames()))
	assert.Equal(t, []AliasPair{{"input", "output", false}, {"output", "ids", false}, {"output", "scale", false}}, tab.Collectives[0].Variants[0].AliasPairs())
	assert.Equal(t, []AliasPair{{"input", "output", true}, {"output", "ids", true}, {"output", "scale", true}}, tab.Collectives[0].Variants[1].AliasPairs(),
		"pull runs in place: each dir-in tensor may be the very output")
}

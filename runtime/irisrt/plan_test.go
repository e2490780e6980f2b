package irisrt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	testModule = "all_gather"
	testKernel = "irisgen_all_gather_push_f32"
	testHash   = "c0ffee"
)

// kernelWorld is a fake world whose platform knows the module image served
// from Options.Kernels, with the given spec hash baked in.
func kernelWorld(t *testing.T, n int, hash string) *World {
	t.Helper()
	return newFakeWorld(t, n, kernelOptions(n, hash))
}

// kernelOptions are Options on a fake platform of n GPUs that serves the
// test module with the given spec hash.
func kernelOptions(n int, hash string) Options {
	p := fakegpu.New(n)
	image := []byte("fake code object " + hash)
	p.AddModule(image, []string{testKernel}, map[string][]byte{irismodel.SpecHashSymbol(testModule): append([]byte(hash), 0, 0, 0)})
	kernels := fstest.MapFS{irismodel.KernelFile("fake", testModule): {Data: image}}
	return Options{Platform: p, Kernels: kernels}
}

func testSpec() core.PlanSpec {
	return core.PlanSpec{
		Op: "all_gather", Variant: "push", Module: testModule, SpecHash: testHash, Kernel: testKernel,
		Threads: 512, Blocks: 3,
		Barriers:   []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone},
		Capturable: []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierNone},
		Workspace:  []core.Buffer{{Name: "scratch", Bytes: 1000}},
		Staging:    []core.Buffer{{Name: "input", Bytes: 64}},
	}
}

func TestNewPlanZeroesBuffersOnTheHeap(t *testing.T) {
	w := kernelWorld(t, 2, testHash)
	require.NoError(t, w.Run(func(r *Rank) error {
		h, p := r.Heap(), fakeOf(r)
		// Dirty the heap where the plan's buffers will land.
		junk, err := h.AllocBytes(1 << 14)
		require.NoError(t, err)
		require.NoError(t, p.Write(junk, bytes.Repeat([]byte{0xEE}, 1<<14)))
		require.NoError(t, h.FreeBytes(junk))

		pl, err := newPlan(r, testSpec())
		require.NoError(t, err)
		assert.Equal(t, junk, pl.flags, "first fit: the flags reuse the dirty block")
		for _, b := range []struct {
			ptr   gpu.DevicePtr
			bytes int64
		}{{pl.flags, 4 * MaxWorld * 8}, {pl.epochs, 5 * 8}, {pl.buffer("scratch"), 1000}, {pl.buffer("input"), 64}} {
			assert.True(t, h.Contains(b.ptr, b.bytes))
			mem, err := p.Read(b.ptr, b.bytes)
			require.NoError(t, err)
			assert.Equal(t, make([]byte, b.bytes), mem, "zeroed")
		}
		assert.Panics(t, func() { pl.buffer("nope") })
		before := h.FreeBytesLeft()
		require.NoError(t, pl.Close())
		assert.Greater(t, h.FreeBytesLeft(), before)
		return nil
	}))
}

func TestLaunchArgsLayout(t *testing.T) {
	w := kernelWorld(t, 2, testHash)
	fake := fakeOf(w.Rank(0))
	plans := make([]*Plan, 2)
	require.NoError(t, w.Run(func(r *Rank) error {
		pl, err := newPlan(r, testSpec())
		plans[r.Rank()] = pl
		return err
	}))
	for i, mode := range []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone} {
		fake.ClearLaunches()
		require.NoError(t, w.Run(func(r *Rank) error {
			pl := plans[r.Rank()]
			a := pl.testArgs().Ptr(0x1234_5678_9abc).Ptr(0x42).I64(-7)
			return pl.testLaunch(r.Stream(), mode, a)
		}))
		ls := fake.Launches()
		require.Len(t, ls, 2, mode.String())
		for _, l := range ls {
			r, pl := w.Rank(l.Device), plans[l.Device]
			assert.Equal(t, testKernel, l.Function)
			assert.Equal(t, gpu.Dim3{X: 3, Y: 1, Z: 1}, l.Grid)
			assert.Equal(t, gpu.Dim3{X: 512, Y: 1, Z: 1}, l.Block)
			assert.Equal(t, r.Stream(), l.Stream)
			a := l.Args
			require.Len(t, a, core.CtxBytes+24)
			le := binary.LittleEndian
			for peer := 0; peer < MaxWorld; peer++ {
				want := uint64(0)
				if peer < 2 {
					want = uint64(r.Heap().Base(peer))
				}
				assert.Equal(t, want, le.Uint64(a[8*peer:]))
			}
			assert.Equal(t, uint64(pl.flags), le.Uint64(a[64:]))
			assert.Equal(t, uint64(pl.epochs), le.Uint64(a[72:]))
			assert.Equal(t, uint64(r.errDev), le.Uint64(a[80:]))
			assert.Equal(t, uint32(defaultTimeout/1000), le.Uint32(a[88:]), "timeout_us")
			n := uint32(i + 1)
			assert.Equal(t, n, le.Uint32(a[92:]), "launch: the rank's launches counted from 1")
			assert.Equal(t, uint32(l.Device), le.Uint32(a[96:]))
			assert.Equal(t, uint32(2), le.Uint32(a[100:]))
			wantBarrier := uint32(0)
			if mode == irismodel.BarrierDevice {
				wantBarrier = 1
			}
			assert.Equal(t, wantBarrier, le.Uint32(a[104:]), mode.String())
			assert.Equal(t, pl.check(n, mode, nil), le.Uint32(a[108:]), "check")
			assert.Equal(t, plans[0].check(n, mode, nil), le.Uint32(a[108:]), "the same on every rank")
			assert.Equal(t, uint64(0x1234_5678_9abc), le.Uint64(a[112:]))
			assert.Equal(t, uint64(0x42), le.Uint64(a[120:]))
			assert.Equal(t, int64(-7), int64(le.Uint64(a[128:])))
		}
	}
}

func TestLaunchModesAndCapture(t *testing.T) {
	w := kernelWorld(t, 1, testHash)
	r := w.Rank(0)
	fake := fakeOf(r)
	spec := testSpec()
	spec.Barriers = []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost}
	pl, err := newPlan(r, spec)
	require.NoError(t, err)

	var me *BarrierModeError
	require.ErrorAs(t, pl.testLaunch(r.Stream(), irismodel.BarrierNone, pl.testArgs()), &me)
	assert.Contains(t, me.Error(), "supported: device, host")
	require.Error(t, pl.testLaunch(r.Stream(), irismodel.BarrierDevice, testArgs{a: &core.Args{}}), "arguments without the ctx")

	s, err := r.Device().NewStream()
	require.NoError(t, err)
	defer r.Device().DestroyStream(s)
	fake.ClearLaunches()
	allocs := 0
	fake.SetAllocHook(func(int, int64) error { allocs++; return nil })
	defer fake.SetAllocHook(nil)

	defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
	require.NoError(t, r.Device().BeginCapture(s, gpu.CaptureGlobal))
	capturing, err := r.Capturing(s)
	require.NoError(t, err)
	require.True(t, capturing)
	var ce *CaptureError
	require.ErrorAs(t, pl.testLaunch(s, irismodel.BarrierHost, pl.testArgs()), &ce)
	assert.Contains(t, ce.Error(), "irismodel.BarrierDevice")
	require.ErrorAs(t, pl.checkLaunch(s, irismodel.BarrierHost), &ce, "Launch asks before its imports")
	require.NoError(t, pl.checkLaunch(s, irismodel.BarrierDevice))
	x, err := r.Heap().Alloc(irismodel.F32, 16) // heap allocation is host-only: fine during capture
	require.NoError(t, err)
	require.NoError(t, pl.testLaunch(s, irismodel.BarrierDevice, pl.testArgs().Staged("input", x)))
	g, err := r.Device().EndCapture(s)
	require.NoError(t, err)
	exec, err := r.Device().Instantiate(g)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.NoError(t, r.Device().LaunchGraph(exec, s))
	}
	require.NoError(t, r.Device().StreamSynchronize(s))
	gl := fake.GraphLaunches(exec)
	require.Len(t, gl, 1, "only the device-mode launch was captured")
	assert.Equal(t, testKernel, gl[0].Function)
	assert.Equal(t, uint32(1), binary.LittleEndian.Uint32(gl[0].Args[104:]))
	replayed := 0
	for _, l := range fake.Launches() {
		if l.Graph == exec {
			replayed++
		}
	}
	assert.Equal(t, 3, replayed)
	assert.Zero(t, allocs, "no device allocation in the launch path")
}

func TestNewPlanRefusedWhileCapturing(t *testing.T) {
	w := kernelWorld(t, 1, testHash)
	r := w.Rank(0)
	defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
	require.NoError(t, r.Device().BeginCapture(r.Stream(), gpu.CaptureGlobal))
	_, err := newPlan(r, testSpec())
	var ce *CaptureError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, ce.Error(), "make the plan before capture")
	_, err = r.Device().EndCapture(r.Stream())
	require.NoError(t, err, "refusing did not break the capture")
	assert.Equal(t, r.Heap().Size()-core.ControlBytes, r.Heap().FreeBytesLeft())
}

func TestStagedImport(t *testing.T) {
	w := kernelWorld(t, 1, testHash)
	r := w.Rank(0)
	fake := fakeOf(r)
	pl, err := newPlan(r, testSpec())
	require.NoError(t, err)
	src, err := r.Device().Alloc(64, false)
	require.NoError(t, err)
	defer r.Device().Free(src)
	var se *ShapeError
	require.ErrorAs(t, pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs().Staged("input", Tensor{Ptr: src, DType: irismodel.F32, Len: 17})), &se)
	assert.Contains(t, se.Error(), "staging")
	var pe *PlacementError

	// Staged arguments: a heap tensor goes in as it is; another is copied
	// into staging by Launch, after its checks, and the kernel gets the
	// staging address; errors surface at Launch with nothing enqueued.
	x, err := r.Heap().Alloc(irismodel.F32, 16)
	require.NoError(t, err)
	fake.ClearLaunches()
	require.NoError(t, fake.Write(src, bytes.Repeat([]byte{9}, 64)))
	require.NoError(t, pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs().Staged("input", x).Staged("input", Tensor{Ptr: src, DType: irismodel.F32, Len: 16})))
	require.NoError(t, r.Device().StreamSynchronize(r.Stream()))
	ls := fake.Launches()
	require.Len(t, ls, 1)
	assert.Equal(t, uint64(x.Ptr), binary.LittleEndian.Uint64(ls[0].Args[core.CtxBytes:]))
	assert.Equal(t, uint64(pl.buffer("input")), binary.LittleEndian.Uint64(ls[0].Args[core.CtxBytes+8:]))
	mem, err := fake.Read(pl.buffer("input"), 64)
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte{9}, 64), mem)
	require.NoError(t, fake.Write(src, bytes.Repeat([]byte{3}, 64)))
	require.ErrorAs(t, pl.testLaunch(r.Stream(), irismodel.BarrierNone, pl.testArgs().Staged("input", Tensor{Ptr: src, DType: irismodel.F32, Len: 16})), &pe, "nothing would order an import in mode none")
	assert.True(t, pe.Unordered)
	assert.Contains(t, pe.Error(), "in barrier mode none nothing orders that copy")
	require.ErrorContains(t, pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs().Staged("scratch", Tensor{Ptr: src, DType: irismodel.F32, Len: 1})), "no staging buffer")
	require.NoError(t, r.Device().StreamSynchronize(r.Stream()))
	assert.Len(t, fake.Launches(), 1, "refused launches enqueue nothing")
	mem, err = fake.Read(pl.buffer("input"), 64)
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte{9}, 64), mem, "a refused launch copied nothing")

	require.ErrorAs(t, checkHeap("all_gather", "output", r, Tensor{Ptr: src, DType: irismodel.F32, Len: 16}), &pe)
	last := Tensor{Ptr: r.Heap().Base(0) + gpuPtr(r.Heap().Size()-8), DType: irismodel.F32, Len: 4}
	require.ErrorAs(t, checkHeap("all_gather", "output", r, last), &pe)
	assert.Contains(t, pe.Error(), "runs past the end")
}

func TestPlansMustAgree(t *testing.T) {
	w := kernelWorld(t, 2, testHash)
	err := w.Run(func(r *Rank) error {
		s := testSpec()
		s.Threads += 64 * r.Rank() // e.g. a different dtype or variant on different ranks
		_, err := newPlan(r, s)
		return err
	})
	require.ErrorContains(t, err, "made a different plan")
	// Both ranks freed what they allocated, so the heaps still agree.
	require.NoError(t, w.Run(func(r *Rank) error { return r.HostBarrier(r.Stream()) }))
}

func TestKernelErrors(t *testing.T) {
	// Stale: the code object was built from another spec.
	w := kernelWorld(t, 2, "0ld")
	err := w.Run(func(r *Rank) error {
		_, err := newPlan(r, testSpec())
		return err
	})
	var ke *KernelError
	require.ErrorAs(t, err, &ke)
	assert.True(t, ke.Stale)
	assert.Contains(t, err.Error(), "regenerate the package (`go generate ./...`), rebuild the code objects with `irisgen kernels`")
	assert.Contains(t, err.Error(), `"0ld"`)
	require.NoError(t, w.Run(func(r *Rank) error { return r.HostBarrier(r.Stream()) }), "nothing leaked on the heaps")

	// Missing from Options.Kernels.
	w = newFakeWorld(t, 1, Options{Kernels: fstest.MapFS{}})
	_, err = newPlan(w.Rank(0), testSpec())
	require.ErrorAs(t, err, &ke)
	assert.Contains(t, err.Error(), "all_gather.fake in Options.Kernels")
	assert.Contains(t, err.Error(), "run `irisgen kernels` and rebuild the program")

	// Missing from $IRISGEN_KERNELS, then found there.
	dir := t.TempDir()
	t.Setenv("IRISGEN_KERNELS", dir)
	p := fakegpu.New(1)
	w = newFakeWorld(t, 1, Options{Platform: p})
	_, err = newPlan(w.Rank(0), testSpec())
	require.ErrorAs(t, err, &ke)
	assert.Contains(t, err.Error(), filepath.Join(dir, "all_gather.fake"))
	image := []byte("from the environment")
	p.AddModule(image, []string{testKernel}, map[string][]byte{irismodel.SpecHashSymbol(testModule): []byte(testHash + "\x00")})
	require.NoError(t, os.WriteFile(filepath.Join(dir, "all_gather.fake"), image, 0o644))
	pl, err := newPlan(w.Rank(0), testSpec())
	require.NoError(t, err)
	require.NoError(t, pl.Close())

	// The module lacks the kernel, or the hash symbol.
	spec := testSpec()
	spec.Kernel = "irisgen_all_gather_push_bf16"
	_, err = newPlan(w.Rank(0), spec)
	require.ErrorAs(t, err, &ke)
	assert.Contains(t, err.Error(), "irisgen_all_gather_push_bf16")
	p.AddModule([]byte("no hash"), []string{testKernel}, nil)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "barrier.fake"), []byte("no hash"), 0o644))
	spec = testSpec()
	spec.Module = "barrier"
	_, err = newPlan(w.Rank(0), spec)
	require.ErrorAs(t, err, &ke)
	assert.Contains(t, err.Error(), "irisgen_spec_hash_barrier")
}

func TestKernelFile(t *testing.T) {
	assert.Equal(t, "x.fatbin", irismodel.KernelFile("cuda", "x"))
	assert.Equal(t, "x.hsaco", irismodel.KernelFile("hip", "x"))
	assert.Equal(t, "x.fake", irismodel.KernelFile("fake", "x"))
}

func TestRankCapture(t *testing.T) {
	w := kernelWorld(t, 1, testHash)
	r := w.Rank(0)
	fake := fakeOf(r)
	pl, err := newPlan(r, testSpec())
	require.NoError(t, err)
	s := r.Stream()
	g, err := r.Capture(s, func() error {
		return errors.Join(pl.testLaunch(s, irismodel.BarrierDevice, pl.testArgs()), pl.testLaunch(s, irismodel.BarrierDevice, pl.testArgs()))
	})
	require.NoError(t, err)
	require.Len(t, fake.GraphLaunches(g.Exec()), 2)
	require.NoError(t, g.Launch(s))
	require.NoError(t, g.Replay(s))
	require.NoError(t, g.Destroy())
	require.NoError(t, g.Destroy(), "twice is fine")
	require.Error(t, g.Launch(s), "a destroyed graph")
	assert.Nil(t, fake.GraphLaunches(g.Exec()), "the executable graph is gone")

	boom := errors.New("boom")
	_, err = r.Capture(s, func() error { return boom })
	require.ErrorIs(t, err, boom)
	capturing, err := r.Capturing(s)
	require.NoError(t, err)
	assert.False(t, capturing, "the capture ends whatever fn returns")
	_, err = r.Capture(s, func() error {
		_, err := r.Capture(s, func() error { return nil })
		return err
	})
	require.ErrorContains(t, err, "already running")
	require.NoError(t, pl.Close(), "failed captures hold nothing")
}

// TestPeerText enumerates how an error quotes another rank's message: as
// it is when short plain text, quoted when it is not text, cut to
// maxPeerText bytes (before a rune, never inside one) with the count of
// the bytes left out.
func TestPeerText(t *testing.T) {
	long := strings.Repeat("x", maxPeerText+100)
	runes := strings.Repeat("x", maxPeerText-1) + "é" + "tail" // é straddles the cut
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"rank 1: out of memory", "rank 1: out of memory"},
		{"\x01\x00\xff", `"\x01\x00\xff"`},
		{"two\nlines", `"two\nlines"`},
		{long, strings.Repeat("x", maxPeerText) + " ... (100 bytes more)"},
		{runes, strings.Repeat("x", maxPeerText-1) + " ... (6 bytes more)"},
	} {
		assert.Equal(t, c.want, peerText([]byte(c.in)), "%q", c.in)
	}
}

// TestPeerErrorsStayBounded: a rank that fails with a long error, or that
// is out of step and sends something else entirely (a megabyte of it),
// reaches its peers as an error of bounded length: errors that quote
// peers' errors, which quote theirs, do not grow step after step.
func TestPeerErrorsStayBounded(t *testing.T) {
	w := kernelWorld(t, 3, testHash)
	huge := strings.Repeat("nested error: ", 1<<16) // 900 KB
	errs := make([]error, 3)
	_ = w.Run(func(r *Rank) error {
		var local error
		if r.Rank() == 1 {
			local = errors.New(huge)
		}
		errs[r.Rank()] = r.syncRanks("step", local, nil)
		return nil
	})
	for k, err := range errs {
		require.Error(t, err, "rank %d", k)
		if k != 1 {
			assert.ErrorContains(t, err, "world: rank "+strconv.Itoa(k)+": step: rank 1: failed: nested error: ")
			assert.Less(t, len(err.Error()), 2*maxPeerText, "rank %d: %d bytes", k, len(err.Error()))
		}
	}
	// Rank 2 out of step: a raw all-gather of binary bytes where its peers
	// make a plan.
	_ = w.Run(func(r *Rank) error {
		if r.Rank() == 2 {
			_, errs[2] = r.Group().AllGather(append([]byte{1}, bytes.Repeat([]byte{0, 0xff}, 1<<19)...))
			return nil
		}
		errs[r.Rank()] = r.syncRanks("plan x", nil, []byte("plan digest"))
		return nil
	})
	for k, err := range errs[:2] {
		require.ErrorContains(t, err, "made a different plan x than rank", "rank %d", k)
		assert.Contains(t, err.Error(), `"\x00\xff`)
		assert.Less(t, len(err.Error()), 4*maxPeerText+300, "rank %d: %d bytes", k, len(err.Error()))
	}
}

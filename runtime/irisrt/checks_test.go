package irisrt

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAlignmentPerDType: a pointer must be a multiple of its element size,
// whatever its alignment modulo 16 (the kernels vectorise where they can).
func TestAlignmentPerDType(t *testing.T) {
	for _, dt := range []irismodel.DType{irismodel.F32, irismodel.F16, irismodel.BF16, irismodel.I32, irismodel.I64, irismodel.U64} {
		for off := int64(0); off < 32; off++ {
			x := Tensor{Ptr: gpu.DevicePtr(0x10000 + off), DType: dt, Len: 4}
			err := checkTensor("op", "x", x, dt, 4)
			if off%dt.Size() == 0 {
				assert.NoError(t, err, "%s at +%d", dt, off)
				continue
			}
			var ae *AlignmentError
			require.ErrorAs(t, err, &ae, "%s at +%d", dt, off)
			assert.ErrorIs(t, err, ErrAlignment)
			assert.Equal(t, dt.Size(), ae.Want)
			assert.Contains(t, err.Error(), fmt.Sprintf("not a multiple of %d bytes", dt.Size()))
		}
	}
	// Index tensors are checked for the dtype they come in.
	var ae *AlignmentError
	require.ErrorAs(t, checkTensorOneOf("op", "ids", Tensor{Ptr: 0x10004, DType: irismodel.I64, Len: 2}, []irismodel.DType{irismodel.I64, irismodel.I32}, 2), &ae)
	require.NoError(t, checkTensorOneOf("op", "ids", Tensor{Ptr: 0x10004, DType: irismodel.I32, Len: 2}, []irismodel.DType{irismodel.I64, irismodel.I32}, 2))
}

// liveWant is what the three checks say about one tensor: "" for accepted,
// else the LiveError's Why; placement is checkHeap's *PlacementError.
type liveWant struct {
	tensor, live, heap string
	placement          bool
}

// TestLiveChecks enumerates the ways a tensor can lie on (or near) a heap
// and what checkTensor (by its own allocation), checkLive and checkHeap say.
func TestLiveChecks(t *testing.T) {
	w := kernelWorld(t, 2, testHash)
	var groups [2]*Rank
	require.NoError(t, w.Run(func(r *Rank) error {
		var err error
		groups[r.Rank()], err = r.NewGroup([]int{0, 1}, 1<<14)
		return err
	}))
	r, g := w.Rank(0), groups[0]
	h := r.Heap()
	// The ranks allocate alike, so the heaps stay equal for the plan below.
	allocs := func(f func(r *Rank) error) { require.NoError(t, w.Run(f)) }

	var x, y, gone, reused, again, planned, inGroup Tensor
	var pl [2]*Plan
	allocs(func(r *Rank) error {
		h := r.Heap()
		a := func(dt irismodel.DType, n int64) Tensor {
			x, err := h.Alloc(dt, n)
			require.NoError(t, err)
			return x
		}
		x1, y1 := a(irismodel.F32, 64), a(irismodel.F16, 10) // y: 20 bytes asked, 256 reserved
		reused1 := a(irismodel.F32, 64)
		require.NoError(t, h.Free(reused1))
		again1 := a(irismodel.F32, 64) // the same offset as reused
		planned1 := a(irismodel.U64, 32)
		require.NoError(t, h.Free(planned1))
		var err error
		pl[r.Rank()], err = newPlan(r, testSpec()) // its flags take planned's memory
		require.NoError(t, err)
		inGroup1, err := groups[r.Rank()].Heap().Alloc(irismodel.F32, 16)
		gone1 := a(irismodel.F32, 64) // last: nothing takes its memory after the free
		require.NoError(t, h.Free(gone1))
		if r.Rank() == 0 {
			x, y, gone, reused, again, planned, inGroup = x1, y1, gone1, reused1, again1, planned1, inGroup1
		}
		return err
	})
	require.Equal(t, reused.Ptr, again.Ptr, "first fit reuses the offset")
	require.Equal(t, planned.Ptr, pl[0].flags, "the plan's flags reuse the freed tensor's memory")
	hand := func(p gpu.DevicePtr, dt irismodel.DType, n int64) Tensor { return Tensor{Ptr: p, DType: dt, Len: n} }
	free := h.base + gpuPtr(h.Size()-1024) // never allocated
	off := func(t Tensor) Tensor { return hand(t.Ptr, t.DType, t.Len) }

	cases := []struct {
		name string
		t    Tensor
		want liveWant
	}{
		{"a live tensor", x, liveWant{}},
		{"a slice of it", x.Slice(3, 10), liveWant{}},
		{"the same made by hand", off(x), liveWant{}},
		{"an empty slice at its end (touches nothing)", x.Slice(64, 0), liveWant{}},
		{"an empty tensor in free memory (touches nothing)", hand(free, irismodel.F32, 0), liveWant{}},
		{"asked-for bytes only", y, liveWant{}},
		{"past the asked-for bytes, inside the rounding", hand(y.Ptr, irismodel.F16, 11), liveWant{live: whyPastEnd, heap: whyPastEnd}},
		{"freed", gone, liveWant{tensor: whyFreed, live: whyFreed, heap: whyFreed}},
		{"freed, by hand", off(gone), liveWant{live: whyNone, heap: whyNone}},
		{"freed, memory reused by a newer tensor", reused, liveWant{tensor: whyReused, live: whyReused, heap: whyReused}},
		{"the same by hand (indistinguishable from the newer one)", off(reused), liveWant{}},
		{"the newer tensor", again, liveWant{}},
		{"freed, memory now a plan's flags", planned, liveWant{tensor: whyReused, live: whyReused, heap: whyReused}},
		{"a plan's flags by hand", off(planned), liveWant{live: whyPlan, heap: whyPlan}},
		{"never allocated", hand(free, irismodel.F32, 4), liveWant{live: whyNone, heap: whyNone}},
		{"over the heap's end", hand(h.base+gpuPtr(h.Size()-8), irismodel.F32, 4), liveWant{live: whyEdge, placement: true}},
		{"into the heap's start", hand(h.base-8, irismodel.F32, 4), liveWant{live: whyEdge, placement: true}},
		{"off the heap", hand(0x40, irismodel.F32, 4), liveWant{placement: true}},
		{"a group's tensor, on the world's rank", inGroup, liveWant{heap: whyGroup}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			why := func(err error) string {
				if err == nil {
					return ""
				}
				var le *LiveError
				require.ErrorAs(t, err, &le)
				assert.ErrorIs(t, err, ErrNotLive)
				assert.Contains(t, err.Error(), le.Why)
				assert.Contains(t, err.Error(), "pass a tensor from Heap.Alloc")
				return le.Why
			}
			assert.Equal(t, c.want.tensor, why(checkTensor("op", "x", c.t, c.t.DType, c.t.Len)), "CheckTensor")
			assert.Equal(t, c.want.live, why(checkLive("op", "x", r, c.t)), "CheckLive")
			err := checkHeap("op", "x", r, c.t)
			if c.want.placement {
				assert.ErrorIs(t, err, ErrPlacement, "CheckHeap")
				return
			}
			assert.Equal(t, c.want.heap, why(err), "CheckHeap")
		})
	}
	// On the group's rank, its own tensors are the caller's, and the world's
	// heap is checked too.
	require.NoError(t, checkHeap("op", "x", g, inGroup))
	require.NoError(t, checkLive("op", "x", g, x))
	require.ErrorIs(t, checkLive("op", "x", g, off(gone)), ErrNotLive)

	// Frees that are refused.
	var he *HeapError
	require.ErrorAs(t, h.Free(gone), &he)
	assert.Contains(t, he.Error(), "not the start of a live allocation")
	require.ErrorAs(t, h.Free(reused), &he, "a stale tensor's free must not free the newer one")
	assert.Contains(t, he.Error(), "newer allocation")
	require.ErrorAs(t, h.FreeBytes(pl[0].flags), &he)
	assert.Contains(t, he.Error(), "close the plan instead")
	require.ErrorAs(t, h.FreeBytes(g.Heap().Base(0)), &he)
	assert.Contains(t, he.Error(), "close the group instead")
	require.ErrorAs(t, g.Heap().Free(x), &he)
	assert.Contains(t, he.Error(), "another heap")

	allocs(func(r *Rank) error {
		return errors.Join(pl[r.Rank()].Close(), groups[r.Rank()].Close())
	})
	require.ErrorIs(t, checkTensor("op", "x", inGroup, irismodel.F32, 16), ErrNotLive, "a closed group's tensor")
	require.NoError(t, w.Close())
	var le *LiveError
	require.ErrorAs(t, checkTensor("op", "x", x, irismodel.F32, 64), &le, "a closed world's tensor")
	assert.Equal(t, whyClosed, le.Why)
}

// TestConcurrentLaunchRefused launches one plan from many goroutines at
// once (run it with -race): every launch either goes ahead or is refused
// with an *InUseError, nothing races, and the plan is usable afterwards.
func TestConcurrentLaunchRefused(t *testing.T) {
	w := kernelWorld(t, 1, testHash)
	r := w.Rank(0)
	fake := fakeOf(r)
	pl, err := newPlan(r, testSpec())
	require.NoError(t, err)
	x, err := r.Heap().Alloc(irismodel.F32, 16)
	require.NoError(t, err)
	fake.ClearLaunches()
	const goroutines, each = 8, 200
	var ok, refused, other int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs().Staged("input", x).Ptr(x.Ptr).I64(16))
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, ErrInUse):
					refused++
					assert.Contains(t, err.Error(), "one goroutine at a time")
				default:
					other++
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, goroutines*each, ok+refused)
	assert.Zero(t, other)
	assert.Len(t, fake.Launches(), ok, "every launch that went ahead launched once, the refused ones nothing")
	for _, l := range fake.Launches() {
		assert.Equal(t, uint64(x.Ptr), leU64(l.Args[core.CtxBytes:]), "no launch saw another's arguments")
		assert.Equal(t, uint64(16), leU64(l.Args[core.CtxBytes+16:]))
	}
	t.Logf("%d launches went ahead, %d refused", ok, refused)
	require.NoError(t, pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs().Staged("input", x).Ptr(x.Ptr).I64(16)))

	// Close against launches: each either closes or is refused, and once
	// closed the plan refuses launches.
	var closeErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range each {
			_ = pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs().Staged("input", x).Ptr(x.Ptr).I64(16))
		}
	}()
	go func() {
		defer wg.Done()
		for {
			if closeErr = pl.Close(); !errors.Is(closeErr, ErrInUse) {
				return
			}
		}
	}()
	wg.Wait()
	require.NoError(t, closeErr)
	require.ErrorContains(t, pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs()), "closed plan")
	require.Error(t, pl.testLaunch(r.Stream(), irismodel.BarrierDevice, testArgs{a: &core.Args{}}), "arguments from elsewhere")
}

// TestLaunchPathAllocatesNothing runs a wrapper's whole launch path (the
// checks of every tensor, the arguments, an import, the launch) and counts
// host allocations: none, also for the new checks.
func TestLaunchPathAllocatesNothing(t *testing.T) {
	opts := kernelOptions(1, testHash)
	q := fakegpu.NewQuiet(opts.Platform.(*fakegpu.Platform))
	opts.Platform = q
	w := newFakeWorld(t, 1, opts)
	r := w.Rank(0)
	pl, err := newPlan(r, testSpec())
	require.NoError(t, err)
	out, err := r.Heap().Alloc(irismodel.F32, 16)
	require.NoError(t, err)
	in, err := r.Device().Alloc(64, false) // off the heap: imported
	require.NoError(t, err)
	input := Tensor{Ptr: in, DType: irismodel.F32, Len: 16}
	ids, err := r.Heap().Alloc(irismodel.I32, 16)
	require.NoError(t, err)
	want := []irismodel.DType{irismodel.I64, irismodel.I32}
	launch := func() error {
		if err := checkTensor("all_gather", "input", input, irismodel.F32, 16); err != nil {
			return err
		}
		if err := checkTensor("all_gather", "output", out.Slice(0, 16), irismodel.F32, 16); err != nil {
			return err
		}
		if err := checkTensorOneOf("all_gather", "ids", ids, want, 16); err != nil {
			return err
		}
		if err := checkHeap("all_gather", "output", r, out); err != nil {
			return err
		}
		if err := checkLive("all_gather", "input", r, input); err != nil {
			return err
		}
		return pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs().Staged("input", input).Ptr(out.Ptr).Ptr(ids.Ptr).I64(16))
	}
	require.NoError(t, launch())
	assert.Zero(t, testing.AllocsPerRun(200, func() { require.NoError(t, launch()) }))
	assert.Equal(t, int64(202), q.Launches.Load())
	assert.Equal(t, int64(202), q.Copies.Load(), "the import's copy ran every time")
}

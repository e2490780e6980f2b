//go:build gpu

package gpu_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime"
	"github.com/irisgen/irisgen/runtime/gpu"
)

// gatherPlan is what both all_gather variants' plans offer.
type gatherPlan interface {
	Launch(s gpu.Stream, input, output runtime.Tensor, mode runtime.Barrier) error
	Close() error
}

var gatherVariants = []string{"push", "pull"}

func newGather(r *runtime.Rank, variant string, dt runtime.DType, n int64) (gatherPlan, error) {
	switch variant {
	case "push":
		return collectives.NewAllGatherPushPlan(r, dt, n)
	case "pull":
		return collectives.NewAllGatherPullPlan(r, dt, n)
	}
	return nil, fmt.Errorf("unknown all_gather variant %q", variant)
}

func newBarrier(r *runtime.Rank) (*collectives.BarrierDevicePlan, error) {
	return collectives.NewBarrierDevicePlan(r)
}

var dataTypes = []runtime.DType{runtime.F32, runtime.F16, runtime.BF16}

// elementCounts are the per-rank sizes of every correctness test: a single
// element, counts that are not a multiple of any vector width, and large ones.
func elementCounts() []int64 {
	sizes := []int64{1, 7, 4096 + 3, 1 << 20}
	if os.Getenv("IRISGEN_TEST_QUICK") == "" {
		sizes = append(sizes, 64<<20)
	}
	return sizes
}

// TestAllGather checks both variants in every dtype and size against the
// CPU reference (the concatenation of every rank's input), with fresh data in
// every round and each barrier mode.
func TestAllGather(t *testing.T) {
	eachWorld(t, defaultOpts(), func(t *testing.T, w *runtime.World) {
		for _, variant := range gatherVariants {
			for _, dt := range dataTypes {
				for _, n := range elementCounts() {
					for _, heapInput := range []bool{true, false} {
						name := fmt.Sprintf("%s/%s/n=%d/heap_input=%v", variant, dt, n, heapInput)
						t.Run(name, func(t *testing.T) {
							if err := w.Run(func(r *runtime.Rank) error {
								return checkGather(r, variant, dt, n, heapInput)
							}); err != nil {
								t.Fatal(err)
							}
						})
					}
				}
			}
		}
	})
}

// checkGather runs one all_gather case on one rank.
func checkGather(r *runtime.Rank, variant string, dt runtime.DType, n int64, heapInput bool) error {
	p, err := newGather(r, variant, dt, n)
	if err != nil {
		return err
	}
	defer p.Close()
	h, world, me := r.Heap(), r.World(), r.Rank()
	out, err := h.Alloc(dt, int64(world)*n)
	if err != nil {
		return err
	}
	defer h.Free(out)
	in, free, err := allocInput(r, dt, n, heapInput)
	if err != nil {
		return err
	}
	defer free()
	s := r.Stream()
	es := int64(dt.Size())
	modes := []runtime.Barrier{runtime.BarrierDevice, runtime.BarrierHost, runtime.BarrierNone, runtime.BarrierDevice}
	for round, mode := range modes {
		if err := upload(r, in, randomBytes(in.Bytes(), 7, uint64(me), uint64(round))); err != nil {
			return err
		}
		if err := r.Device().MemsetD8Async(out.Ptr, 0xA5, out.Bytes(), s); err != nil { // poison
			return err
		}
		if mode == runtime.BarrierNone { // the caller orders: everybody poisoned before anybody writes
			if err := r.HostBarrier(s); err != nil {
				return err
			}
		}
		if err := p.Launch(s, in, out, mode); err != nil {
			return fmt.Errorf("rank %d round %d (%s): %w", me, round, mode, err)
		}
		if mode == runtime.BarrierNone {
			if err := r.HostBarrier(s); err != nil {
				return err
			}
		}
		if err := syncCheck(r, s); err != nil {
			return err
		}
		got, err := download(r, out)
		if err != nil {
			return err
		}
		for peer := 0; peer < world; peer++ {
			want := randomBytes(n*es, 7, uint64(peer), uint64(round))
			if slot := got[int64(peer)*n*es : int64(peer+1)*n*es]; !bytes.Equal(slot, want) {
				return fmt.Errorf("rank %d round %d (%s): slot of rank %d: %s", me, round, mode, peer, firstDiff(slot, want, int(es)))
			}
		}
		// Nobody may upload the next round's input before every peer has
		// finished the checks that read this one (the host barrier covers
		// host-side ordering; the kernel's end barrier covers device reads).
		if err := r.HostBarrier(s); err != nil {
			return err
		}
	}
	return checkGatherRejects(r, p, variant, dt, n, in, out)
}

// allocInput allocates a per-rank input on the heap or in plain device memory.
func allocInput(r *runtime.Rank, dt runtime.DType, n int64, onHeap bool) (runtime.Tensor, func(), error) {
	if onHeap {
		t, err := r.Heap().Alloc(dt, n)
		return t, func() { r.Heap().Free(t) }, err
	}
	ptr, err := r.Device().Alloc(n*int64(dt.Size()), false)
	if err != nil {
		return runtime.Tensor{}, nil, err
	}
	return runtime.Tensor{Ptr: ptr, DType: dt, Len: n}, func() { r.Device().Free(ptr) }, nil
}

// checkGatherRejects checks the derived placement and aliasing rules on a
// real launch path: push writes peers' outputs, so an output off the heap is
// refused; both variants forbid aliasing.
func checkGatherRejects(r *runtime.Rank, p gatherPlan, variant string, dt runtime.DType, n int64, in, out runtime.Tensor) error {
	if variant == "push" {
		ptr, err := r.Device().Alloc(out.Bytes(), false)
		if err != nil {
			return err
		}
		defer r.Device().Free(ptr)
		offHeap := runtime.Tensor{Ptr: ptr, DType: dt, Len: out.Len}
		var pe *runtime.PlacementError
		if err := p.Launch(r.Stream(), in, offHeap, runtime.BarrierDevice); !errors.As(err, &pe) {
			return fmt.Errorf("push with an output off the heap: got %v, want *runtime.PlacementError", err)
		}
	}
	slot := out.Slice(int64(r.Rank())*n, n)
	var ae *runtime.AliasError
	if err := p.Launch(r.Stream(), slot, out, runtime.BarrierDevice); !errors.As(err, &ae) {
		return fmt.Errorf("%s with input aliasing the output: got %v, want *runtime.AliasError", variant, err)
	}
	return nil
}

package tests

import (
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// quietPlatform serves the fake platform's devices with Launch and the
// staging copy replaced by counters, so that an allocation test measures
// the generated code and the runtime, not the fake's recording.
type quietPlatform struct{ gpu.Platform }

type quietDevice struct {
	gpu.Device
	launches, copies int
}

func (p quietPlatform) Open(i int) (gpu.Device, error) {
	d, err := p.Platform.Open(i)
	return &quietDevice{Device: d}, err
}

func (d *quietDevice) Launch(gpu.Function, gpu.Dim3, gpu.Dim3, uint32, gpu.Stream, []byte) error {
	d.launches++
	return nil
}

func (d *quietDevice) CopyDtoDAsync(gpu.DevicePtr, gpu.DevicePtr, int64, gpu.Stream) error {
	d.copies++
	return nil
}

// TestLaunchPathDoesNotAllocate: the typed Launch of generated plans (the
// tensors' slice literal, every check of the interpreter, staging, argument
// packing) and the convenience calls once their plan is cached allocate
// nothing.
func TestLaunchPathDoesNotAllocate(t *testing.T) {
	fake := fakegpu.New(1)
	w := fakeWorld(t, 1, quietPlatform{fake}, fakeKernels(fake))
	r := w.Rank(0)
	dev := r.Device().(*quietDevice)
	s := r.Stream()
	const n = 1000
	heap := func(dt irismodel.DType, n int64) irisrt.Tensor {
		x, err := r.Heap().Alloc(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	in, out := heap(irismodel.BF16, n), heap(irismodel.BF16, n)
	ptr, err := r.Device().Alloc(2*n, false)
	if err != nil {
		t.Fatal(err)
	}
	offIn := irisrt.Tensor{Ptr: ptr, DType: irismodel.BF16, Len: n}
	push, err := collectives.NewAllGatherPushPlan(r, irismodel.BF16, n)
	if err != nil {
		t.Fatal(err)
	}
	pull, err := collectives.NewAllGatherPullPlan(r, irismodel.BF16, n)
	if err != nil {
		t.Fatal(err)
	}
	bar, err := collectives.NewBarrierDevicePlan(r)
	if err != nil {
		t.Fatal(err)
	}
	bcast, err := collectives.NewBroadcastPullPlan(r, irismodel.BF16, n)
	if err != nil {
		t.Fatal(err)
	}
	// MoE dispatch: t=4 tokens of h=8, k=2, e=4 experts, cap=8.
	tokens, ids, wts := heap(irismodel.BF16, 4*8), heap(irismodel.I32, 4*2), heap(irismodel.F32, 4*2)
	rt, rid, rw, rs, rc := heap(irismodel.BF16, 8*8), heap(irismodel.I64, 8*2), heap(irismodel.F32, 8*2), heap(irismodel.I64, 8), heap(irismodel.I64, 1)
	ss := heap(irismodel.I64, 4)
	calls := map[string]func() error{
		"typed Launch":         func() error { return push.Launch(s, in, out, irismodel.BarrierDevice) },
		"typed Launch, staged": func() error { return pull.Launch(s, offIn, out, irismodel.BarrierDevice) },
		"no tensors":           func() error { return bar.Launch(s, irismodel.BarrierDevice) },
		"typed Launch, a parameter and a one-rank tensor, staged": func() error {
			return bcast.Launch(s, offIn, out.Slice(0, n), 0, irismodel.BarrierDevice)
		},
		"Shift, an int parameter": func() error {
			return collectives.Shift(r, s, collectives.ShiftPull, irismodel.BF16, offIn, out, 1, irismodel.BarrierDevice)
		},
		"SendRecv, two rank parameters, n given": func() error {
			return collectives.SendRecv(r, s, collectives.SendRecvPush, irismodel.BF16, n, in, out, 0, 0, irismodel.BarrierNone)
		},
		"AllGather": func() error {
			return collectives.AllGather(r, s, collectives.AllGatherPull, irismodel.BF16, offIn, out, irismodel.BarrierDevice)
		},
		"AllReduce auto": func() error {
			return collectives.AllReduce(r, s, collectives.AllReduceAuto, irismodel.BF16, collectives.AllReduceOpSum, in, out, irismodel.BarrierDevice)
		},
		"Barrier": func() error { return collectives.Barrier(r, s, collectives.BarrierDevice, irismodel.BarrierDevice) },
		"MoeDispatch, e given": func() error {
			return collectives.MoeDispatch(r, s, collectives.MoeDispatchPush, irismodel.BF16, 4, tokens, ids, wts, rt, rid, rw, rs, rc, ss, irismodel.BarrierDevice)
		},
	}
	for name, call := range calls {
		if err := call(); err != nil { // the convenience calls make their plan
			t.Fatalf("%s: %v", name, err)
		}
		before := dev.launches
		if allocs := testing.AllocsPerRun(50, func() {
			if err := call(); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("%s: %v allocations a call", name, allocs)
		}
		if dev.launches <= before {
			t.Errorf("%s launched nothing", name)
		}
	}
	if dev.copies == 0 {
		t.Error("the staged launches copied nothing")
	}
	if got := irisimpl.CachedPlans(r); got != 6 {
		t.Errorf("%d cached plans, want 6 (one per convenience call)", got)
	}
}

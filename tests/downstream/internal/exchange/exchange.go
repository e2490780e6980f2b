// Package exchange runs this repository's generated collectives (package
// coll: its own halo exchange and broadcast from a root, and the
// catalogue's all_reduce, moe_dispatch and moe_combine it generates beside
// them) on one rank of a world and checks every result against a CPU
// reference, bit for bit. Inputs are multiples of 1/8 in [-4, 4), exact in
// f32, f16 and bf16, and outputs are poisoned before each launch, so a
// stale or skipped result cannot pass.
package exchange

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"

	"example.com/stencil/internal/gen/coll"
)

// DTypes are the element types both collectives are generated for.
var DTypes = []irismodel.DType{irismodel.F32, irismodel.F16, irismodel.BF16}

// Value is element i of slice side (0 or 1) of what rank contributes.
func Value(rank, side int, i int64) float32 {
	return float32((int64(rank)*7919+int64(side)*104729+i)%64-32) / 8
}

// HaloSend is what rank sends: send[0] to its left neighbour, send[1] to
// its right one, h elements each.
func HaloSend(rank int, h int64) []float32 {
	v := make([]float32, 2*h)
	for side := 0; side < 2; side++ {
		for i := int64(0); i < h; i++ {
			v[int64(side)*h+i] = Value(rank, side, i)
		}
	}
	return v
}

// HaloWant is the CPU reference of recv on rank in a world of world ranks:
// recv[0] is the left neighbour's send[1], recv[1] the right neighbour's
// send[0], neighbours on a ring.
func HaloWant(rank, world int, h int64) []float32 {
	left, right := (rank+world-1)%world, (rank+1)%world
	v := make([]float32, 2*h)
	for i := int64(0); i < h; i++ {
		v[i] = Value(left, 1, i)
		v[h+i] = Value(right, 0, i)
	}
	return v
}

// BroadcastInput is rank's input of a broadcast of n elements.
func BroadcastInput(rank int, n int64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = Value(rank, 0, int64(i))
	}
	return v
}

// BroadcastWant is the CPU reference of every rank's output: the root's
// input.
func BroadcastWant(root int, n int64) []float32 { return BroadcastInput(root, n) }

// Halo is one halo exchange case.
type Halo struct {
	Variant coll.HaloExchangeVariant
	DType   irismodel.DType
	H       int64
	// HeapSend puts send on the symmetric heap; otherwise it is plain
	// device memory, which the pull variant stages onto the heap.
	HeapSend bool
}

func (c Halo) String() string {
	return fmt.Sprintf("halo_exchange/%s %s h=%d heap send=%v", c.Variant, c.DType, c.H, c.HeapSend)
}

// Broadcast is one broadcast case.
type Broadcast struct {
	Variant coll.RootBroadcastVariant
	DType   irismodel.DType
	N       int64
	Root    int
	// HeapInput puts input on the symmetric heap; otherwise it is plain
	// device memory, which the pull variant stages onto the heap.
	HeapInput bool
}

func (c Broadcast) String() string {
	return fmt.Sprintf("root_broadcast/%s %s n=%d root=%d heap input=%v", c.Variant, c.DType, c.N, c.Root, c.HeapInput)
}

// plan is what both variants of a collective have in common.
type plan interface {
	Launch(s gpu.Stream, a, b irisrt.Tensor, mode irismodel.Barrier) error
	Close() error
}

// buffers allocates the collective's two tensors: a on the heap or in
// plain device memory, b on the heap. Heap allocation is collective: every
// rank calls it in the same order.
type buffers struct {
	r    *irisrt.Rank
	a, b irisrt.Tensor
	heap bool
}

func newBuffers(r *irisrt.Rank, dt irismodel.DType, na, nb int64, heapA bool) (*buffers, error) {
	bf := &buffers{r: r, heap: heapA}
	var err error
	if heapA {
		bf.a, err = r.Heap().Alloc(dt, na)
	} else {
		var p gpu.DevicePtr
		p, err = r.Device().Alloc(na*dt.Size(), false)
		bf.a = irisrt.Tensor{Ptr: p, DType: dt, Len: na}
	}
	if err != nil {
		return nil, err
	}
	if bf.b, err = r.Heap().Alloc(dt, nb); err != nil {
		bf.free()
		return nil, err
	}
	return bf, nil
}

func (bf *buffers) free() error {
	var errs []error
	if bf.b.Ptr != 0 {
		errs = append(errs, bf.r.Heap().Free(bf.b))
	}
	if bf.heap {
		errs = append(errs, bf.r.Heap().Free(bf.a))
	} else {
		errs = append(errs, bf.r.Device().Free(bf.a.Ptr))
	}
	return errors.Join(errs...)
}

// RunHalo runs c once eagerly and replays it from a graph, checking recv
// after each.
func RunHalo(r *irisrt.Rank, c Halo) (err error) {
	var p plan
	switch c.Variant {
	case coll.HaloExchangePush:
		p, err = coll.NewHaloExchangePushPlan(r, c.DType, c.H)
	case coll.HaloExchangePull:
		p, err = coll.NewHaloExchangePullPlan(r, c.DType, c.H)
	default:
		return fmt.Errorf("no halo exchange variant %q", c.Variant)
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	bf, err := newBuffers(r, c.DType, 2*c.H, 2*c.H, c.HeapSend)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bf.free()) }()
	send, err := irismodel.Encode(c.DType, HaloSend(r.Rank(), c.H))
	if err != nil {
		return err
	}
	want, err := irismodel.Encode(c.DType, HaloWant(r.Rank(), r.World(), c.H))
	if err != nil {
		return err
	}
	launch := func() error { return p.Launch(r.Stream(), bf.a, bf.b, irismodel.BarrierDevice) }
	return run(r, c.String(), bf, send, want, launch)
}

// broadcastPlan is what both broadcast variants have: the root is a launch
// parameter.
type broadcastPlan interface {
	Launch(s gpu.Stream, input, output irisrt.Tensor, root int, mode irismodel.Barrier) error
	Close() error
}

// RunBroadcast runs c once eagerly and replays it from a graph (captured
// with c.Root: a graph replays the root it captured), checking output
// after each. Only the root passes its input; the others pass the zero
// tensor.
func RunBroadcast(r *irisrt.Rank, c Broadcast) (err error) {
	var p broadcastPlan
	switch c.Variant {
	case coll.RootBroadcastPull:
		p, err = coll.NewRootBroadcastPullPlan(r, c.DType, c.N)
	case coll.RootBroadcastPush:
		p, err = coll.NewRootBroadcastPushPlan(r, c.DType, c.N)
	default:
		return fmt.Errorf("no broadcast variant %q", c.Variant)
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	bf, err := newBuffers(r, c.DType, c.N, c.N, c.HeapInput)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bf.free()) }()
	in, err := irismodel.Encode(c.DType, BroadcastInput(r.Rank(), c.N))
	if err != nil {
		return err
	}
	want, err := irismodel.Encode(c.DType, BroadcastWant(c.Root, c.N))
	if err != nil {
		return err
	}
	input := irisrt.Tensor{} // the root's alone
	if r.Rank() == c.Root {
		input = bf.a
	}
	launch := func() error { return p.Launch(r.Stream(), input, bf.b, c.Root, irismodel.BarrierDevice) }
	return run(r, c.String(), bf, in, want, launch)
}

// Replays is how many times run replays a captured launch.
const Replays = 3

// checkValues compares results with the CPU reference; the fake-platform
// test of All turns it off (its GPU runs no kernels) and checks the rest:
// plans, placements, staging, capture and replay.
var checkValues = true

// run uploads input into bf.a, poisons bf.b, launches, and compares bf.b
// with want; then the same under graph replay, with the input uploaded
// afresh and the output poisoned before every replay.
func run(r *irisrt.Rank, name string, bf *buffers, input, want []byte, launch func() error) error {
	check := func(how string) error {
		if err := r.Device().StreamSynchronize(r.Stream()); err != nil {
			return fmt.Errorf("%s, %s: %w", name, how, err)
		}
		if err := r.Check(); err != nil {
			return fmt.Errorf("%s, %s: %w", name, how, err)
		}
		if !checkValues {
			return nil
		}
		got, err := download(r, bf.b)
		if err != nil {
			return err
		}
		if i := firstDiff(got, want); i >= 0 {
			es := int(bf.b.DType.Size())
			return fmt.Errorf("%s, %s: rank %d, element %d of %d: got bytes %x, want %x", name, how, r.Rank(), i/es, bf.b.Len,
				got[i/es*es:i/es*es+es], want[i/es*es:i/es*es+es])
		}
		return nil
	}
	prepare := func() error {
		if err := upload(r, bf.a, input); err != nil {
			return err
		}
		return upload(r, bf.b, poison(len(want)))
	}
	if err := prepare(); err != nil {
		return err
	}
	if err := launch(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := check("eager"); err != nil {
		return err
	}
	g, err := r.Capture(r.Stream(), launch)
	if err != nil {
		return fmt.Errorf("%s: capturing: %w", name, err)
	}
	defer g.Destroy()
	for i := 0; i < Replays; i++ {
		if err := prepare(); err != nil {
			return err
		}
		// Replay launches the graph, waits for it and reports any error a
		// kernel raised under replay.
		if err := g.Replay(r.Stream()); err != nil {
			return fmt.Errorf("%s: replay %d: %w", name, i, err)
		}
		if err := check(fmt.Sprintf("replay %d", i)); err != nil {
			return err
		}
	}
	return nil
}

// poison is n bytes of 0xff: NaN in every float type, never a valid result.
func poison(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xff
	}
	return b
}

func upload(r *irisrt.Rank, t irisrt.Tensor, b []byte) error {
	if int64(len(b)) != t.Bytes() {
		return fmt.Errorf("upload: %d bytes into a %d-byte tensor", len(b), t.Bytes())
	}
	if len(b) == 0 {
		return nil
	}
	return r.Device().CopyHtoD(t.Ptr, unsafe.Pointer(&b[0]), t.Bytes())
}

func download(r *irisrt.Rank, t irisrt.Tensor) ([]byte, error) {
	b := make([]byte, t.Bytes())
	if len(b) == 0 {
		return b, nil
	}
	return b, r.Device().CopyDtoH(unsafe.Pointer(&b[0]), t.Ptr, t.Bytes())
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// Sizes are the element counts of the matrix: one element, an odd count
// that leaves a tail after the 16-byte vectors, and a large one.
var Sizes = []int64{1, 4096 + 3, 1<<20 + 5}

// All runs every case on r: both variants of this repository's two
// collectives, every dtype and size, the tensor peers read on and off the
// heap, the broadcast from every root (one plan per variant, dtype and
// size serves them all); and of the catalogue's it uses, every all_reduce
// variant (and auto) with its input on and off the heap, and the MoE pair.
// Every rank of the world calls it. It returns the number of cases that
// passed.
func All(r *irisrt.Rank, sizes []int64) (int, error) {
	n := 0
	for _, dt := range DTypes {
		for _, size := range sizes {
			for _, v := range AllReduceVariants {
				for _, heap := range []bool{true, false} {
					if err := RunAllReduce(r, AllReduce{Variant: v, DType: dt, N: size, HeapInput: heap}); err != nil {
						return n, err
					}
					n++
				}
			}
		}
		for _, c := range moeCases(dt, r.World()) {
			if err := RunMoE(r, c); err != nil {
				return n, err
			}
			n++
		}
	}
	for _, dt := range DTypes {
		for _, h := range sizes {
			for _, v := range []coll.HaloExchangeVariant{coll.HaloExchangePush, coll.HaloExchangePull} {
				for _, heap := range []bool{true, false} {
					if err := RunHalo(r, Halo{Variant: v, DType: dt, H: h, HeapSend: heap}); err != nil {
						return n, err
					}
					n++
				}
			}
			for _, v := range []coll.RootBroadcastVariant{coll.RootBroadcastPull, coll.RootBroadcastPush} {
				for root := 0; root < r.World(); root++ {
					for _, heap := range []bool{true, false} {
						if err := RunBroadcast(r, Broadcast{Variant: v, DType: dt, N: h, Root: root, HeapInput: heap}); err != nil {
							return n, err
						}
						n++
					}
				}
			}
		}
	}
	return n, nil
}

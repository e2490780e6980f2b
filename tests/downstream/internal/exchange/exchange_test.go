package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu/fakekernels"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"

	"example.com/stencil/internal/gen/coll"
)

// TestHaloReference enumerates the neighbours on rings of 1 to 4 ranks.
func TestHaloReference(t *testing.T) {
	for _, c := range []struct{ world, rank, left, right int }{
		{1, 0, 0, 0},
		{2, 0, 1, 1}, {2, 1, 0, 0},
		{3, 0, 2, 1}, {3, 1, 0, 2}, {3, 2, 1, 0},
		{4, 0, 3, 1}, {4, 3, 2, 0},
	} {
		const h = 5
		want := HaloWant(c.rank, c.world, h)
		left, right := HaloSend(c.left, h), HaloSend(c.right, h)
		require.Equal(t, left[h:], want[:h], "%+v: recv[0] is the left neighbour's send[1]", c)
		require.Equal(t, right[:h], want[h:], "%+v: recv[1] is the right neighbour's send[0]", c)
	}
	require.Equal(t, BroadcastInput(2, 7), BroadcastWant(2, 7))
	require.NotEqual(t, HaloSend(0, 4)[:4], HaloSend(0, 4)[4:], "the two slices differ")
	require.NotEqual(t, BroadcastInput(0, 9), BroadcastInput(1, 9), "ranks' inputs differ")
}

// TestValuesExact: every value the checks use is exact in each dtype, so
// the comparison can be bit for bit.
func TestValuesExact(t *testing.T) {
	v := HaloSend(3, 200)
	for _, dt := range DTypes {
		b, err := irismodel.Encode(dt, v)
		require.NoError(t, err)
		got, err := irismodel.Decode(dt, b)
		require.NoError(t, err)
		require.Equal(t, v, got, dt.String())
	}
}

// fakeWorld is an in-process world of n fake GPUs that serve every module
// of this repository's generated package (its own collectives and the
// catalogue's it generates) with their kernels and spec hashes, as the
// code objects of `go tool irisgen kernels` would.
func fakeWorld(t *testing.T, n int) (*irisrt.World, *fakegpu.Platform) {
	t.Helper()
	p := fakegpu.New(n)
	kernels, err := fakekernels.For(p, irisimpl.Registered("example.com/stencil/internal/gen/coll"))
	require.NoError(t, err)
	w, err := irisrt.NewLocalWorld(n, irisrt.Options{Platform: p, Kernels: kernels, HeapBytes: 64 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Close()) })
	return w, p
}

// launchesOf lists the launches recorded on rank r's device since from.
func launchesOf(p *fakegpu.Platform, r *irisrt.Rank, from int) []fakegpu.Launch {
	var out []fakegpu.Launch
	for _, l := range p.Launches() {
		if l.Seq >= from && l.Device == r.Device().Ordinal() {
			out = append(out, l)
		}
	}
	return out
}

func word(args []byte, i int) uint64 { return binary.LittleEndian.Uint64(args[i*8:]) }

// ctxWords is the kernel context's size in 8-byte words (docs/internals.md).
const ctxWords = 112 / 8

// TestHaloPlansOnFake: the generated wrappers refuse what the spec's rules
// forbid, and pack the arguments of what they launch: tensor pointers in
// spec order after the context, then the sizes.
func TestHaloPlansOnFake(t *testing.T) {
	w, p := fakeWorld(t, 2)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		const h = 5
		push, err := coll.NewHaloExchangePushPlan(r, irismodel.BF16, h)
		require.NoError(t, err)
		defer push.Close()
		pull, err := coll.NewHaloExchangePullPlan(r, irismodel.BF16, h)
		require.NoError(t, err)
		defer pull.Close()
		heapSend, err := r.Heap().Alloc(irismodel.BF16, 2*h)
		require.NoError(t, err)
		heapRecv, err := r.Heap().Alloc(irismodel.BF16, 2*h)
		require.NoError(t, err)
		dev, err := r.Device().Alloc(2*h*2, false)
		require.NoError(t, err)
		devSend := irisrt.Tensor{Ptr: dev, DType: irismodel.BF16, Len: 2 * h}
		before := len(p.Launches())

		// Refused: nothing launched.
		var pe *irisrt.PlacementError
		require.ErrorAs(t, push.Launch(r.Stream(), heapSend, devSend, irismodel.BarrierDevice), &pe, "push writes the neighbours' recv: it must be on the heap")
		require.Equal(t, "recv", pe.Name)
		var de *irisrt.DTypeError
		require.ErrorAs(t, push.Launch(r.Stream(), irisrt.Tensor{Ptr: heapSend.Ptr, DType: irismodel.F32, Len: h}, heapRecv, irismodel.BarrierDevice), &de)
		var se *irisrt.ShapeError
		require.ErrorAs(t, pull.Launch(r.Stream(), heapSend, heapRecv.Slice(0, h), irismodel.BarrierDevice), &se)
		var ae *irisrt.AliasError
		require.ErrorAs(t, push.Launch(r.Stream(), heapSend, heapSend, irismodel.BarrierDevice), &ae)
		require.Empty(t, launchesOf(p, r, before))

		// push: send anywhere, recv on the heap; pointers as passed.
		require.NoError(t, push.Launch(r.Stream(), devSend, heapRecv, irismodel.BarrierDevice))
		// pull: send off the heap is staged onto it; recv anywhere.
		require.NoError(t, pull.Launch(r.Stream(), devSend, heapRecv, irismodel.BarrierDevice))
		// pull with send on the heap: read in place.
		require.NoError(t, pull.Launch(r.Stream(), heapSend, heapRecv, irismodel.BarrierNone))
		ls := launchesOf(p, r, before)
		require.Len(t, ls, 3)
		require.Equal(t, "irisgen_halo_exchange_push_bf16", ls[0].Function)
		require.Equal(t, "irisgen_halo_exchange_pull_bf16", ls[1].Function)
		for _, l := range ls {
			require.Len(t, l.Args, 8*(ctxWords+3), "context, send, recv, h")
			require.Equal(t, uint64(heapRecv.Ptr), word(l.Args, ctxWords+1))
			require.Equal(t, uint64(h), word(l.Args, ctxWords+2))
			blocks, _ := irisimpl.Grid(2*h*2, 256, 16, 1, 32) // the spec's shape: no min_blocks
			require.Equal(t, uint32(256), l.Block.X, "threads from the spec")
			require.Equal(t, uint32(blocks), l.Grid.X)
		}
		require.Equal(t, uint64(devSend.Ptr), word(ls[0].Args, ctxWords), "push reads send where it is")
		staged := gpu.DevicePtr(word(ls[1].Args, ctxWords))
		require.NotEqual(t, devSend.Ptr, staged)
		require.True(t, r.Heap().Contains(staged, devSend.Bytes()), "pull reads a send that is off the heap from the plan's staging on the heap")
		require.Equal(t, uint64(heapSend.Ptr), word(ls[2].Args, ctxWords), "a send on the heap is not staged")
		return errors.Join(r.Heap().Free(heapSend), r.Heap().Free(heapRecv), r.Device().Free(dev))
	}))
}

// TestRootBroadcastPlansOnFake: the root is a launch parameter, checked
// against the world before anything is enqueued and passed after n; only
// the root's input is checked and passed (the others get a null pointer),
// and pull, whose peers read it, gets the address slots where the root
// publishes it.
func TestRootBroadcastPlansOnFake(t *testing.T) {
	w, p := fakeWorld(t, 2)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		const n = 9
		push, err := coll.NewRootBroadcastPushPlan(r, irismodel.F16, n)
		require.NoError(t, err)
		defer push.Close()
		pull, err := coll.NewRootBroadcastPullPlan(r, irismodel.F16, n)
		require.NoError(t, err)
		defer pull.Close()
		in, err := r.Heap().Alloc(irismodel.F16, n)
		require.NoError(t, err)
		out, err := r.Heap().Alloc(irismodel.F16, n)
		require.NoError(t, err)
		dev, err := r.Device().Alloc(n*2, false)
		require.NoError(t, err)
		before := len(p.Launches())
		var pe *irisrt.PlacementError
		require.ErrorAs(t, push.Launch(r.Stream(), in, irisrt.Tensor{Ptr: dev, DType: irismodel.F16, Len: n}, 1, irismodel.BarrierDevice), &pe,
			"the root stores into every rank's output: it must be on the heap")
		var pa *irisrt.ParamError
		require.ErrorAs(t, push.Launch(r.Stream(), in, out, 2, irismodel.BarrierDevice), &pa, "root 2 of a world of 2")
		require.Equal(t, "root", pa.Name)
		var de *irisrt.DTypeError
		bad := irisrt.Tensor{Ptr: in.Ptr, DType: irismodel.F32, Len: n}
		if r.Rank() == 1 {
			require.ErrorAs(t, push.Launch(r.Stream(), bad, out, 1, irismodel.BarrierDevice), &de, "the root's input is checked")
		}
		require.Empty(t, launchesOf(p, r, before))
		if err := r.HostBarrier(r.Stream()); err != nil {
			return err
		}

		input := irisrt.Tensor{} // root 1's alone
		if r.Rank() == 1 {
			input = in
		}
		before = len(p.Launches())
		require.NoError(t, push.Launch(r.Stream(), input, out, 1, irismodel.BarrierDevice))
		require.NoError(t, pull.Launch(r.Stream(), input, out, 1, irismodel.BarrierDevice))
		ls := launchesOf(p, r, before)
		require.Len(t, ls, 2)
		require.Equal(t, "irisgen_root_broadcast_push_f16", ls[0].Function)
		require.Equal(t, "irisgen_root_broadcast_pull_f16", ls[1].Function)
		for _, l := range ls {
			require.Len(t, l.Args, 8*(ctxWords+5), "context, input, output, n, root, input's address slots")
			require.Equal(t, []uint64{uint64(input.Ptr), uint64(out.Ptr), n, 1},
				[]uint64{word(l.Args, ctxWords), word(l.Args, ctxWords+1), word(l.Args, ctxWords+2), word(l.Args, ctxWords+3)})
		}
		require.Zero(t, word(ls[0].Args, ctxWords+4), "push: only the root reads its input")
		slots := gpu.DevicePtr(word(ls[1].Args, ctxWords+4))
		require.True(t, r.Heap().Contains(slots, 8), "pull: the plan's address slots, on the heap")
		return errors.Join(r.Heap().Free(in), r.Heap().Free(out), r.Device().Free(dev))
	}))
}

// TestAllOnFake runs the program's whole matrix (All, as cmd/stencil does)
// on a fake world of 2: every plan is made and closed, every launch passes
// its checks (placement, staging, aliasing, parameters), every capture and
// replay works, and every kernel of every case is launched. The fake GPU
// runs no kernels, so results are not compared here; the GPUs do that.
func TestAllOnFake(t *testing.T) {
	checkValues = false
	defer func() { checkValues = true }()
	w, p := fakeWorld(t, 2)
	sizes := []int64{1, 4096 + 3}
	var cases [2]int
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		n, err := All(r, sizes)
		cases[r.Rank()] = n
		return err
	}))
	perDType := len(sizes)*len(AllReduceVariants)*2 + len(moeCases(irismodel.F32, 2)) + len(sizes)*(2*2+2*2*2)
	require.Equal(t, [2]int{len(DTypes) * perDType, len(DTypes) * perDType}, cases)

	launched := map[string]int{}
	for _, l := range p.Launches() {
		if !l.Captured {
			launched[l.Function]++
		}
	}
	for _, dt := range DTypes {
		for _, v := range AllReduceVariants[:len(AllReduceVariants)-1] {
			k := "irisgen_all_reduce_" + string(v) + "_" + dt.String() + "_sum"
			// Per rank: 2 sizes x input on and off the heap x (eager + replays).
			require.GreaterOrEqual(t, launched[k], 2*2*2*(1+Replays), k)
		}
		for _, k := range []string{"irisgen_moe_dispatch_push_", "irisgen_moe_combine_push_", "irisgen_halo_exchange_push_", "irisgen_root_broadcast_pull_"} {
			require.Positive(t, launched[k+dt.String()], k+dt.String())
		}
	}
}

// TestAllReduceArgsOnFake: the argument layout of the catalogue's
// all_reduce in this package: after the context, one pointer per tensor in
// spec order, its five workspace tensors included (the plan's buffer where
// the variant uses it, else 0), then n. An input off the heap is staged
// onto the heap for one_shot, whose peers read it, and passed as it is to
// one_shot_staged, which copies it into its stage workspace itself.
func TestAllReduceArgsOnFake(t *testing.T) {
	w, p := fakeWorld(t, 2)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		const n = 100
		dev, err := r.Device().Alloc(n*2, false)
		require.NoError(t, err)
		in := irisrt.Tensor{Ptr: dev, DType: irismodel.BF16, Len: n}
		out, err := r.Heap().Alloc(irismodel.BF16, n)
		require.NoError(t, err)
		oneShot, err := coll.NewAllReduceOneShotPlan(r, irismodel.BF16, coll.AllReduceOpSum, n)
		require.NoError(t, err)
		defer oneShot.Close()
		staged, err := coll.NewAllReduceOneShotStagedPlan(r, irismodel.BF16, coll.AllReduceOpSum, n)
		require.NoError(t, err)
		defer staged.Close()
		before := len(p.Launches())
		require.NoError(t, oneShot.Launch(r.Stream(), in, out, irismodel.BarrierDevice))
		require.NoError(t, staged.Launch(r.Stream(), in, out, irismodel.BarrierDevice))
		ls := launchesOf(p, r, before)
		require.Len(t, ls, 2)
		require.Equal(t, "irisgen_all_reduce_one_shot_bf16_sum", ls[0].Function)
		require.Equal(t, "irisgen_all_reduce_one_shot_staged_bf16_sum", ls[1].Function)
		// input, output, ring, locks, stage, inbox, lamport, n
		for _, l := range ls {
			require.Len(t, l.Args, 8*(ctxWords+8))
			require.Equal(t, uint64(out.Ptr), word(l.Args, ctxWords+1))
			require.Equal(t, uint64(n), word(l.Args, ctxWords+7))
		}
		a := ls[0].Args
		require.NotEqual(t, uint64(in.Ptr), word(a, ctxWords), "one_shot: input staged")
		require.True(t, r.Heap().Contains(gpu.DevicePtr(word(a, ctxWords)), in.Bytes()), "onto the heap")
		require.Equal(t, []uint64{0, 0, 0, 0, 0}, []uint64{word(a, ctxWords+2), word(a, ctxWords+3), word(a, ctxWords+4), word(a, ctxWords+5), word(a, ctxWords+6)},
			"one_shot uses no workspace")
		a = ls[1].Args
		require.Equal(t, uint64(in.Ptr), word(a, ctxWords), "one_shot_staged reads input where it is")
		stage := gpu.DevicePtr(word(a, ctxWords+4))
		require.True(t, r.Heap().Contains(stage, 2*n*2), "its stage workspace [2, n] on the heap")
		require.Equal(t, []uint64{0, 0, 0, 0}, []uint64{word(a, ctxWords+2), word(a, ctxWords+3), word(a, ctxWords+5), word(a, ctxWords+6)})
		return errors.Join(r.Heap().Free(out), r.Device().Free(dev))
	}))
}

// TestMoEReference: the CPU reference's routing sends every token to each
// rank that holds one of its experts, once (a token with both experts on
// one rank counts once there), each token's experts differ, and the
// weights are applied.
func TestMoEReference(t *testing.T) {
	for _, world := range []int{1, 2, 3, 4, 8} {
		for _, c := range moeCases(irismodel.F32, world) {
			var total, want int64
			for r := 0; r < world; r++ {
				for _, n := range c.WantCounts(r, world) {
					total += n
				}
				for tok := int64(0); tok < c.T; tok++ {
					if c.E > 3 {
						require.NotEqual(t, c.Expert(r, tok, 0), c.Expert(r, tok, 1))
					}
					ranks := map[int]bool{}
					for j := int64(0); j < c.K; j++ {
						o := c.Owner(c.Expert(r, tok, j), world)
						require.Less(t, o, world)
						ranks[o] = true
					}
					want += int64(len(ranks))
				}
			}
			require.Equal(t, want, total, "world %d %s", world, c)
			require.LessOrEqual(t, total, int64(world)*c.T*c.K)
			require.GreaterOrEqual(t, total, int64(world)*c.T)
			tok, wantOut := c.Tokens(0), c.Want(0)
			w := float32(c.K)
			if c.Weights {
				w = 0.75
			}
			require.Equal(t, w*tok[3], wantOut[3])
		}
	}
	require.Equal(t, AllReduceInput(0, 5)[2]+AllReduceInput(1, 5)[2], AllReduceWant(2, 5)[2])
}

// TestHaloPushEmulatedOnFake runs halo_exchange's push variant on a fake
// world of 3 with a Go stand-in for its kernel (fakegpu's OnLaunch hook),
// which finds everything in the kernel's argument bytes as the real kernel
// does: the context (the heap bases of every rank, this rank and the
// world), then send, recv and h. It stores send[0] into the left
// neighbour's recv[1] and send[1] into the right one's recv[0] through the
// heap's address translation. So the test checks the wrappers' argument
// layout, the heap's symmetric offsets and the CPU reference together,
// with no GPU. docs/testing.md walks through it.
func TestHaloPushEmulatedOnFake(t *testing.T) {
	const world, h = 3, 5
	w, p := fakeWorld(t, world)
	p.OnLaunch(func(l fakegpu.Launch) error {
		if l.Function != "irisgen_halo_exchange_push_f32" {
			return fmt.Errorf("unexpected kernel %s", l.Function)
		}
		a := l.Args
		var base [8]uint64 // ctx.base: every rank's heap base, as mapped on this device
		for i := range base {
			base[i] = word(a, i)
		}
		rank := int(binary.LittleEndian.Uint32(a[96:])) // ctx.rank, after base, flags, epochs, err, timeout_ns
		n := int(binary.LittleEndian.Uint32(a[100:]))   // ctx.world
		send, recv, hh := word(a, ctxWords), word(a, ctxWords+1), int64(word(a, ctxWords+2))
		peer := func(r int, ptr uint64) gpu.DevicePtr { return gpu.DevicePtr(base[r] + ptr - base[rank]) }
		data, err := p.Read(gpu.DevicePtr(send), 2*hh*4)
		if err != nil {
			return err
		}
		left, right := (rank+n-1)%n, (rank+1)%n
		if err := p.Write(peer(left, recv)+gpu.DevicePtr(hh*4), data[:hh*4]); err != nil { // left's recv[1]
			return err
		}
		return p.Write(peer(right, recv), data[hh*4:]) // right's recv[0]
	})
	defer p.OnLaunch(nil)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		plan, err := coll.NewHaloExchangePushPlan(r, irismodel.F32, h)
		if err != nil {
			return err
		}
		defer plan.Close()
		send, err := r.Heap().Alloc(irismodel.F32, 2*h) // collective: every rank, same order
		if err != nil {
			return err
		}
		recv, err := r.Heap().Alloc(irismodel.F32, 2*h)
		if err != nil {
			return err
		}
		in, err := irismodel.Encode(irismodel.F32, HaloSend(r.Rank(), h))
		if err != nil {
			return err
		}
		if err := upload(r, send, in); err != nil {
			return err
		}
		// Every rank's send is in place before any kernel reads it: the
		// real kernel's first barrier, done here on the host.
		if err := r.HostBarrier(r.Stream()); err != nil {
			return err
		}
		if err := plan.Launch(r.Stream(), send, recv, irismodel.BarrierDevice); err != nil {
			return err
		}
		// Every neighbour has stored into this rank's recv.
		if err := r.HostBarrier(r.Stream()); err != nil {
			return err
		}
		got, err := download(r, recv)
		if err != nil {
			return err
		}
		vals, err := irismodel.Decode(irismodel.F32, got)
		if err != nil {
			return err
		}
		if want := HaloWant(r.Rank(), r.World(), h); !slices.Equal(vals, want) {
			return fmt.Errorf("rank %d: recv %v, want %v", r.Rank(), vals, want)
		}
		return errors.Join(r.Heap().Free(send), r.Heap().Free(recv))
	}))
}

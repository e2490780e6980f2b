package moepair

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu/fakekernels"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// fakeWorld is a 2-GPU fake world serving the catalogue's kernels with
// their spec hashes (the fake runs no code: it records launches).
func fakeWorld(t *testing.T) (*irisrt.World, *fakegpu.Platform) {
	p := fakegpu.New(2)
	kernels, err := fakekernels.For(p, irisimpl.Registered("github.com/irisgen/irisgen/generated/collectives"))
	require.NoError(t, err)
	w, err := irisrt.NewLocalWorld(2, irisrt.Options{Platform: p, Kernels: kernels, HeapBytes: 64 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w, p
}

func TestPair(t *testing.T) {
	w, p := fakeWorld(t)
	const tk, h, k, e, cp = 33, 64, 3, 8, 40
	sizes := []int64{tk, h, k, e, cp}
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		free := r.Heap().FreeBytesLeft()
		pair, err := New(r, collectives.Catalogue, irismodel.BF16, sizes)
		if err != nil {
			return err
		}
		ts := pair.Tensors
		assert.Len(t, pair.DispatchArgs, 9)
		assert.Len(t, pair.CombineArgs, 7)
		// Dispatch's outputs are combine's inputs: the same tensors.
		for i, name := range []string{"recv_ids", "recv_weights", "recv_src", "recv_counts", "send_slot"} {
			assert.Equal(t, ts[name], pair.DispatchArgs[4+i], name)
			assert.Equal(t, ts[name], pair.CombineArgs[1+i], name)
		}
		assert.Equal(t, ts["expert_out"], pair.CombineArgs[0])
		assert.Equal(t, irismodel.I64, ts["ids"].DType)
		assert.Equal(t, irismodel.F32, ts["weights"].DType)
		assert.Equal(t, int64(2*cp*h), ts["recv_tokens"].Len)
		assert.Equal(t, int64(k*2*cp*h), ts["expert_out"].Len)
		assert.Equal(t, int64(2*cp*k), ts["recv_ids"].Len)
		assert.Equal(t, int64(tk*2), ts["send_slot"].Len)
		assert.Equal(t, int64(tk*h), ts["output"].Len)

		// The identity expert copies the received rows into every plane.
		rows := ts["recv_tokens"]
		want := make([]byte, rows.Bytes())
		for i := range want {
			want[i] = byte(i*7 + r.Rank())
		}
		dev, s := r.Device(), r.Stream()
		if err := dev.CopyHtoD(rows.Ptr, unsafe.Pointer(&want[0]), rows.Bytes()); err != nil {
			return err
		}
		if err := pair.Expert(s); err != nil {
			return err
		}
		if err := dev.StreamSynchronize(s); err != nil {
			return err
		}
		got := make([]byte, ts["expert_out"].Bytes())
		if err := dev.CopyDtoH(unsafe.Pointer(&got[0]), ts["expert_out"].Ptr, int64(len(got))); err != nil {
			return err
		}
		for j := range k {
			assert.Equal(t, want, got[j*len(want):(j+1)*len(want)], "plane %d of expert_out", j)
		}

		if r.Rank() == 0 {
			p.ClearLaunches()
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if err := pair.Launch(s, irismodel.BarrierDevice); err != nil {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if err := pair.Close(); err != nil {
			return err
		}
		assert.Equal(t, free, r.Heap().FreeBytesLeft(), "Close frees every tensor and both plans")
		return nil
	}))
	var names []string
	for _, l := range p.Launches() {
		if l.Device == 0 {
			names = append(names, l.Function)
		}
	}
	assert.Equal(t, []string{"irisgen_moe_dispatch_push_bf16", "irisgen_moe_combine_push_bf16"}, names, "dispatch, then combine")
}

func TestPairSizes(t *testing.T) {
	w, _ := fakeWorld(t)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		_, err := New(r, collectives.Catalogue, irismodel.BF16, []int64{1, 2, 3})
		assert.ErrorContains(t, err, "3 sizes, want 5")
		return nil
	}))
}

// TestFind: the pair is found in any package's catalogue that holds both
// push variants, and only there.
func TestFind(t *testing.T) {
	d, c, ok := Find(collectives.Catalogue)
	require.True(t, ok)
	assert.Equal(t, [2]string{"moe_dispatch/push", "moe_combine/push"}, [2]string{d.Collective + "/" + d.Variant, c.Collective + "/" + c.Variant})
	var noCombine []irisimpl.Entry
	for _, e := range collectives.Catalogue {
		if e.Collective != Combine {
			noCombine = append(noCombine, e)
		}
	}
	_, _, ok = Find(noCombine)
	assert.False(t, ok)
	_, _, ok = Find(nil)
	assert.False(t, ok)
}

// Entry.Alloc, which New's allocation follows: one tensor per spec tensor,
// in its element type, all freed by free.
func TestEntryAlloc(t *testing.T) {
	w, _ := fakeWorld(t)
	e, ok := collectives.Lookup("moe_dispatch", "push")
	require.True(t, ok)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		free := r.Heap().FreeBytesLeft()
		ts, release, err := e.Alloc(r, irismodel.F16, []int64{5, 16, 2, 8, 10})
		if err != nil {
			return err
		}
		require.Len(t, ts, len(e.Tensors))
		for i, ti := range e.Tensors {
			assert.Equal(t, ti.ElemType(irismodel.F16), ts[i].DType, ti.Name)
			assert.Equal(t, ti.Numel(2, []int64{5, 16, 2, 8, 10}), ts[i].Len, ti.Name)
		}
		assert.Equal(t, irismodel.I64, ts[1].DType, "ids: the first index type")
		release()
		assert.Equal(t, free, r.Heap().FreeBytesLeft())
		return nil
	}))
}

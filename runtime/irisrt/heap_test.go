package irisrt

import (
	"math/rand/v2"
	"testing"

	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomOps runs a reproducible mix of allocs and frees and returns every
// offset handed out, in order.
func randomOps(t *testing.T, a *allocator, seed uint64, steps int) []int64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	var live, offs []int64
	for i := 0; i < steps; i++ {
		if len(live) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(live))
			require.True(t, release(a, live[k]))
			live = append(live[:k], live[k+1:]...)
			continue
		}
		l, ok := a.alloc(rng.Int64N(5000), kindUser)
		if !ok {
			offs = append(offs, -1)
			continue
		}
		off := l.off
		require.Zero(t, off%heapAlign, "alignment")
		offs = append(offs, off)
		live = append(live, off)
	}
	return offs
}

// alloc and release are the allocator's calls by offset, as the tests use them.
func alloc(a *allocator, n int64) (int64, bool) {
	l, ok := a.alloc(n, kindUser)
	return l.off, ok
}

func release(a *allocator, off int64) bool {
	i, ok := a.starting(off)
	if ok {
		a.release(i)
	}
	return ok
}

func TestAllocatorDeterministicAndAligned(t *testing.T) {
	a, b := newAllocator(1<<20), newAllocator(1<<20)
	oa, ob := randomOps(t, a, 42, 3000), randomOps(t, b, 42, 3000)
	assert.Equal(t, oa, ob, "the same call sequence gives the same offsets")
	assert.Equal(t, a.sum, b.sum)
	assert.Equal(t, len(a.live), len(b.live))
	// the free list stays sorted, coalesced and inside the heap
	checkSpans(t, a)
}

func checkSpans(t *testing.T, a *allocator) {
	t.Helper()
	var total int64
	for i, s := range a.spans {
		require.Positive(t, s.n)
		require.LessOrEqual(t, s.off+s.n, a.size)
		if i > 0 {
			prev := a.spans[i-1]
			require.Less(t, prev.off+prev.n, s.off, "spans sorted and never adjacent")
		}
		total += s.n
	}
	for i, l := range a.live {
		total += l.n
		if i > 0 {
			require.Less(t, a.live[i-1].off, l.off, "the live table is sorted by offset")
		}
	}
	require.Equal(t, a.size, total, "free + live covers the heap")
}

func TestAllocatorReuseAndCoalescing(t *testing.T) {
	a := newAllocator(4096)
	x, _ := alloc(a, 100) // 256
	y, _ := alloc(a, 300) // 512
	z, _ := alloc(a, 1)   // 256
	assert.Equal(t, []int64{0, 256, 768}, []int64{x, y, z})
	require.True(t, release(a, y))
	w, _ := alloc(a, 256)
	assert.Equal(t, int64(256), w, "first fit reuses the freed hole")
	v, _ := alloc(a, 256)
	assert.Equal(t, int64(512), v)
	require.False(t, release(a, y+1), "not the start of an allocation")
	for _, o := range []int64{x, z, w, v} {
		require.True(t, release(a, o))
	}
	require.False(t, release(a, x), "double free")
	assert.Equal(t, []span{{0, 4096}}, a.spans, "everything coalesces back into one block")
	assert.Zero(t, a.sum)
	full, ok := alloc(a, 4096)
	assert.True(t, ok)
	assert.Zero(t, full)
	_, ok = alloc(a, 1)
	assert.False(t, ok, "exhausted")
	_, ok = alloc(a, -1)
	assert.False(t, ok)
}

func TestAllocatorBeyond4GiB(t *testing.T) {
	const size = 24 << 30
	a := newAllocator(size)
	pad, ok := alloc(a, 5<<30+3)
	require.True(t, ok)
	obj, ok := alloc(a, 1024)
	require.True(t, ok)
	assert.Equal(t, int64(5<<30+heapAlign), obj, "offsets past 4 GiB are exact")
	big, ok := alloc(a, 16<<30)
	require.True(t, ok)
	assert.Greater(t, big, int64(4<<30))
	near, ok := alloc(a, size-(obj+1024)-16<<30)
	require.True(t, ok, "the tail up to the last byte is usable")
	assert.Equal(t, big+16<<30, near)
	i, ok := a.starting(near)
	require.True(t, ok)
	assert.Equal(t, int64(size), near+a.live[i].n)
	require.True(t, release(a, pad))
	_, ok = alloc(a, 5<<30+257)
	assert.False(t, ok, "a 5 GiB hole does not take more")
	again, ok := alloc(a, 5<<30)
	require.True(t, ok)
	assert.Zero(t, again)
	checkSpans(t, a)
}

func TestHeapExhaustionAndContains(t *testing.T) {
	w := newFakeWorld(t, 2, Options{HeapBytes: 64 << 10})
	h := w.Rank(0).Heap()
	assert.Equal(t, int64(64<<10), h.Size())
	x, err := h.Alloc(irismodel.F32, 1000)
	require.NoError(t, err)
	assert.True(t, h.Contains(x.Ptr, x.Bytes()))
	assert.True(t, h.Contains(h.Base(0), h.Size()))
	assert.False(t, h.Contains(h.Base(0), h.Size()+1))
	assert.False(t, h.Contains(h.Base(0)-1, 1))
	assert.False(t, h.Contains(h.Base(0)+gpuPtr(h.Size()), 0))
	assert.False(t, h.Contains(h.Base(1), 8), "a peer's heap is not this rank's heap")
	off, ok := h.Offset(x.Ptr)
	assert.True(t, ok)
	assert.Equal(t, h.Base(1)+gpuPtr(off), h.Peer(x.Ptr, 1))

	_, err = h.Alloc(irismodel.F32, 1<<20)
	var he *HeapError
	require.ErrorAs(t, err, &he)
	assert.Contains(t, he.Error(), "Options.HeapBytes or IRISGEN_HEAP_BYTES")
	assert.Contains(t, he.Error(), "65536-byte heap")
	require.Error(t, h.Free(x.Slice(1, 1)), "a slice is not an allocation")
	require.NoError(t, h.Free(x))
	require.Error(t, h.Free(x), "double free")
	assert.Equal(t, h.Size()-core.ControlBytes, h.FreeBytesLeft())
	_, err = h.Alloc(irismodel.DType(0), 1)
	assert.Error(t, err)
	_, err = h.Alloc(irismodel.F32, -1)
	assert.Error(t, err)
}

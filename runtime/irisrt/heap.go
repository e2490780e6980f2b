package irisrt

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"

	"github.com/irisgen/irisgen/runtime/gpu"
)

// HeapAlign is the alignment of every heap allocation, in bytes.
const HeapAlign = 256

// Heap is one rank's symmetric heap: a single device allocation of the same
// size on every rank, carved up by a deterministic allocator. Allocation is
// collective: when every rank makes the same sequence of Alloc and Free calls
// with the same sizes, every object lands at the same offset on every rank, so
// a peer's copy of an object is at Base(peer) + Offset(ptr). The runtime checks
// this at every host barrier and plan creation and fails with a *HeapError when
// the ranks' heaps have diverged.
type Heap struct {
	rank  int
	dev   gpu.Device
	base  gpu.DevicePtr
	size  int64
	bases []gpu.DevicePtr // every rank's heap base as mapped on this device

	mu sync.Mutex
	a  *allocator
}

// Alloc allocates a tensor of n elements of dt, 256-byte aligned, from the
// heap. It is collective: every rank must make the same call in the same order
// (see Heap). The memory is not cleared (the heap is zeroed only at creation).
func (h *Heap) Alloc(dt DType, n int64) (Tensor, error) {
	if !dt.Valid() {
		return Tensor{}, &HeapError{Rank: h.rank, Op: "alloc", Msg: fmt.Sprintf("Alloc with invalid dtype %s", dt)}
	}
	if n < 0 || n > (1<<62)/dt.Size() {
		return Tensor{}, &HeapError{Rank: h.rank, Op: "alloc", Msg: fmt.Sprintf("Alloc of %d elements of %s: the count must be between 0 and 2^62 bytes", n, dt)}
	}
	p, err := h.AllocBytes(n * dt.Size())
	if err != nil {
		return Tensor{}, err
	}
	return Tensor{Ptr: p, DType: dt, Len: n}, nil
}

// AllocBytes allocates bytes (at least HeapAlign) from the heap; collective
// like Alloc.
func (h *Heap) AllocBytes(bytes int64) (gpu.DevicePtr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	off, ok := h.a.alloc(bytes)
	if !ok {
		if bytes < 0 {
			return 0, &HeapError{Rank: h.rank, Op: "alloc", Msg: fmt.Sprintf("Alloc of %d bytes: negative size", bytes)}
		}
		return 0, &HeapError{Rank: h.rank, Op: "alloc", Want: bytes, Free: h.a.largestFree(), Size: h.size}
	}
	return h.base + gpu.DevicePtr(off), nil
}

// Free returns t's memory to the heap. t must be a tensor returned by Alloc
// (not a slice of one). Collective like Alloc.
func (h *Heap) Free(t Tensor) error { return h.FreeBytes(t.Ptr) }

// FreeBytes frees an allocation made by Alloc or AllocBytes by its address.
func (h *Heap) FreeBytes(p gpu.DevicePtr) error {
	off, ok := h.Offset(p)
	if !ok {
		return &HeapError{Rank: h.rank, Op: "free", Msg: fmt.Sprintf("Free of %#x, which is not on the heap", uint64(p))}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.a.release(off) {
		return &HeapError{Rank: h.rank, Op: "free", Msg: fmt.Sprintf("Free of %#x (offset %d), which is not the start of a live allocation (double free, or a slice of a tensor)", uint64(p), off)}
	}
	return nil
}

// Contains reports whether [p, p+bytes) lies entirely inside this rank's heap.
func (h *Heap) Contains(p gpu.DevicePtr, bytes int64) bool {
	off, ok := h.Offset(p)
	return ok && bytes >= 0 && bytes <= h.size-off
}

// Offset returns p's offset from this rank's heap base, and whether p is on
// the heap at all.
func (h *Heap) Offset(p gpu.DevicePtr) (int64, bool) {
	if p < h.base || uint64(p-h.base) >= uint64(h.size) {
		return 0, false
	}
	return int64(p - h.base), true
}

// Base returns rank's heap base as mapped on this rank's device (this rank's
// own base for rank == Rank()).
func (h *Heap) Base(rank int) gpu.DevicePtr { return h.bases[rank] }

// Peer translates p, an address on this rank's heap, into the address of the
// same object on rank's heap, as mapped on this device.
func (h *Heap) Peer(p gpu.DevicePtr, rank int) gpu.DevicePtr {
	return h.bases[rank] + (p - h.base)
}

// Size is the heap's size in bytes (the same on every rank).
func (h *Heap) Size() int64 { return h.size }

// FreeBytesLeft is the total of the heap's free blocks.
func (h *Heap) FreeBytesLeft() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.a.freeTotal()
}

// digest is a fingerprint of the set of live allocations. Equal heaps (same
// allocations at the same offsets) have equal digests on every rank.
func (h *Heap) digest() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, uint64(len(h.a.live)))
	binary.LittleEndian.PutUint64(b[8:], h.a.sum)
	return b
}

// allocator is a first-fit free-list allocator over [0, size). It is a pure
// function of the sequence of calls, which is what makes the heap symmetric.
// All arithmetic is int64: offsets past 4 GiB are ordinary.
type allocator struct {
	size  int64
	spans []span          // sorted by offset; never adjacent (coalesced)
	live  map[int64]int64 // offset -> rounded size
	sum   uint64          // xor of mix(off, size) over live allocations
}

type span struct{ off, n int64 }

func newAllocator(size int64) *allocator {
	size &^= HeapAlign - 1
	a := &allocator{size: size, live: map[int64]int64{}}
	if size > 0 {
		a.spans = []span{{0, size}}
	}
	return a
}

func roundUp(n int64) (int64, bool) {
	if n < 0 || n > 1<<62 {
		return 0, false
	}
	if n == 0 {
		n = 1 // a zero-length object still gets its own address
	}
	return (n + HeapAlign - 1) &^ (HeapAlign - 1), true
}

// alloc returns the offset of the first free block that fits n bytes.
func (a *allocator) alloc(n int64) (int64, bool) {
	n, ok := roundUp(n)
	if !ok {
		return 0, false
	}
	for i, s := range a.spans {
		if s.n < n {
			continue
		}
		if s.n == n {
			a.spans = append(a.spans[:i], a.spans[i+1:]...)
		} else {
			a.spans[i] = span{s.off + n, s.n - n}
		}
		a.live[s.off] = n
		a.sum ^= mix(s.off, n)
		return s.off, true
	}
	return 0, false
}

// release frees the allocation starting at off, merging it with free
// neighbours; false when off is not the start of a live allocation.
func (a *allocator) release(off int64) bool {
	n, ok := a.live[off]
	if !ok {
		return false
	}
	delete(a.live, off)
	a.sum ^= mix(off, n)
	i := sort.Search(len(a.spans), func(i int) bool { return a.spans[i].off > off })
	s := span{off, n}
	if i > 0 && a.spans[i-1].off+a.spans[i-1].n == off { // merge with the block before
		i--
		s = span{a.spans[i].off, a.spans[i].n + n}
		a.spans = append(a.spans[:i], a.spans[i+1:]...)
	}
	if i < len(a.spans) && s.off+s.n == a.spans[i].off { // and the one after
		s.n += a.spans[i].n
		a.spans = append(a.spans[:i], a.spans[i+1:]...)
	}
	a.spans = append(a.spans, span{})
	copy(a.spans[i+1:], a.spans[i:])
	a.spans[i] = s
	return true
}

func (a *allocator) largestFree() int64 {
	var m int64
	for _, s := range a.spans {
		m = max(m, s.n)
	}
	return m
}

func (a *allocator) freeTotal() int64 {
	var t int64
	for _, s := range a.spans {
		t += s.n
	}
	return t
}

// mix hashes an allocation for the order-independent heap digest.
func mix(off, n int64) uint64 {
	x := uint64(off)*0x9e3779b97f4a7c15 ^ uint64(n)*0xc2b2ae3d27d4eb4f
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return x
}

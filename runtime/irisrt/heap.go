package irisrt

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// heapAlign is the alignment of every heap allocation, in bytes; the
// control block takes whole units of it.
const (
	heapAlign = 256
	_         = uint(0 - core.ControlBytes%heapAlign)
)

// Heap is one rank's symmetric heap: a single device allocation of the same
// size on every rank, carved up by a deterministic allocator. Allocation is
// collective: when every rank makes the same sequence of Alloc and Free calls
// with the same sizes, every object lands at the same offset on every rank, so
// a peer's copy of an object is at Base(peer) + Offset(ptr). The runtime checks
// this at every host barrier and plan creation and fails with a *HeapError when
// the ranks' heaps have diverged.
//
// The heap knows its live allocations (a table sorted by offset), so the
// launch path refuses, without allocating, a tensor that lies on the heap
// but not inside a live allocation of the caller's (see checkLive), and a
// tensor whose allocation was freed, even when its memory has since been
// handed out again.
type Heap struct {
	rank  int
	dev   gpu.Device
	base  gpu.DevicePtr
	size  int64
	bases []gpu.DevicePtr // every rank's heap base as mapped on this device

	mu     sync.RWMutex
	a      *allocator
	closed atomic.Bool // the rank was released (a group's heap: the group closed): the memory is gone
	parent *Heap       // a group's heap: the world's heap its reservation lies on
}

// isClosed reports whether the heap's memory is gone: its rank was
// released, or (a group's heap) its group closed or its world released.
func (h *Heap) isClosed() bool { return h.closed.Load() || (h.parent != nil && h.parent.closed.Load()) }

// usable returns a *ClosedError for op on a closed heap.
func (h *Heap) usable(op string) error {
	if h.isClosed() {
		return &ClosedError{Op: op, What: fmt.Sprintf("the heap of rank %d (its world or group)", h.rank)}
	}
	return nil
}

// Alloc allocates a tensor of n elements of dt, 256-byte aligned, from the
// heap. It is collective: every rank must make the same call in the same order
// (see Heap). The memory is not cleared (the heap is zeroed only at creation).
func (h *Heap) Alloc(dt irismodel.DType, n int64) (Tensor, error) {
	if !dt.Valid() {
		return Tensor{}, &HeapError{Rank: h.rank, Op: "alloc", Msg: fmt.Sprintf("Alloc with invalid dtype %s", dt)}
	}
	if n < 0 || n > maxBytes/dt.Size() {
		return Tensor{}, &HeapError{Rank: h.rank, Op: "alloc", Msg: fmt.Sprintf("Alloc of %d elements of %s: the count must be between 0 and 2^62 bytes", n, dt)}
	}
	a, err := h.alloc(n*dt.Size(), kindUser)
	if err != nil {
		return Tensor{}, err
	}
	return Tensor{Ptr: h.base + gpu.DevicePtr(a.off), DType: dt, Len: n, heap: h, id: a.id}, nil
}

// AllocBytes allocates bytes (rounded up to a multiple of 256, the
// alignment of every heap allocation) from the heap; collective
// like Alloc.
func (h *Heap) AllocBytes(bytes int64) (gpu.DevicePtr, error) {
	a, err := h.alloc(bytes, kindUser)
	if err != nil {
		return 0, err
	}
	return h.base + gpu.DevicePtr(a.off), nil
}

// alloc makes an allocation of kind.
func (h *Heap) alloc(bytes int64, kind allocKind) (allocation, error) {
	if err := h.usable("Heap.Alloc"); err != nil {
		return allocation{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.a.alloc(bytes, kind)
	if !ok {
		if bytes < 0 {
			return allocation{}, &HeapError{Rank: h.rank, Op: "alloc", Msg: fmt.Sprintf("Alloc of %d bytes: negative size", bytes)}
		}
		return allocation{}, &HeapError{Rank: h.rank, Op: "alloc", Want: bytes, Free: h.a.largestFree(), Size: h.size}
	}
	return a, nil
}

// Free returns t's memory to the heap. t must be a tensor returned by Alloc
// (not a slice of one). Collective like Alloc. It refuses (*InUseError) while
// a live graph captured with Rank.Capture uses the tensor.
func (h *Heap) Free(t Tensor) error {
	if t.heap != nil && t.heap != h {
		return &HeapError{Rank: h.rank, Op: "free", Msg: fmt.Sprintf("Free of %s, which was allocated on another heap (another rank's, or a group's)", t)}
	}
	return h.free(t.Ptr, t.id, kindUser)
}

// FreeBytes frees an allocation made by Alloc or AllocBytes by its address.
func (h *Heap) FreeBytes(p gpu.DevicePtr) error { return h.free(p, 0, kindUser) }

// free releases the allocation of kind starting at p; id, when not 0, is the
// allocation's id as the caller's tensor knows it.
func (h *Heap) free(p gpu.DevicePtr, id uint64, kind allocKind) error {
	off, ok := h.Offset(p)
	if !ok {
		return &HeapError{Rank: h.rank, Op: "free", Msg: fmt.Sprintf("Free of %#x, which is not on the heap", uint64(p))}
	}
	if err := h.usable("Heap.Free"); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i, ok := h.a.starting(off)
	switch {
	case !ok:
		return &HeapError{Rank: h.rank, Op: "free", Msg: fmt.Sprintf("Free of %#x (offset %d), which is not the start of a live allocation (double free, or a slice of a tensor)", uint64(p), off)}
	case id != 0 && h.a.live[i].id != id:
		return &HeapError{Rank: h.rank, Op: "free", Msg: fmt.Sprintf("Free of %#x (offset %d): the tensor was freed already and its memory now holds a newer allocation (double free)", uint64(p), off)}
	case h.a.live[i].kind != kind:
		return &HeapError{Rank: h.rank, Op: "free", Msg: fmt.Sprintf("Free of %#x (offset %d), which %s", uint64(p), off, kindOwner[h.a.live[i].kind])}
	case h.a.live[i].pins > 0:
		return &InUseError{What: fmt.Sprintf("heap memory at %#x (offset %d)", uint64(p), off), By: graphsUsing(h.a.live[i].pins)}
	}
	h.a.release(i)
	return nil
}

// kindOwner says who owns an allocation of a kind, for a refused Free.
var kindOwner = [...]string{
	kindUser:    "was allocated with Alloc",
	kindPlan:    "belongs to a plan: close the plan instead",
	kindGroup:   "is a group's reservation: close the group instead",
	kindControl: "is the heap's control block, which the runtime owns",
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
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.a.freeTotal()
}

// digest is a fingerprint of the set of live allocations. Equal heaps (same
// allocations at the same offsets) have equal digests on every rank.
func (h *Heap) digest() []byte {
	h.mu.RLock()
	defer h.mu.RUnlock()
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, uint64(len(h.a.live)))
	binary.LittleEndian.PutUint64(b[8:], h.a.sum)
	return b
}

// close marks the heap's memory gone (its rank was released): later checks
// of its tensors say so.
func (h *Heap) close() {
	h.closed.Store(true)
}

// maxBytes is the largest allocation, and the largest tensor a plan is made
// for: 2^62 bytes, so sums and rounding of sizes never overflow int64.
const maxBytes = 1 << 62

// allocKind says who made an allocation, so that a tensor whose memory a
// plan or group now owns is not taken for the caller's.
type allocKind uint8

const (
	kindUser    allocKind = iota // Heap.Alloc, Heap.AllocBytes
	kindPlan                     // a plan's flags, epochs, workspace and staging
	kindGroup                    // a group's reservation (Rank.NewGroup)
	kindControl                  // the heap's control block (core.ControlBytes at offset 0)
)

// newHeap is the heap of size bytes at base with every rank's base as
// mapped on dev (bases[rank] = base), its control block reserved at
// offset 0 (the caller zeroes the memory). A heap too small for the
// control block is an error.
func newHeap(rank int, dev gpu.Device, base gpu.DevicePtr, size int64, bases []gpu.DevicePtr) (*Heap, error) {
	h := &Heap{rank: rank, dev: dev, base: base, size: size, a: newAllocator(size), bases: bases}
	if _, ok := h.a.alloc(core.ControlBytes, kindControl); !ok {
		return nil, &HeapError{Rank: rank, Op: "create", Size: size, Msg: fmt.Sprintf(
			"a heap of %d bytes has no room for its %d-byte control block: make it larger", size, core.ControlBytes)}
	}
	return h, nil
}

// allocation is one live allocation.
type allocation struct {
	off, n int64  // offset and rounded size
	bytes  int64  // size asked for: a tensor must end inside it
	id     uint64 // the allocation's number on this heap, from 1: tells a stale tensor from a new one at the same offset
	kind   allocKind
	pins   int32 // live graphs (Rank.Capture) that use it
}

// allocator is a first-fit free-list allocator over [0, size). It is a pure
// function of the sequence of calls, which is what makes the heap symmetric.
// All arithmetic is int64: offsets past 4 GiB are ordinary.
type allocator struct {
	size  int64
	spans []span       // sorted by offset; never adjacent (coalesced)
	live  []allocation // sorted by offset
	sum   uint64       // xor of mix(off, size) over live allocations
	made  uint64       // allocations made so far (the last id)
}

type span struct{ off, n int64 }

func newAllocator(size int64) *allocator {
	size &^= heapAlign - 1
	a := &allocator{size: size}
	if size > 0 {
		a.spans = []span{{0, size}}
	}
	return a
}

func roundUp(n int64) (int64, bool) {
	if n < 0 || n > maxBytes {
		return 0, false
	}
	if n == 0 {
		n = 1 // a zero-length object still gets its own address
	}
	return (n + heapAlign - 1) &^ (heapAlign - 1), true
}

// alloc makes an allocation of bytes in the first free block that fits.
func (a *allocator) alloc(bytes int64, kind allocKind) (allocation, bool) {
	n, ok := roundUp(bytes)
	if !ok {
		return allocation{}, false
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
		a.made++
		l := allocation{off: s.off, n: n, bytes: bytes, id: a.made, kind: kind}
		j := a.after(s.off)
		a.live = slices.Insert(a.live, j, l)
		a.sum ^= mix(s.off, n)
		return l, true
	}
	return allocation{}, false
}

// after is the index of the first live allocation that starts after off.
func (a *allocator) after(off int64) int {
	lo, hi := 0, len(a.live)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a.live[m].off <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// starting finds the live allocation that starts at off.
func (a *allocator) starting(off int64) (int, bool) {
	i := a.after(off) - 1
	return i, i >= 0 && a.live[i].off == off
}

// holding finds the live allocation whose asked-for bytes hold [off,
// off+bytes) (an empty range may sit at its end), or the one that off falls
// in (ok false) when the range runs past it, or -1.
func (a *allocator) holding(off, bytes int64) (i int, ok bool) {
	i = a.after(off) - 1
	if i < 0 || off >= a.live[i].off+a.live[i].n {
		return -1, false
	}
	l := a.live[i]
	return i, bytes <= l.bytes-(off-l.off)
}

// release frees live allocation i, merging it with free neighbours.
func (a *allocator) release(i int) {
	off, n := a.live[i].off, a.live[i].n
	a.live = slices.Delete(a.live, i, i+1)
	a.sum ^= mix(off, n)
	j := sort.Search(len(a.spans), func(j int) bool { return a.spans[j].off > off })
	s := span{off, n}
	if j > 0 && a.spans[j-1].off+a.spans[j-1].n == off { // merge with the block before
		j--
		s = span{a.spans[j].off, a.spans[j].n + n}
		a.spans = append(a.spans[:j], a.spans[j+1:]...)
	}
	if j < len(a.spans) && s.off+s.n == a.spans[j].off { // and the one after
		s.n += a.spans[j].n
		a.spans = append(a.spans[:j], a.spans[j+1:]...)
	}
	a.spans = slices.Insert(a.spans, j, s)
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

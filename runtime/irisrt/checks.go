package irisrt

import (
	"strconv"
)

// The launch path's checks beyond dtype and length: element alignment and
// live heap allocations. Every one is
// allocation-free when the check passes (the launch path's promise); only
// a refusal builds its error.

// checkAligned refuses a tensor whose pointer is not a multiple of its
// element size. Every kernel reads and writes elements through typed
// pointers (and f16/bf16 atomics through the aligned 32-bit word holding
// the element), which a misaligned address breaks or faults on. 16-byte
// vector alignment is not required: the kernels check it per call and take
// the element path where pointers do not share their alignment modulo 16.
func checkAligned(op, name string, t Tensor) error {
	if es := t.DType.Size(); es > 0 && uint64(t.Ptr)%uint64(es) != 0 {
		return &AlignmentError{Op: op, Name: name, Tensor: t, Want: es}
	}
	return nil
}

// Why a tensor on the heap may not be used (LiveError.Why).
const (
	whyClosed  = "belongs to a world that was closed"
	whyFreed   = "was freed (Heap.Free) before this launch"
	whyReused  = "was freed, and its memory now holds a newer allocation"
	whyNone    = "lies in no live allocation (it was freed, or never allocated)"
	whyPastEnd = "runs past the end of its allocation"
	whyEdge    = "runs over an edge of the heap"
	whyPlan    = "lies in a plan's own buffers (barrier flags, workspace or staging): a stale tensor whose memory a plan now uses"
	whyControl = "lies in the heap's control block, which the runtime's kernels use"
	whyGroup   = "lies in a group's reservation (Rank.NewGroup), where each peer holds its own group's memory: launch a plan made on the group"
)

// check says why t may not be used as a tensor on this heap, or "" when it
// may: t empty, off the heap (other device memory), or inside one live
// allocation that the caller owns. shared: peers address the tensor through the heap,
// so a group's reservation does not do.
func (h *Heap) check(t Tensor, shared bool) string {
	bytes := t.Bytes()
	off, on := h.Offset(t.Ptr)
	switch {
	case bytes == 0:
		return "" // touches nothing
	case !on && bytes > 0 && t.Ptr < h.base && uint64(h.base-t.Ptr) < uint64(bytes):
		return whyEdge
	case !on:
		return ""
	case bytes > h.size-off:
		return whyEdge
	}
	id := t.id
	if t.heap != h {
		id = 0 // t's id numbers another heap's allocations
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.isClosed() {
		return whyClosed
	}
	i, ok := h.a.holding(off, bytes)
	switch {
	case i < 0 && id != 0:
		return whyFreed
	case i < 0:
		return whyNone
	case id != 0 && h.a.live[i].id != id:
		return whyReused
	case !ok:
		return whyPastEnd
	case h.a.live[i].kind == kindPlan:
		return whyPlan
	case h.a.live[i].kind == kindControl:
		return whyControl
	case h.a.live[i].kind == kindGroup && shared:
		return whyGroup
	}
	return ""
}

// checkOwn refuses a tensor from Heap.Alloc whose allocation is gone: the
// check checkTensor makes without knowing the rank.
func checkOwn(op, name string, t Tensor) error {
	if t.heap == nil {
		return nil
	}
	if why := t.heap.check(t, false); why != "" {
		return &LiveError{Op: op, Name: name, Rank: t.heap.rank, Tensor: t, Why: why}
	}
	return nil
}

// checkLive checks a tensor of any placement against r's heap (and, on a
// group, the world's heap the group's is part of): off the heap it may lie
// anywhere, on the heap it must lie inside one live allocation of the
// caller's, not in memory that was freed, never allocated, or that a plan
// or group owns (*LiveError). checkHeap makes it too, for the tensors peers
// address.
func checkLive(op, name string, r *Rank, t Tensor) error {
	for h := r; h != nil; h = h.parent {
		if why := h.heap.check(t, false); why != "" {
			return &LiveError{Op: op, Name: name, Rank: h.rank, Tensor: t, Why: why}
		}
	}
	return nil
}

// graphsUsing says what holds an allocation or plan in use.
func graphsUsing(n int32) string {
	return strconv.Itoa(int(n)) + " live graph(s) captured with Rank.Capture: destroy them (Graph.Destroy) on every rank first"
}

package irisrt

import (
	"fmt"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Tensor is a contiguous 1-D view of device memory: Len elements of DType
// starting at Ptr. A tensor from Heap.Alloc (and its slices) also remembers
// its allocation, so that the launch checks refuse it once it is freed.
type Tensor struct {
	Ptr   gpu.DevicePtr
	DType irismodel.DType
	Len   int64

	heap *Heap  // the heap that allocated it, or nil
	id   uint64 // its allocation's id on heap
}

// Bytes is the tensor's size in bytes.
func (t Tensor) Bytes() int64 { return t.Len * t.DType.Size() }

// End is the first address past the tensor.
func (t Tensor) End() gpu.DevicePtr { return t.Ptr + gpu.DevicePtr(t.Bytes()) }

// Slice returns the n elements starting at element off. Like slicing a Go
// slice it panics when [off, off+n) is not inside t, since that is a
// programming error, not a run-time condition.
func (t Tensor) Slice(off, n int64) Tensor {
	if off < 0 || n < 0 || off > t.Len || n > t.Len-off {
		panic(fmt.Sprintf("irisgen: Tensor.Slice(%d, %d) out of range of a %d-element %s tensor", off, n, t.Len, t.DType))
	}
	t.Ptr += gpu.DevicePtr(off * t.DType.Size())
	t.Len = n
	return t
}

// Overlaps reports whether t and u share at least one byte. Empty tensors
// overlap nothing.
func (t Tensor) Overlaps(u Tensor) bool {
	if t.Bytes() <= 0 || u.Bytes() <= 0 {
		return false
	}
	return t.Ptr < u.End() && u.Ptr < t.End()
}

func (t Tensor) String() string {
	return fmt.Sprintf("%s[%d]@%#x", t.DType, t.Len, uint64(t.Ptr))
}

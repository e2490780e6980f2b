package irismodel

import (
	"slices"
	"strconv"
	"strings"
)

// Dir is the direction of a tensor in a collective's signature.
type Dir string

// Tensor directions. Workspace tensors are not passed by the caller: the
// plan allocates them on the heap.
const (
	In        Dir = "in"
	Out       Dir = "out"
	InOut     Dir = "inout"
	Workspace Dir = "workspace"
)

// Dirs lists every direction, in spec order.
func Dirs() []Dir { return []Dir{In, Out, InOut, Workspace} }

func (d Dir) String() string { return string(d) }

// Writes reports whether a launch writes a tensor of direction d (out, inout).
func (d Dir) Writes() bool { return d == Out || d == InOut }

// Dim is one factor of a shape: a positive constant, DimWorld, DimBlocks or
// DimSize(i), the collective's size parameter i.
type Dim int64

// The built-in shape symbols, known to every spec.
const (
	DimWorld  Dim = -1 // the number of ranks
	DimBlocks Dim = -2 // the plan's blocks (workspace shapes only)
)

// The spellings of the built-in symbols.
const (
	WorldSymbol  = "world"
	BlocksSymbol = "blocks"
)

// DimSize is the dimension given by the collective's size parameter i.
func DimSize(i int) Dim { return Dim(-3 - i) }

// Size returns the index of the size parameter d stands for, or -1.
func (d Dim) Size() int {
	if d <= -3 {
		return int(-3 - d)
	}
	return -1
}

// Name is d as a spec writes it, with sizes the names of the collective's
// size parameters: "world", "blocks", a size's name, or the constant.
func (d Dim) Name(sizes []string) string {
	switch i := d.Size(); {
	case d == DimWorld:
		return WorldSymbol
	case d == DimBlocks:
		return BlocksSymbol
	case i >= 0 && i < len(sizes):
		return sizes[i]
	}
	return strconv.FormatInt(int64(d), 10)
}

// ParseDim is the Dim a spec's symbol stands for among the size names
// sizes; ok is false for a name that is none of them.
func ParseDim(symbol string, sizes []string) (d Dim, ok bool) {
	switch symbol {
	case WorldSymbol:
		return DimWorld, true
	case BlocksSymbol:
		return DimBlocks, true
	}
	for i, s := range sizes {
		if s == symbol {
			return DimSize(i), true
		}
	}
	return 0, false
}

// Shape is a tensor's dimensions, outermost first; its element count is
// their product.
type Shape []Dim

// String writes the shape as the spec does, e.g. "[world, n]", with sizes
// the names of the collective's size parameters.
func (s Shape) String(sizes []string) string { return "[" + s.join(sizes, ", ") + "]" }

// Product writes the element count as a product for messages and
// comments, e.g. "world*n".
func (s Shape) Product(sizes []string) string { return s.join(sizes, "*") }

func (s Shape) join(sizes []string, sep string) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.Name(sizes)
	}
	return strings.Join(parts, sep)
}

// Numel is the element count for world ranks, blocks blocks and the sizes
// in the collective's order; ok is false when a factor is negative or the
// product does not fit in an int64.
func (s Shape) Numel(world, blocks int64, sizes []int64) (n int64, ok bool) {
	n = 1
	for _, d := range s {
		f := int64(d)
		switch i := d.Size(); {
		case d == DimWorld:
			f = world
		case d == DimBlocks:
			f = blocks
		case i >= 0 && i < len(sizes):
			f = sizes[i]
		case i >= 0:
			return 0, false
		}
		if f < 0 || (f > 0 && n > (1<<63-1)/f) {
			return 0, false
		}
		n *= f
	}
	return n, true
}

// TensorDesc is a tensor of a collective's signature.
type TensorDesc struct {
	Name  string
	Dir   Dir
	Shape Shape
	// DType is the tensor's fixed element type (workspace flags, index
	// tensors); 0: the plan's data type.
	DType DType
	// Index, when set, are the index types a launch may pass (DType is the
	// first); the kernel gets the element width after the sizes and reads
	// the tensor through read_index.
	Index []DType
	// Optional: a launch may leave the tensor out, passing the zero Tensor
	// (the kernel gets a null pointer, and the tensor is not checked). Only
	// dir: in tensors that no peer touches.
	Optional bool
	// Owner, when set, names the rank parameter whose rank alone uses the
	// tensor (the spec's ranks key): the launch checks it there only; on
	// the other ranks it ignores what the caller passes (the zero Tensor)
	// and the kernel gets a null pointer.
	Owner string
}

// OwnBlock reports whether t may be rank r's own block of b in place
// (aliasing: own_block): t is dir: in, b written, of the same element
// type, and b's shape is [world] followed by t's, so block r of b is
// exactly t's size.
func (t *TensorDesc) OwnBlock(b *TensorDesc) bool {
	return t.Dir == In && (b.Dir == Out || b.Dir == InOut) && t.DType == b.DType &&
		len(b.Shape) == len(t.Shape)+1 && b.Shape[0] == DimWorld && slices.Equal(b.Shape[1:], t.Shape)
}

// User reports whether the caller passes the tensor to a launch; workspace
// tensors are allocated by the plan instead.
func (t *TensorDesc) User() bool { return t.Dir != Workspace }

// ElemType is the tensor's element type in a plan or kernel of data type
// dt: its fixed DType when it has one, else dt.
func (t *TensorDesc) ElemType(dt DType) DType {
	if t.DType != 0 {
		return t.DType
	}
	return dt
}

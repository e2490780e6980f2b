// Package spec reads a collective spec (YAML) into an AST that keeps the line
// and column of every key and value. It checks the shape of the document
// only: known keys, no duplicates, the right kind of value (string, list,
// mapping, integer) in every place. Names, ranges and the rules between keys
// are checked by the IR builder (package ir), which reports through the same
// positions.
//
// Errors are diag errors; the package does not import ir (ir imports spec).
package spec

import "github.com/irisgen/irisgen/internal/diag"

// Pos is a position in the spec file (the same type as ir.Pos).
type Pos = diag.Pos

// Node is what every AST value knows about itself: where it is and whether
// it was written at all.
type Node struct {
	// Pos is the position of the value, or of its key when the value is
	// missing or malformed in a way that leaves no better place.
	Pos Pos
	// KeyPos is the position of the key that introduced the value (zero for
	// list items).
	KeyPos Pos
	// Set: the key is present in the file.
	Set bool
	// Bad: the key is present but its value was malformed and already
	// reported; later stages skip it so that one mistake gives one error.
	Bad bool
}

// OK reports whether the value is present and well-formed.
func (n Node) OK() bool { return n.Set && !n.Bad }

// Str is a scalar value.
type Str struct {
	Node
	Value string
}

// Int is an integer value.
type Int struct {
	Node
	Value int64
}

// Bool is a boolean value.
type Bool struct {
	Node
	Value bool
}

// List is a list of scalars. Bad also marks a list with a malformed item
// (reported and left out of Items).
type List struct {
	Node
	Items []Str
}

// Dim is one shape dimension: a symbol or a constant.
type Dim struct {
	Pos    Pos
	Symbol string // empty for a constant
	Const  int64
}

// Shape is a tensor shape. Bad also marks a shape with a malformed
// dimension (reported and left out of Dims).
type Shape struct {
	Node
	Dims []Dim
}

// File is one spec.
type File struct {
	Pos Pos // the top-level mapping
	// Read: the document is a mapping. False when it is empty, not YAML or
	// not a mapping (reported); the other fields are then empty.
	Read     bool
	Name     Str
	Summary  Str
	DTypes   List
	Ops      List
	Sizes    List
	Params   Params
	Tensors  Tensors
	Variants Variants
}

// Params is the params mapping, in file order.
type Params struct {
	Node
	List []*Param
}

// Param is one entry of params: a typed scalar a launch passes. Its Node
// is the entry's value; a value written as a plain type name (root: rank)
// sets Type only.
type Param struct {
	Node
	Name     Str // the key
	Type     Str
	Min, Max Int
}

// Tensors is the tensors mapping, in file order.
type Tensors struct {
	Node
	List []*Tensor
}

// Tensor is one entry of tensors; its Node is the entry's value.
type Tensor struct {
	Node
	Name  Str // the key
	Dir   Str
	Shape Shape
	DType Str
	// DTypes is set instead of DType when dtype is a list: the launch may
	// pass any of these index types.
	DTypes   List
	Optional Bool
	// Ranks names the rank parameter whose rank alone uses the tensor.
	Ranks Str
}

// Variants is the variants mapping, in file order.
type Variants struct {
	Node
	List []*Variant
}

// Variant is one entry of variants; its Node is the entry's value.
type Variant struct {
	Node
	Name     Str // the key
	Summary  Str
	Template Str
	Access   AccessMap
	Aliasing Str
	Barriers List
	Launch   Launch
	// Engine is what moves the data: sm (a kernel from Template, the
	// default) or copy (the copy engines, by the schedule in Copies).
	Engine Str
	Copies Copies
}

// Copies is a copy-engine variant's copies list, in file order.
type Copies struct {
	Node
	List []*Copy
}

// Copy is one item of copies: for every value of the rank variables
// Each, block From (tensor[block]@rank) goes into block To. Its Node is
// the item's mapping.
type Copy struct {
	Node
	Each     List
	From, To Str
}

// AccessMap is a variant's access mapping, in file order.
type AccessMap struct {
	Node
	List []*Access
}

// Access is one entry of a variant's access mapping: a tensor name and the
// kinds written for it (a single kind is a one-item list).
type Access struct {
	Tensor Str // the key
	Kinds  List
}

// Launch is a variant's launch mapping.
type Launch struct {
	Node
	Threads     Int
	MaxBlocks   Int
	MinBlocks   Int
	VectorBytes Int
}

package ir

import (
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Variant returns the variant called name, or nil.
func (c *Collective) Variant(name string) *Variant {
	for _, v := range c.Variants {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// Param returns the parameter called name, or nil.
func (c *Collective) Param(name string) *Param {
	for _, p := range c.Params {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Tensor returns the tensor called name, or nil.
func (c *Collective) Tensor(name string) *Tensor { return tensorByName(c, name) }

// UserTensors returns the tensors a launch takes from the caller (all but
// workspace), in spec order: the order of the wrapper's parameters.
func (c *Collective) UserTensors() []*Tensor {
	var out []*Tensor
	for _, t := range c.Tensors {
		if t.User() {
			out = append(out, t)
		}
	}
	return out
}

// Reduces reports whether the collective has reduction operators (and so
// its plans and kernels take an op).
func (c *Collective) Reduces() bool { return len(c.Ops) > 0 }

// ShapeString is t's shape as written in the spec, e.g. "[world, n]".
func (c *Collective) ShapeString(t *Tensor) string { return t.Shape.String(c.Symbols) }

// NumelString is t's element count as a product for messages and comments,
// e.g. "world*n".
func (c *Collective) NumelString(t *Tensor) string { return t.Shape.Product(c.Symbols) }

// Use returns how the variant touches the tensor called name, or nil.
func (v *Variant) Use(name string) *Use {
	for i := range v.Uses {
		if v.Uses[i].Tensor.Name == name {
			return &v.Uses[i]
		}
	}
	return nil
}

// Supports reports whether a launch of the variant may ask for mode.
func (v *Variant) Supports(mode irismodel.Barrier) bool {
	for _, m := range v.Barriers {
		if m == mode {
			return true
		}
	}
	return false
}

// DefaultBarrier is the mode a launch gets when it asks for none.
func (v *Variant) DefaultBarrier() irismodel.Barrier { return v.Barriers[0] }

// CaptureOf returns the capture claim of mode; ok is false when the variant
// does not support mode.
func (v *Variant) CaptureOf(mode irismodel.Barrier) (c Capture, ok bool) {
	for _, c := range v.Capture {
		if c.Mode == mode {
			return c, true
		}
	}
	return Capture{}, false
}

// Kernel returns the entry point for dt and op (dt "" for a collective
// without dtypes, OpNone for one without ops).
func (v *Variant) Kernel(dt irismodel.DType, op Op) (Kernel, bool) {
	for _, k := range v.Kernels {
		if k.DType == dt && k.Op == op {
			return k, true
		}
	}
	return Kernel{}, false
}

// AliasPairs lists the pairs of user tensors whose overlap a launch must
// check, in spec order: every pair of which at least one is written (dir
// out or inout). A pair of a dir: in tensor and a written one may be the
// very same tensor under aliasing: allow (InPlace); every other overlap is
// refused, because a partial overlap lets one block write what another has
// yet to read, and two written tensors in one memory lose one's results.
func (v *Variant) AliasPairs() [][2]*Tensor {
	var pairs [][2]*Tensor
	for i, a := range v.Uses {
		for _, b := range v.Uses[i+1:] {
			ta, tb := a.Tensor, b.Tensor
			if ta.User() && tb.User() && (ta.Dir != irismodel.In || tb.Dir != irismodel.In) {
				pairs = append(pairs, [2]*Tensor{ta, tb})
			}
		}
	}
	return pairs
}

// OwnBlock reports whether a launch may pass a as the rank's own block of b:
// the variant's aliasing is own_block and a is a dir: in tensor of which b
// is [world] blocks (irismodel.TensorDesc.OwnBlock). The runtime checks
// such a pair as exactly that block or disjoint.
func (v *Variant) OwnBlock(a, b *Tensor) bool {
	return v.Aliasing == AliasOwnBlock && a.TensorDesc.OwnBlock(&b.TensorDesc)
}

// InPlace reports whether a launch may pass the same tensor as a and b: the
// variant allows aliasing and one of them is dir: in, the other written. The
// runtime (irisimpl) checks such a pair as in place (the same tensor or
// disjoint) and every other pair of AliasPairs for no overlap at all.
func (v *Variant) InPlace(a, b *Tensor) bool {
	return v.Aliasing == AliasAllow && (a.Dir == irismodel.In) != (b.Dir == irismodel.In)
}

package irisimpl

import (
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Table is the descriptor of one generated package: every collective and
// variant, with the facts the generator derived from the specs. A generated
// package holds one Table, registers it in init (Register) and hands it to the
// runtime from its typed constructors and Launch methods; the runtime
// interprets it for everything a launch needs: the dtype, op and size checks
// of a constructor, the plan's grid, workspace and staging, the kernel name,
// the tensor checks of a launch (dtype, length, placement, aliasing), the
// packing of the kernel's arguments, the convenience calls and the
// catalogue.
//
// The generated code is its only writer; a Table that breaks the rules
// below (a generator bug, or a hand-built one in a test) is refused with an
// error at the first plan, never with a panic.
type Table struct {
	// ImportPath is the generated package's import path: the key of its
	// registration and of its code objects in a rank's kernel cache.
	ImportPath string
	// KernelsCommand builds the package's code objects, as a user of its
	// repository types it ("make kernels"); errors about missing or stale
	// code objects name it.
	KernelsCommand string
	// Embedded holds the package's embedded files: its code objects are
	// kernels/<KernelFile(platform, collective)>.
	Embedded fs.FS
	// Collectives are the package's collectives in name order.
	Collectives []Collective

	once sync.Once
	err  error // why the table cannot be used (set by prepare)
	// conflict, when set, is a registration of another package under the
	// same ImportPath (Register).
	conflict atomic.Pointer[Table]
}

// Collective describes one spec: its signature and its variants.
type Collective struct {
	Name     string
	SpecHash string            // baked into its code object; a mismatch is a stale kernel
	DTypes   []irismodel.DType // data types of its kernels; empty: it has none (barrier)
	Ops      []string
	Sizes    []SizeParam            // in kernel-argument order
	Params   []irismodel.ParamDesc  // launch parameters, in kernel-argument order (after the sizes)
	Tensors  []irismodel.TensorDesc // in spec order, workspace included
	Variants []Variant
	// Auto is the tuning table of the auto variant, first match wins, the
	// last rule matching everything; empty: no auto variant.
	Auto []irismodel.AutoRule

	t     *Table
	user  []int // indices of the user tensors in Tensors
	owner []int // per tensor: the index in Params of its Owner, -1 for none
	meets bool  // some variant meets its peers (Variant.meets)
}

// SizeParam is a size parameter of a collective.
type SizeParam struct {
	Name string
	// From is the index in Collective.Tensors of the user tensor the
	// convenience call reads the size from (the tensor's length divided by
	// its other dimensions, once world and the sizes read before are known);
	// -1: the size is a parameter of the convenience call.
	From int
}

// Use is how a variant uses one tensor: the placement rule the generator
// derived from the spec's access declarations.
type Use uint8

// The uses of a tensor.
const (
	// Unused: the variant does not touch the tensor; a workspace it leaves
	// unused is not allocated, and the kernel gets a null pointer.
	Unused Use = iota
	// UseLocal: only this rank touches it; any device memory will do.
	UseLocal
	// UseImport: peers read it; on the heap it is used as it is, otherwise
	// Launch copies it into plan-owned heap staging on the stream first.
	UseImport
	// UseHeap: peers write it; it must be on the heap (*PlacementError).
	UseHeap
)

// Variant is one algorithm of a collective.
type Variant struct {
	Name string
	// Uses is how the variant uses each tensor of the collective, in
	// Collective.Tensors order.
	Uses []Use
	// InPlace is the spec's aliasing: allow. A pair of a dir: in tensor and
	// a written one (out, inout) may then be the very same tensor (or
	// disjoint); without it, and for every other pair with a written tensor
	// (two written tensors in one memory lose one's results), they may not
	// overlap at all (ir.Variant.AliasPairs and InPlace).
	InPlace bool
	// OwnBlock is the spec's aliasing: own_block (copy-engine variants): a
	// dir: in tensor whose shape a written tensor's is [world] blocks of
	// (irismodel.TensorDesc.OwnBlock) may be exactly this rank's block of
	// it, in place, else disjoint; the launch then drops the copy whose
	// source and destination are one.
	OwnBlock bool
	// Barriers are the modes a launch may ask for, the default first;
	// Capturable those whose launch may be captured in a graph.
	Barriers   []irismodel.Barrier
	Capturable []irismodel.Barrier
	// The launch shape: threads a block, the largest grid and the vector
	// width that sizes it (Grid).
	Threads, MaxBlocks, VectorBytes int
	// MinBlocks is the spec's min_blocks: where the size gives fewer
	// blocks, a plan's blocks have fewer threads, so it has up to
	// MinBlocks of them (Grid). 0 (the generator writes it only above 1)
	// and 1 give the spec's shape at every size.
	MinBlocks int
	// Engine is what moves the data. EngineCopy: the variant has no
	// kernel; a launch enqueues the copies its schedule Copies gives this
	// rank (irismodel.ExpandCopies) on the launch stream, between the
	// barriers of its mode (docs/internals.md, "Copy-engine launches").
	Engine irismodel.Engine
	Copies []irismodel.CopyStmt

	c     *Collective
	label string // "collective/variant", for errors
	id    uint64 // unique in the process: the plan cache's key
	heap  []int  // user positions of UseHeap tensors
	pairs []aliasPair
	// exchanged: the tensors only one rank uses that peers touch, which get
	// address slots.
	exchanged []int
	// meets: the kernel may wait for or touch a peer (a tensor peers use, or
	// a barrier mode other than none): its launches are numbered (launch.go).
	meets bool
}

// aliasPair is a pair of user positions a launch checks for overlap;
// same says that the very same tensor is allowed (in place).
type aliasPair struct {
	a, b int
	same bool
	// blockOf: a may be this rank's own block of b (aliasing: own_block);
	// hasBlock: b may be this rank's own block of a.
	blockOf, hasBlock bool
}

// Label is "collective/variant", as errors name the variant.
func (v *Variant) Label() string { return v.label }

// Kernel is the kernel entry of v for data type dt and op (0 and "" where
// the collective has no dtypes or ops):
// irisgen_<collective>_<variant>[_<dtype>][_<op>], as ir.KernelName names
// it in the generated source.
func (v *Variant) Kernel(dt irismodel.DType, op string) string {
	if len(v.c.DTypes) == 0 {
		dt = 0
	}
	if len(v.c.Ops) == 0 {
		op = ""
	}
	return irismodel.KernelName(v.c.Name, v.Name, dt, op)
}

// Variant returns the variant called name, or nil.
func (c *Collective) Variant(name string) *Variant {
	for i := range c.Variants {
		if c.Variants[i].Name == name {
			return &c.Variants[i]
		}
	}
	return nil
}

// Choose is the variant the auto table picks for a launch on world ranks
// whose largest user tensor has the given bytes ("" without a table).
func (c *Collective) Choose(world int, bytes int64) string {
	return irismodel.Choose(c.Auto, world, bytes)
}

// variantIDs numbers the variants of every prepared table.
var variantIDs atomic.Uint64

// prepare checks the table once and derives what launches use. Its error
// is kept and returned by every plan of the table.
func (t *Table) prepare() error {
	t.once.Do(func() { t.err = t.build() })
	return t.err
}

func (t *Table) build() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("irisrt: the descriptor table of %q is invalid: %s; regenerate the package with irisgen",
			t.ImportPath, fmt.Sprintf(format, a...))
	}
	// The links first, so that the plans of an invalid table find it and
	// return why it is invalid.
	for ci := range t.Collectives {
		c := &t.Collectives[ci]
		c.t = t
		for vi := range c.Variants {
			v := &c.Variants[vi]
			v.c, v.label = c, c.Name+"/"+v.Name
		}
	}
	for ci := range t.Collectives {
		c := &t.Collectives[ci]
		if c.Name == "" || len(c.Variants) == 0 {
			return bad("collective %d has no name or no variants", ci)
		}
		if len(c.Sizes) > 64 {
			return bad("%s has %d size parameters; at most 64 are supported", c.Name, len(c.Sizes))
		}
		for _, d := range c.DTypes {
			if !d.Valid() {
				return bad("%s: invalid dtype %d", c.Name, d)
			}
		}
		c.user = c.user[:0]
		for i, td := range c.Tensors {
			if td.Dir != irismodel.Workspace {
				c.user = append(c.user, i)
			}
			if err := c.checkTensor(td); err != nil {
				return bad("%s: tensor %s: %v", c.Name, td.Name, err)
			}
		}
		if err := c.checkParams(); err != nil {
			return bad("%s: %v", c.Name, err)
		}
		for i, s := range c.Sizes {
			if err := c.checkSize(i, s); err != nil {
				return bad("%s: size %s: %v", c.Name, s.Name, err)
			}
		}
		c.meets = false
		for vi := range c.Variants {
			v := &c.Variants[vi]
			if err := c.prepareVariant(v); err != nil {
				return bad("%s/%s: %v", c.Name, v.Name, err)
			}
			c.meets = c.meets || v.meets
		}
		for _, r := range c.Auto {
			if c.Variant(r.Variant) == nil {
				return bad("%s: the auto table names unknown variant %q", c.Name, r.Variant)
			}
		}
	}
	return nil
}

func (c *Collective) checkTensor(td irismodel.TensorDesc) error {
	switch td.Dir {
	case irismodel.In, irismodel.Out, irismodel.InOut, irismodel.Workspace:
	default:
		return fmt.Errorf("unknown dir %q", td.Dir)
	}
	if len(td.Shape) == 0 {
		return fmt.Errorf("empty shape")
	}
	for _, d := range td.Shape {
		switch {
		case d == irismodel.DimBlocks && td.Dir != irismodel.Workspace:
			return fmt.Errorf("only workspace shapes may use blocks")
		case d == 0, d.Size() >= len(c.Sizes):
			return fmt.Errorf("dimension %d is neither a constant nor a known symbol", d)
		}
	}
	if td.DType == 0 && len(c.DTypes) == 0 {
		return fmt.Errorf("takes the plan's data type, but the collective has none")
	}
	if td.DType != 0 && !td.DType.Valid() {
		return fmt.Errorf("invalid dtype %d", td.DType)
	}
	if len(td.Index) > 0 && td.Index[0] != td.DType {
		return fmt.Errorf("index types %v do not start with its dtype %s", td.Index, td.DType)
	}
	return nil
}

// checkParams checks the parameters and the tensors' owners, and links
// every tensor to its owner's parameter.
func (c *Collective) checkParams() error {
	if len(c.Params) > 64 {
		return fmt.Errorf("%d parameters; at most 64 are supported", len(c.Params))
	}
	for i, d := range c.Params {
		switch {
		case d.Name == "":
			return fmt.Errorf("parameter %d has no name", i)
		case d.Kind < irismodel.ParamRank || d.Kind > irismodel.ParamF32:
			return fmt.Errorf("parameter %s has unknown kind %d", d.Name, d.Kind)
		case d.Kind == irismodel.ParamInt && d.Min > d.Max:
			return fmt.Errorf("parameter %s has min %d above max %d", d.Name, d.Min, d.Max)
		}
		for _, e := range c.Params[:i] {
			if e.Name == d.Name {
				return fmt.Errorf("parameter %s is declared twice", d.Name)
			}
		}
	}
	c.owner = make([]int, len(c.Tensors))
	for i, td := range c.Tensors {
		c.owner[i] = -1
		if td.Owner == "" {
			continue
		}
		j := slices.IndexFunc(c.Params, func(d irismodel.ParamDesc) bool { return d.Name == td.Owner })
		switch {
		case j < 0 || c.Params[j].Kind != irismodel.ParamRank:
			return fmt.Errorf("tensor %s is owned by %q, which is not a rank parameter", td.Name, td.Owner)
		case td.Dir == irismodel.Workspace || td.Optional:
			return fmt.Errorf("tensor %s is owned by %s but is a workspace or optional", td.Name, td.Owner)
		}
		c.owner[i] = j
	}
	return nil
}

func (c *Collective) checkSize(i int, s SizeParam) error {
	if s.From < 0 {
		return nil
	}
	if s.From >= len(c.Tensors) || c.Tensors[s.From].Dir == irismodel.Workspace {
		return fmt.Errorf("read from tensor %d, which is not a user tensor", s.From)
	}
	if c.Tensors[s.From].Owner != "" {
		return fmt.Errorf("read from tensor %s, which only rank %s passes", c.Tensors[s.From].Name, c.Tensors[s.From].Owner)
	}
	if c.Tensors[s.From].Optional {
		return fmt.Errorf("read from tensor %s, which a launch may leave out", c.Tensors[s.From].Name)
	}
	n := 0
	for _, d := range c.Tensors[s.From].Shape {
		if d.Size() == i {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("read from tensor %s, whose shape names it %d times", c.Tensors[s.From].Name, n)
	}
	return nil
}

func (c *Collective) prepareVariant(v *Variant) error {
	if v.id == 0 {
		v.id = variantIDs.Add(1)
	}
	if len(v.Uses) != len(c.Tensors) {
		return fmt.Errorf("%d uses for %d tensors", len(v.Uses), len(c.Tensors))
	}
	if len(v.Barriers) == 0 {
		return fmt.Errorf("no barrier modes")
	}
	for _, m := range v.Barriers {
		if !m.Valid() {
			return fmt.Errorf("unknown barrier mode %d", m)
		}
	}
	for _, m := range v.Capturable {
		if !slices.Contains(v.Barriers, m) {
			return fmt.Errorf("capturable mode %s is not one of its modes", m)
		}
	}
	if v.Threads < 1 || v.Threads > irismodel.MaxThreads || v.MaxBlocks < 1 || v.MaxBlocks > irismodel.MaxBlocks || v.VectorBytes < 1 {
		return fmt.Errorf("launch shape %d threads, %d blocks, %d-byte vectors", v.Threads, v.MaxBlocks, v.VectorBytes)
	}
	if v.MinBlocks < 0 || v.MinBlocks > v.MaxBlocks {
		return fmt.Errorf("launch shape: MinBlocks %d, want 0 or 1..MaxBlocks (%d)", v.MinBlocks, v.MaxBlocks)
	}
	if v.OwnBlock && (v.Engine != irismodel.EngineCopy || v.InPlace) {
		return fmt.Errorf("OwnBlock on a kernel variant, or with InPlace: it is a copy-engine variant's aliasing: own_block alone")
	}
	v.heap, v.pairs, v.exchanged = nil, nil, nil
	v.meets = !slices.Equal(v.Barriers, []irismodel.Barrier{irismodel.BarrierNone})
	if err := c.checkCopies(v); err != nil {
		return err
	}
	for ti := range c.Tensors {
		// A copy-engine variant's peers write such a tensor at the owner's
		// staging buffer (Plans.StageOut), which needs no address slots.
		if c.owner[ti] >= 0 && v.Uses[ti] >= UseImport && v.Engine != irismodel.EngineCopy {
			v.exchanged = append(v.exchanged, ti)
		}
		if v.Uses[ti] >= UseImport {
			v.meets = true
		}
	}
	writes := func(d irismodel.Dir) bool { return d == irismodel.Out || d == irismodel.InOut }
	for a, ia := range c.user {
		if v.Uses[ia] > UseHeap {
			return fmt.Errorf("tensor %s has unknown use %d", c.Tensors[ia].Name, v.Uses[ia])
		}
		if v.Uses[ia] == UseHeap && !v.stagesOut(ia) {
			v.heap = append(v.heap, a)
		}
		// The pairs ir.Variant.AliasPairs lists: every pair of user tensors
		// of which one at least is written, in spec order; in place (the
		// same tensor allowed) only for a dir: in tensor and a written one.
		for b := a + 1; b < len(c.user); b++ {
			da, db := c.Tensors[ia].Dir, c.Tensors[c.user[b]].Dir
			if writes(da) || writes(db) {
				ta, tb := &c.Tensors[ia], &c.Tensors[c.user[b]]
				v.pairs = append(v.pairs, aliasPair{a: a, b: b, same: v.InPlace && (da == irismodel.In) != (db == irismodel.In),
					blockOf: v.OwnBlock && ta.OwnBlock(tb), hasBlock: v.OwnBlock && tb.OwnBlock(ta)})
			}
		}
	}
	return nil
}

// stagesOut reports whether v's launches write tensor ti through the
// owner's staging buffer: a copy-engine variant whose peers write a tensor
// only one rank passes (Plans.StageOut).
func (v *Variant) stagesOut(ti int) bool {
	return v.Engine == irismodel.EngineCopy && v.c.owner[ti] >= 0 && v.Uses[ti] == UseHeap
}

// checkCopies checks a copy-engine variant's schedule against the
// collective: the tensors and parameters it names, the blocks it indexes;
// and that a kernel variant has none.
func (c *Collective) checkCopies(v *Variant) error {
	switch {
	case v.Engine == irismodel.EngineSM && len(v.Copies) > 0:
		return fmt.Errorf("a kernel variant with a copy schedule")
	case v.Engine == irismodel.EngineSM:
		return nil
	case v.Engine != irismodel.EngineCopy:
		return fmt.Errorf("unknown engine %d", v.Engine)
	case len(v.Copies) == 0:
		return fmt.Errorf("a copy-engine variant without copies")
	}
	rank := func(e irismodel.RankExpr, vars int, whole bool) error {
		switch {
		case e.Whole() && whole:
			return nil
		case e.Var >= vars || e.Param >= len(c.Params) || e.Shift >= len(c.Params) || (e.Var < 0) == (e.Param < 0):
			return fmt.Errorf("a rank that names no variable or parameter")
		case e.Param >= 0 && c.Params[e.Param].Kind != irismodel.ParamRank, e.Shift >= 0 && c.Params[e.Shift].Kind != irismodel.ParamInt:
			return fmt.Errorf("a rank of a parameter of the wrong kind")
		}
		return nil
	}
	for i, st := range v.Copies {
		if st.Vars < 0 || st.Vars > irismodel.MaxCopyVars {
			return fmt.Errorf("copy %d has %d rank variables", i, st.Vars)
		}
		for _, e := range []irismodel.CopyEnd{st.From, st.To} {
			if e.Tensor < 0 || e.Tensor >= len(c.Tensors) || c.Tensors[e.Tensor].Dir == irismodel.Workspace {
				return fmt.Errorf("copy %d names tensor %d, which is not a user tensor", i, e.Tensor)
			}
			if !e.Block.Whole() && c.Tensors[e.Tensor].Shape[0] != irismodel.DimWorld {
				return fmt.Errorf("copy %d indexes tensor %s, whose first dimension is not world", i, c.Tensors[e.Tensor].Name)
			}
			if err := rank(e.Block, st.Vars, true); err != nil {
				return fmt.Errorf("copy %d: %v", i, err)
			}
			if err := rank(e.Rank, st.Vars, false); err != nil {
				return fmt.Errorf("copy %d: %v", i, err)
			}
		}
	}
	return nil
}

// AliasPair is a pair of user tensors whose overlap a launch checks;
// InPlace says that they may be the very same tensor (checkInPlace),
// OwnBlock that one may be exactly this rank's block of the other
// (checkOwnBlock), else they may not overlap at all (checkNoAlias).
type AliasPair struct {
	A, B     string
	InPlace  bool
	OwnBlock bool
}

// AliasPairs lists the pairs of user tensors whose overlap a launch of v
// checks, in spec order.
func (v *Variant) AliasPairs() []AliasPair {
	out := make([]AliasPair, len(v.pairs))
	for i, p := range v.pairs {
		out[i] = AliasPair{A: v.c.Tensors[v.c.user[p.a]].Name, B: v.c.Tensors[v.c.user[p.b]].Name, InPlace: p.same, OwnBlock: p.blockOf || p.hasBlock}
	}
	return out
}

// sizeNames are the names of c's size parameters, in order.
func (c *Collective) sizeNames() []string {
	names := make([]string, len(c.Sizes))
	for i, s := range c.Sizes {
		names[i] = s.Name
	}
	return names
}

package irisimpl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// VariantPlan is a plan of one variant of a generated package: the runtime
// irisrt.Plan with the variant's descriptor and the dtype, op and sizes it was made
// for. Every generated plan type embeds it (its typed Launch calls
// LaunchTensors), and the catalogue's constructors return it.
type VariantPlan struct {
	plan  *irisrt.Plan
	v     *Variant
	dt    irismodel.DType
	op    string
	sizes []int64
	lens  []int64         // element counts of the user tensors
	bufs  []gpu.DevicePtr // per tensor: its workspace buffer, or its address slots, else 0
	// empty: every user tensor has 0 elements, so a launch enqueues nothing.
	empty bool

	// A copy-engine variant's launch state, reused by every launch: per
	// tensor its bytes and this rank's address of it (the one the peers'
	// translate), the parameters' values and the expanded schedule.
	tbytes []int64
	ptrs   []gpu.DevicePtr
	vals   []int64
	sched  []irismodel.BlockCopy
}

// AnyPlan is what every plan of a generated package offers, whatever its
// variant.
type AnyPlan interface {
	// LaunchTensors launches with the user tensors in spec order (a
	// collective without parameters).
	LaunchTensors(s gpu.Stream, ts []irisrt.Tensor, mode irismodel.Barrier) error
	// LaunchParams launches with the user tensors and the parameters in
	// spec order.
	LaunchParams(s gpu.Stream, ts []irisrt.Tensor, ps []irismodel.Param, mode irismodel.Barrier) error
	// Plan returns the runtime plan.
	Plan() *irisrt.Plan
	// Close frees the plan's buffers (collective).
	Close() error
}

// NewPlanOf makes a plan of variant v (of a registered or prepared Table)
// for dt, op and the sizes, as the generated plan type T, which embeds
// VariantPlan: the body of every generated constructor. Like NewPlan it is
// collective. dt must be one of the collective's dtypes and op one of its
// ops (*irisrt.UnsupportedError); both are ignored where the collective has none.
// The sizes must not be negative; with sizes that leave every user tensor
// empty the plan's launches enqueue nothing.
func NewPlanOf[T any, P interface {
	*T
	bind(VariantPlan)
}](r *irisrt.Rank, v *Variant, dt irismodel.DType, op string, sizes ...int64) (P, error) {
	vp, err := newVariantPlan(r, v, dt, op, sizes)
	if err != nil {
		return nil, err
	}
	p := P(new(T))
	p.bind(*vp)
	return p, nil
}

func (p *VariantPlan) bind(v VariantPlan) { *p = v }

// Plan is the runtime plan: its grid, buffers and barrier modes.
func (p *VariantPlan) Plan() *irisrt.Plan { return p.plan }

// Close frees the plan's heap buffers; like making a plan it is collective.
func (p *VariantPlan) Close() error {
	if p.plan == nil {
		return nil
	}
	return p.plan.Close()
}

func dtypeStrings(ds []irismodel.DType) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

func sizeNames(ss []SizeParam) string {
	if len(ss) == 0 {
		return "none"
	}
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// newVariantPlan checks dt, op and the sizes against v's collective, works
// out the plan's shape from the descriptor and makes the plan.
func newVariantPlan(r *irisrt.Rank, v *Variant, dt irismodel.DType, op string, sizes []int64) (*VariantPlan, error) {
	if v == nil || v.c == nil {
		return nil, errors.New("irisimpl: a plan of a variant whose table was never registered: the generated package calls irisimpl.Register in init; a hand-built Table must be registered too")
	}
	c := v.c
	if err := c.t.usable(); err != nil {
		return nil, err
	}
	if len(c.DTypes) == 0 {
		dt = 0
	} else if !slices.Contains(c.DTypes, dt) {
		return nil, &irisrt.UnsupportedError{Op: v.label, What: "dtype", Got: dt.String(), Allowed: dtypeStrings(c.DTypes)}
	}
	if len(c.Ops) == 0 {
		op = ""
	} else if !slices.Contains(c.Ops, op) {
		return nil, &irisrt.UnsupportedError{Op: v.label, What: "op", Got: op, Allowed: c.Ops}
	}
	if len(sizes) != len(c.Sizes) {
		return nil, fmt.Errorf("%s: %d sizes, want %d (%s)", v.label, len(sizes), len(c.Sizes), sizeNames(c.Sizes))
	}
	for i, n := range sizes {
		if n < 0 {
			return nil, fmt.Errorf("%s: size parameter %s = %d, want >= 0", v.label, c.Sizes[i].Name, n)
		}
	}
	world := int64(r.World())
	p := &VariantPlan{v: v, dt: dt, op: op, sizes: slices.Clone(sizes), lens: make([]int64, len(c.user)), bufs: make([]gpu.DevicePtr, len(c.Tensors))}
	bytesOf := func(td *irismodel.TensorDesc, blocks int64) (n, bytes int64, err error) {
		n, ok := td.Shape.Numel(world, blocks, sizes)
		es := td.ElemType(dt).Size()
		if !ok || n > (1<<63-1)/es {
			return 0, 0, &irisrt.ShapeError{Op: v.label, Name: td.Name, Msg: fmt.Sprintf("shape %s does not fit in 2^63 bytes with these sizes (world %d)", td.Shape.String(c.sizeNames()), world)}
		}
		return n, n * es, nil
	}
	// The grid follows the largest user tensor, so block b pairs with block
	// b on every peer (every rank computes the same sizes).
	var largest int64
	for i, ti := range c.user {
		n, bytes, err := bytesOf(&c.Tensors[ti], 0)
		if err != nil {
			return nil, err
		}
		p.lens[i], largest = n, max(largest, bytes)
	}
	p.empty = len(c.user) > 0 && largest == 0
	// Grid clamps MinBlocks to the largest grid, which ranks sharing a GPU
	// lower.
	blocks, threads := Grid(largest, v.Threads, v.VectorBytes, v.MinBlocks, rt.MaxBlocks(r, v.MaxBlocks))
	spec := core.PlanSpec{
		Embedded: c.t.Embedded, KernelsCommand: c.t.KernelsCommand,
		Package: c.t.ImportPath, Op: c.Name, Variant: v.Name, Module: c.Name, SpecHash: c.SpecHash, Kernel: v.Kernel(dt, op),
		Threads: threads, Blocks: blocks, Barriers: v.Barriers, Capturable: v.Capturable, Sizes: p.sizes, Local: !v.meets,
		Copy: v.Engine == irismodel.EngineCopy,
	}
	if spec.Copy {
		spec.Kernel, spec.MaxCopies = "", irismodel.MaxIssued(v.Copies, int(world))
		p.tbytes, p.ptrs, p.vals = make([]int64, len(c.Tensors)), make([]gpu.DevicePtr, len(c.Tensors)), make([]int64, len(c.Params))
		for i, ti := range c.user {
			p.tbytes[ti] = p.lens[i] * c.Tensors[ti].ElemType(dt).Size()
		}
	}
	var workspace []int // the tensors of spec.Workspace
	u := 0              // position among the user tensors
	for ti := range c.Tensors {
		td := &c.Tensors[ti]
		switch {
		case td.Dir == irismodel.Workspace && v.Uses[ti] != Unused:
			_, bytes, err := bytesOf(td, int64(blocks))
			if err != nil {
				return nil, err
			}
			spec.Workspace = append(spec.Workspace, core.Buffer{Name: td.Name, Bytes: bytes})
			workspace = append(workspace, ti)
		case td.Dir != irismodel.Workspace && (v.Uses[ti] == UseImport || v.stagesOut(ti)):
			spec.Staging = append(spec.Staging, core.Buffer{Name: td.Name, Bytes: p.lens[u] * td.ElemType(dt).Size()})
		}
		if td.Dir != irismodel.Workspace {
			u++
		}
	}
	// A slot per block for every tensor only one rank passes that peers
	// touch: its owner's kernel publishes the tensor's heap offset there.
	for _, ti := range v.exchanged {
		spec.Workspace = append(spec.Workspace, core.Buffer{Name: slotsName(c.Tensors[ti].Name), Bytes: int64(blocks) * 8})
	}
	plan, err := rt.NewPlan(r, spec)
	if err != nil {
		return nil, err
	}
	p.plan = plan
	for _, ti := range workspace {
		p.bufs[ti] = rt.Buffer(plan, c.Tensors[ti].Name)
	}
	for _, ti := range v.exchanged {
		p.bufs[ti] = rt.Buffer(plan, slotsName(c.Tensors[ti].Name))
	}
	return p, nil
}

// slotsName is the plan buffer of a tensor's address slots (not an
// identifier, so no workspace tensor has it).
func slotsName(tensor string) string { return "address slots of " + tensor }

// LaunchTensors is LaunchParams without parameters, for collectives that
// have none.
func (p *VariantPlan) LaunchTensors(s gpu.Stream, ts []irisrt.Tensor, mode irismodel.Barrier) error {
	return p.LaunchParams(s, ts, nil, mode)
}

// LaunchParams launches the plan's kernel on s in barrier mode mode with the
// user tensors and the parameters in spec order, after checking, in this
// order and before anything is enqueued: every parameter's kind and range
// (*irisrt.ParamError); every tensor's dtype and length (*irisrt.DTypeError, *irisrt.ShapeError;
// an optional tensor may be the zero irisrt.Tensor, and a tensor only one rank uses
// is checked on that rank only and ignored on the others); that tensors
// peers write are on the heap (*PlacementError); the variant's aliasing rule
// (*irisrt.AliasError); and the plan's checks of the mode and the stream.
// Tensors peers read that are not on the heap are copied into the plan's
// staging on s first. A plan whose tensors are all empty (a size of 0)
// makes the checks and enqueues nothing. It never allocates.
func (p *VariantPlan) LaunchParams(s gpu.Stream, ts []irisrt.Tensor, ps []irismodel.Param, mode irismodel.Barrier) error {
	if p.plan == nil {
		return errors.New("irisimpl: launch of a plan that was never made: make plans with their New...Plan constructor")
	}
	r := rt.Rank(p.plan)
	if rt.Closed(r) {
		return rt.ClosedErr(r, "launch of "+p.v.label)
	}
	return p.launch(s, ts, ps, mode, rt.NextLaunch(r, p.v.meets))
}

// launch is LaunchParams as launch number n: a refusal (any error before
// the kernel is enqueued) reaches the peers (the plan core's Refuse).
func (p *VariantPlan) launch(s gpu.Stream, ts []irisrt.Tensor, ps []irismodel.Param, mode irismodel.Barrier, n uint32) error {
	enqueued, err := p.launchChecked(s, ts, ps, mode, n)
	if err != nil && !enqueued {
		if p.empty {
			return rt.Refuse(rt.Rank(p.plan), s, n, err) // nothing of the peers' waits for it
		}
		return rt.RefuseLaunch(p.plan, s, n, mode, err)
	}
	return err
}

// launchChecked makes LaunchParams' checks and launches; enqueued says
// whether the kernel reached the stream.
func (p *VariantPlan) launchChecked(s gpu.Stream, ts []irisrt.Tensor, ps []irismodel.Param, mode irismodel.Barrier, n uint32) (enqueued bool, err error) {
	v := p.v
	c := v.c
	if len(ts) != len(c.user) {
		return false, c.countError(v.label, len(ts))
	}
	if len(ps) != len(c.Params) {
		return false, c.paramCountError(v.label, len(ps))
	}
	r := rt.Rank(p.plan)
	for i := range c.Params {
		if err := checkParam(&c.Params[i], v.label, ps[i], r.World()); err != nil {
			return false, err
		}
	}
	// mine reports whether this rank uses tensor ti.
	mine := func(ti int) bool { return c.owner[ti] < 0 || ps[c.owner[ti]].Int() == int64(r.Rank()) }
	for i, ti := range c.user {
		td, t := &c.Tensors[ti], ts[i]
		var err error
		switch {
		case !mine(ti), td.Optional && t.Ptr == 0:
			continue
		case len(td.Index) > 0:
			err = rt.CheckTensorOneOf(v.label, td.Name, t, td.Index, p.lens[i])
		default:
			err = rt.CheckTensor(v.label, td.Name, t, td.ElemType(p.dt), p.lens[i])
		}
		if err == nil && t.Ptr != 0 {
			// Wherever the rules put it: a tensor on the heap must be a live
			// allocation of the caller's (a hand-made one into freed memory or
			// a plan's buffers is refused).
			err = rt.CheckLive(v.label, td.Name, r, t)
		}
		if err != nil {
			return false, err
		}
	}
	for _, i := range v.heap {
		if ti := c.user[i]; mine(ti) {
			if err := rt.CheckHeap(v.label, c.Tensors[ti].Name, r, ts[i]); err != nil {
				return false, err
			}
		}
	}
	for _, pr := range v.pairs {
		ta, tb := c.user[pr.a], c.user[pr.b]
		if !mine(ta) || !mine(tb) {
			continue
		}
		na, nb := c.Tensors[ta].Name, c.Tensors[tb].Name
		var err error
		switch {
		case pr.blockOf:
			err = checkOwnBlock(v.label, na, ts[pr.a], nb, ts[pr.b], r.Rank(), r.World())
		case pr.hasBlock:
			err = checkOwnBlock(v.label, nb, ts[pr.b], na, ts[pr.a], r.Rank(), r.World())
		case pr.same:
			err = checkInPlace(v.label, na, ts[pr.a], nb, ts[pr.b])
		default:
			err = checkNoAlias(v.label, na, ts[pr.a], nb, ts[pr.b])
		}
		if err != nil {
			return false, err
		}
	}
	if p.empty {
		return false, rt.Skip(p.plan, s, mode)
	}
	// The kernel's argument struct: a pointer per tensor in spec order (0
	// for a tensor this rank does not use), the sizes, the parameters, the
	// element width of every index tensor, the address slots of every
	// tensor only one rank uses.
	a := rt.Args(p.plan)
	u := 0
	for ti := range c.Tensors {
		td := &c.Tensors[ti]
		switch {
		case td.Dir == irismodel.Workspace:
			a.Ptr(p.bufs[ti])
			continue
		case !mine(ti):
			a.Ptr(0)
		case v.stagesOut(ti):
			rt.StageOut(p.plan, a, td.Name, ts[u])
		case v.Uses[ti] == UseImport:
			rt.Staged(p.plan, a, td.Name, ts[u])
		default:
			a.Ptr(ts[u].Ptr)
		}
		if p.ptrs != nil {
			p.ptrs[ti] = gpu.DevicePtr(binary.LittleEndian.Uint64(a.B[len(a.B)-8:]))
			if !mine(ti) && v.stagesOut(ti) {
				// The owner's tensor is reached at its staging buffer, at
				// this rank's offset of the same buffer.
				p.ptrs[ti] = rt.Buffer(p.plan, td.Name)
			}
		}
		u++
	}
	for _, n := range p.sizes {
		a.I64(n)
	}
	for _, x := range ps {
		a.I64(int64(x.Word()))
	}
	for i, ti := range c.user {
		if idx := c.Tensors[ti].Index; len(idx) > 0 {
			w := ts[i].DType.Size()
			if !mine(ti) {
				w = idx[0].Size()
			}
			a.I64(w)
		}
	}
	for ti := range c.Tensors {
		if c.owner[ti] >= 0 {
			a.Ptr(p.bufs[ti]) // the slots where peers touch it, else 0
		}
	}
	if p.ptrs != nil && a.Err == nil {
		p.copies(a, ps)
	}
	return rt.Launch(p.plan, s, mode, a, n, core.Fingerprint(rt.ID(p.plan), n, mode, ps))
}

// copies appends to a the copies a copy-engine launch of this rank issues:
// the variant's schedule expanded for the world, this rank and the
// parameters, each block's address worked out from this rank's address of
// its tensor (a peer's through the heap: the same offset on every rank).
func (p *VariantPlan) copies(a *core.Args, ps []irismodel.Param) {
	r := rt.Rank(p.plan)
	world, me := r.World(), r.Rank()
	for i, x := range ps {
		p.vals[i] = x.Int()
	}
	p.sched = irismodel.ExpandCopies(p.sched[:0], p.v.Copies, world, me, p.vals)
	block := func(t, rank, blk int) (gpu.DevicePtr, int64) {
		ptr, bytes := p.ptrs[t], p.tbytes[t]
		if rank != me {
			ptr = r.Heap().Peer(ptr, rank)
		}
		if blk >= 0 {
			bytes /= int64(world)
			ptr += gpu.DevicePtr(int64(blk) * bytes)
		}
		return ptr, bytes
	}
	for _, bc := range p.sched {
		src, bytes := block(bc.From, bc.FromRank, bc.FromBlock)
		dst, _ := block(bc.To, bc.ToRank, bc.ToBlock)
		a.Copies = append(a.Copies, core.Copy{Dst: dst, Src: src, Bytes: bytes})
	}
}

// paramCountError reports a launch of what with got parameters instead of
// c's.
func (c *Collective) paramCountError(what string, got int) error {
	if len(c.Params) == 0 {
		return fmt.Errorf("%s takes no parameters, got %d", what, got)
	}
	names := make([]string, len(c.Params))
	for i, d := range c.Params {
		names[i] = d.Name
	}
	return fmt.Errorf("%s: %d parameters, want %d (%s): launch with LaunchParams", what, got, len(c.Params), strings.Join(names, ", "))
}

// countError reports a launch of what with got tensors instead of c's.
func (c *Collective) countError(what string, got int) error {
	if len(c.user) == 0 {
		return fmt.Errorf("%s takes no tensors, got %d", what, got)
	}
	names := make([]string, len(c.user))
	for i, ti := range c.user {
		names[i] = c.Tensors[ti].Name
	}
	return fmt.Errorf("%s: %d tensors, want %d (%s)", what, got, len(c.user), strings.Join(names, ", "))
}

// Run is RunParams without parameters, for collectives that have none.
func (c *Collective) Run(r *irisrt.Rank, s gpu.Stream, variant string, dt irismodel.DType, op string, given []int64, ts []irisrt.Tensor, mode irismodel.Barrier) error {
	return c.RunParams(r, s, variant, dt, op, given, ts, nil, mode)
}

// RunParams launches a variant of c through r's plan cache: the convenience call
// <Collective>(r, s, variant, ...) of the generated package. The sizes are
// read from the tensors every rank passes (SizeParam.From) except those
// given, in order, by the caller; variant AutoVariant picks one from the
// tuning table by the bytes of the largest user tensor as its shape gives
// it with these sizes, which every rank works out alike (a tensor only the
// root passes counts on every rank). The first call with a variant, dtype,
// op and sizes makes the plan (collective, and refused while s is
// capturing: *irisrt.CaptureError), later ones reuse it; a call that finds its
// plan does not allocate. The parameters ps are the launch's
// (LaunchParams); like a launch, the call is numbered, and its refusal
// reaches the peers.
func (c *Collective) RunParams(r *irisrt.Rank, s gpu.Stream, variant string, dt irismodel.DType, op string, given []int64, ts []irisrt.Tensor, ps []irismodel.Param, mode irismodel.Barrier) error {
	if c.t == nil {
		return errors.New("irisimpl: Run on a collective whose table was never registered")
	}
	if rt.Closed(r) {
		return rt.ClosedErr(r, "Run of "+c.Name)
	}
	p, v, err := c.plan(r, s, variant, dt, op, given, ts)
	meets := c.meets
	if v != nil {
		meets = v.meets
	}
	n := rt.NextLaunch(r, meets)
	if err != nil {
		return rt.Refuse(r, s, n, err)
	}
	return p.launch(s, ts, ps, mode, n)
}

// plan finds (or makes) RunParams' plan: the variant (nil when unknown)
// and its plan for the sizes the tensors give.
func (c *Collective) plan(r *irisrt.Rank, s gpu.Stream, variant string, dt irismodel.DType, op string, given []int64, ts []irisrt.Tensor) (*VariantPlan, *Variant, error) {
	if err := c.t.usable(); err != nil {
		return nil, nil, err
	}
	if len(ts) != len(c.user) {
		return nil, nil, c.countError(c.Name, len(ts))
	}
	var buf [8]int64
	sizes := buf[:0]
	if len(c.Sizes) > len(buf) {
		sizes = make([]int64, 0, len(c.Sizes))
	}
	sizes = sizes[:len(c.Sizes)]
	if err := c.inferSizes(sizes, int64(r.World()), given, ts); err != nil {
		return nil, nil, err
	}
	if variant == irismodel.AutoVariant && len(c.Auto) > 0 {
		variant = c.Choose(r.World(), c.largestBytes(int64(r.World()), dt, sizes))
	}
	v := c.Variant(variant)
	if v == nil {
		return nil, nil, c.unknownVariant(variant)
	}
	p, err := cachedPlan(r, s, v, dt, op, sizes)
	return p, v, err
}

// largestBytes is the bytes of c's largest user tensor on world ranks for
// dt and the sizes, from the shapes alone (an index tensor at its first
// dtype): what Choose compares, the same on every rank whatever tensors
// each passes. A shape that overflows counts as the largest.
func (c *Collective) largestBytes(world int64, dt irismodel.DType, sizes []int64) int64 {
	var largest int64
	for _, ti := range c.user {
		td := &c.Tensors[ti]
		n, ok := td.Shape.Numel(world, 0, sizes)
		es := max(td.ElemType(dt).Size(), 1)
		if !ok || n > (1<<63-1)/es {
			return 1<<63 - 1
		}
		largest = max(largest, n*es)
	}
	return largest
}

func (c *Collective) unknownVariant(name string) error {
	names := make([]string, 0, len(c.Variants)+1)
	for _, v := range c.Variants {
		names = append(names, v.Name)
	}
	if len(c.Auto) > 0 {
		names = append(names, irismodel.AutoVariant)
	}
	return fmt.Errorf("%s: unknown variant %q (variants: %s)", c.Name, name, strings.Join(names, ", "))
}

// inferSizes fills sizes: the given ones in order, the others from the
// length of their tensor divided by its other dimensions, in as many rounds
// as the dependencies need. A size whose divisor is 0 or overflows is 0,
// which the plan refuses.
func (c *Collective) inferSizes(sizes []int64, world int64, given []int64, ts []irisrt.Tensor) error {
	var known uint64 // bit i: size i is known (prepare allows at most 64 sizes)
	g := 0
	for i, sp := range c.Sizes {
		if sp.From < 0 && g < len(given) {
			sizes[i], known = given[g], known|1<<i
			g++
		}
	}
	if want := c.givenCount(); len(given) != want {
		return fmt.Errorf("%s: %d sizes given, want %d", c.Name, len(given), want)
	}
	for progress := true; progress; {
		progress = false
	sizes:
		for i, sp := range c.Sizes {
			if known&(1<<i) != 0 {
				continue
			}
			d := int64(1)
			for _, dim := range c.Tensors[sp.From].Shape {
				f := int64(dim)
				switch j := dim.Size(); {
				case j == i:
					continue
				case dim == irismodel.DimWorld:
					f = world
				case j >= 0 && known&(1<<j) == 0:
					continue sizes
				case j >= 0:
					f = sizes[j]
				}
				if f <= 0 || d > (1<<63-1)/f {
					d = 0
					break
				}
				d *= f
			}
			sizes[i], known, progress = 0, known|1<<i, true
			if d > 0 {
				sizes[i] = ts[c.userPos(sp.From)].Len / d
			}
		}
	}
	for i, sp := range c.Sizes {
		if known&(1<<i) == 0 {
			return fmt.Errorf("%s: size %s cannot be read from the tensors", c.Name, sp.Name)
		}
	}
	return nil
}

func (c *Collective) givenCount() int {
	n := 0
	for _, sp := range c.Sizes {
		if sp.From < 0 {
			n++
		}
	}
	return n
}

// userPos is the launch position of tensor ti.
func (c *Collective) userPos(ti int) int { return slices.Index(c.user, ti) }

// cachedPlan returns r's cached plan of v for dt, op and sizes, making it
// on first use. The key is built in a stack buffer and looked up without a
// conversion, so a hit does not allocate.
func cachedPlan(r *irisrt.Rank, s gpu.Stream, v *Variant, dt irismodel.DType, op string, sizes []int64) (*VariantPlan, error) {
	var kb [96]byte
	key := binary.LittleEndian.AppendUint64(kb[:0], v.id)
	key = append(key, byte(dt), byte(len(op)))
	key = append(key, op...)
	for _, n := range sizes {
		key = binary.LittleEndian.AppendUint64(key, uint64(n))
	}
	c := rt.Cache(r)
	c.Mu.Lock()
	defer c.Mu.Unlock()
	if p, ok := c.Plans[string(key)]; ok {
		return p.(*VariantPlan), nil
	}
	capturing, err := r.Capturing(s)
	if err != nil {
		return nil, err
	}
	if capturing {
		return nil, &irisrt.CaptureError{Op: "creating a plan of " + v.label + " on first use",
			What: "making a plan allocates and zeroes heap memory and waits for the other ranks",
			Fix:  "make the plan with its New...Plan constructor before capture and launch that plan inside the capture"}
	}
	p, err := newVariantPlan(r, v, dt, op, sizes)
	if err != nil {
		return nil, err
	}
	if c.Plans == nil {
		c.Plans = map[string]any{}
	}
	c.Plans[string(key)] = p
	return p, nil
}

// CachedPlans is the number of plans r's convenience calls have made.
func CachedPlans(r *irisrt.Rank) int {
	c := rt.Cache(r)
	c.Mu.Lock()
	defer c.Mu.Unlock()
	return len(c.Plans)
}

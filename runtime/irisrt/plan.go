package irisrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// PlanSpec is what a plan is made of: which kernel, how it is launched,
// which barrier modes it supports and which heap buffers it needs besides
// the barrier flags. The descriptor interpreter (NewPlanOf) works it out from
// a generated package's Table.
type PlanSpec struct {
	Package          string // import path of the generated package: where its code objects come from
	Op, Variant      string // "all_gather", "push": used in errors
	Module, SpecHash string // module = collective name; the wrapper's spec hash
	Kernel           string // kernel entry name (ir.KernelName)
	Threads, Blocks  int
	Barriers         []irismodel.Barrier // modes the variant supports, default first
	Capturable       []irismodel.Barrier // modes whose launch may be captured
	Workspace        []Buffer            // heap, zeroed at plan creation
	Staging          []Buffer            // heap, for tensors with placement import
	// Sizes are the size parameters the plan was made for: like the rest
	// of the spec, every rank must make the plan with the same ones.
	Sizes []int64
	// Local: the kernel never waits for or touches a peer (all its tensors
	// local, barrier mode none only), so a rank may launch it alone; its
	// launches are not numbered (see launch.go).
	Local bool
}

// Buffer is a named heap buffer of a plan.
type Buffer struct {
	Name  string
	Bytes int64
}

// Plan holds everything one launch of a kernel needs that must be allocated:
// the loaded function, the barrier flags uint64[blocks+1][MaxWorld] and epochs
// uint64[blocks+2] (the last row and two counters serve the grid-wide sync),
// workspace and staging buffers, all on the heap, and a reusable argument
// buffer. Launching a plan never allocates device memory,
// copies between host and device, or waits on the host (except in
// BarrierHost mode).
//
// A plan's launches must be ordered on the device (one stream, or streams
// ordered with events): its kernels carry the barrier epochs from one
// launch to the next. So a plan is launched from one goroutine at a time;
// a launch (or Close) that overlaps another on the host is refused with an
// *InUseError rather than racing on the plan's argument buffer.
type Plan struct {
	r       *Rank
	spec    PlanSpec
	fn      gpu.Function
	flags   gpu.DevicePtr
	epochs  gpu.DevicePtr
	bufs    map[string]planBuf
	allocs  []gpu.DevicePtr // in allocation order
	ctx     [CtxBytes]byte
	args    Args
	busy    atomic.Bool  // held from Args to the end of Launch, and by Close
	refused Args         // what Args returns while busy: its err says so; never written after NewPlan
	closed  bool         // read and written only while busy is held
	graphs  atomic.Int32 // live graphs (Rank.Capture) that launch the plan
	id      uint64       // the plan in its launches' checks: its spec and heap offset
}

type planBuf struct {
	ptr     gpu.DevicePtr
	bytes   int64
	staging bool
}

// Args is a kernel's argument struct being packed: the 112-byte ctx, then 8
// little-endian bytes per tensor pointer and per int64 symbol, in the order of
// the kernel's <kernel>_args struct.
type Args struct {
	b      []byte
	ptrs   []gpu.DevicePtr // the pointers among b (a graph captured through Rank.Capture holds their allocations)
	p      *Plan
	stages []stage // copies Launch makes onto the heap first
	err    error   // the first Staged error, returned by Launch
}

// stage is one pending import: t copied into staging buffer name at to.
type stage struct {
	name string
	to   gpu.DevicePtr
	t    Tensor
}

// Staged appends t's address when t lies on the rank's heap (in a live
// allocation: see CheckLive); otherwise the
// address of the plan's staging buffer name, into which Launch copies t on
// its stream after its checks and before the kernel (refused in BarrierNone,
// where nothing would order that copy before the peers' reads). Variants
// whose peers read a tensor take it this way, so a user tensor anywhere in
// device memory works.
func (a *Args) Staged(name string, t Tensor) *Args {
	if a.err != nil {
		return a
	}
	if err := CheckLive(a.p.spec.Op, name, a.p.r, t); err != nil {
		a.err = err
		return a
	}
	if a.p.r.heap.Contains(t.Ptr, t.Bytes()) {
		return a.Ptr(t.Ptr)
	}
	b, err := a.p.staging(name, t)
	if err != nil {
		if a.err == nil {
			a.err = err
		}
		return a.Ptr(0)
	}
	a.stages = append(a.stages, stage{name, b.ptr, t})
	return a.Ptr(b.ptr)
}

// Ptr appends a tensor pointer.
func (a *Args) Ptr(p gpu.DevicePtr) *Args {
	if a.err != nil {
		return a // refused already (and the plan's refused Args is never written)
	}
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(p))
	a.ptrs = append(a.ptrs, p)
	return a
}

// I64 appends an int64 symbol.
func (a *Args) I64(v int64) *Args {
	if a.err != nil {
		return a
	}
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(v))
	return a
}

// Bytes returns the packed bytes (shared with the Args, not a copy).
func (a *Args) Bytes() []byte { return a.b }

func (s *PlanSpec) validate() error {
	bad := func(format string, v ...any) error {
		return fmt.Errorf("plan %s %s: invalid PlanSpec: %s", s.Op, s.Variant, fmt.Sprintf(format, v...))
	}
	switch {
	case s.Module == "" || s.Kernel == "":
		return bad("Module and Kernel are required")
	case s.Threads < 1 || s.Threads > 1024:
		return bad("Threads = %d, want 1..1024", s.Threads)
	case s.Blocks < 1 || s.Blocks > 1<<16:
		return bad("Blocks = %d, want 1..65536", s.Blocks)
	case len(s.Barriers) == 0:
		return bad("no barrier modes")
	}
	for _, b := range append(slices.Clone(s.Barriers), s.Capturable...) {
		if !b.Valid() {
			return bad("unknown barrier mode %d", b)
		}
	}
	names := map[string]bool{}
	for _, b := range append(slices.Clone(s.Workspace), s.Staging...) {
		if b.Name == "" || names[b.Name] {
			return bad("buffer names must be unique and non-empty (got %q twice or empty)", b.Name)
		}
		if b.Bytes < 0 {
			return bad("buffer %q has %d bytes", b.Name, b.Bytes)
		}
		names[b.Name] = true
	}
	return nil
}

// digest identifies a plan across ranks: every rank must make the same one.
func (s *PlanSpec) digest() []byte {
	d := fmt.Sprintf("%s|%s|%s|%s|%s|%s|%d|%d|%v|%v|%v|%v|sizes %v|local %v", s.Package, s.Op, s.Variant, s.Module, s.SpecHash, s.Kernel,
		s.Threads, s.Blocks, s.Barriers, s.Capturable, s.Workspace, s.Staging, s.Sizes, s.Local)
	return []byte(d)
}

// NewPlan makes a plan on r. It is collective: every rank makes the same plan
// in the same order. It loads the kernel (checking the module's spec hash),
// allocates flags, epochs, workspace and staging on the heap, zeroes them on
// r's stream and waits for them, then meets the other ranks, so no peer can
// signal into the flags before they are zeroed. Any rank's failure fails the
// plan on every rank. It refuses with a *CaptureError while r's stream
// captures.
func NewPlan(r *Rank, s PlanSpec) (*Plan, error) {
	if r.isClosed() {
		return nil, r.closedErr(fmt.Sprintf("NewPlan %s %s", s.Op, s.Variant))
	}
	p := &Plan{r: r, spec: s, bufs: map[string]planBuf{}}
	s.Barriers, s.Capturable, s.Sizes = slices.Clone(s.Barriers), slices.Clone(s.Capturable), slices.Clone(s.Sizes)
	p.spec = s
	err := p.setup()
	if serr := r.syncRanks(fmt.Sprintf("plan %s %s", s.Op, s.Variant), err, s.digest()); serr != nil {
		p.freeAll()
		return nil, serr
	}
	// The plan in its launches' checks: its spec and where its flags lie on
	// the heap, the same on every rank (two plans of one spec differ).
	flagsOff, _ := r.heap.Offset(p.flags)
	p.id = digestHash(s.digest()) ^ mix64(uint64(flagsOff))
	p.ctx = r.ctx
	binary.LittleEndian.PutUint64(p.ctx[ctxOffFlags:], uint64(p.flags))
	binary.LittleEndian.PutUint64(p.ctx[ctxOffEpochs:], uint64(p.epochs))
	p.args.b, p.args.ptrs, p.args.p = make([]byte, 0, CtxBytes+8*16), make([]gpu.DevicePtr, 0, 16), p
	p.refused = Args{p: p, err: &InUseError{What: fmt.Sprintf("plan %s %s", s.Op, s.Variant),
		By: "another launch or Close on another goroutine: launch a plan from one goroutine at a time (its launches must be ordered on the device anyway)"}}
	return p, nil
}

// setup is this rank's part of NewPlan.
func (p *Plan) setup() error {
	r, s := p.r, &p.spec
	if err := s.validate(); err != nil {
		return err
	}
	capturing, err := r.Capturing(r.stream)
	if err != nil {
		return err
	}
	if capturing {
		return &CaptureError{Op: fmt.Sprintf("making a plan for %s %s", s.Op, s.Variant),
			What: "it loads the kernel, allocates and zeroes heap memory and waits for the other ranks",
			Fix:  "make the plan before capture and launch it inside the capture"}
	}
	if p.fn, err = r.Function(s.Package, s.Module, s.SpecHash, s.Kernel); err != nil {
		return err
	}
	alloc := func(bytes int64) (gpu.DevicePtr, error) {
		a, err := r.heap.alloc(bytes, kindPlan)
		if err != nil {
			return 0, err
		}
		ptr := r.heap.base + gpu.DevicePtr(a.off)
		p.allocs = append(p.allocs, ptr)
		if err := r.dev.MemsetD8Async(ptr, 0, bytes, r.stream); err != nil {
			return 0, platformErr("zeroing a plan buffer", err)
		}
		return ptr, nil
	}
	blocks := int64(s.Blocks)
	// Row `blocks` of the flags and epochs[blocks], epochs[blocks+1] are the
	// grid-wide sync's (rank-level flags, arrival count, generation).
	if p.flags, err = alloc((blocks + 1) * MaxWorld * 8); err != nil {
		return err
	}
	if p.epochs, err = alloc((blocks + 2) * 8); err != nil {
		return err
	}
	for i, list := range [][]Buffer{s.Workspace, s.Staging} {
		for _, b := range list {
			ptr, err := alloc(b.Bytes)
			if err != nil {
				return fmt.Errorf("plan %s %s: buffer %q: %w", s.Op, s.Variant, b.Name, err)
			}
			p.bufs[b.Name] = planBuf{ptr: ptr, bytes: b.Bytes, staging: i == 1}
		}
	}
	if err := r.dev.StreamSynchronize(r.stream); err != nil {
		return platformErr("zeroing plan buffers", err)
	}
	return nil
}

// freeAll returns the plan's heap buffers, newest first.
func (p *Plan) freeAll() error {
	var errs []error
	for i := len(p.allocs) - 1; i >= 0; i-- {
		errs = append(errs, p.r.heap.free(p.allocs[i], 0, kindPlan))
	}
	p.allocs = nil
	return errors.Join(errs...)
}

// Close frees the plan's heap buffers. It is collective (heap frees are):
// it waits for the device and for every rank first, so no kernel of this
// plan still runs anywhere when the buffers are reused. It refuses while
// the rank's stream captures (*CaptureError) or a live graph captured
// through Rank.Capture launches the plan (*InUseError): any rank's refusal
// (or failure) reaches every rank, and then no rank frees anything and the
// plan stays open.
func (p *Plan) Close() error {
	if !p.busy.CompareAndSwap(false, true) {
		return p.refused.err
	}
	defer p.busy.Store(false)
	if p.closed {
		return nil
	}
	if p.r.isClosed() {
		// The world's release freed the plan's memory with its heap.
		return p.r.closedErr(fmt.Sprintf("close of plan %s %s", p.spec.Op, p.spec.Variant))
	}
	err := p.closeRefusal()
	if p.r.perGPU > 1 {
		// Ranks sharing a GPU share its context, and synchronizing a context
		// while a peer's stream captures breaks the capture (the driver
		// crashed on an H100): first wait until every rank is here.
		if err := p.r.syncRanks(fmt.Sprintf("close of plan %s %s (ranks sharing a GPU)", p.spec.Op, p.spec.Variant), err, p.spec.digest()); err != nil {
			return err
		}
	}
	if err == nil {
		if err = p.r.dev.Synchronize(); err != nil {
			err = platformErr("waiting for the plan's kernels", err)
		}
	}
	if err := p.r.syncRanks(fmt.Sprintf("close of plan %s %s", p.spec.Op, p.spec.Variant), err, p.spec.digest()); err != nil {
		return err
	}
	p.closed = true
	return p.freeAll()
}

// closeRefusal says why this rank may not close the plan now, or nil.
func (p *Plan) closeRefusal() error {
	capturing, err := p.r.Capturing(p.r.stream)
	switch {
	case err != nil:
		return err
	case capturing:
		return &CaptureError{Op: "closing a plan", What: "it waits for the device and the other ranks", Fix: "close plans after the capture has ended"}
	}
	if n := p.graphs.Load(); n > 0 {
		return &InUseError{What: fmt.Sprintf("plan %s %s", p.spec.Op, p.spec.Variant), By: graphsUsing(n)}
	}
	return nil
}

// Rank is the rank the plan was made on.
func (p *Plan) Rank() *Rank { return p.r }

// Spec is the plan's spec.
func (p *Plan) Spec() PlanSpec { return p.spec }

// Flags is the address of the plan's barrier flags on this rank's heap.
func (p *Plan) Flags() gpu.DevicePtr { return p.flags }

// Epochs is the address of the plan's per-block epoch counters.
func (p *Plan) Epochs() gpu.DevicePtr { return p.epochs }

// Function is the plan's kernel.
func (p *Plan) Function() gpu.Function { return p.fn }

// Buffer returns the address of the workspace or staging buffer name. An
// unknown name is a bug in the caller (the generated wrapper) and panics.
func (p *Plan) Buffer(name string) gpu.DevicePtr {
	b, ok := p.bufs[name]
	if !ok {
		panic(fmt.Sprintf("irisgen: plan %s %s has no buffer %q", p.spec.Op, p.spec.Variant, name))
	}
	return b.ptr
}

// staging finds the staging buffer name and checks that t fits it.
func (p *Plan) staging(name string, t Tensor) (planBuf, error) {
	b, ok := p.bufs[name]
	if !ok || !b.staging {
		return planBuf{}, fmt.Errorf("plan %s %s: no staging buffer %q to import into", p.spec.Op, p.spec.Variant, name)
	}
	if t.Bytes() > b.bytes {
		return planBuf{}, &ShapeError{Op: p.spec.Op, Name: name, Want: b.bytes, Got: t.Bytes(), Msg: fmt.Sprintf(
			"%d bytes do not fit the plan's %d-byte staging buffer: make a plan for this size, or allocate the tensor on the heap", t.Bytes(), b.bytes)}
	}
	return b, nil
}

// copyIn enqueues one import's copy on s.
func (p *Plan) copyIn(s gpu.Stream, st stage) error {
	if st.t.Bytes() == 0 {
		return nil
	}
	if err := p.r.dev.CopyDtoDAsync(st.to, st.t.Ptr, st.t.Bytes(), s); err != nil {
		return platformErr(fmt.Sprintf("%s: importing %q onto the heap", p.spec.Op, st.name), err)
	}
	return nil
}

// Args resets the plan's argument buffer to its ctx and returns it. The
// buffer is reused by every launch of the plan, so Args holds the plan
// until Launch returns: pass the result to Launch. While another goroutine
// holds the plan, the Args returned makes Launch refuse with an
// *InUseError.
func (p *Plan) Args() *Args {
	if !p.busy.CompareAndSwap(false, true) {
		return &p.refused
	}
	p.args.b = append(p.args.b[:0], p.ctx[:]...)
	p.args.ptrs, p.args.stages, p.args.err = p.args.ptrs[:0], p.args.stages[:0], nil
	return &p.args
}

// usable returns a *ClosedError for a launch of a closed plan (or of one
// whose world was closed).
func (p *Plan) usable() error {
	if p.r.isClosed() {
		return p.r.closedErr(fmt.Sprintf("launch of %s %s", p.spec.Op, p.spec.Variant))
	}
	if p.closed {
		return &ClosedError{Op: fmt.Sprintf("launch of %s %s", p.spec.Op, p.spec.Variant), What: "the plan (Plan.Close: a closed plan cannot be launched)"}
	}
	return nil
}

// checkLaunch reports whether a launch of the plan on s in mode may go
// ahead: the plan and its world are open (*ClosedError), the variant
// supports mode, s is not capturing when mode cannot be captured
// (*CaptureError), and the rank has no world fault (in mode host the host
// barrier reports it, on every rank). Launch asks it before anything
// reaches the stream (imports included), so a refused launch leaves
// nothing behind in a capture.
func (p *Plan) checkLaunch(s gpu.Stream, mode irismodel.Barrier) error {
	if err := p.usable(); err != nil {
		return err
	}
	if !slices.Contains(p.spec.Barriers, mode) {
		return &BarrierModeError{Op: p.spec.Op, Variant: p.spec.Variant, Mode: mode, Supported: p.spec.Barriers}
	}
	if mode == irismodel.BarrierHost || !slices.Contains(p.spec.Capturable, mode) {
		capturing, err := p.r.Capturing(s)
		if err != nil {
			return err
		}
		if capturing {
			return &CaptureError{Op: fmt.Sprintf("launching %s %s with barrier mode %s", p.spec.Op, p.spec.Variant, mode),
				What: capturableWhy(mode),
				Fix:  "launch with a capturable barrier mode inside the graph (" + modeList(p.spec.Capturable) + ")"}
		}
	}
	if mode == irismodel.BarrierHost {
		return nil
	}
	return p.r.poisoned()
}

// Skip is the launch of a plan with nothing to do (every tensor empty): it
// makes Launch's checks of the plan, the mode and the stream, and enqueues
// nothing (no kernel, no host barrier). Like a launch it is collective and
// numbered, and a refusal reaches the peers (see Launch).
func (p *Plan) Skip(s gpu.Stream, mode irismodel.Barrier) error {
	if p.r.isClosed() {
		return p.usable()
	}
	n := p.r.nextLaunch(!p.spec.Local)
	if err := p.skip(s, mode); err != nil {
		return p.r.refuse(s, n, err)
	}
	return nil
}

// skip is Skip's checks.
func (p *Plan) skip(s gpu.Stream, mode irismodel.Barrier) error {
	if !p.busy.CompareAndSwap(false, true) {
		return p.refused.err
	}
	defer p.busy.Store(false)
	return p.checkLaunch(s, mode)
}

// Launch launches the plan's kernel on s with the packed arguments a, in
// barrier mode, after the checks of checkLaunch. BarrierHost waits for s and
// meets the other ranks before and after the kernel, so it is refused while
// s captures (*CaptureError, nothing launched). After a world fault (see
// Rank.Check) every launch returns it until the world is restarted. A
// launch made while Rank.Capture captures is held by the graph, with the
// heap tensors it is given (see Graph).
//
// Launches are collective and numbered on each rank in call order (a
// refused call included): a refused launch (any error before the kernel
// is enqueued) makes every peer's kernel of the same launch, which would
// wait for this rank, give up at once with a *PeerRefusedError, and
// kernels of launches that do not match (another plan, parameters or
// barrier mode as the same launch) give up with a *MismatchError (see
// "Faults" in docs/collectives.md).
func (p *Plan) Launch(s gpu.Stream, mode irismodel.Barrier, a *Args) error {
	if p.r.isClosed() {
		if a == &p.args {
			p.busy.Store(false)
		}
		return p.usable()
	}
	n := p.r.nextLaunch(!p.spec.Local)
	if enqueued, err := p.launch(s, mode, a, n, p.check(n, mode, nil)); err != nil {
		if !enqueued {
			return p.r.refuse(s, n, err)
		}
		return err
	}
	return nil
}

// launch is Launch of launch number n with fingerprint check; enqueued
// says whether the kernel reached the stream (an error after it is no
// refusal: the peers met the kernel).
func (p *Plan) launch(s gpu.Stream, mode irismodel.Barrier, a *Args, n, check uint32) (enqueued bool, err error) {
	if a != &p.args {
		if a == &p.refused {
			return false, a.err
		}
		return false, fmt.Errorf("%s %s: launch arguments must come from this plan's Args", p.spec.Op, p.spec.Variant)
	}
	defer p.busy.Store(false)
	if a.err != nil {
		return false, a.err
	}
	if err := p.checkLaunch(s, mode); err != nil {
		return false, err
	}
	if mode == irismodel.BarrierNone && len(a.stages) > 0 {
		// Nothing would order the copy before the peers' reads.
		st := a.stages[0]
		return false, &PlacementError{Op: p.spec.Op, Name: st.name, Rank: p.r.rank, Tensor: st.t, Unordered: true}
	}
	// Imports reach the stream only once the launch is sure to go ahead, so
	// a refused launch leaves nothing in a capture.
	for _, st := range a.stages {
		if err := p.copyIn(s, st); err != nil {
			return false, err
		}
	}
	var flag uint32
	if mode == irismodel.BarrierDevice {
		flag = 1
	}
	le := binary.LittleEndian
	le.PutUint32(a.b[ctxOffBarrier:], flag)
	le.PutUint32(a.b[ctxOffLaunch:], n)
	le.PutUint32(a.b[ctxOffCheck:], check)
	if mode == irismodel.BarrierHost {
		// The ranks compare the launch at the barrier; a peer that launched
		// it in another mode and waits for this rank's kernel finds it
		// recorded in the control block.
		if n != 0 {
			if err := p.r.begun(n, check, s); err != nil {
				return false, err
			}
		}
		var fp []byte
		if n != 0 {
			fp = launchDigest(n, check)
		}
		if err := p.r.hostBarrier(s, fp); err != nil {
			return false, err
		}
	}
	if g := p.r.graphs.capturing.Load(); g != nil {
		g.use(p, a, n)
	}
	grid := gpu.Dim3{X: uint32(p.spec.Blocks), Y: 1, Z: 1}
	block := gpu.Dim3{X: uint32(p.spec.Threads), Y: 1, Z: 1}
	if err := p.r.launch(p.fn, grid, block, s, a.b); err != nil {
		return false, platformErr(fmt.Sprintf("launching %s", p.spec.Kernel), err)
	}
	if mode == irismodel.BarrierHost {
		return true, p.r.HostBarrier(s)
	}
	return true, nil
}

func capturableWhy(mode irismodel.Barrier) string {
	if mode == irismodel.BarrierHost {
		return "a host barrier waits for the stream and for the other ranks on the host"
	}
	return "this variant cannot be captured in mode " + mode.String()
}

func modeList(ms []irismodel.Barrier) string {
	if len(ms) == 0 {
		return "none is: this variant cannot be captured"
	}
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ", "
		}
		s += "irismodel.Barrier" + map[irismodel.Barrier]string{irismodel.BarrierDevice: "Device", irismodel.BarrierHost: "Host", irismodel.BarrierNone: "None"}[m]
	}
	return s
}

// Blocks is the grid size of a plan: one block per threads*vectorBytes bytes,
// at least 1 and at most maxBlocks, so that block b pairs with block b on
// every peer.
func Blocks(bytes int64, threads, vectorBytes, maxBlocks int) int {
	per := int64(max(threads, 1)) * int64(max(vectorBytes, 1))
	n := int64(1)
	if bytes > 0 {
		n = (bytes-1)/per + 1
	}
	return int(min(n, int64(max(maxBlocks, 1))))
}

// launch launches one of the rank's kernels: as a programmatic dependent of
// the kernel before it on s where the device does that (gpu.LaunchDependent;
// every irisgen kernel waits for its predecessor in irisgen::begin), plainly
// when ranks share the GPU: a rank's next kernel, resident early while it
// waits, could hold the room that a peer's kernel on the same GPU needs to
// start, and the two wait for each other (the grids are cut so that the
// ranks' grids of one kernel fit together, not two kernels a rank).
func (r *Rank) launch(f gpu.Function, grid, block gpu.Dim3, s gpu.Stream, args []byte) error {
	if r.perGPU > 1 {
		return r.dev.Launch(f, grid, block, 0, s, args)
	}
	return gpu.LaunchDependent(r.dev, f, grid, block, 0, s, args)
}

// sharedMaxBlocks is a variant's largest grid when perGPU ranks share a GPU
// (Options.ShareGPUs): max_blocks blocks of a kernel fit on one GPU at
// once (its blocks wait for each other), so perGPU grids of the same
// kernel, one a rank, fit together when each has max_blocks / perGPU.
func sharedMaxBlocks(maxBlocks, perGPU int) int {
	if perGPU <= 1 {
		return maxBlocks
	}
	return max(1, maxBlocks/perGPU)
}

// CheckTensor checks t's dtype, element count and alignment (and that it is
// not nil), and that a tensor from Heap.Alloc was not freed since (see
// CheckLive). Where n is 0 the zero Tensor will do: an empty tensor needs no
// memory.
func CheckTensor(op, name string, t Tensor, want irismodel.DType, n int64) error {
	if t.Ptr == 0 {
		if n == 0 && t.Len == 0 {
			return nil
		}
		return &ShapeError{Op: op, Name: name, Want: n, Msg: "nil device pointer (the tensor was never allocated)"}
	}
	if t.DType != want {
		return &DTypeError{Op: op, Name: name, Want: want, Got: t.DType}
	}
	if t.Len != n {
		return &ShapeError{Op: op, Name: name, Want: n, Got: t.Len}
	}
	if err := checkAligned(op, name, t); err != nil {
		return err
	}
	return checkOwn(op, name, t)
}

// CheckTensorOneOf is CheckTensor for a tensor that may come in any of the
// dtypes want (index tensors: int32 or int64).
func CheckTensorOneOf(op, name string, t Tensor, want []irismodel.DType, n int64) error {
	if t.Ptr != 0 && !slices.Contains(want, t.DType) && len(want) > 0 {
		// A copy, so that want (the wrappers' literal) does not escape and
		// the launch path stays allocation-free.
		return &DTypeError{Op: op, Name: name, Want: want[0], Also: slices.Clone(want[1:]), Got: t.DType}
	}
	return CheckTensor(op, name, t, t.DType, n)
}

// CheckHeap checks that t lies entirely on r's symmetric heap, inside a live
// allocation of the caller's (*LiveError otherwise, see CheckLive). An empty
// tensor passes: nothing is written into it.
func CheckHeap(op, name string, r *Rank, t Tensor) error {
	if t.Bytes() == 0 {
		return nil
	}
	if r.heap.Contains(t.Ptr, t.Bytes()) {
		if why := r.heap.check(t, true); why != "" {
			return &LiveError{Op: op, Name: name, Rank: r.rank, Tensor: t, Why: why}
		}
		return nil
	}
	_, starts := r.heap.Offset(t.Ptr)
	return &PlacementError{Op: op, Name: name, Rank: r.rank, Tensor: t, Partial: starts}
}

// CheckNoAlias checks that ta and tb do not overlap.
func CheckNoAlias(op, a string, ta Tensor, b string, tb Tensor) error {
	if ta.Overlaps(tb) {
		return &AliasError{Op: op, A: a, B: b, TA: ta, TB: tb}
	}
	return nil
}

// CheckInPlace checks that ta and tb are the same tensor or do not overlap
// (the rule of variants that run in place).
func CheckInPlace(op, a string, ta Tensor, b string, tb Tensor) error {
	if ta.Overlaps(tb) && (ta.Ptr != tb.Ptr || ta.Bytes() != tb.Bytes()) {
		return &AliasError{Op: op, A: a, B: b, TA: ta, TB: tb, InPlace: true}
	}
	return nil
}

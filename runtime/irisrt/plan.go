package irisrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

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
	spec    core.PlanSpec
	fn      gpu.Function
	flags   gpu.DevicePtr
	epochs  gpu.DevicePtr
	bufs    map[string]planBuf
	allocs  []gpu.DevicePtr // in allocation order
	ctx     [core.CtxBytes]byte
	args    core.Args
	stages  []stage      // copies launch makes through staging (args' imports, a copy-engine launch's staged outputs)
	busy    atomic.Bool  // held from args to the end of launch, and by Close
	refused core.Args    // what args returns while busy: its Err says so; never written after newPlan
	closed  bool         // read and written only while busy is held
	graphs  atomic.Int32 // live graphs (Rank.Capture) that launch the plan
	id      uint64       // the plan in its launches' checks: its spec and heap offset
	// valueOps: a copy-engine barrier's stream memory operations, reused
	// from launch to launch (copyBarrier).
	valueOps []gpu.ValueOp
	// lanes: a copy-engine plan's streams besides the launch's (copy.go);
	// nil where it uses one.
	lanes *copyLanes
	// moving: a launch's copies that move bytes, reused (copy).
	moving []core.Copy
}

type planBuf struct {
	ptr     gpu.DevicePtr
	bytes   int64
	staging bool
}

// stage is one pending copy through staging buffer name at buf: an import
// (t copied into it before the kernel), or with out a copy-engine
// launch's staged output (the buffer copied into t after the launch).
type stage struct {
	name string
	buf  gpu.DevicePtr
	t    Tensor
	out  bool
}

// staged appends t's address to a when t lies on the rank's heap (in a live
// allocation: see checkLive); otherwise the address of the plan's staging
// buffer name, into which launch copies t on its stream after its checks
// and before the kernel (refused in BarrierNone, where nothing would order
// that copy before the peers' reads). Variants whose peers read a tensor
// take it this way, so a user tensor anywhere in device memory works.
func (p *Plan) staged(a *core.Args, name string, t Tensor) {
	if a.Err != nil {
		return // refused already (and the plan's refused Args is never written)
	}
	if err := checkLive(p.spec.Op, name, p.r, t); err != nil {
		a.Err = err
		return
	}
	if p.r.heap.Contains(t.Ptr, t.Bytes()) {
		a.Ptr(t.Ptr)
		return
	}
	p.toStaging(a, name, t, false)
}

// stageOut appends the address of the plan's staging buffer name, which
// launch copies into t after the launch's last barrier, wherever t lies
// (core.Plans.StageOut): a copy-engine variant's peers write a tensor only
// one rank passes at its staging buffer, whose heap offset every rank
// knows.
func (p *Plan) stageOut(a *core.Args, name string, t Tensor) {
	if a.Err != nil {
		return
	}
	if err := checkLive(p.spec.Op, name, p.r, t); err != nil {
		a.Err = err
		return
	}
	p.toStaging(a, name, t, true)
}

// toStaging appends the address of the plan's staging buffer name and
// records the copy between it and t that launch makes (out: from it).
func (p *Plan) toStaging(a *core.Args, name string, t Tensor, out bool) {
	b, err := p.staging(name, t)
	if err != nil {
		a.Ptr(0).Err = err
		return
	}
	p.stages = append(p.stages, stage{name, b.ptr, t, out})
	a.Ptr(b.ptr)
}

func validateSpec(s *core.PlanSpec) error {
	bad := func(format string, v ...any) error {
		return fmt.Errorf("plan %s %s: invalid PlanSpec: %s", s.Op, s.Variant, fmt.Sprintf(format, v...))
	}
	switch {
	case !s.Copy && (s.Module == "" || s.Kernel == ""):
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
func specDigest(s *core.PlanSpec) []byte {
	d := fmt.Sprintf("%s|%s|%s|%s|%s|%s|%d|%d|%v|%v|%v|%v|sizes %v|local %v|copy %v", s.Package, s.Op, s.Variant, s.Module, s.SpecHash, s.Kernel,
		s.Threads, s.Blocks, s.Barriers, s.Capturable, s.Workspace, s.Staging, s.Sizes, s.Local, s.Copy)
	return []byte(d)
}

// newPlan makes a plan on r. It is collective: every rank makes the same plan
// in the same order. It loads the kernel (checking the module's spec hash),
// allocates flags, epochs, workspace and staging on the heap, zeroes them on
// r's stream and waits for them, then meets the other ranks, so no peer can
// signal into the flags before they are zeroed. Any rank's failure fails the
// plan on every rank. It refuses with a *CaptureError while r's stream
// captures.
func newPlan(r *Rank, s core.PlanSpec) (*Plan, error) {
	if r.isClosed() {
		return nil, r.closedErr(fmt.Sprintf("NewPlan %s %s", s.Op, s.Variant))
	}
	p := &Plan{r: r, spec: s, bufs: map[string]planBuf{}}
	s.Barriers, s.Capturable, s.Sizes = slices.Clone(s.Barriers), slices.Clone(s.Capturable), slices.Clone(s.Sizes)
	p.spec = s
	err := p.setup()
	if serr := r.syncRanks(fmt.Sprintf("plan %s %s", s.Op, s.Variant), err, specDigest(&s)); serr != nil {
		p.freeAll()
		return nil, serr
	}
	// The plan in its launches' checks: its spec and where its flags lie on
	// the heap, the same on every rank (two plans of one spec differ).
	flagsOff, _ := r.heap.Offset(p.flags)
	p.id = core.PlanID(specDigest(&s), flagsOff)
	p.ctx = r.ctx
	binary.LittleEndian.PutUint64(p.ctx[core.CtxOffFlags:], uint64(p.flags))
	binary.LittleEndian.PutUint64(p.ctx[core.CtxOffEpochs:], uint64(p.epochs))
	p.args.B, p.args.Ptrs = make([]byte, 0, core.CtxBytes+8*16), make([]gpu.DevicePtr, 0, 16)
	p.refused = core.Args{Err: &InUseError{What: fmt.Sprintf("plan %s %s", s.Op, s.Variant),
		By: "another launch or Close on another goroutine: launch a plan from one goroutine at a time (its launches must be ordered on the device anyway)"}}
	return p, nil
}

// setup is this rank's part of newPlan.
func (p *Plan) setup() error {
	r, s := p.r, &p.spec
	if err := validateSpec(s); err != nil {
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
	if !s.Copy {
		if p.fn, err = r.function(s); err != nil {
			return err
		}
	} else {
		if slices.Contains(s.Barriers, irismodel.BarrierDevice) {
			if err := r.needSeen(); err != nil {
				return err
			}
		}
		if p.lanes, err = r.newLanes(s.MaxCopies); err != nil {
			return err
		}
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
	for i, list := range [][]core.Buffer{s.Workspace, s.Staging} {
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

// freeAll returns the plan's heap buffers, newest first, and destroys its
// lanes.
func (p *Plan) freeAll() error {
	errs := []error{p.r.dropLanes(p.lanes)}
	p.lanes = nil
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
		return p.refused.Err
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
		if err := p.r.syncRanks(fmt.Sprintf("close of plan %s %s (ranks sharing a GPU)", p.spec.Op, p.spec.Variant), err, specDigest(&p.spec)); err != nil {
			return err
		}
	}
	if err == nil {
		if err = p.r.dev.Synchronize(); err != nil {
			err = platformErr("waiting for the plan's kernels", err)
		}
	}
	if err := p.r.syncRanks(fmt.Sprintf("close of plan %s %s", p.spec.Op, p.spec.Variant), err, specDigest(&p.spec)); err != nil {
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

// buffer returns the address of the workspace or staging buffer name. An
// unknown name is a bug in the caller (the generated wrapper) and panics.
func (p *Plan) buffer(name string) gpu.DevicePtr {
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

// copyStages enqueues on s the copies of the stages whose out is out: the
// imports into their staging buffers, or the staged outputs out of them.
func (p *Plan) copyStages(s gpu.Stream, out bool) error {
	for _, st := range p.stages {
		if st.out != out || st.t.Bytes() == 0 {
			continue
		}
		dst, src, what := st.buf, st.t.Ptr, "importing %q onto the heap"
		if out {
			dst, src, what = st.t.Ptr, st.buf, "copying %q out of its staging buffer"
		}
		if err := p.r.dev.CopyDtoDAsync(dst, src, st.t.Bytes(), s); err != nil {
			return platformErr(fmt.Sprintf("%s: "+what, p.spec.Op, st.name), err)
		}
	}
	return nil
}

// Args resets the plan's argument buffer to its ctx and returns it. The
// buffer is reused by every launch of the plan, so Args holds the plan
// until Launch returns: pass the result to Launch. While another goroutine
// holds the plan, the Args returned makes Launch refuse with an
// *InUseError.
func (p *Plan) argsFor() *core.Args {
	if !p.busy.CompareAndSwap(false, true) {
		return &p.refused
	}
	p.args.B = append(p.args.B[:0], p.ctx[:]...)
	p.args.Ptrs, p.args.Err, p.stages, p.args.Copies = p.args.Ptrs[:0], nil, p.stages[:0], p.args.Copies[:0]
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

// skip makes launch's checks of the plan, the mode and the stream for a
// launch of a plan with nothing to do (every tensor empty), which enqueues
// nothing (no kernel, no host barrier).
func (p *Plan) skip(s gpu.Stream, mode irismodel.Barrier) error {
	if !p.busy.CompareAndSwap(false, true) {
		return p.refused.Err
	}
	defer p.busy.Store(false)
	return p.checkLaunch(s, mode)
}

// launch launches the plan's kernel on s with the packed arguments a (from
// argsFor), in barrier mode, as launch number n with fingerprint check,
// after the checks of checkLaunch. BarrierHost waits for s and meets the
// other ranks before and after the kernel, so it is refused while s
// captures (*CaptureError, nothing launched). After a world fault (see
// Rank.Check) every launch returns it until the world is restarted. A
// launch made while Rank.Capture captures is held by the graph, with the
// heap tensors it is given (see Graph). enqueued says whether the kernel
// reached the stream: an error before it is a refusal, which the caller
// tells the peers (Rank.refuse: their kernels of launch n give up at once
// with a *PeerRefusedError; kernels of launches that do not match, another
// plan, parameters or barrier mode as the same launch, give up with a
// *MismatchError; see "Faults" in docs/collectives.md).
func (p *Plan) launch(s gpu.Stream, mode irismodel.Barrier, a *core.Args, n, check uint32) (enqueued bool, err error) {
	if a != &p.args {
		if a == &p.refused {
			return false, a.Err
		}
		return false, fmt.Errorf("%s %s: launch arguments must come from this plan's Args", p.spec.Op, p.spec.Variant)
	}
	defer p.busy.Store(false)
	if a.Err != nil {
		return false, a.Err
	}
	if err := p.checkLaunch(s, mode); err != nil {
		return false, err
	}
	if mode == irismodel.BarrierNone {
		// Nothing would order an import before the peers' reads (a variant
		// with staged outputs has no mode none).
		for _, st := range p.stages {
			if !st.out {
				return false, &PlacementError{Op: p.spec.Op, Name: st.name, Rank: p.r.rank, Tensor: st.t, Unordered: true}
			}
		}
	}
	// Imports reach the stream only once the launch is sure to go ahead, so
	// a refused launch leaves nothing in a capture.
	if err := p.copyStages(s, false); err != nil {
		return false, err
	}
	var flag uint32
	if mode == irismodel.BarrierDevice {
		flag = 1
	}
	le := binary.LittleEndian
	le.PutUint32(a.B[core.CtxOffBarrier:], flag)
	le.PutUint32(a.B[core.CtxOffLaunch:], n)
	le.PutUint32(a.B[core.CtxOffCheck:], check)
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
		g.use(p, a, n, mode)
	}
	if p.spec.Copy {
		if enqueued, err := p.issueCopies(s, mode, a.Copies); err != nil {
			return enqueued, err
		}
	} else {
		grid := gpu.Dim3{X: uint32(p.spec.Blocks), Y: 1, Z: 1}
		block := gpu.Dim3{X: uint32(p.spec.Threads), Y: 1, Z: 1}
		if err := p.r.launch(p.fn, grid, block, s, a.B); err != nil {
			return false, platformErr(fmt.Sprintf("launching %s", p.spec.Kernel), err)
		}
	}
	if mode == irismodel.BarrierHost {
		if err := p.r.HostBarrier(s); err != nil {
			return true, err
		}
	}
	// The staged outputs, once the peers' copies into the staging buffers
	// are done (after the last barrier); in mode host the launch returns
	// with its output complete, as a kernel's does.
	if err := p.copyStages(s, true); err != nil {
		return true, err
	}
	if mode == irismodel.BarrierHost && slices.ContainsFunc(p.stages, func(st stage) bool { return st.out }) {
		if err := p.r.dev.StreamSynchronize(s); err != nil {
			return true, platformErr("waiting for the staged outputs", err)
		}
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

// checkTensor checks t's dtype, element count and alignment (and that it is
// not nil), and that a tensor from Heap.Alloc was not freed since (see
// checkLive). Where n is 0 the zero Tensor will do: an empty tensor needs no
// memory.
func checkTensor(op, name string, t Tensor, want irismodel.DType, n int64) error {
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

// checkTensorOneOf is checkTensor for a tensor that may come in any of the
// dtypes want (index tensors: int32 or int64).
func checkTensorOneOf(op, name string, t Tensor, want []irismodel.DType, n int64) error {
	if t.Ptr != 0 && !slices.Contains(want, t.DType) && len(want) > 0 {
		// A copy, so that want (the wrappers' literal) does not escape and
		// the launch path stays allocation-free.
		return &DTypeError{Op: op, Name: name, Want: want[0], Also: slices.Clone(want[1:]), Got: t.DType}
	}
	return checkTensor(op, name, t, t.DType, n)
}

// checkHeap checks that t lies entirely on r's symmetric heap, inside a live
// allocation of the caller's (*LiveError otherwise, see checkLive). An empty
// tensor passes: nothing is written into it.
func checkHeap(op, name string, r *Rank, t Tensor) error {
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

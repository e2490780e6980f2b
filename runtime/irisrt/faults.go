package irisrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Faults. Kernels report errors in the rank's two error records
// (host-mapped irisgen_error, docs/internals.md):
//
//   - record 0, world faults: a timeout in a device barrier or any other
//     wait, a launch that does not match a peer's (*MismatchError), a
//     launch a peer refused on the host (*PeerRefusedError; launch.go).
//     The peers' barrier epochs are out of step, so the record is
//     sticky: every later spin of the rank's kernels gives up at once,
//     launches and Rank.Check return the error, and the world must be
//     closed and started again (World.Close / Rank.Close release
//     everything, and a new world in the same process works).
//   - record 1, call faults: an index out of range (a MoE expert id) or a
//     capacity exceeded. The kernel skipped the bad item, went on and met
//     its peers, so only that call's results are incomplete: Rank.Check
//     returns the error once and clears it, and the world stays usable.
//
// A peer's refusal of a copy-engine launch, which it released (copy.go),
// is a call fault too, kept in the seen areas rather than a record:
// Rank.Check reports it once (*PeerRefusedError with Copies set).

// record reads error record i, or nil when it holds none. A record being
// written (code 0xffffffff) is read at the next check.
func (r *Rank) record(i int) error {
	if r.errHost == nil {
		return nil
	}
	b := unsafe.Slice((*byte)(unsafe.Add(r.errHost, i*core.ErrRecordBytes)), core.ErrRecordBytes)
	code := atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[0]))) // published last, after the rest
	if code == 0 || code == core.ErrCodeWriting {
		return nil
	}
	le := binary.LittleEndian
	rank, peer, block, epoch, info := int(le.Uint32(b[4:])), int(le.Uint32(b[8:])), int(le.Uint32(b[12:])), le.Uint64(b[16:]), le.Uint64(b[24:])
	switch {
	case code == core.ErrCodeTimeout:
		return &BarrierTimeoutError{Rank: rank, Peer: peer, Block: block, Epoch: epoch}
	case code == core.ErrCodeMismatch && i == 0:
		return &MismatchError{Rank: rank, Peer: peer, Block: block, Launch: uint32(epoch), Check: uint32(info), PeerCheck: uint32(info >> 32), World: true}
	case code == core.ErrCodeRefused && i == 0:
		e := &PeerRefusedError{Rank: rank, Peer: peer, Launch: uint32(info >> 32), Reason: RefusalReason(uint32(info))}
		if r.local != nil {
			e.Err = r.local.refusal(refusalKey{gpu.DevicePtr(epoch), e.Launch})
		}
		return e
	}
	return &DeviceFaultError{Code: code, Rank: rank, Block: block, Info: info, World: i == 0}
}

// poisoned returns the rank's world fault (record 0), which stays set.
func (r *Rank) poisoned() error { return r.record(0) }

// Check returns the error the rank's kernels reported: the world fault
// (*BarrierTimeoutError, or a *DeviceFaultError with World set), which
// stays set and comes back from every later Check and launch until the
// world is closed, else a call fault (a *PeerRefusedError with Copies set:
// a peer refused a copy-engine launch and released it, so this rank's
// copies of it ran without it; a *DeviceFaultError: an index out of
// range, a capacity exceeded), which Check reports once and clears. It
// does not wait for the GPU: synchronize the stream first to see the
// errors of launched kernels (Graph.Replay does both).
func (r *Rank) Check() error {
	if err := r.usable("Check"); err != nil {
		return err // the records were freed with the rank
	}
	if err := r.poisoned(); err != nil {
		return err
	}
	if err := r.copyRefusal(); err != nil {
		return err
	}
	err := r.record(1)
	if err != nil {
		atomic.StoreUint32((*uint32)(unsafe.Add(r.errHost, core.ErrRecordBytes)), 0)
	}
	return err
}

// graphSet tracks the graphs captured through Rank.Capture on a device: a
// world rank and its groups share one.
type graphSet struct {
	capturing atomic.Pointer[Graph] // the graph whose capture is running, or nil
	mu        sync.Mutex
	live      map[*Graph]bool
}

// abandon is a failed capture's release of the peers' copy-engine
// launches (copy.go): their graphs hold the launches this rank took (or
// refused) in the capture, and wait on this rank's flags when replayed. It
// tells the peers, as a refused replay does, of the first launch it has
// not told them of already, and enqueues the hollow barriers of every
// copy-engine launch of the capture on s, once, to meet the peers' first
// replay (which then reports the refusal; Graph.Launch refuses later
// ones). It returns err, joined with a failure.
func (g *Graph) abandon(s gpu.Stream, err error) error {
	if len(g.rounds) == 0 {
		return err
	}
	if st, e := g.r.dev.CaptureStatus(s); e != nil || st != gpu.CaptureNone {
		return err // still capturing: nothing can be enqueued eagerly
	}
	for _, f := range g.firsts {
		if !f.r.refusedOwn(f.n) {
			err = f.r.refuse(s, f.n, err)
		}
	}
	// The refused words were written from the control stream, maybe
	// without waiting (under capture): they land before the release.
	if e := g.r.dev.StreamSynchronize(g.r.control); e != nil {
		return errors.Join(err, platformErr("telling the peers of a failed capture", e))
	}
	return releaseRounds(s, g.rounds, err)
}

// Graph is a graph captured with Rank.Capture, instantiated and ready to
// replay. While it lives, the plans launched into it cannot be closed, nor
// the heap tensors (and groups) those launches were given freed: Close and
// Free return an *InUseError until Destroy. Graphs are collective like
// plans: every rank captures the same launches, replays them in the same
// order and destroys its graph.
type Graph struct {
	r     *Rank
	exec  gpu.GraphExec
	plans []*Plan
	pins  []pin
	gone  bool
	// firsts: the first launch number the graph replays, per rank (its
	// world rank, groups): a refused replay reaches the peers with it.
	firsts []graphLaunch
	// rounds: the plans of its copy-engine launches in mode device, in
	// capture order, a refused one's hollow barriers included (copy.go);
	// copies: their launch numbers (of those that went ahead).
	rounds []*Plan
	copies []graphLaunch
}

// graphLaunch is a launch number of a rank (a world rank or a group).
type graphLaunch struct {
	r *Rank
	n uint32
}

// pin is one heap allocation a graph holds.
type pin struct {
	h   *Heap
	off int64
}

// Exec is the instantiated graph, for replaying it by other means
// (gpu.Device.LaunchGraph). Whoever does so checks for errors as
// Graph.Replay does: Rank.Check after the stream has finished, and no
// replay once it returned a world fault.
func (g *Graph) Exec() gpu.GraphExec { return g.exec }

// Launch replays the graph on s, asynchronously. It refuses (returning the
// error) once the rank has a world fault: the replay's barriers would give
// up at once anyway. A refused replay reaches the peers as a refused
// launch does (Plan.Launch): their replay's first kernel that waits for
// this rank gives up at once. Errors the replay raises come back from
// Rank.Check once s has finished.
func (g *Graph) Launch(s gpu.Stream) error {
	if err := g.r.usable("Graph.Launch"); err != nil {
		return err
	}
	for _, c := range g.copies {
		if e := c.r.metRefusal(c.n); e != nil {
			// The peer has no part of this launch to meet a replay with
			// (it refused it at capture time, or refused a replay): the
			// first replay met its release, and Check reported it.
			return fmt.Errorf("Graph.Launch: not replayed, a copy-engine launch of the graph was refused by a peer (destroy the graph): %w", e)
		}
	}
	if err := g.launch(s); err != nil {
		for _, f := range g.firsts {
			err = f.r.refuse(s, f.n, err)
		}
		return releaseRounds(s, g.rounds, err)
	}
	return nil
}

// releaseRounds releases the peers' copy-engine launches of rounds (a
// graph's, in capture order) after this rank refused to run them with err
// (copy.go): hollow barriers on s, or after a world fault the words
// written from the control stream. It returns err, joined with a failure.
func releaseRounds(s gpu.Stream, rounds []*Plan, err error) error {
	worldFault := reasonOf(err) == RefusedWorldFault
	var errs []error
	for _, p := range rounds {
		if p.r.isClosed() || !p.busy.CompareAndSwap(false, true) {
			continue
		}
		if !p.closed {
			if worldFault {
				errs = append(errs, p.unblock())
			} else {
				errs = append(errs, p.hollow(s))
			}
		}
		p.busy.Store(false)
	}
	if e := errors.Join(errs...); e != nil {
		return errors.Join(err, platformErr("releasing the peers' copy-engine launches of a graph", e))
	}
	return err
}

func (g *Graph) launch(s gpu.Stream) error {
	if g.gone {
		return &ClosedError{Op: "Graph.Launch", What: "the graph (Graph.Destroy)"}
	}
	if err := g.r.poisoned(); err != nil {
		return err
	}
	if err := g.r.dev.LaunchGraph(g.exec, s); err != nil {
		return platformErr("replaying a graph", err)
	}
	return nil
}

// Replay replays the graph on s, waits for s and returns any error the
// kernels raised (Rank.Check): a world fault, or a call fault of this
// replay.
func (g *Graph) Replay(s gpu.Stream) error {
	if err := g.Launch(s); err != nil {
		return err
	}
	if err := g.r.dev.StreamSynchronize(s); err != nil {
		return platformErr("waiting for a graph replay", err)
	}
	return g.r.Check()
}

// Destroy frees the graph and lets go of its plans and tensors. Destroying
// it twice is not an error.
func (g *Graph) Destroy() error {
	if g.gone {
		return nil
	}
	g.release()
	set := g.r.graphs
	set.mu.Lock()
	delete(set.live, g)
	set.mu.Unlock()
	if err := g.r.dev.DestroyGraphExec(g.exec); err != nil {
		return platformErr("destroying a graph", err)
	}
	return nil
}

// release lets go of the graph's plans and tensors.
func (g *Graph) release() {
	g.gone = true
	for _, p := range g.plans {
		p.graphs.Add(-1)
	}
	for _, p := range g.pins {
		p.h.unpin(p.off)
	}
	g.plans, g.pins = nil, nil
}

// use records that launch n of p in mode with arguments a went into the
// graph. Capture is not the steady-state launch path: the lists may grow
// here.
func (g *Graph) use(p *Plan, a *core.Args, n uint32, mode irismodel.Barrier) {
	g.first(p.r, n)
	if p.releases(n, mode) {
		g.rounds = append(g.rounds, p)
		g.copies = append(g.copies, graphLaunch{p.r, n})
	}
	if !slices.Contains(g.plans, p) {
		g.plans = append(g.plans, p)
		p.graphs.Add(1)
	}
	for _, ptr := range a.Ptrs {
		for r := p.r; r != nil; r = r.parent {
			if off, ok := r.heap.pin(ptr); ok {
				g.pins = append(g.pins, pin{r.heap, off})
				break
			}
		}
	}
}

// first records launch n of r as the first of the capture, unless r has
// one already.
func (g *Graph) first(r *Rank, n uint32) {
	if n != 0 && !slices.ContainsFunc(g.firsts, func(f graphLaunch) bool { return f.r == r }) {
		g.firsts = append(g.firsts, graphLaunch{r, n})
	}
}

// destroyAll destroys every live graph of the set (a rank's release).
func (s *graphSet) destroyAll(dev gpu.Device) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for g := range s.live {
		g.release()
		errs = append(errs, dev.DestroyGraphExec(g.exec))
	}
	s.live = nil
	return errors.Join(errs...)
}

// pin holds the allocation (of the caller's or a group's; a plan's own
// buffers are held through the plan) that p lies in, so it cannot be
// freed: ok and its offset, or false when p is not in one.
func (h *Heap) pin(p gpu.DevicePtr) (int64, bool) {
	off, on := h.Offset(p)
	if !on {
		return 0, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i, _ := h.a.holding(off, 0)
	if h.isClosed() || i < 0 || h.a.live[i].kind == kindPlan || h.a.live[i].kind == kindControl {
		return 0, false
	}
	h.a.live[i].pins++
	return h.a.live[i].off, true
}

// pinned counts the pins on the heap's allocations (all of them, or the
// one starting at off).
func (h *Heap) pinned(off int64, all bool) int32 {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var n int32
	for _, l := range h.a.live {
		if all || l.off == off {
			n += l.pins
		}
	}
	return n
}

// unpin lets go of a pin.
func (h *Heap) unpin(off int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i, ok := h.a.starting(off); ok && !h.isClosed() && h.a.live[i].pins > 0 {
		h.a.live[i].pins--
	}
}

// CaptureMode is the stream capture mode for this rank: gpu.CaptureRelaxed
// in an in-process world (a global-mode capture would be invalidated by
// another rank's ordinary synchronisation in the same process),
// gpu.CaptureGlobal in a process of its own.
func (r *Rank) CaptureMode() gpu.CaptureMode {
	if r.local != nil {
		return gpu.CaptureRelaxed
	}
	return gpu.CaptureGlobal
}

// Capture records on s what fn enqueues there into a graph and returns it
// instantiated, ready to replay (Graph.Launch, Graph.Replay; free it with
// Graph.Destroy). It checks that s really was capturing while fn ran.
// It captures in the rank's CaptureMode. The capture is ended whatever fn returns, and fn's error
// comes back. Every plan of this rank (or its groups) that fn launches,
// and the heap tensors it launches them with, are held by the graph until
// it is destroyed.
func (r *Rank) Capture(s gpu.Stream, fn func() error) (*Graph, error) {
	if err := r.usable("Capture"); err != nil {
		return nil, err
	}
	mode := r.CaptureMode()
	g := &Graph{r: r}
	if !r.graphs.capturing.CompareAndSwap(nil, g) {
		return nil, errors.New("capture: a capture through Rank.Capture is already running on this rank (or its world rank or groups)")
	}
	defer r.graphs.capturing.Store(nil)
	defer gpu.PinCaptureThread(mode)()
	if err := r.dev.BeginCapture(s, mode); err != nil {
		return nil, platformErr("beginning a stream capture", err)
	}
	capturing, cerr := r.Capturing(s)
	ferr := fn()
	graph, eerr := r.dev.EndCapture(s)
	if eerr != nil {
		eerr = platformErr("ending the stream capture", eerr)
	} else {
		defer r.dev.DestroyGraph(graph)
	}
	err := errors.Join(cerr, ferr, eerr)
	if err == nil && !capturing {
		err = fmt.Errorf("capture: stream %#x was not capturing after BeginCapture", uint64(s))
	}
	if err == nil {
		if g.exec, err = r.dev.Instantiate(graph); err != nil {
			err = platformErr("instantiating the captured graph", err)
		}
	}
	if err != nil {
		g.release()
		return nil, g.abandon(s, err)
	}
	r.graphs.mu.Lock()
	if r.graphs.live == nil {
		r.graphs.live = map[*Graph]bool{}
	}
	r.graphs.live[g] = true
	r.graphs.mu.Unlock()
	return g, nil
}

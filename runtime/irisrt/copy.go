package irisrt

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// A copy-engine launch (core.PlanSpec.Copy) runs no kernel. On its stream
// it enqueues, in mode device:
//
//	enter: 1 into word rank of every peer's enter row (a stream memory
//	       operation, or where the driver's cannot store into a peer's
//	       memory a 4-byte copy: Rank.raise); for every peer j, wait
//	       until the own enter[j] holds 1, then store 0 into it
//	seen:  a copy of the own control block's refused words into the
//	       rank's host-mapped seen area (below)
//	the copies (Args.Copies, CopyDtoDAsync between heap addresses)
//	done:  the same on the done row
//
// The two rows are uint32[MaxWorld] each at the start of the plan's flags
// (zeroed when the plan is made, on the heap, at the same offset on every
// rank). The enter barrier orders the copies after every rank's earlier
// work on its stream (its inputs are ready, its outputs free); the done
// barrier orders every rank's later work after all the copies into and out
// of its tensors. A word is reset by its only reader, the rank it belongs
// to, after its wait; its writer's next store comes after the reader's
// reset, since the writer's next barrier of the plan waits for a word the
// reader stores after that reset. So the words only ever hold 0 and 1, the
// same at every launch, and a graph replays them like an eager launch:
// eager launches and replays mix freely. Mode none enqueues the copies
// alone (the caller orders the ranks), mode host the copies between the
// host barriers that Plan.launch makes around them.
//
// The waits are stream memory operations without a time limit, so a rank
// that refuses a launch (Plan.refuse) releases the waits its peers' launch
// of it makes on it, and they learn of the refusal:
//
//   - The release. A word is a one-slot mailbox without a launch number
//     in it, and it must stay so: a graph replays the values it captured,
//     so launch-numbered (GEQ) words would let a replay of an old launch
//     pass on a newer eager launch's number, and a write-only release
//     cannot be placed safely in a 0/1 protocol. Written on the control
//     stream, a release races with the rank's own earlier launch of the
//     plan, still on its stream (two 1s in one word before the reader's
//     reset: one is lost and the reader waits for ever), and even after
//     that launch has finished, the done word may still hold the previous
//     1 (its reader resets it only after its own done wait). What keeps
//     the mailboxes in step is the writer's flow control, the barrier's
//     own waits. So the refusing rank enqueues, where the launch would
//     have gone (its stream), the plan's two barriers without the copies
//     and without the seen copy (hollow): they take the refused launch's
//     place in the rank's sequence of barriers of the plan, meet the
//     peers' launch of it and leave every word as a launch does. The
//     peers' copies then run on whatever the refusing rank's buffers
//     hold: their results of that launch are invalid, and the world stays
//     usable. While the stream captures, the hollow barriers go into the
//     capture (a capture that survives the refusal replays them with the
//     peers' replays); a capture that fails enqueues the hollow barriers
//     of every copy launch it took, once, on the stream after it ended
//     (Rank.Capture), to meet the peers' first replay of their graph.
//     A rank with a world fault (reason RefusedWorldFault: the world is
//     to be closed, only liveness matters) raises the two words on every
//     peer from its control stream instead (Plan.unblock), but only once
//     that raise cannot meet another in one word: after the streams that
//     hold the plan's earlier launches have finished (so no raise of
//     theirs is still to land), and once the peer's copy of the word reads
//     0 (the peer took the earlier raise). Both waits are host polls
//     bounded by Options.Timeout; at the bound it raises nothing more and
//     returns a *WorldError saying what did not drain
//     (TestCopyProtocolWorldFault searches the fixed release). During a
//     capture in global mode (a multi-process world) CUDA allows no
//     stream query, so there it raises at once, as it did before, and
//     can still lose a raise.
//   - The detection. The refused words (launch, reason) that the
//     refusing rank writes into every peer's control block (Rank.refuse)
//     are written and waited for before the hollow barriers are
//     enqueued, so a peer's launch whose enter barrier it released finds
//     them there. The seen copy after the enter barrier (64 bytes at
//     most, a copy-engine operation on the stream: no host sync, no
//     kernel) puts them where the host reads them without waiting for
//     the GPU, and Rank.Check (Graph.Replay, the host barrier) reports a
//     word it has not reported before as a *PeerRefusedError with Copies
//     set, once (a call fault: the world stays usable), unless this rank
//     refused that launch too. Reading the control block itself would
//     cost a device-to-host copy and a host sync at every check; a kernel
//     would take the SMs that copy-engine variants leave free.
//
// The copies themselves go over the plan's lanes (copyLanes): the launch's
// stream and, where the platform can make a stream wait for an event, up
// to Options.CopyStreams-1 streams of the plan, forked from the launch's
// stream after the enter barrier and joined back before the done barrier.
// A launch's copies are independent (the spec's rules: each reads a tensor
// the launch only reads and writes a block nothing else writes), so they
// may run in any order; one after another on one stream each waits for the
// one before (on 4 H100s a copy launch of a world of 4 had about 44 us of
// fixed cost, barriers included, with its copies in one stream).
// Under capture the fork and join become a graph's parallel branches.
//
// A rank that never launches its part at all (a crash, a skipped call, a
// refusal before a plan exists, a launch refused because another
// goroutine holds the plan) still holds its peers' streams for ever.

const (
	copyEnterRow = 0
	copyDoneRow  = 4 * MaxWorld
)

// copyRows are the barriers' rows, by name.
var copyRows = [...]struct {
	row  int64
	name string
}{{copyEnterRow, "enter"}, {copyDoneRow, "done"}}

// copyLanes are the streams of a copy-engine plan besides the launch's, and
// the events that fork them from it and join them back (one a stream).
// They belong to the plan, which one goroutine launches at a time: shared
// by plans, a stream forked into one goroutine's capture would take
// another's eager copies into the graph.
type copyLanes struct {
	wait    gpu.EventWaiter // the device
	streams []gpu.Stream
	fork    gpu.Event
	joins   []gpu.Event
}

// laneSet holds the lanes of a world rank's and its groups' live plans,
// which the rank's release destroys.
type laneSet struct {
	mu   sync.Mutex
	live map[*copyLanes]bool
}

// newLanes makes the lanes of a copy-engine plan of r with at most
// maxCopies copies a launch (0: no bound): none where one stream is all
// the plan may use (Options.CopyStreams, by default the world size; at
// most maxCopies, copies being never cut; a platform without
// gpu.EventWaiter).
func (r *Rank) newLanes(maxCopies int) (*copyLanes, error) {
	n := r.opts.CopyStreams
	if n == 0 {
		n = r.world
	}
	if maxCopies > 0 {
		n = min(n, maxCopies)
	}
	w, ok := r.dev.(gpu.EventWaiter)
	if !ok || n <= 1 {
		return nil, nil
	}
	l := &copyLanes{wait: w}
	err := func() (err error) {
		if l.fork, err = r.dev.NewEvent(false); err != nil {
			return err
		}
		for range n - 1 {
			s, err := r.dev.NewStream()
			if err != nil {
				return err
			}
			l.streams = append(l.streams, s)
			e, err := r.dev.NewEvent(false)
			if err != nil {
				return err
			}
			l.joins = append(l.joins, e)
		}
		return nil
	}()
	if err != nil {
		return nil, errors.Join(platformErr(fmt.Sprintf("rank %d making the streams of a copy-engine plan", r.rank), err), l.destroy(r.dev))
	}
	r.lanes.mu.Lock()
	r.lanes.live[l] = true
	r.lanes.mu.Unlock()
	return l, nil
}

// dropLanes destroys a plan's lanes (its Close, or a failed newPlan).
func (r *Rank) dropLanes(l *copyLanes) error {
	if l == nil {
		return nil
	}
	r.lanes.mu.Lock()
	delete(r.lanes.live, l)
	r.lanes.mu.Unlock()
	return l.destroy(r.dev)
}

// destroy destroys what l holds.
func (l *copyLanes) destroy(dev gpu.Device) error {
	var errs []error
	for _, s := range l.streams {
		errs = append(errs, dev.DestroyStream(s))
	}
	for _, e := range l.joins {
		errs = append(errs, dev.DestroyEvent(e))
	}
	if l.fork != 0 {
		errs = append(errs, dev.DestroyEvent(l.fork))
	}
	l.streams, l.joins, l.fork = nil, nil, 0
	return errors.Join(errs...)
}

// copy enqueues the copies that move bytes on s and the lanes, whole, the
// i-th on lane i mod the lanes used (lane 0 is s; the copies come sorted by
// the peer they reach, so each lane takes other peers), the lanes forked
// from s before their first copy and joined back into s after their last.
// A copy is never cut to fill idle lanes: on 4 H100s, one copy of 16 to 64
// MiB cut into pieces on 2 to 4 streams ran 4 to 15% slower than whole.
// enqueued says whether anything reached s or a lane.
func (p *Plan) copy(s gpu.Stream, copies []core.Copy) (enqueued bool, err error) {
	dev, l := p.r.dev, p.lanes
	p.moving = p.moving[:0]
	for _, c := range copies {
		// A copy onto itself is the in-place launch's own block
		// (aliasing: own_block): nothing to move.
		if c.Bytes > 0 && c.Src != c.Dst {
			p.moving = append(p.moving, c)
		}
	}
	var sides []gpu.Stream
	if l != nil && len(p.moving) > 1 {
		sides = l.streams[:min(len(p.moving)-1, len(l.streams))]
	}
	fail := func(step string, err error) (bool, error) {
		return enqueued, platformErr(fmt.Sprintf("%s %s: %s", p.spec.Op, p.spec.Variant, step), err)
	}
	if len(sides) > 0 {
		w := l.wait
		if err := dev.RecordEvent(l.fork, s); err != nil {
			return fail("forking its copies onto more streams", err)
		}
		enqueued = true
		for _, side := range sides {
			if err := w.WaitEvent(side, l.fork); err != nil {
				return fail("forking its copies onto more streams", err)
			}
		}
		// The join comes last, whatever fails before it: a stream forked
		// into a capture and never joined back fails the capture.
		defer func() {
			for j, side := range sides {
				if e := dev.RecordEvent(l.joins[j], side); e != nil {
					err = errors.Join(err, platformErr("joining a copy-engine launch's streams", e))
				} else if e := w.WaitEvent(s, l.joins[j]); e != nil {
					err = errors.Join(err, platformErr("joining a copy-engine launch's streams", e))
				}
			}
		}()
	}
	for i, c := range p.moving {
		on := s
		if k := i % (1 + len(sides)); k > 0 {
			on = sides[k-1]
		}
		if err := dev.CopyDtoDAsync(c.Dst, c.Src, c.Bytes, on); err != nil {
			return fail(fmt.Sprintf("a copy of %d bytes from %#x to %#x", c.Bytes, uint64(c.Src), uint64(c.Dst)), err)
		}
		enqueued = true
	}
	return enqueued, nil
}

// issueCopies enqueues a copy-engine launch on s; enqueued says whether
// anything reached the stream.
func (p *Plan) issueCopies(s gpu.Stream, mode irismodel.Barrier, copies []core.Copy) (enqueued bool, err error) {
	if mode == irismodel.BarrierDevice {
		if err := p.copyBarrier(s, copyEnterRow); err != nil {
			return false, err
		}
		enqueued = true
		if err := p.r.seen.snapshot(s); err != nil {
			return true, err
		}
	}
	moved, err := p.copy(s, copies)
	if enqueued = enqueued || moved; err != nil {
		return enqueued, err
	}
	if mode == irismodel.BarrierDevice {
		if err := p.copyBarrier(s, copyDoneRow); err != nil {
			return true, err
		}
	}
	return true, nil
}

// copyBarrier enqueues one barrier of a copy-engine launch on the flag row
// at byte offset row of the plan's flags, as one batch of stream memory
// operations where the platform has one (gpu.ValueOps: one stream
// operation instead of three a peer, each of which cost about 2.5 us on
// H100s): 1 into this rank's word on every peer (raise), then for every
// peer a wait for its word here and the reset of it.
func (p *Plan) copyBarrier(s gpu.Stream, row int64) error {
	r := p.r
	r.seen.launchedOn(s)
	word := func(j int) gpu.DevicePtr { return p.flags + gpu.DevicePtr(row+4*int64(j)) }
	ops := p.valueOps[:0]
	for j := range r.world {
		if j != r.rank {
			var err error
			if ops, err = r.raise(ops, r.heap.Peer(word(r.rank), j), s); err != nil {
				return platformErr(fmt.Sprintf("%s %s: the barrier with its peers", p.spec.Op, p.spec.Variant), err)
			}
		}
	}
	for j := range r.world {
		if j != r.rank {
			ops = append(ops, gpu.ValueOp{Dst: word(j), Value: 1, Wait: true}, gpu.ValueOp{Dst: word(j)})
		}
	}
	p.valueOps = ops
	if err := gpu.ValueOps(r.dev, ops, s); err != nil {
		return platformErr(fmt.Sprintf("%s %s: the barrier with its peers", p.spec.Op, p.spec.Variant), err)
	}
	return nil
}

// hollow enqueues a copy-engine launch in mode device without its copies:
// the enter and the done barrier, which meet the peers' launch and leave
// the flags as a launch does (see above).
func (p *Plan) hollow(s gpu.Stream) error {
	if err := p.copyBarrier(s, copyEnterRow); err != nil {
		return err
	}
	return p.copyBarrier(s, copyDoneRow)
}

// unblock is the release of a rank with a world fault (reason
// RefusedWorldFault: the world is to be closed, only the peers' liveness
// matters): it raises this rank's enter and done words on every peer from
// the control stream, as the refused launch's two barriers would have, but
// only where the raise cannot be lost (see above):
//
//  1. It waits until the streams that may hold the plan's earlier launches
//     have finished their work: also (the refused launch's stream: a
//     plan's launches are ordered on the device, so its earlier launches
//     come before that stream's end) and the stream of the rank's latest
//     copy-engine launch. No raise of theirs is then still to land. A
//     stream that captures is not waited for: its captured work does not
//     run, and its earlier work cannot be queried while it captures.
//  2. For every peer and word, it reads the peer's copy of the word (through
//     the peer mapping, from the host: peerWord) until it holds 0: the
//     peer has taken the earlier raise, and nothing else raises it now.
//  3. It raises the peer's two words from the control stream.
//
// Every wait ends at Options.Timeout from the start of the release. A
// stream that did not finish raises nothing; a peer whose word still holds
// the earlier raise (it has not reached that launch) is not raised again,
// the other peers are. Either returns a *WorldError naming the plan, the
// peer (-1: a stream of this rank) and what did not drain; nothing hangs.
//
// While the rank captures through Rank.Capture in a strict mode (global: a
// multi-process world) it raises at once, without the waits: CUDA refuses
// a stream query during such a capture, whatever the stream, and breaks
// the capture. That release can still be lost (docs/collectives.md); a
// failed capture's release of the launches it took (Graph.abandon) comes
// after the capture has ended, with the waits.
func (p *Plan) unblock(also ...gpu.Stream) error {
	r := p.r
	if r.graphs.capturing.Load() != nil && r.CaptureMode() != gpu.CaptureRelaxed {
		return p.raiseAll(nil)
	}
	op := fmt.Sprintf("releasing its peers' %s %s launch after its world fault", p.spec.Op, p.spec.Variant)
	limit := r.opts.Timeout
	deadline := time.Now().Add(limit)
	streams := slices.Clone(also)
	if c := r.seen; c != nil && c.lastSet.Load() {
		if s := gpu.Stream(c.last.Load()); !slices.Contains(streams, s) {
			streams = append(streams, s)
		}
	}
	for _, s := range streams {
		st, err := r.dev.CaptureStatus(s)
		if err == nil && st != gpu.CaptureNone {
			continue
		}
		done := false
		if err == nil {
			done, err = r.drain(s, deadline)
		}
		if err != nil || !done {
			msg := fmt.Sprintf("its stream %#x, which holds the plan's earlier launches, did not finish within %v: nothing raised (a raise could meet an earlier one still to land, and be lost)", uintptr(s), limit)
			if err != nil {
				msg = fmt.Sprintf("waiting for its stream %#x, which holds the plan's earlier launches: nothing raised", uintptr(s))
			}
			return &WorldError{Rank: r.rank, Op: op, Peer: -1, Msg: msg, Err: err}
		}
	}
	return p.raiseAll(func(j int, w gpu.DevicePtr, name string) error {
		v, err := r.peerWord(w, deadline)
		switch {
		case err != nil:
			return &WorldError{Rank: r.rank, Op: op, Peer: j, Msg: fmt.Sprintf("reading its %s word there: nothing raised there", name), Err: err}
		case v != 0:
			return &WorldError{Rank: r.rank, Op: op, Peer: j, Msg: fmt.Sprintf("its %s word there still holds this rank's earlier raise after %v (rank %d has not reached that launch): nothing raised there (a second raise would be lost)", name, limit, j)}
		}
		return nil
	})
}

// raiseAll raises this rank's enter and done words on every peer from the
// control stream; where ready is not nil, only on a peer where it returns
// nil for both words (j the peer, w the word through the peer mapping),
// and its errors are returned, joined with the raises'.
func (p *Plan) raiseAll(ready func(j int, w gpu.DevicePtr, name string) error) error {
	r := p.r
	var errs []error
	for j := range r.world {
		if j == r.rank {
			continue
		}
		words := [len(copyRows)]gpu.DevicePtr{}
		var err error
		for k, row := range copyRows {
			words[k] = r.heap.Peer(p.flags+gpu.DevicePtr(row.row+4*int64(r.rank)), j)
			if ready != nil && err == nil {
				err = ready(j, words[k], row.name)
			}
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range words {
			ops, err := r.raise(nil, w, r.control)
			if err == nil {
				err = gpu.ValueOps(r.dev, ops, r.control)
			}
			if err != nil {
				errs = append(errs, platformErr(fmt.Sprintf("%s %s: releasing rank %d", p.spec.Op, p.spec.Variant, j), err))
			}
		}
	}
	return errors.Join(errs...)
}

// drain waits until s has finished its work (gpu.Device.StreamQuery) or
// deadline has passed, and reports whether it finished.
func (r *Rank) drain(s gpu.Stream, deadline time.Time) (bool, error) {
	return poll(deadline, func() (bool, error) { return r.dev.StreamQuery(s) })
}

// peerWord reads the 4-byte word at dst (a peer's, through the peer
// mapping) from the host until it holds 0 or deadline has passed, and
// returns what it read last. Each read is a copy of the word into the seen
// area's poll word on the control stream (a copy-engine operation, as the
// seen copy: no kernel, no synchronous copy that would wait for the legacy
// stream) and a wait for that stream (drain), after which the host reads
// its pinned memory.
func (r *Rank) peerWord(dst gpu.DevicePtr, deadline time.Time) (uint32, error) {
	c := r.seen
	if c == nil {
		return 0, errors.New("the rank has no host-mapped area to read it into")
	}
	host := (*uint32)(unsafe.Add(c.host, copyPollOff))
	var v uint32
	_, err := poll(deadline, func() (bool, error) {
		if err := r.dev.CopyDtoDAsync(c.dev+copyPollOff, dst, 4, r.control); err != nil {
			return false, err
		}
		done, err := r.drain(r.control, deadline)
		if err != nil {
			return false, err
		}
		if !done {
			return false, fmt.Errorf("the copy of the word on the control stream did not finish in time")
		}
		v = atomic.LoadUint32(host)
		return v == 0, nil
	})
	return v, err
}

// poll calls try until it reports done or fails, or deadline has passed
// after a try, pausing between tries (10 us, doubling up to 1 ms), and
// reports whether try reported done.
func poll(deadline time.Time, try func() (bool, error)) (bool, error) {
	pause := 10 * time.Microsecond
	for {
		done, err := try()
		if err != nil || done {
			return done, err
		}
		if !time.Now().Before(deadline) {
			return false, nil
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
}

// raise stores 1 into dst, a word of a peer's memory, on s: as a stream
// memory operation appended to ops (for the caller to enqueue, after any
// it enqueued on s before) where the device's can store into a peer's
// memory, else now, as a 4-byte copy from the rank's one word (CUDA 13.1
// and later; IRISGEN_PEER_WRITES=0). The copy, like the stream memory
// operation, starts once the stream's earlier work has ended, so a peer
// that sees the 1 sees that work's writes. It costs a copy-engine
// operation a peer where a batch of memory operations took them all.
func (r *Rank) raise(ops []gpu.ValueOp, dst gpu.DevicePtr, s gpu.Stream) ([]gpu.ValueOp, error) {
	if r.one == 0 {
		return append(ops, gpu.ValueOp{Dst: dst, Value: 1}), nil
	}
	return ops, r.dev.CopyDtoDAsync(dst, r.one, 4, s)
}

// releases reports whether a refused launch of the plan in mode must
// release its peers' stream waits: a copy-engine plan with barriers, in
// mode device, launch n counted, in a world of more than one rank.
func (p *Plan) releases(n uint32, mode irismodel.Barrier) bool {
	return p.spec.Copy && mode == irismodel.BarrierDevice && n != 0 && p.r.world > 1
}

// refuse is Rank.refuse for launch n of the plan in mode on s: it tells
// the peers, and a copy-engine plan releases their stream waits on this
// rank (see above): hollow barriers on s, or, after a world fault, the
// words written from the control stream. A plan held by another goroutine
// (*InUseError) or closed releases nothing: its flags are not this
// call's to touch.
func (p *Plan) refuse(s gpu.Stream, n uint32, mode irismodel.Barrier, err error) error {
	r := p.r
	err = r.refuse(s, n, err)
	if !p.releases(n, mode) || r.isClosed() {
		return err
	}
	if !p.busy.CompareAndSwap(false, true) {
		return err
	}
	defer p.busy.Store(false)
	if p.closed {
		return err
	}
	var rerr error
	if reasonOf(err) == RefusedWorldFault {
		rerr = p.unblock(s)
	} else {
		rerr = p.hollow(s)
		if g := r.graphs.capturing.Load(); g != nil && rerr == nil {
			if st, e := r.dev.CaptureStatus(s); e == nil && st != gpu.CaptureNone {
				g.first(r, n)
				g.rounds = append(g.rounds, p)
			}
		}
	}
	if rerr != nil {
		return errors.Join(err, platformErr(fmt.Sprintf("rank %d releasing its peers' copy-engine launch %d", r.rank, n), rerr))
	}
	return err
}

// copySeen is a rank's (or a group's) host-mapped seen area: the refused
// words of its control block as its latest copy-engine launch in mode
// device found them after its enter barrier (uint64[MaxWorld]), and what
// Check has reported of them.
type copySeen struct {
	r        *Rank
	host     unsafe.Pointer
	dev      gpu.DevicePtr
	reported [MaxWorld]uint64 // per peer: the word last reported
	// last: the stream of the rank's latest copy-engine barrier (a launch's
	// or a hollow one), which a world fault's release waits for
	// (Plan.unblock); lastSet: there was one.
	last    atomic.Uint64
	lastSet atomic.Bool
}

// The seen area: the refused words (uint64[MaxWorld]), then the poll word,
// into which Rank.peerWord copies a peer's flag word for the host to read.
const (
	copySeenBytes = 8 * MaxWorld
	copyPollOff   = copySeenBytes
)

// launchedOn records that a copy-engine barrier was enqueued on s.
func (c *copySeen) launchedOn(s gpu.Stream) {
	if c != nil {
		c.last.Store(uint64(s))
		c.lastSet.Store(true)
	}
}

// seenSet holds the seen areas of a world rank and its groups (Check reads
// them all, as the error records are shared).
type seenSet struct {
	mu    sync.Mutex
	areas []*copySeen
}

// needSeen makes the rank's seen area, once: a plan with copy-engine
// launches in mode device is being made (not a launch path).
func (r *Rank) needSeen() error {
	if r.seen != nil {
		return nil
	}
	const bytes = copySeenBytes + 8
	host, dev, err := r.dev.AllocHostMapped(bytes)
	if err != nil {
		return platformErr(fmt.Sprintf("rank %d allocating the record of its copy-engine launches' refusals", r.rank), err)
	}
	clear(unsafe.Slice((*byte)(host), bytes))
	r.seen = &copySeen{r: r, host: host, dev: dev}
	r.seens.mu.Lock()
	r.seens.areas = append(r.seens.areas, r.seen)
	r.seens.mu.Unlock()
	return nil
}

// dropSeen frees the rank's seen area (a group's Close).
func (r *Rank) dropSeen() error {
	c := r.seen
	if c == nil {
		return nil
	}
	r.seen = nil
	r.seens.mu.Lock()
	r.seens.areas = slices.DeleteFunc(r.seens.areas, func(x *copySeen) bool { return x == c })
	r.seens.mu.Unlock()
	return r.dev.FreeHost(c.host)
}

// snapshot enqueues the seen copy on s.
func (c *copySeen) snapshot(s gpu.Stream) error {
	if c == nil || c.r.world == 1 {
		return nil
	}
	r := c.r
	if err := r.dev.CopyDtoDAsync(c.dev, r.heap.base+core.OffRefused, 8*int64(r.world), s); err != nil {
		return platformErr("recording the refusals a copy-engine launch met", err)
	}
	return nil
}

// next returns the first refusal in the area not reported yet, and marks
// it reported; nil when there is none.
func (c *copySeen) next() *PeerRefusedError {
	r := c.r
	for q := range r.world {
		if q == r.rank {
			continue
		}
		w := atomic.LoadUint64((*uint64)(unsafe.Add(c.host, 8*q)))
		n := uint32(w)
		if n == 0 || w == c.reported[q] {
			continue
		}
		c.reported[q] = w
		if r.refusedToo(n) {
			continue // this rank refused it too: it made no copies of it
		}
		e := &PeerRefusedError{Rank: r.rank, Peer: q, Launch: n, Reason: RefusalReason(w >> 32), Copies: true}
		if r.local != nil {
			e.Err = r.local.refusal(refusalKey{r.heap.base, n})
		}
		r.met[r.metNext%len(r.met)] = e
		r.metNext++
		return e
	}
	return nil
}

// copyRefusal returns a refusal that a copy-engine launch of the rank or
// of one of its groups met and Check has not reported yet, or nil.
func (r *Rank) copyRefusal() error {
	set := r.seens
	if set == nil {
		return nil
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	for _, c := range set.areas {
		if e := c.next(); e != nil {
			return e
		}
	}
	return nil
}

// noteOwn records that this rank refused launch n.
func (r *Rank) noteOwn(n uint32) {
	if r.seens == nil {
		return
	}
	r.seens.mu.Lock()
	defer r.seens.mu.Unlock()
	r.own[r.ownNext%len(r.own)] = n
	r.ownNext++
}

// refusedToo reports whether this rank refused launch n itself (lately);
// the seen set's lock held.
func (r *Rank) refusedToo(n uint32) bool {
	return slices.Contains(r.own[:], n)
}

// refusedOwn is refusedToo, taking the lock.
func (r *Rank) refusedOwn(n uint32) bool {
	if r.seens == nil {
		return false
	}
	r.seens.mu.Lock()
	defer r.seens.mu.Unlock()
	return r.refusedToo(n)
}

// metRefusal returns the reported refusal of launch n that a copy-engine
// launch of this rank met, or nil: a graph that replays launch n is
// refused from then on (Graph.Launch), since the peer has no part of it
// to meet the replay with.
func (r *Rank) metRefusal(n uint32) *PeerRefusedError {
	if r.seens == nil {
		return nil
	}
	r.seens.mu.Lock()
	defer r.seens.mu.Unlock()
	for _, e := range r.met {
		if e != nil && e.Launch == n {
			return e
		}
	}
	return nil
}

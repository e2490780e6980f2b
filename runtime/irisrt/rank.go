package irisrt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
)

// Rank is one rank of a world: a GPU with its symmetric heap, a stream, an
// error record the kernels write, and the world's host rendezvous. A Rank is
// driven from one goroutine at a time.
type Rank struct {
	rank, world int
	opts        Options
	dev         gpu.Device
	heap        *Heap
	stream      gpu.Stream
	control     gpu.Stream // the rank's own stream for the control blocks (refusals reach the peers on it)
	group       Group
	errHost     unsafe.Pointer
	errDev      gpu.DevicePtr
	ctx         [core.CtxBytes]byte
	// one is a device word holding 1 where the device's stream memory
	// operations cannot store into a peer's memory (gpu.PeerValueWrites):
	// the source of the 4-byte copies that raise the copy-engine barriers'
	// flags on the peers instead (copy.go). 0 where they can.
	one gpu.DevicePtr

	kernels *kernelCache
	graphs  *graphSet       // shared with the rank's groups
	plans   core.Cache      // the convenience calls' plans (runtime/irisimpl)
	local   *World          // the in-process world, or nil
	opened  []gpu.DevicePtr // peers' heaps opened through IPC
	perGPU  int             // ranks on one GPU at most (Options.ShareGPUs); 0 or 1: a GPU each

	parent   *Rank         // the world's rank of a group (NewGroup), or nil
	reserved gpu.DevicePtr // a group's reservation on the parent's heap
	groupKey string        // a group's rendezvous in an in-process world
	groups   int           // NewGroup calls so far (names in-process groups)

	launches atomic.Uint32 // the last launch number (launch.go)

	// Copy-engine refusals (copy.go): the seen area of this rank's
	// copy-engine launches, all of the world rank's and its groups', this
	// rank's own latest refusals and the peers' refusals Check reported.
	seen    *copySeen
	seens   *seenSet
	lanes   *laneSet // the lanes of the live copy-engine plans (copy.go)
	own     [16]uint32
	ownNext int
	met     [16]*PeerRefusedError
	metNext int
	closed  atomic.Bool // released (a world rank), or closed (a group)

	releaseOnce sync.Once
	releaseErr  error
}

// newRank creates the device resources of a rank: stream, zeroed heap and
// zeroed error record. On error it frees what it made.
func newRank(rank, world int, dev gpu.Device, opts Options) (r *Rank, err error) {
	r = &Rank{rank: rank, world: world, opts: opts, dev: dev, kernels: &kernelCache{}, graphs: &graphSet{}, seens: &seenSet{}, lanes: &laneSet{live: map[*copyLanes]bool{}}}
	made := r // the returns below clear r
	defer func() {
		if err != nil {
			made.release()
		}
	}()
	if r.stream, err = dev.NewStream(); err != nil {
		return nil, platformErr(fmt.Sprintf("rank %d creating its stream", rank), err)
	}
	if r.control, err = dev.NewStream(); err != nil {
		return nil, platformErr(fmt.Sprintf("rank %d creating its control stream", rank), err)
	}
	base, err := dev.Alloc(opts.HeapBytes, true)
	if err != nil {
		return nil, &HeapError{Rank: rank, Op: "create", Err: err, Msg: fmt.Sprintf(
			"cannot allocate a %d-byte heap on GPU %d; lower Options.HeapBytes / IRISGEN_HEAP_BYTES", opts.HeapBytes, dev.Ordinal())}
	}
	bases := make([]gpu.DevicePtr, world)
	bases[rank] = base
	if r.heap, err = newHeap(rank, dev, base, opts.HeapBytes, bases); err != nil {
		_ = dev.Free(base)
		return nil, err
	}
	host, errDev, err := dev.AllocHostMapped(core.ErrRecords * core.ErrRecordBytes)
	if err != nil {
		return nil, platformErr(fmt.Sprintf("rank %d allocating its error records", rank), err)
	}
	r.errHost, r.errDev = host, errDev
	clear(unsafe.Slice((*byte)(host), core.ErrRecords*core.ErrRecordBytes))
	if !gpu.PeerValueWrites(dev) {
		if r.one, err = dev.Alloc(4, false); err != nil {
			return nil, platformErr(fmt.Sprintf("rank %d allocating the word its copy-engine barriers copy to peers", rank), err)
		}
		one := uint32(1)
		if err := dev.CopyHtoD(r.one, unsafe.Pointer(&one), 4); err != nil {
			return nil, platformErr(fmt.Sprintf("rank %d setting the word its copy-engine barriers copy to peers", rank), err)
		}
	}
	// Heap memory starts zeroed, so flags and epochs of the first plans and
	// user tensors have a known state.
	if err := dev.MemsetD8Async(base, 0, opts.HeapBytes, r.stream); err != nil {
		return nil, platformErr(fmt.Sprintf("rank %d zeroing its heap", rank), err)
	}
	if err := dev.StreamSynchronize(r.stream); err != nil {
		return nil, platformErr(fmt.Sprintf("rank %d zeroing its heap", rank), err)
	}
	return r, nil
}

// setBases records every rank's heap base as mapped on this device and builds
// the ctx template the kernels get by value.
func (r *Rank) setBases(bases []gpu.DevicePtr) {
	copy(r.heap.bases, bases)
	le := binary.LittleEndian
	for i, b := range bases {
		le.PutUint64(r.ctx[8*i:], uint64(b))
	}
	le.PutUint64(r.ctx[core.CtxOffErr:], uint64(r.errDev))
	le.PutUint32(r.ctx[core.CtxOffTimeout:], timeoutMicros(r.opts.Timeout))
	le.PutUint32(r.ctx[core.CtxOffRank:], uint32(r.rank))
	le.PutUint32(r.ctx[core.CtxOffWorld:], uint32(r.world))
}

// release frees the rank's device resources (once): it waits for the
// device (a kernel may still be giving up after a fault), destroys the
// graphs captured through Capture, unloads the kernels and frees the heap,
// the error records and the stream, whatever state a fault left them in.
func (r *Rank) release() error {
	r.releaseOnce.Do(func() {
		r.closed.Store(true)
		_ = r.dev.Synchronize() // best effort: a failed device is freed all the same
		var errs []error
		errs = append(errs, r.graphs.destroyAll(r.dev))
		errs = append(errs, r.kernels.unload(r.dev))
		for _, p := range r.opened {
			errs = append(errs, r.dev.IPCCloseHandle(p))
		}
		if r.heap != nil {
			r.heap.close()
			errs = append(errs, r.dev.Free(r.heap.base))
		}
		if r.errHost != nil {
			errs = append(errs, r.dev.FreeHost(r.errHost))
		}
		if r.one != 0 {
			errs = append(errs, r.dev.Free(r.one))
		}
		if r.seens != nil {
			for _, c := range r.seens.areas {
				errs = append(errs, r.dev.FreeHost(c.host))
			}
			r.seens.areas = nil
		}
		r.lanes.mu.Lock()
		for l := range r.lanes.live {
			errs = append(errs, l.destroy(r.dev))
		}
		clear(r.lanes.live)
		r.lanes.mu.Unlock()
		if r.stream != 0 {
			errs = append(errs, r.dev.DestroyStream(r.stream))
		}
		if r.control != 0 {
			errs = append(errs, r.dev.DestroyStream(r.control))
		}
		r.releaseErr = errors.Join(errs...)
	})
	return r.releaseErr
}

// Close leaves a multi-process world: it waits (best effort) until every rank
// has reached Close, so no peer still reads this rank's heap, then closes the
// peers' heaps, frees its own and leaves the rendezvous. Ranks of an
// in-process world are closed by World.Close. On a group (NewGroup) it waits
// for the members and frees the group's reservation on the world's heap:
// like NewGroup, every rank of the world closes its group, after closing
// the group's plans and freeing its tensors.
func (r *Rank) Close() error {
	if r.parent != nil {
		return r.closeGroup()
	}
	if r.local != nil {
		return fmt.Errorf("rank %d belongs to an in-process world: close the World instead", r.rank)
	}
	if r.isClosed() {
		return nil
	}
	_ = r.dev.StreamSynchronize(r.stream)
	_ = r.group.Barrier() // a failed world cannot be waited for; free anyway
	err := r.release()
	return errors.Join(err, r.group.Close())
}

// isClosed reports whether r was closed: a world rank released (World.Close,
// Rank.Close), a group closed or its world rank released.
func (r *Rank) isClosed() bool {
	return r.closed.Load() || (r.parent != nil && r.parent.closed.Load())
}

// usable returns a *ClosedError for a call op on a closed rank, else nil:
// every entry point that would reach the GPU asks first (through
// isClosed where op would have to be built: the launch path allocates
// nothing).
func (r *Rank) usable(op string) error {
	if !r.isClosed() {
		return nil
	}
	return r.closedErr(op)
}

// closedErr is the *ClosedError of a call op on r, which is closed.
func (r *Rank) closedErr(op string) error {
	switch {
	case r.parent != nil && r.parent.closed.Load():
		return &ClosedError{Op: op, What: fmt.Sprintf("the world of rank %d's group", r.parent.rank)}
	case r.closed.Load() && r.parent != nil:
		return &ClosedError{Op: op, What: fmt.Sprintf("rank %d's group", r.parent.rank)}
	case r.closed.Load():
		return &ClosedError{Op: op, What: fmt.Sprintf("the world of rank %d", r.rank)}
	}
	return nil
}

// Rank is this rank's index in the world.
func (r *Rank) Rank() int { return r.rank }

// World is the number of ranks.
func (r *Rank) World() int { return r.world }

// Device is this rank's GPU.
func (r *Rank) Device() gpu.Device { return r.dev }

// Heap is this rank's symmetric heap.
func (r *Rank) Heap() *Heap { return r.heap }

// Stream is the rank's own non-blocking stream, created with the rank.
func (r *Rank) Stream() gpu.Stream { return r.stream }

// Group is the world's host rendezvous as seen from this rank.
func (r *Rank) Group() Group { return r.group }

// Options are the world's resolved options (defaults and environment
// applied).
func (r *Rank) Options() Options { return r.opts }

// Capturing reports whether s is capturing (or a capture on it was
// invalidated and not yet ended).
func (r *Rank) Capturing(s gpu.Stream) (bool, error) {
	if err := r.usable("Capturing"); err != nil {
		return false, err
	}
	st, err := r.dev.CaptureStatus(s)
	if err != nil {
		return false, platformErr("querying the stream's capture status", err)
	}
	return st != gpu.CaptureNone, nil
}

// HostBarrier waits until all work queued on s has finished, checks the
// error records, then waits on the host until every rank has done the same.
// A rank's error (its kernels' fault, see Check) reaches every rank: that
// rank gets it, the others a *WorldError naming the rank, and all stay in
// step. It also checks that every rank's heap holds the same allocations.
// Not allowed while s is capturing.
func (r *Rank) HostBarrier(s gpu.Stream) error { return r.hostBarrier(s, nil) }

// hostBarrier is HostBarrier where the ranks also compare launch, the
// fingerprint of the launch in mode host the barrier precedes (a
// *MismatchError on every rank when they differ), or nil.
func (r *Rank) hostBarrier(s gpu.Stream, launch []byte) error {
	capturing, err := r.Capturing(s)
	if err != nil {
		return err
	}
	if capturing {
		return &CaptureError{Op: "HostBarrier",
			What: "it waits for the stream and for the other ranks on the host",
			Fix:  "inside a graph use launches with irismodel.BarrierDevice; keep host barriers outside the capture"}
	}
	local := r.dev.StreamSynchronize(s)
	if local != nil {
		local = platformErr(fmt.Sprintf("rank %d synchronizing its stream", r.rank), local)
	} else {
		local = r.Check()
	}
	if launch == nil {
		return r.syncRanks("host barrier", local, nil)
	}
	parts, err := r.exchange("host barrier", local, append(r.heap.digest(), launch...))
	if err != nil {
		return err
	}
	if err := r.sameHeaps("host barrier", parts); err != nil {
		return err
	}
	le := binary.LittleEndian
	for p, b := range parts {
		if len(b) != 16+8 {
			return &WorldError{Rank: r.rank, Op: "host barrier", Peer: p, Msg: "sent a malformed message"}
		}
		if !bytes.Equal(b[16:], launch) {
			return &MismatchError{Rank: r.rank, Peer: p, Launch: le.Uint32(launch), Block: -1, Check: le.Uint32(launch[4:]), PeerCheck: le.Uint32(b[20:])}
		}
	}
	return nil
}

// syncRanks is one host rendezvous that also carries each rank's outcome and
// fingerprints: localErr (this rank failed the step), the heap digest, and
// an optional digest of what the ranks are doing together (a plan). Every
// rank returns an error when any rank failed or the fingerprints differ.
func (r *Rank) syncRanks(op string, localErr error, digest []byte) error {
	if err := r.usable(op); err != nil {
		return err
	}
	mine := append(r.heap.digest(), digest...)
	parts, err := r.exchange(op, localErr, mine)
	if err != nil {
		return err
	}
	// The plans first: ranks that made different plans hold different
	// allocations too, and the plans say why.
	for p, b := range parts {
		if len(b) < 16 {
			return &WorldError{Rank: r.rank, Op: op, Peer: p, Msg: "sent a malformed message"}
		}
		if !bytes.Equal(b[16:], digest) {
			return &WorldError{Rank: r.rank, Op: op, Peer: p, Msg: fmt.Sprintf(
				"made a different %s than rank %d (rank %d: %s; rank %d: %s): plans are collective, every rank must make the same plans "+
					"with the same arguments (variant, dtype, op, sizes) in the same order", op, r.rank, p, peerText(b[16:]), r.rank, peerText(digest))}
		}
	}
	return r.sameHeaps(op, parts)
}

// sameHeaps checks that every rank's heap digest (the first 16 bytes of
// its part) equals this rank's.
func (r *Rank) sameHeaps(op string, parts [][]byte) error {
	mine := r.heap.digest()
	for p, b := range parts {
		if len(b) < 16 {
			return &WorldError{Rank: r.rank, Op: op, Peer: p, Msg: "sent a malformed message"}
		}
		if !bytes.Equal(b[:16], mine) {
			return &HeapError{Rank: r.rank, Op: "collective", Msg: fmt.Sprintf(
				"at the %s, rank %d's heap holds different allocations than rank %d's: Alloc and Free are collective, "+
					"every rank must make the same calls with the same sizes in the same order", op, p, r.rank)}
		}
	}
	return nil
}

func binaryAppendI64(b []byte, v int64) []byte { return binary.LittleEndian.AppendUint64(b, uint64(v)) }
func binaryI64(b []byte) int64                 { return int64(binary.LittleEndian.Uint64(b)) }

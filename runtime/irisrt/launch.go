package irisrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Launch fingerprints, refusals and mismatches (issue 25, items 2-3).
//
// Every launch call of a plan that meets its peers gets a number on its
// rank (Rank.nextLaunch: 1, 2, ... per world rank or group, counted on the
// host in call order, a refused call included), so the same call has the
// same number on every rank of a program that makes the same calls in the
// same order; a graph replays the numbers it captured. The kernel gets the
// number (irisgen_ctx.launch) and a fingerprint of the launch (check: a
// hash of the number, the plan, the parameters and the barrier mode), and
// the device header uses them three ways (runtime/include/irisgen.h):
//
//   - A barrier flag carries the check above its epoch: where a block meets
//     a peer's block, a flag of that very sync with another check is a
//     mismatch (another root, mode or launch number), found where the
//     ranks meet, at no extra memory access.
//   - Block 0 records (launch, check) in the rank's control block (begun);
//     a wait that has spun for 1 ms reads the awaited peer's record of the
//     same launch, and another check there is a mismatch too (another
//     collective or plan: the ranks would otherwise wait for each other on
//     different flags until the time limit).
//   - A rank whose launch call is refused on the host writes (reason,
//     launch) into refused[rank] of every peer's control block (two 32-bit
//     memsets on the rank's control stream, through its peer mappings);
//     a kernel of that launch waiting for that rank (a sync waits for
//     every peer) reads it in the slow path of its spin (every 256 polls)
//     and gives up at once.
//
// The mismatch and the refusal are world faults (record 0): the kernels
// that gave up have left their peers' barrier epochs out of step, so the
// world is closed and started again, as after a timeout. A refusal on
// every rank leaves nothing to do: no kernel waits for its number, and
// later launches have later numbers.

// RefusalReason is what kind of error made a rank refuse a launch, as it
// travels to the peers whose kernels gave up (PeerRefusedError).
type RefusalReason uint32

// The reasons, by the refusal's error.
const (
	RefusedOther       RefusalReason = iota // another error
	RefusedDType                            // *DTypeError
	RefusedShape                            // *ShapeError
	RefusedPlacement                        // *PlacementError
	RefusedAlias                            // *AliasError
	RefusedAlignment                        // *AlignmentError
	RefusedNotLive                          // *LiveError
	RefusedParam                            // *ParamError
	RefusedBarrierMode                      // *BarrierModeError
	RefusedCapture                          // *CaptureError
	RefusedInUse                            // *InUseError
	RefusedClosed                           // *ClosedError
	RefusedWorldFault                       // the rank's own world fault (a timeout, a mismatch, a peer's refusal)
	RefusedMismatch                         // *MismatchError at the host barrier
	RefusedPlatform                         // *gpu.Error: the GPU library failed
)

var refusalNames = [...]string{
	RefusedOther:       "an error",
	RefusedDType:       "a tensor of the wrong dtype",
	RefusedShape:       "a tensor of the wrong shape",
	RefusedPlacement:   "a tensor off the symmetric heap",
	RefusedAlias:       "overlapping tensors",
	RefusedAlignment:   "a misaligned tensor",
	RefusedNotLive:     "a tensor that is not a live heap allocation",
	RefusedParam:       "a launch parameter out of range",
	RefusedBarrierMode: "an unsupported barrier mode",
	RefusedCapture:     "a launch not allowed during stream capture",
	RefusedInUse:       "a plan in use on another goroutine",
	RefusedClosed:      "a closed plan",
	RefusedWorldFault:  "its own world fault",
	RefusedMismatch:    "a launch mismatch at the host barrier",
	RefusedPlatform:    "a GPU library failure",
}

func (r RefusalReason) String() string {
	if int(r) < len(refusalNames) {
		return refusalNames[r]
	}
	return fmt.Sprintf("RefusalReason(%d)", uint32(r))
}

// reasonOf classifies a refusal's error.
func reasonOf(err error) RefusalReason {
	var ge *gpu.Error
	for _, c := range []struct {
		target error
		reason RefusalReason
	}{
		{ErrDType, RefusedDType}, {ErrShape, RefusedShape}, {ErrPlacement, RefusedPlacement}, {ErrAlias, RefusedAlias},
		{ErrAlignment, RefusedAlignment}, {ErrNotLive, RefusedNotLive}, {ErrParam, RefusedParam},
		{ErrBarrierMode, RefusedBarrierMode}, {ErrCapture, RefusedCapture}, {ErrInUse, RefusedInUse}, {ErrClosed, RefusedClosed},
		{ErrBarrierTimeout, RefusedWorldFault}, {ErrPeerRefused, RefusedWorldFault}, {ErrDeviceFault, RefusedWorldFault},
		{ErrMismatch, RefusedMismatch},
	} {
		if errors.Is(err, c.target) {
			if c.target == ErrMismatch {
				var me *MismatchError
				if errors.As(err, &me) && me.World {
					return RefusedWorldFault
				}
			}
			return c.reason
		}
	}
	if errors.As(err, &ge) {
		return RefusedPlatform
	}
	return RefusedOther
}

// nextLaunch numbers a launch call of a plan that meets its peers (0, not
// counted, for one that does not: a rank may launch such a plan alone).
// Numbers skip 0 when they wrap.
func (r *Rank) nextLaunch(meets bool) uint32 {
	if !meets {
		return 0
	}
	n := r.launches.Add(1)
	if n == 0 {
		n = r.launches.Add(1)
	}
	return n
}

// check is the fingerprint of launch n of the plan in mode with the
// parameters ps (core.Fingerprint). It does not allocate.
func (p *Plan) check(n uint32, mode irismodel.Barrier, ps []irismodel.Param) uint32 {
	return core.Fingerprint(p.id, n, mode, ps)
}

// refuse reports that launch n of this rank, on stream s, was refused with
// err before its kernel was enqueued: every peer's kernel of that launch
// gives up at once (see above), and in an in-process world err travels to
// them. It returns err (joined with a failure to reach the peers, if any).
// Nothing is written for a launch that is not counted, or once the rank is
// closed.
func (r *Rank) refuse(s gpu.Stream, n uint32, err error) error {
	if n == 0 || r.world == 1 || r.isClosed() {
		return err
	}
	r.noteOwn(n)
	reason := reasonOf(err)
	if r.local != nil {
		for q := 0; q < r.world; q++ {
			if q != r.rank {
				r.local.noteRefusal(refusalKey{r.heap.bases[q], n}, err)
			}
		}
	}
	var errs []error
	for q := 0; q < r.world; q++ {
		if q == r.rank {
			continue
		}
		word := r.heap.bases[q] + core.OffRefused + gpu.DevicePtr(8*r.rank)
		// The reason first: a kernel that sees the launch sees the reason.
		if e := r.dev.MemsetD32Async(word+4, uint32(reason), 1, r.control); e != nil {
			errs = append(errs, e)
		} else if e := r.dev.MemsetD32Async(word, n, 1, r.control); e != nil {
			errs = append(errs, e)
		}
	}
	// The words reach the peers even if the program ends right after the
	// error: wait for them, unless s captures (in a global capture the
	// wait could break it; the words follow soon anyway).
	if st, e := r.dev.CaptureStatus(s); len(errs) == 0 && e == nil && st == gpu.CaptureNone {
		if e := r.dev.StreamSynchronize(r.control); e != nil {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return errors.Join(err, platformErr(fmt.Sprintf("rank %d telling its peers that it refused launch %d", r.rank, n), errors.Join(errs...)))
	}
	return err
}

// begun records launch n with fingerprint check in this rank's control
// block from the host, on s, as a kernel's begin does: a launch in mode
// host does it before its host barrier, so that a peer whose kernel waits
// for this rank (in mode device) finds the mismatch.
func (r *Rank) begun(n, check uint32, s gpu.Stream) error {
	slot := r.heap.base + core.OffBegun + gpu.DevicePtr(8*(n%core.ControlRing))
	if err := r.dev.MemsetD32Async(slot, check, 1, s); err != nil {
		return platformErr("recording the launch in the control block", err)
	}
	if err := r.dev.MemsetD32Async(slot+4, n, 1, s); err != nil {
		return platformErr("recording the launch in the control block", err)
	}
	return nil
}

// refusalKey names a refusal as a waiting kernel reports it: the heap
// base of its world or group (as mapped where the kernel runs) and the
// launch number.
type refusalKey struct {
	base gpu.DevicePtr
	n    uint32
}

// refusals are an in-process world's latest refusals, so that a rank whose
// kernel gave up gets the refusing rank's own error. The memory is
// bounded: the oldest go first.
type refusals struct {
	mu   sync.Mutex
	keys [64]refusalKey
	errs [64]error
	next int
}

func (w *World) noteRefusal(k refusalKey, err error) {
	f := &w.refused
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[f.next], f.errs[f.next] = k, err
	f.next = (f.next + 1) % len(f.keys)
}

func (w *World) refusal(k refusalKey) error {
	f := &w.refused
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, kk := range f.keys {
		if kk == k && f.errs[i] != nil {
			return f.errs[i]
		}
	}
	return nil
}

// launchDigest is a launch's fingerprint as the host barrier of a launch
// in mode host compares it.
func launchDigest(n, check uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, n)
	return binary.LittleEndian.AppendUint32(b, check)
}

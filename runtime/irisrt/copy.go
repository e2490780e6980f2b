package irisrt

import (
	"fmt"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// A copy-engine launch (core.PlanSpec.Copy) runs no kernel. On its stream
// it enqueues, in mode device:
//
//	enter: 1 into word rank of every peer's enter row; for every peer j,
//	       wait until the own enter[j] holds 1, then store 0 into it
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
// The waits are stream memory operations without a time limit: a peer that
// never launches its part holds the stream for ever (the kernels' time
// limits and error records do not exist here).

const (
	copyEnterRow = 0
	copyDoneRow  = 4 * MaxWorld
)

// issueCopies enqueues a copy-engine launch on s; enqueued says whether
// anything reached the stream.
func (p *Plan) issueCopies(s gpu.Stream, mode irismodel.Barrier, copies []core.Copy) (enqueued bool, err error) {
	dev := p.r.dev
	if mode == irismodel.BarrierDevice {
		if err := p.copyBarrier(s, copyEnterRow); err != nil {
			return false, err
		}
		enqueued = true
	}
	for _, c := range copies {
		if c.Bytes == 0 {
			continue
		}
		if err := dev.CopyDtoDAsync(c.Dst, c.Src, c.Bytes, s); err != nil {
			return enqueued, platformErr(fmt.Sprintf("%s %s: a copy of %d bytes from %#x to %#x", p.spec.Op, p.spec.Variant, c.Bytes, uint64(c.Src), uint64(c.Dst)), err)
		}
		enqueued = true
	}
	if mode == irismodel.BarrierDevice {
		if err := p.copyBarrier(s, copyDoneRow); err != nil {
			return true, err
		}
	}
	return true, nil
}

// copyBarrier enqueues one barrier of a copy-engine launch on the flag row
// at byte offset row of the plan's flags.
func (p *Plan) copyBarrier(s gpu.Stream, row int64) error {
	r, dev := p.r, p.r.dev
	word := func(j int) gpu.DevicePtr { return p.flags + gpu.DevicePtr(row+4*int64(j)) }
	for j := range r.world {
		if j == r.rank {
			continue
		}
		if err := dev.WriteValue32(r.heap.Peer(word(r.rank), j), 1, s); err != nil {
			return platformErr(fmt.Sprintf("%s %s: signalling rank %d", p.spec.Op, p.spec.Variant, j), err)
		}
	}
	for j := range r.world {
		if j == r.rank {
			continue
		}
		if err := dev.WaitValue32(word(j), 1, s); err != nil {
			return platformErr(fmt.Sprintf("%s %s: waiting for rank %d", p.spec.Op, p.spec.Variant, j), err)
		}
		if err := dev.WriteValue32(word(j), 0, s); err != nil {
			return platformErr(fmt.Sprintf("%s %s: resetting rank %d's flag", p.spec.Op, p.spec.Variant, j), err)
		}
	}
	return nil
}

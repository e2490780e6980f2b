package irisrt

import (
	"bytes"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Launches of a plan made by hand (newPlan), numbered as the interpreter
// numbers them, for the tests of the plan core.

// Skip is the launch of a plan with nothing to do (every tensor empty): it
// makes Launch's checks of the plan, the mode and the stream, and enqueues
// nothing (no kernel, no host barrier). Like a launch it is collective and
// numbered, and a refusal reaches the peers (see Launch).
func (p *Plan) skipNumbered(s gpu.Stream, mode irismodel.Barrier) error {
	if p.r.isClosed() {
		return p.usable()
	}
	n := p.r.nextLaunch(!p.spec.Local)
	if err := p.skip(s, mode); err != nil {
		return p.r.refuse(s, n, err)
	}
	return nil
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
func (p *Plan) launchNumbered(s gpu.Stream, mode irismodel.Barrier, a *core.Args) error {
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

// ctxBytes returns a copy of the irisgen_ctx template every kernel of r
// gets: heap bases, error record, timeout, rank and world; flags, epochs and
// barrier are zero (plans fill them in).
func (r *Rank) ctxBytes() []byte { return bytes.Clone(r.ctx[:]) }

// testArgs packs a plan's arguments as the interpreter does (argsFor,
// staged), chainably, for testLaunch.
type testArgs struct {
	p *Plan
	a *core.Args
}

func (p *Plan) testArgs() testArgs { return testArgs{p, p.argsFor()} }

func (t testArgs) Staged(name string, x Tensor) testArgs { t.p.staged(t.a, name, x); return t }
func (t testArgs) Ptr(v gpu.DevicePtr) testArgs          { t.a.Ptr(v); return t }
func (t testArgs) I64(v int64) testArgs                  { t.a.I64(v); return t }
func (t testArgs) Bytes() []byte                         { return t.a.B }

// testLaunch is launchNumbered with arguments packed by testArgs.
func (p *Plan) testLaunch(s gpu.Stream, mode irismodel.Barrier, a testArgs) error {
	return p.launchNumbered(s, mode, a.a)
}

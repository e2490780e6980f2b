package tests

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// TestCopyRefusalReleasesPeers: a rank that refuses its launch of a
// copy-engine variant in mode device (a tensor of the wrong dtype) does not
// leave its peers' streams waiting on its barrier flags (the fake fails a
// stream wait after its limit instead of hanging), and every peer's next
// check returns a *irisrt.PeerRefusedError naming that rank, the launch and
// the reason, once; the next launch, matching, moves the right bytes again.
// Every copy-engine variant, worlds of 2 and 3, eager, refused at capture
// time (the peers' first replay of their graph is released and reports it,
// a second replay is refused on the host) and refused at replay time (a
// destroyed graph's replay).
func TestCopyRefusalReleasesPeers(t *testing.T) {
	var entries []collectives.Entry
	for _, e := range collectives.Catalogue {
		if e.Descriptor().Engine == irismodel.EngineCopy && slices.Contains(e.Barriers, irismodel.BarrierDevice) {
			entries = append(entries, e)
		}
	}
	if len(entries) != 7 {
		t.Fatalf("%d copy-engine variants with mode device, want 7", len(entries))
	}
	for _, world := range []int{2, 3} {
		for _, e := range entries {
			for _, how := range []string{"eager", "capture", "replay"} {
				t.Run(fmt.Sprintf("%s/%s/w%d/%s", e.Collective, e.Variant, world, how), func(t *testing.T) {
					t.Parallel()
					p := fakegpu.New(world)
					p.SetWaitLimit(5 * time.Second) // a hang fails well inside the test's time
					w := fakeWorld(t, world, p, fakeKernels(p))
					if err := w.Run(func(r *irisrt.Rank) error { return copyRefusal(r, p, e, how) }); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// copyRefusal is TestCopyRefusalReleasesPeers on one rank.
func copyRefusal(r *irisrt.Rank, fake *fakegpu.Platform, e collectives.Entry, how string) error {
	const n = 5
	world, me := r.World(), r.Rank()
	dt := irismodel.BF16
	plan, err := e.New(r, dt, "", []int64{n})
	if err != nil {
		return err
	}
	defer plan.Close()
	ts, free, err := e.Alloc(r, dt, []int64{n})
	if err != nil {
		return err
	}
	defer free()
	s := r.Stream()
	ps := e.SampleParams(world, 0)
	// The refusing rank: the last that passes a tensor (send_recv: src and
	// dst only), with one of them of the wrong dtype.
	refuser := -1
	for q := world - 1; q >= 0 && refuser < 0; q-- {
		for _, t := range e.TensorsFor(q, ts, ps) {
			if t.Ptr != 0 {
				refuser = q
				break
			}
		}
	}
	mine := e.TensorsFor(me, ts, ps)
	bad := slices.Clone(mine)
	for i, t := range bad {
		if t.Ptr != 0 {
			bad[i].DType = irismodel.F32
			break
		}
	}
	inputs := func(k int) [][]byte {
		all := make([][]byte, world)
		for q := range world {
			b := make([]byte, ts[0].Bytes())
			for i := range b {
				b[i] = byte(3 + q*29 + i*7 + k*53)
			}
			all[q] = b
		}
		return all
	}
	fill := func(all [][]byte) error {
		if err := fake.Write(ts[0].Ptr, all[me]); err != nil {
			return err
		}
		return fake.Write(ts[1].Ptr, slices.Repeat([]byte{0xEE}, int(ts[1].Bytes())))
	}
	// refused checks what a rank gets after the refusal of launch k: the
	// refusing rank its *DTypeError (from the launch or the capture), every
	// other rank a *PeerRefusedError from err.
	wantRefused := func(what string, err error, k uint32, reason irisrt.RefusalReason) error {
		var pe *irisrt.PeerRefusedError
		if !errors.As(err, &pe) {
			return fmt.Errorf("%s: rank %d got %v, want a *irisrt.PeerRefusedError", what, me, err)
		}
		want := irisrt.PeerRefusedError{Rank: me, Peer: refuser, Launch: k, Reason: reason, Copies: true, Err: pe.Err}
		if *pe != want {
			return fmt.Errorf("%s: rank %d got %+v, want %+v", what, me, *pe, want)
		}
		if reason == irisrt.RefusedDType {
			var de *irisrt.DTypeError
			if !errors.As(pe.Err, &de) {
				return fmt.Errorf("%s: rank %d: the refusing rank's own error %v, want its *irisrt.DTypeError (in process)", what, me, pe.Err)
			}
		}
		return nil
	}
	var de *irisrt.DTypeError
	switch how {
	case "eager": // launch 1
		if me == refuser {
			if err := plan.LaunchParams(s, bad, ps, irismodel.BarrierDevice); !errors.As(err, &de) {
				return fmt.Errorf("rank %d's refused launch: %v, want a *irisrt.DTypeError", me, err)
			}
		} else if err := plan.LaunchParams(s, mine, ps, irismodel.BarrierDevice); err != nil {
			return fmt.Errorf("rank %d's launch: %w", me, err)
		}
		if err := r.Device().StreamSynchronize(s); err != nil {
			return err
		}
		err := r.Check()
		if me == refuser {
			if err != nil {
				return fmt.Errorf("the refusing rank's check: %w", err)
			}
		} else if err := wantRefused("eager", err, 1, irisrt.RefusedDType); err != nil {
			return err
		}
	case "capture": // launch 1, captured
		if me == refuser {
			g, err := r.Capture(s, func() error { return plan.LaunchParams(s, bad, ps, irismodel.BarrierDevice) })
			if !errors.As(err, &de) || g != nil {
				return fmt.Errorf("rank %d's refused capture: %v, want a *irisrt.DTypeError and no graph", me, err)
			}
		} else {
			g, err := r.Capture(s, func() error { return plan.LaunchParams(s, mine, ps, irismodel.BarrierDevice) })
			if err != nil {
				return err
			}
			if err := wantRefused("first replay", g.Replay(s), 1, irisrt.RefusedDType); err != nil {
				return err
			}
			if err := wantRefused("second replay", g.Replay(s), 1, irisrt.RefusedDType); err != nil {
				return err
			}
			if err := g.Destroy(); err != nil {
				return err
			}
		}
		if err := r.Device().StreamSynchronize(s); err != nil {
			return err
		}
	case "replay": // launch 1, captured on every rank; the refusing rank destroys its graph and replays it
		g, err := r.Capture(s, func() error { return plan.LaunchParams(s, mine, ps, irismodel.BarrierDevice) })
		if err != nil {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if me == refuser {
			if err := g.Destroy(); err != nil {
				return err
			}
			if err := g.Replay(s); !errors.Is(err, irisrt.ErrClosed) {
				return fmt.Errorf("rank %d's replay of a destroyed graph: %v, want an *irisrt.ClosedError", me, err)
			}
		} else {
			if err := wantRefused("replay", g.Replay(s), 1, irisrt.RefusedClosed); err != nil {
				return err
			}
			if err := wantRefused("second replay", g.Replay(s), 1, irisrt.RefusedClosed); err != nil {
				return err
			}
			if err := g.Destroy(); err != nil {
				return err
			}
		}
		if err := r.Device().StreamSynchronize(s); err != nil {
			return err
		}
	}
	if err := r.Check(); err != nil {
		return fmt.Errorf("rank %d: reported once, then %w", me, err)
	}
	// The flags are in step: the next launch meets and moves the bytes.
	all := inputs(1)
	if err := fill(all); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if err := plan.LaunchParams(s, mine, ps, irismodel.BarrierDevice); err != nil {
		return fmt.Errorf("rank %d's next launch: %w", me, err)
	}
	if err := r.HostBarrier(s); err != nil {
		return fmt.Errorf("rank %d after its next launch: %w", me, err)
	}
	got, err := fake.Read(ts[1].Ptr, ts[1].Bytes())
	if err != nil {
		return err
	}
	ref := copyRef(e.Collective, world, me, all, ps)
	if ref == nil {
		ref = slices.Repeat([]byte{0xEE}, int(ts[1].Bytes()))
	}
	if !slices.Equal(got, ref) {
		return fmt.Errorf("rank %d's output after the refusal % x, want % x", me, got, ref)
	}
	return r.HostBarrier(s)
}

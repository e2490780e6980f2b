//go:build gpu

package gpu_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// releaseLimit is how long a peer's stream, and the world's Close, may take
// to finish after the faulty rank's release: the release itself waits at
// most the device limit (faultLimit) twice over, the rest is slack.
const releaseLimit = 2*faultLimit + 10*time.Second

// TestFaultCopyReleasePending: the last rank has launch 1 of a copy-engine
// plan (all_gather copy_push, mode device) waiting on its stream for its
// peers, which have not launched, when it gets a world fault (a device
// barrier that no peer joins times out on a stream of its own). It then
// refuses launch 2 (its own world fault) and releases the peers' launch 2
// from its control stream; the peers launch 1 and 2 only while that
// release runs. The release waits for the faulty rank's launch stream and
// for each peer to take launch 1's raises before it raises (Plan.unblock),
// so every peer's stream finishes and the world closes, within
// releaseLimit. Before, the release raised at once: one of two raises of a
// word was lost, and the peers' streams and the world's Close waited for
// ever. In-process worlds of 2 and of the GPU count.
func TestFaultCopyReleasePending(t *testing.T) {
	cases := countCases(t)
	for _, n := range worldSizes(t) {
		t.Run(fmt.Sprintf("in-process/world%d", n), func(t *testing.T) {
			w, err := irisrt.NewLocalWorld(n, faultOpts())
			if err != nil {
				t.Fatal(err)
			}
			faulted := make(chan struct{})
			signal := sync.OnceFunc(func() { close(faulted) })
			err = w.Run(func(r *irisrt.Rank) error {
				if r.Rank() == r.World()-1 {
					defer signal()
				}
				return copyReleaseRank(r, faulted, signal)
			})
			closed := make(chan error, 1)
			start := time.Now()
			go func() { closed <- w.Close() }()
			select {
			case cerr := <-closed:
				if err == nil && cerr != nil {
					err = fmt.Errorf("closing the world: %w", cerr)
				}
			case <-time.After(releaseLimit):
				t.Fatalf("the world did not close within %v (a peer's stream still waits: the release was lost); the run: %v", releaseLimit, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the world closed in %v", time.Since(start).Round(time.Millisecond))
			cases.add(1)
		})
	}
}

// copyReleaseRank is a rank's part of TestFaultCopyReleasePending: the last
// rank faults (and calls signal just before its refused launch), the
// others launch once faulted is closed.
func copyReleaseRank(r *irisrt.Rank, faulted <-chan struct{}, signal func()) error {
	const n = 4096 + 3
	me, world, s := r.Rank(), r.World(), r.Stream()
	faulty := world - 1
	p, err := collectives.NewAllGatherCopyPushPlan(r, irismodel.BF16, n)
	if err != nil {
		return err
	}
	b, err := newBarrier(r)
	if err != nil {
		return err
	}
	in, _, err := tensor(r, irismodel.BF16, n, true)
	if err != nil {
		return err
	}
	out, _, err := tensor(r, irismodel.BF16, int64(world)*n, true)
	if err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if me == faulty {
		side, err := r.Device().NewStream()
		if err != nil {
			return err
		}
		defer r.Device().DestroyStream(side)
		// Launch 1 waits on s for the peers' enter raises.
		if err := p.Launch(s, in, out, irismodel.BarrierDevice); err != nil {
			return fmt.Errorf("rank %d: launch 1: %w", me, err)
		}
		if done, err := r.Device().StreamQuery(s); err != nil || done {
			return fmt.Errorf("rank %d: launch 1 done (%v, %v) before any peer launched: it cannot be pending", me, done, err)
		}
		// The world fault.
		err = b.Launch(side, irismodel.BarrierDevice)
		if err == nil {
			err = syncCheck(r, side)
		}
		if !errors.Is(err, irisrt.ErrBarrierTimeout) {
			return fmt.Errorf("rank %d: a barrier no peer joins: got %v, want a *irisrt.BarrierTimeoutError", me, err)
		}
		signal()
		start := time.Now()
		err = p.Launch(s, in, out, irismodel.BarrierDevice) // refused, released
		took := time.Since(start)
		var we *irisrt.WorldError
		if !errors.Is(err, irisrt.ErrBarrierTimeout) || errors.As(err, &we) {
			return fmt.Errorf("rank %d: launch 2 after the fault: got %v, want its own timeout and the peers released", me, err)
		}
		fmt.Printf("rank %d: launch 2 refused, its release made in %v\n", me, took.Round(time.Microsecond))
		return finished(r, s, "its launch 1")
	}
	select {
	case <-faulted:
	case <-time.After(releaseLimit):
		return fmt.Errorf("rank %d: rank %d did not fault within %v", me, faulty, releaseLimit)
	}
	// Let the faulty rank's release begin: it waits for its launch 1, which
	// waits for this rank's.
	time.Sleep(100 * time.Millisecond)
	for k := 1; k <= 2; k++ {
		if err := p.Launch(s, in, out, irismodel.BarrierDevice); err != nil {
			return fmt.Errorf("rank %d: launch %d: %w", me, k, err)
		}
	}
	if err := finished(r, s, "its launches 1 and 2"); err != nil {
		return err
	}
	// The release reaches the peers with the refusal (its own world fault).
	var pe *irisrt.PeerRefusedError
	if err := r.Check(); err != nil && (!errors.As(err, &pe) || pe.Peer != faulty || pe.Reason != irisrt.RefusedWorldFault || !pe.Copies) {
		return fmt.Errorf("rank %d: got %v, want nothing or a *irisrt.PeerRefusedError of a copy-engine launch naming rank %d's world fault", me, err, faulty)
	}
	return nil
}

// finished waits up to releaseLimit for s to finish its work (without the
// limitless StreamSynchronize, so that a lost release fails the test
// instead of hanging it).
func finished(r *irisrt.Rank, s gpu.Stream, what string) error {
	deadline := time.Now().Add(releaseLimit)
	for {
		done, err := r.Device().StreamQuery(s)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d: the stream of %s still waits after %v: the release was lost", r.Rank(), what, releaseLimit)
		}
		time.Sleep(time.Millisecond)
	}
}

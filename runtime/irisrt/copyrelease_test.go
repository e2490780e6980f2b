package irisrt

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
)

// The release of a rank with a world fault (Plan.unblock) on the fake, with
// real goroutines: it waits for its launch stream and for the peers' words
// (TestCopyProtocolWorldFault searches every order of it), and gives up at
// Options.Timeout with a *WorldError instead of hanging.

// releaseWorld is a fake world of 2 with copy-engine plans, device time
// limit limit.
func releaseWorld(t *testing.T, limit time.Duration, peerWrites bool) (*fakegpu.Platform, []*Rank, []*Plan) {
	t.Helper()
	fake := fakegpu.New(2)
	fake.SetWaitLimit(10 * time.Second)
	fake.SetPeerValueWrites(peerWrites)
	w := newFakeWorld(t, 2, Options{Platform: fake, Timeout: limit})
	ranks := []*Rank{w.Rank(0), w.Rank(1)}
	return fake, ranks, copyPlans(t, ranks)
}

// word is the 32-bit word at device address a.
func word(t *testing.T, fake *fakegpu.Platform, a gpu.DevicePtr) uint32 {
	t.Helper()
	b, err := fake.Read(a, 4)
	require.NoError(t, err)
	return binary.LittleEndian.Uint32(b)
}

func setWord(t *testing.T, fake *fakegpu.Platform, a gpu.DevicePtr, v uint32) {
	t.Helper()
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, v)
	require.NoError(t, fake.Write(a, b))
}

// within runs f and fails the test when it takes longer than limit.
func within(t *testing.T, limit time.Duration, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("still waiting after %v", limit)
		return nil
	}
}

// TestCopyReleaseAfterPendingLaunch: rank 1 has launch 1 of the plan on
// its stream, waiting for rank 0, when it releases launch 2 after a world
// fault; rank 0 launches 1 and 2 only then. The release waits for rank 1's
// stream and for rank 0 to take launch 1's raises, so rank 0's launch 2
// passes (the release of old raised at once, and one of two raises of a
// word was lost: rank 0's launch 2 waited for ever). With stream writes
// into peers' memory and without.
func TestCopyReleaseAfterPendingLaunch(t *testing.T) {
	for _, peerWrites := range []bool{true, false} {
		fake, ranks, plans := releaseWorld(t, 5*time.Second, peerWrites)
		r1 := ranks[1]
		pending := make(chan error, 1)
		go func() { pending <- copyLaunch(plans[1], nil) }()
		for {
			select {
			case err := <-pending:
				t.Fatalf("rank 1's launch 1 returned before rank 0 launched: %v", err)
			default:
			}
			done, err := r1.dev.StreamQuery(r1.stream)
			require.NoError(t, err)
			if !done {
				break // launch 1 waits for rank 0 at its enter barrier
			}
			time.Sleep(time.Millisecond)
		}
		released := make(chan error, 1)
		start := time.Now()
		go func() { released <- plans[1].unblock(r1.stream) }()
		time.Sleep(20 * time.Millisecond) // the release waits for rank 1's stream
		err := within(t, 8*time.Second, func() error {
			for range 2 {
				if err := copyLaunch(plans[0], nil); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(t, err, "peerwrites=%v: rank 0's launches 1 and 2", peerWrites)
		require.NoError(t, <-pending, "rank 1's launch 1")
		require.NoError(t, <-released, "rank 1's release of launch 2")
		assert.Less(t, time.Since(start), 4*time.Second)
		for _, w := range copyRows {
			for q := range 2 {
				assert.Zero(t, word(t, fake, plans[0].flags+gpu.DevicePtr(w.row+4*int64(q))),
					"rank 0's %s word of rank %d: every raise taken", w.name, q)
			}
		}
	}
}

// TestCopyReleaseGivesUp: the release's waits end at Options.Timeout with a
// *WorldError naming the plan, the peer and what did not drain, instead of
// hanging: a peer word that still holds rank 1's earlier raise (rank 0 never
// took it) is not raised again, and a launch stream that does not finish
// raises nothing at all.
func TestCopyReleaseGivesUp(t *testing.T) {
	const limit = 50 * time.Millisecond
	t.Run("peer word", func(t *testing.T) {
		fake, ranks, plans := releaseWorld(t, limit, true)
		enter := plans[0].flags + copyEnterRow + 4 // rank 1's enter word on rank 0
		done := plans[0].flags + copyDoneRow + 4
		setWord(t, fake, enter, 1)
		start := time.Now()
		err := within(t, 5*time.Second, func() error { return plans[1].unblock(ranks[1].stream) })
		took := time.Since(start)
		var we *WorldError
		require.ErrorAs(t, err, &we)
		assert.True(t, errors.Is(err, ErrWorld))
		assert.Equal(t, 1, we.Rank)
		assert.Equal(t, 0, we.Peer)
		assert.Contains(t, we.Op, "copies copy_push")
		assert.Contains(t, we.Msg, "enter word there still holds")
		assert.GreaterOrEqual(t, took, limit)
		assert.Less(t, took, limit+2*time.Second)
		assert.Equal(t, uint32(1), word(t, fake, enter), "not raised again")
		assert.Zero(t, word(t, fake, done), "nothing raised on rank 0")
		// Once rank 0 took the raise, the release goes through.
		setWord(t, fake, enter, 0)
		require.NoError(t, plans[1].unblock(ranks[1].stream))
		assert.Equal(t, [2]uint32{1, 1}, [2]uint32{word(t, fake, enter), word(t, fake, done)})
	})
	t.Run("launch stream", func(t *testing.T) {
		fake, ranks, plans := releaseWorld(t, limit, true)
		r1 := ranks[1]
		stuck := plans[1].flags + copyEnterRow // a word of rank 1 nobody raises
		waited := make(chan error, 1)
		go func() { waited <- r1.dev.WaitValue32(stuck, 1, r1.stream) }()
		for {
			done, err := r1.dev.StreamQuery(r1.stream)
			require.NoError(t, err)
			if !done {
				break
			}
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		err := within(t, 5*time.Second, func() error { return plans[1].unblock(r1.stream) })
		took := time.Since(start)
		var we *WorldError
		require.ErrorAs(t, err, &we)
		assert.Equal(t, -1, we.Peer)
		assert.Contains(t, we.Op, "copies copy_push")
		assert.Contains(t, we.Msg, "did not finish within")
		assert.GreaterOrEqual(t, took, limit)
		for _, w := range copyRows {
			assert.Zero(t, word(t, fake, plans[0].flags+gpu.DevicePtr(w.row+4)), "nothing raised: rank 0's %s word", w.name)
		}
		setWord(t, fake, stuck, 1)
		require.NoError(t, <-waited)
	})
}

// TestCopyReleaseDuringGlobalCapture: in a multi-process world a rank
// captures in global mode, where CUDA refuses any stream query and breaks
// the capture: a release made while it captures raises at once, without
// its waits, and leaves the capture alone.
func TestCopyReleaseDuringGlobalCapture(t *testing.T) {
	fake := fakegpu.New(2)
	fake.SetWaitLimit(10 * time.Second)
	ranks := joinFakeProcesses(t, fake, 2, Options{HeapBytes: 1 << 20, RendezvousTimeout: 10 * time.Second})
	t.Cleanup(func() { closeAll(t, ranks) })
	plans := copyPlans(t, ranks)
	r1 := ranks[1]
	require.Equal(t, gpu.CaptureGlobal, r1.CaptureMode())
	g, err := r1.Capture(r1.stream, func() error {
		if st, err := r1.dev.CaptureStatus(r1.stream); err != nil || st != gpu.CaptureActive {
			return errors.New("not capturing")
		}
		return plans[1].unblock(r1.stream)
	})
	require.NoError(t, err, "the release, and the capture around it")
	require.NoError(t, g.Destroy())
	for _, w := range copyRows {
		assert.Equal(t, uint32(1), word(t, fake, plans[0].flags+gpu.DevicePtr(w.row+4)), "rank 0's %s word of rank 1: raised", w.name)
	}
}

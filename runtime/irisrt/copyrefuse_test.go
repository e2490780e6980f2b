package irisrt

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copyPlans makes a copy-engine plan without copies (its barriers and its
// seen copy alone) on every rank.
func copyPlans(t *testing.T, ranks []*Rank) []*Plan {
	t.Helper()
	plans := make([]*Plan, len(ranks))
	for k, err := range eachProcess(ranks, func(r *Rank) error {
		p, err := newPlan(r, core.PlanSpec{Op: "copies", Variant: "copy_push", Copy: true, Threads: 1, Blocks: 1,
			Barriers: []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierNone}, Capturable: []irismodel.Barrier{irismodel.BarrierDevice}})
		plans[r.rank] = p
		return err
	}) {
		require.NoError(t, err, "rank %d", k)
	}
	return plans
}

// copyLaunch is launch n of p in mode device as Plan.launch and the
// interpreter make it, refused with refuse when that is not nil.
func copyLaunch(p *Plan, refuse error) error {
	s := p.r.stream
	n := p.r.nextLaunch(true)
	if refuse != nil {
		return p.refuse(s, n, irismodel.BarrierDevice, refuse)
	}
	if _, err := p.launch(s, irismodel.BarrierDevice, p.argsFor(), n, p.check(n, irismodel.BarrierDevice, nil)); err != nil {
		return err
	}
	if err := p.r.dev.StreamSynchronize(s); err != nil {
		return err
	}
	return p.r.Check()
}

// TestCopyRefusalAcrossProcesses: in a multi-process world the refusal of
// a copy-engine launch releases the peer's stream waits and reaches its
// Check through the seen copy (no host path carries the error: Err nil),
// once; the next launch meets. With stream memory operations into peers'
// memory and, as from CUDA 13.1, without (the flags copied).
func TestCopyRefusalAcrossProcesses(t *testing.T) {
	for _, peerWrites := range []bool{true, false} {
		t.Run(fmt.Sprintf("peerwrites=%v", peerWrites), func(t *testing.T) {
			fake := fakegpu.New(2)
			fake.SetPeerValueWrites(peerWrites)
			fake.SetWaitLimit(5 * time.Second)
			ranks := joinFakeProcesses(t, fake, 2, Options{HeapBytes: 1 << 20, RendezvousTimeout: 10 * time.Second})
			t.Cleanup(func() { closeAll(t, ranks) })
			plans := copyPlans(t, ranks)
			errs := eachProcess(ranks, func(r *Rank) error {
				if r.rank == 1 {
					return copyLaunch(plans[1], &DTypeError{Op: "copies", Name: "input", Want: irismodel.BF16, Got: irismodel.F32})
				}
				return copyLaunch(plans[0], nil)
			})
			require.ErrorIs(t, errs[1], ErrDType)
			var pe *PeerRefusedError
			require.ErrorAs(t, errs[0], &pe)
			assert.Equal(t, PeerRefusedError{Rank: 0, Peer: 1, Launch: 1, Reason: RefusedDType, Copies: true}, *pe)
			assert.Contains(t, pe.Error(), "rank 0's results of launch 1 are invalid")
			assert.Contains(t, pe.Error(), "The world stays usable")
			require.NoError(t, ranks[0].Check(), "reported once")
			for k, err := range eachProcess(ranks, func(r *Rank) error { return copyLaunch(plans[r.rank], nil) }) {
				require.NoError(t, err, "rank %d: the next launch", k)
			}
		})
	}
}

// TestCopyRefusalEverywhere: a copy-engine launch refused on every rank
// meets in the hollow barriers and reports nothing (nobody copied).
func TestCopyRefusalEverywhere(t *testing.T) {
	fake := fakegpu.New(3)
	fake.SetWaitLimit(5 * time.Second)
	w, err := NewLocalWorld(3, Options{Platform: fake, HeapBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	plans := copyPlans(t, w.ranks)
	for k, err := range eachProcess(w.ranks, func(r *Rank) error {
		return copyLaunch(plans[r.rank], &ParamError{})
	}) {
		require.ErrorIs(t, err, ErrParam, "rank %d", k)
	}
	for k, err := range eachProcess(w.ranks, func(r *Rank) error { return copyLaunch(plans[r.rank], nil) }) {
		require.NoError(t, err, "rank %d: the next launch, no refusal reported", k)
	}
}

// TestCopyRefusalWorldFault: a rank with a world fault releases its peers'
// copy-engine launches by writing its words from the control stream (no
// wait of its own); the peer learns the reason. With and without stream
// memory operations into peers' memory.
func TestCopyRefusalWorldFault(t *testing.T) {
	for _, peerWrites := range []bool{true, false} {
		t.Run(fmt.Sprintf("peerwrites=%v", peerWrites), func(t *testing.T) {
			fake := fakegpu.New(2)
			fake.SetPeerValueWrites(peerWrites)
			fake.SetWaitLimit(5 * time.Second)
			w, err := NewLocalWorld(2, Options{Platform: fake, HeapBytes: 1 << 20})
			require.NoError(t, err)
			t.Cleanup(func() { w.Close() })
			plans := copyPlans(t, w.ranks)
			errs := eachProcess(w.ranks, func(r *Rank) error {
				if r.rank == 1 {
					return copyLaunch(plans[1], &BarrierTimeoutError{Rank: 1, Peer: 0})
				}
				return copyLaunch(plans[0], nil)
			})
			require.ErrorIs(t, errs[1], ErrBarrierTimeout)
			var pe *PeerRefusedError
			require.ErrorAs(t, errs[0], &pe)
			assert.Equal(t, RefusedWorldFault, pe.Reason)
			assert.True(t, pe.Copies)
			assert.Contains(t, pe.Error(), "Rank 1 has a world fault: close the world")
			assert.True(t, errors.Is(pe.Err, ErrBarrierTimeout), "in process, rank 1's own error")
		})
	}
}

// TestCopyLanesLifecycle: a copy-engine plan of a world of 3 makes two
// streams and three events a rank (its lanes) by default, none with
// IRISGEN_COPY_STREAMS=1, n-1 streams and n events with n; Close destroys
// them, and so does the world's Close for a plan left open.
func TestCopyLanesLifecycle(t *testing.T) {
	for _, c := range []struct {
		env             string
		streams, events int
	}{{"", 2, 3}, {"1", 0, 0}, {"2", 1, 2}, {"5", 4, 5}} {
		t.Run("IRISGEN_COPY_STREAMS="+c.env, func(t *testing.T) {
			t.Setenv("IRISGEN_COPY_STREAMS", c.env)
			fake := fakegpu.New(3)
			w, err := NewLocalWorld(3, Options{Platform: fake, HeapBytes: 1 << 20})
			require.NoError(t, err)
			s0, e0 := fake.LiveStreamsAndEvents()
			plans := copyPlans(t, w.ranks)
			s1, e1 := fake.LiveStreamsAndEvents()
			assert.Equal(t, 3*c.streams, s1-s0, "streams of the plans")
			assert.Equal(t, 3*c.events, e1-e0, "events of the plans")
			for k, err := range eachProcess(w.ranks, func(r *Rank) error { return copyLaunch(plans[r.rank], nil) }) {
				require.NoError(t, err, "rank %d", k)
			}
			for k, err := range eachProcess(w.ranks, func(r *Rank) error { return plans[r.rank].Close() }) {
				require.NoError(t, err, "rank %d", k)
			}
			s2, e2 := fake.LiveStreamsAndEvents()
			assert.Equal(t, [2]int{s0, e0}, [2]int{s2, e2}, "after Close")
			copyPlans(t, w.ranks) // left open
			require.NoError(t, w.Close())
			s3, e3 := fake.LiveStreamsAndEvents()
			assert.Equal(t, [2]int{0, 0}, [2]int{s3, e3}, "after the world's Close")
		})
	}
}

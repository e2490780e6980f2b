package irisrt

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkGroups checks group ranks made from a 4-rank world split into
// {0, 1} and {2, 3}: numbering, heaps at one offset within a group, the
// ctx's bases, and host barriers and plans of the two groups side by side.
func checkGroups(t *testing.T, world []*Rank, groups []*Rank) {
	t.Helper()
	off := groups[0].Heap().Base(0) - world[0].Heap().Base(0)
	for k, g := range groups {
		require.Equal(t, world[k], g.Parent())
		assert.Equal(t, k%2, g.Rank())
		assert.Equal(t, 2, g.World())
		first := k - k%2 // the group's first world rank
		for i := 0; i < 2; i++ {
			assert.Equal(t, world[k].Heap().Base(first+i)+off, g.Heap().Base(i), "rank %d: group base %d", k, i)
		}
		ctx := g.Ctx()
		assert.Equal(t, uint64(g.Heap().Base(1)), leU64(ctx[8:]), "ctx base[1]")
		assert.Zero(t, leU64(ctx[16:]), "ctx base[2] unused")
		assert.Equal(t, uint32(2), leU32(ctx[ctxOffWorld:]))
		assert.Equal(t, uint32(k%2), leU32(ctx[ctxOffRank:]))
	}
}

func leU64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
func leU32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

func pairOf(rank int) []int { return []int{rank - rank%2, rank - rank%2 + 1} }

func TestGroupsInProcess(t *testing.T) {
	w := kernelWorld(t, 4, testHash)
	groups := make([]*Rank, 4)
	require.NoError(t, w.Run(func(r *Rank) error {
		g, err := r.NewGroup(pairOf(r.Rank()), 1<<16)
		groups[r.Rank()] = g
		return err
	}))
	checkGroups(t, w.Ranks(), groups)
	// Each group meets on its own: a group that never arrives holds only its
	// own members back.
	require.NoError(t, w.Run(func(r *Rank) error {
		g := groups[r.Rank()]
		for i := 0; i < 20; i++ {
			if err := g.HostBarrier(g.Stream()); err != nil {
				return err
			}
		}
		pl, err := NewPlan(g, testSpec())
		if err != nil {
			return err
		}
		if !g.Heap().Contains(pl.Buffer("scratch"), 1000) || r.Heap().FreeBytesLeft() != groups[0].Parent().Heap().FreeBytesLeft() {
			return errors.New("a group's plan must live on the group's heap, and the world's heaps stay equal")
		}
		return pl.Close()
	}))
	// Two more groups over the same ranks (here the whole world) have heaps
	// of their own: nothing they allocate is shared.
	var a, b [4]*Rank
	require.NoError(t, w.Run(func(r *Rank) error {
		var err error
		if a[r.Rank()], err = r.NewGroup([]int{0, 1, 2, 3}, 1<<12); err != nil {
			return err
		}
		b[r.Rank()], err = r.NewGroup([]int{0, 1, 2, 3}, 1<<12)
		return err
	}))
	assert.NotEqual(t, a[0].Heap().Base(0), b[0].Heap().Base(0))
	assert.False(t, a[0].Heap().Contains(b[0].Heap().Base(0), 1))
	require.NoError(t, w.Run(func(r *Rank) error {
		return errors.Join(a[r.Rank()].Close(), b[r.Rank()].Close(), groups[r.Rank()].Close())
	}))
	for _, r := range w.Ranks() {
		assert.Equal(t, r.Heap().Size(), r.Heap().FreeBytesLeft(), "Close frees the reservations")
	}
}

func TestGroupErrors(t *testing.T) {
	w := kernelWorld(t, 4, testHash)
	err := w.Run(func(r *Rank) error {
		members := pairOf(r.Rank())
		if r.Rank() == 1 {
			members = []int{0, 1, 2}
		}
		_, err := r.NewGroup(members, 1<<12)
		return err
	})
	var we *WorldError
	require.ErrorAs(t, err, &we)
	assert.Contains(t, err.Error(), "every member of a group must pass the same list")
	for _, r := range w.Ranks() {
		assert.Equal(t, r.Heap().Size(), r.Heap().FreeBytesLeft(), "nothing reserved when the lists disagree")
	}
	err = w.Run(func(r *Rank) error {
		_, err := r.NewGroup(pairOf(r.Rank()), int64(1<<12+r.Rank()*256))
		return err
	})
	require.ErrorContains(t, err, "every rank must pass the same heapBytes")
	for members, want := range map[string][]int{"leave this rank out": {2, 3}, "ascending": {1, 0}, "not a rank of this": {0, 9}} {
		err = w.Run(func(r *Rank) error {
			m := pairOf(r.Rank())
			if r.Rank() == 0 {
				m = want
			}
			_, err := r.NewGroup(m, 1<<12)
			return err
		})
		require.ErrorContains(t, err, members)
	}
	err = w.Run(func(r *Rank) error {
		g, err := r.NewGroup(pairOf(r.Rank()), 1<<12)
		if err != nil {
			return err
		}
		_, err = g.NewGroup([]int{g.Rank()}, 256)
		return errors.Join(err, g.Close())
	})
	require.ErrorContains(t, err, "not from a group")
}

func TestGroupsInMultiProcessWorld(t *testing.T) {
	opts := kernelOptions(4, testHash)
	opts.HeapBytes, opts.RendezvousTimeout = 1<<16, 10*time.Second
	ranks := joinFakeProcesses(t, opts.Platform.(*fakegpu.Platform), 4, opts)
	groups := make([]*Rank, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for k, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := r.NewGroup(pairOf(k), 1<<14)
			groups[k], errs[k] = g, err
			for i := 0; i < 10 && err == nil; i++ {
				err = g.HostBarrier(g.Stream())
			}
			if err == nil {
				var pl *Plan
				if pl, err = NewPlan(g, testSpec()); err == nil {
					err = pl.Close()
				}
			}
			errs[k] = err
		}()
	}
	wg.Wait()
	for k, err := range errs {
		require.NoError(t, err, "rank %d", k)
	}
	checkGroups(t, ranks, groups)
	for k := range groups {
		wg.Add(1)
		go func() { defer wg.Done(); errs[k] = groups[k].Close() }()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	closeAll(t, ranks)
}

// A rank that fails inside World.Run releases the members of its groups at
// once, as it does the world's rendezvous.
func TestGroupAbortedWithTheWorld(t *testing.T) {
	opts := kernelOptions(2, testHash)
	opts.RendezvousTimeout = 30 * time.Second
	w := newFakeWorld(t, 2, opts)
	groups := make([]*Rank, 2)
	require.NoError(t, w.Run(func(r *Rank) error {
		var err error
		groups[r.Rank()], err = r.NewGroup([]int{0, 1}, 1<<12)
		return err
	}))
	start := time.Now()
	err := w.Run(func(r *Rank) error {
		if r.Rank() == 1 {
			return errors.New("boom")
		}
		return groups[0].HostBarrier(groups[0].Stream())
	})
	require.ErrorContains(t, err, "boom")
	var we *WorldError
	require.ErrorAs(t, err, &we, "rank 0 learns of it through the group")
	assert.Contains(t, we.Error(), "world rank 1 failed")
	assert.Less(t, time.Since(start), 10*time.Second)
	require.NoError(t, w.Run(func(r *Rank) error { return groups[r.Rank()].HostBarrier(groups[r.Rank()].Stream()) }), "the next Run resets the groups")
}

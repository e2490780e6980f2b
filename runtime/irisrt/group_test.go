package irisrt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
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
		ctx := g.ctxBytes()
		assert.Equal(t, uint64(g.Heap().Base(1)), leU64(ctx[8:]), "ctx base[1]")
		assert.Zero(t, leU64(ctx[16:]), "ctx base[2] unused")
		assert.Equal(t, uint32(2), leU32(ctx[core.CtxOffWorld:]))
		assert.Equal(t, uint32(k%2), leU32(ctx[core.CtxOffRank:]))
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
		pl, err := newPlan(g, testSpec())
		if err != nil {
			return err
		}
		if !g.Heap().Contains(pl.buffer("scratch"), 1000) || r.Heap().FreeBytesLeft() != groups[0].Parent().Heap().FreeBytesLeft() {
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
		assert.Equal(t, r.Heap().Size()-core.ControlBytes, r.Heap().FreeBytesLeft(), "Close frees the reservations")
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
		assert.Equal(t, r.Heap().Size()-core.ControlBytes, r.Heap().FreeBytesLeft(), "nothing reserved when the lists disagree")
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
				if pl, err = newPlan(g, testSpec()); err == nil {
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

// wholeGPUs is the rule of SharedGPUGroupError counted another way: a group
// holds whole GPUs when the ranks on the GPUs it touches number as many as
// its members (it always holds some of each, so only then all of each).
func wholeGPUs(members, gpus []int) bool {
	touched := map[int]bool{}
	for _, m := range members {
		touched[gpus[m]] = true
	}
	n := 0
	for _, g := range gpus {
		if touched[g] {
			n++
		}
	}
	return n == len(members)
}

// sharedLayout places n ranks on count GPUs as both kinds of world do:
// rank i (LOCAL_RANK i) on GPU i mod count.
func sharedLayout(n, count int) []int {
	gpus := make([]int, n)
	for i := range gpus {
		gpus[i] = i % count
	}
	return gpus
}

// TestSharedGPUGroupRule enumerates every layout up to 8 ranks: worlds of
// n ranks on 1 to n GPUs, every group of them. A group is refused exactly
// when it splits the ranks of a GPU, and the error names that GPU, all its
// ranks and the group. On as many GPUs as ranks nothing is refused.
func TestSharedGPUGroupRule(t *testing.T) {
	refused, want := 0, 0
	for n := 1; n <= 8; n++ {
		for count := 1; count <= n; count++ {
			// Of the 2^n-1 groups, the unions of whole GPUs are allowed:
			// 2^count-1 of them.
			want += (1 << n) - (1 << count)
			gpus := sharedLayout(n, count)
			for set := 1; set < 1<<n; set++ {
				var members []int
				for i := range n {
					if set&(1<<i) != 0 {
						members = append(members, i)
					}
				}
				err := splitsSharedGPU(3, [][]int{members}, gpus)
				what := fmt.Sprintf("world %d on %d GPUs, group %v", n, count, members)
				if wholeGPUs(members, gpus) {
					require.NoError(t, err, what)
					continue
				}
				refused++
				require.True(t, count < n, what+": refused although no GPU is shared")
				var se *SharedGPUGroupError
				require.ErrorAs(t, err, &se, what)
				require.ErrorIs(t, err, ErrSharedGPU)
				assert.Equal(t, 3, se.Rank)
				assert.Equal(t, members, se.Members, what)
				var on []int
				for q, g := range gpus {
					if g == se.GPU {
						on = append(on, q)
					}
				}
				assert.Equal(t, on, se.OnGPU, what)
				inside := 0
				for _, q := range on {
					if slices.Contains(members, q) {
						inside++
					}
				}
				assert.True(t, inside > 0 && inside < len(on), "%s: GPU %d is not split", what, se.GPU)
			}
		}
	}
	assert.Equal(t, want, refused, "refused layouts")
	// The layout of the deadlock: a world of 4 on one GPU, pairs.
	err := splitsSharedGPU(0, [][]int{{0, 1}, {0, 1}, {2, 3}, {2, 3}}, sharedLayout(4, 1))
	require.ErrorContains(t, err, "group [0 1] holds some of the ranks [0 1 2 3] that share GPU 0 (Options.ShareGPUs, IRISGEN_SHARE_GPUS) but not [2 3]")
	assert.Contains(t, err.Error(), "deadlocks until the barrier timeout")
	assert.Contains(t, err.Error(), "or run the world on as many GPUs as ranks")
}

// partitions returns every partition of 0..n-1 into groups, as each rank's
// group (ranks ascending within a group).
func partitions(n int) [][][]int {
	var out [][][]int
	var rec func(i int, blocks [][]int)
	rec = func(i int, blocks [][]int) {
		if i == n {
			mine := make([][]int, n)
			for _, b := range blocks {
				for _, m := range b {
					mine[m] = slices.Clone(b)
				}
			}
			out = append(out, mine)
			return
		}
		for k := range blocks {
			blocks[k] = append(blocks[k], i)
			rec(i+1, blocks)
			blocks[k] = blocks[k][:len(blocks[k])-1]
		}
		rec(i+1, append(blocks, []int{i}))
	}
	rec(0, nil)
	return out
}

// TestSharedGPUGroupsInProcess: in-process worlds of 3 and 4 ranks on 1 to
// n GPUs (ranks sharing them), every partition of the world into groups:
// NewGroup refuses on every rank exactly when a group splits a GPU's
// ranks, reserving nothing; otherwise the groups work.
func TestSharedGPUGroupsInProcess(t *testing.T) {
	for n := 3; n <= 4; n++ {
		for count := 1; count <= n; count++ {
			opts := kernelOptions(count, testHash)
			opts.ShareGPUs = true
			w := newFakeWorld(t, n, opts)
			gpus := sharedLayout(n, count)
			for _, part := range partitions(n) {
				whole := true
				for _, g := range part {
					whole = whole && wholeGPUs(g, gpus)
				}
				errs := make([]error, n)
				require.NoError(t, w.Run(func(r *Rank) error {
					g, err := r.NewGroup(part[r.Rank()], 1<<12)
					if errs[r.Rank()] = err; err != nil {
						return nil
					}
					return errors.Join(g.HostBarrier(g.Stream()), g.Close())
				}))
				what := fmt.Sprintf("world %d on %d GPUs, groups %v", n, count, part)
				for k, err := range errs {
					if whole {
						require.NoError(t, err, "%s: rank %d", what, k)
						continue
					}
					var se *SharedGPUGroupError
					require.ErrorAs(t, err, &se, "%s: rank %d", what, k)
					assert.Equal(t, k, se.Rank)
				}
				for k, r := range w.Ranks() {
					require.Equal(t, r.Heap().Size()-core.ControlBytes, r.Heap().FreeBytesLeft(), "%s: rank %d's heap", what, k)
				}
			}
		}
	}
}

// TestSharedGPUGroupsProcessWorld: the same rule in a multi-process world
// (LOCAL_RANK i on GPU i mod 2): the pairs {0,1}, {2,3} split both GPUs and
// are refused on every rank; the pairs {0,2}, {1,3} are a GPU each and
// work.
func TestSharedGPUGroupsProcessWorld(t *testing.T) {
	opts := kernelOptions(2, testHash)
	opts.HeapBytes, opts.RendezvousTimeout, opts.ShareGPUs = 1<<16, 10*time.Second, true
	ranks := joinFakeProcesses(t, opts.Platform.(*fakegpu.Platform), 4, opts)
	defer closeAll(t, ranks)
	errs := eachProcess(ranks, func(r *Rank) error {
		_, err := r.NewGroup(pairOf(r.Rank()), 1<<12)
		return err
	})
	for k, err := range errs {
		require.ErrorIs(t, err, ErrSharedGPU, "rank %d", k)
	}
	errs = eachProcess(ranks, func(r *Rank) error {
		g, err := r.NewGroup([]int{r.Rank() % 2, r.Rank()%2 + 2}, 1<<12)
		if err != nil {
			return err
		}
		pl, err := newPlan(g, testSpec())
		if err != nil {
			return errors.Join(err, g.Close())
		}
		return errors.Join(g.HostBarrier(g.Stream()), pl.Close(), g.Close())
	})
	for k, err := range errs {
		require.NoError(t, err, "rank %d", k)
	}
}

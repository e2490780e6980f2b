package irisrt

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeRecord fills error record i of r as a kernel would, through the
// device address.
func writeRecord(t *testing.T, r *Rank, i int, code uint32, info uint64) {
	t.Helper()
	rec := make([]byte, core.ErrRecordBytes)
	le := binary.LittleEndian
	le.PutUint32(rec, code)
	le.PutUint32(rec[4:], uint32(r.Rank()))
	le.PutUint32(rec[8:], uint32(1-r.Rank()))
	le.PutUint32(rec[12:], 3)
	le.PutUint64(rec[16:], 9)
	le.PutUint64(rec[24:], info)
	require.NoError(t, fakeOf(r).Write(r.errDev+gpu.DevicePtr(i*core.ErrRecordBytes), rec))
}

// graphRank is a one-rank world with a plan and a graph of one launch of it.
func graphRank(t *testing.T) (*Rank, *fakegpu.Platform, *Plan, *Graph) {
	t.Helper()
	w := kernelWorld(t, 1, testHash)
	r := w.Rank(0)
	pl, err := newPlan(r, testSpec())
	require.NoError(t, err)
	s := r.Stream()
	g, err := r.Capture(s, func() error { return pl.testLaunch(s, irismodel.BarrierDevice, pl.testArgs()) })
	require.NoError(t, err)
	return r, fakeOf(r), pl, g
}

// TestFaultRecords enumerates what each record and code does: which error
// Check returns, whether it stays, and whether launches (eager, host
// barrier, graph) are refused.
func TestFaultRecords(t *testing.T) {
	for _, c := range []struct {
		name    string
		record  int
		code    uint32
		check   error // the sentinel Check's error matches, or nil
		world   bool  // sticky, launches refused
		message string
	}{
		{"timeout", 0, core.ErrCodeTimeout, ErrBarrierTimeout, true, "close the world and start it again"},
		{"unknown world fault", 0, 9, ErrDeviceFault, true, "close the world and start it again"},
		{"being written", 0, core.ErrCodeWriting, nil, false, ""},
		{"index out of range", 1, core.ErrCodeIndex, ErrDeviceFault, false, "an index out of range (value 77; nothing was written for it); the call's results are incomplete"},
		{"capacity exceeded", 1, core.ErrCodeCapacity, ErrDeviceFault, false, "receive capacity (77 rows; the rest were dropped)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, fake, pl, g := graphRank(t)
			s := r.Stream()
			writeRecord(t, r, c.record, c.code, 77)
			fake.ClearLaunches()

			err := r.Check()
			if c.check == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, c.check)
				assert.Contains(t, err.Error(), c.message)
			}
			if c.world {
				require.ErrorIs(t, r.Check(), c.check, "a world fault stays")
				for _, mode := range []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierNone, irismodel.BarrierHost} {
					require.ErrorIs(t, pl.testLaunch(s, mode, pl.testArgs()), c.check, mode.String())
				}
				require.ErrorIs(t, g.Launch(s), c.check)
				require.ErrorIs(t, r.HostBarrier(s), c.check)
				assert.Empty(t, fake.Launches(), "nothing launched on an out-of-step world")
				return
			}
			require.NoError(t, r.Check(), "a call fault is reported once")
			for _, mode := range []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierNone, irismodel.BarrierHost} {
				require.NoError(t, pl.testLaunch(s, mode, pl.testArgs()), mode.String())
			}
			require.NoError(t, g.Replay(s))
			assert.Len(t, fake.Launches(), 4)
		})
	}
}

// TestFaultUnderReplay: a kernel replayed from a graph raises a call fault,
// then a world fault; Replay reports each, the world stays usable after the
// first and refuses replays after the second.
func TestFaultUnderReplay(t *testing.T) {
	r, fake, _, g := graphRank(t)
	s := r.Stream()
	defer g.Destroy()
	raise := map[int]uint32{} // replay -> code
	replays := 0
	fake.OnLaunch(func(l fakegpu.Launch) error {
		if l.Graph == 0 {
			return nil
		}
		replays++
		if code, ok := raise[replays]; ok {
			rec, i := r, 1
			if code == core.ErrCodeTimeout {
				i = 0
			}
			writeRecord(t, rec, i, code, uint64(replays))
		}
		return nil
	})
	defer fake.OnLaunch(nil)
	raise[2], raise[4] = core.ErrCodeIndex, core.ErrCodeTimeout
	require.NoError(t, g.Replay(s))
	var de *DeviceFaultError
	require.ErrorAs(t, g.Replay(s), &de, "the fault of replay 2")
	assert.Equal(t, uint64(2), de.Info)
	assert.False(t, de.World)
	require.NoError(t, g.Replay(s), "replay 3: the world is usable")
	require.ErrorIs(t, g.Replay(s), ErrBarrierTimeout, "replay 4")
	require.ErrorIs(t, g.Replay(s), ErrBarrierTimeout, "refused")
	assert.Equal(t, 4, replays, "no replay after the world fault")
}

// TestFaultReachesEveryRank: a rank's fault comes back from the host
// barrier on every rank (the others name it), the ranks stay in step, and
// a call fault leaves the world usable; in both kinds of world.
func TestFaultReachesEveryRank(t *testing.T) {
	check := func(t *testing.T, ranks []*Rank, run func(func(r *Rank) error) []error) {
		writeRecord(t, ranks[1], 1, core.ErrCodeIndex, 5)
		errs := run(func(r *Rank) error { return r.HostBarrier(r.Stream()) })
		require.ErrorIs(t, errs[1], ErrDeviceFault)
		var we *WorldError
		require.ErrorAs(t, errs[0], &we)
		assert.Equal(t, 1, we.Peer)
		assert.Contains(t, we.Error(), "an index out of range (value 5")
		for _, err := range run(func(r *Rank) error { return r.HostBarrier(r.Stream()) }) {
			require.NoError(t, err, "the world stays usable after a call fault")
		}
		writeRecord(t, ranks[1], 0, core.ErrCodeTimeout, 0)
		for i := 0; i < 2; i++ {
			errs = run(func(r *Rank) error { return r.HostBarrier(r.Stream()) })
			require.ErrorIs(t, errs[1], ErrBarrierTimeout)
			require.ErrorIs(t, errs[0], ErrWorld)
			assert.Contains(t, errs[0].Error(), "device barrier timed out")
		}
	}
	t.Run("in-process", func(t *testing.T) {
		w := newFakeWorld(t, 2, Options{})
		check(t, w.Ranks(), func(fn func(r *Rank) error) []error {
			errs := make([]error, 2)
			_ = w.Run(func(r *Rank) error { errs[r.Rank()] = fn(r); return nil })
			return errs
		})
	})
	t.Run("multi-process", func(t *testing.T) {
		ranks := joinFakeProcesses(t, fakegpu.New(2), 2, Options{HeapBytes: 1 << 16, RendezvousTimeout: 10 * time.Second})
		defer closeAll(t, ranks)
		check(t, ranks, func(fn func(r *Rank) error) []error { return eachProcess(ranks, fn) })
	})
}

// eachProcess runs fn on every rank of a process world at once.
func eachProcess(ranks []*Rank, fn func(r *Rank) error) []error {
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for k, r := range ranks {
		wg.Add(1)
		go func() { defer wg.Done(); errs[k] = fn(r) }()
	}
	wg.Wait()
	return errs
}

// TestRecoveryAfterWorldFault: after a timeout the world closes cleanly
// (graphs, plans and heaps included) and a new world in the same process
// works; in both kinds of world.
func TestRecoveryAfterWorldFault(t *testing.T) {
	t.Run("in-process", func(t *testing.T) {
		opts := kernelOptions(2, testHash)
		fake := opts.Platform.(*fakegpu.Platform)
		opts.HeapBytes = 1 << 20
		w, err := NewLocalWorld(2, opts)
		require.NoError(t, err)
		var g *Graph
		require.NoError(t, w.Run(func(r *Rank) error {
			pl, err := newPlan(r, testSpec())
			if err != nil {
				return err
			}
			gr, err := r.Capture(r.Stream(), func() error { return pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs()) })
			if r.Rank() == 0 {
				g = gr
			}
			return err // plan and graph left open on purpose
		}))
		writeRecord(t, w.Rank(0), 0, core.ErrCodeTimeout, 0)
		require.ErrorIs(t, w.Rank(0).Check(), ErrBarrierTimeout)
		require.NoError(t, w.Close())
		assert.Zero(t, fake.LiveRegions(), "everything released")
		assert.Nil(t, fake.GraphLaunches(g.Exec()), "the graph destroyed")
		require.NoError(t, g.Destroy(), "destroying it after the world is fine")

		w, err = NewLocalWorld(2, opts)
		require.NoError(t, err)
		defer w.Close()
		fake.ClearLaunches()
		require.NoError(t, w.Run(func(r *Rank) error {
			pl, err := newPlan(r, testSpec())
			if err != nil {
				return err
			}
			if err := r.Check(); err != nil {
				return err
			}
			return errors.Join(pl.testLaunch(r.Stream(), irismodel.BarrierDevice, pl.testArgs()), r.HostBarrier(r.Stream()), pl.Close())
		}))
		assert.Len(t, fake.Launches(), 2)
	})
	t.Run("multi-process", func(t *testing.T) {
		fake := fakegpu.New(2)
		opts := Options{HeapBytes: 1 << 16, RendezvousTimeout: 10 * time.Second}
		ranks := joinFakeProcesses(t, fake, 2, opts)
		writeRecord(t, ranks[1], 0, core.ErrCodeTimeout, 0)
		closeAll(t, ranks)
		assert.Zero(t, fake.LiveRegions())
		ranks = joinFakeProcesses(t, fake, 2, opts)
		for _, err := range eachProcess(ranks, func(r *Rank) error { return errors.Join(r.Check(), r.HostBarrier(r.Stream())) }) {
			require.NoError(t, err)
		}
		closeAll(t, ranks)
	})
}

// TestGraphHoldsPlansAndTensors: while a graph captured through
// Rank.Capture lives, its plans cannot be closed and its heap tensors (and
// the group they live in) cannot be freed, on every rank alike; after
// Destroy they can.
func TestGraphHoldsPlansAndTensors(t *testing.T) {
	w := kernelWorld(t, 2, testHash)
	type state struct {
		pl, other  *Plan
		x, y, z    Tensor
		g          *Graph
		group      *Rank
		gt         Tensor
		groupPlan  *Plan
		groupGraph *Graph
	}
	st := make([]*state, 2)
	require.NoError(t, w.Run(func(r *Rank) error {
		s := &state{}
		st[r.Rank()] = s
		var err error
		h := r.Heap()
		s.x, _ = h.Alloc(irismodel.F32, 16)
		s.y, _ = h.Alloc(irismodel.F32, 16)
		s.z, _ = h.Alloc(irismodel.F32, 16) // not used by the graph
		if s.pl, err = newPlan(r, testSpec()); err != nil {
			return err
		}
		if s.other, err = newPlan(r, testSpec()); err != nil {
			return err
		}
		if s.group, err = r.NewGroup([]int{0, 1}, 1<<14); err != nil {
			return err
		}
		s.gt, _ = s.group.Heap().Alloc(irismodel.F32, 16)
		if s.groupPlan, err = newPlan(s.group, testSpec()); err != nil {
			return err
		}
		st := r.Stream()
		s.g, err = r.Capture(st, func() error {
			return errors.Join(
				s.pl.testLaunch(st, irismodel.BarrierDevice, s.pl.testArgs().Staged("input", s.x.Slice(4, 8)).Ptr(s.y.Ptr).Ptr(0x40)), // 0x40: not on the heap
				s.groupPlan.testLaunch(st, irismodel.BarrierDevice, s.groupPlan.testArgs().Ptr(s.gt.Ptr)))
		})
		return err
	}))
	refused := func(err error) {
		require.ErrorIs(t, err, ErrInUse)
		assert.Contains(t, err.Error(), "destroy them (Graph.Destroy) on every rank first")
	}
	require.NoError(t, w.Run(func(r *Rank) error {
		s := st[r.Rank()]
		h := r.Heap()
		refused(h.Free(s.x))
		refused(h.Free(s.y))
		refused(s.group.Heap().Free(s.gt))
		refused(s.pl.Close())
		refused(s.groupPlan.Close())
		refused(s.group.Close())
		require.NoError(t, h.Free(s.z), "a tensor the graph does not use")
		require.NoError(t, s.other.Close(), "a plan the graph does not launch")
		return r.HostBarrier(r.Stream()) // every refusal left the heaps equal
	}))
	// Only rank 0 destroys its graph: rank 1's refusal to close the plan
	// reaches rank 0, and neither frees it.
	require.NoError(t, st[0].g.Destroy())
	errs := make([]error, 2)
	_ = w.Run(func(r *Rank) error { errs[r.Rank()] = st[r.Rank()].pl.Close(); return nil })
	require.ErrorIs(t, errs[1], ErrInUse)
	require.ErrorIs(t, errs[0], ErrWorld)
	assert.Contains(t, errs[0].Error(), "in use by")
	require.NoError(t, st[1].g.Destroy())
	require.NoError(t, w.Run(func(r *Rank) error {
		s := st[r.Rank()]
		h := r.Heap()
		return errors.Join(s.pl.Close(), s.groupPlan.Close(), h.Free(s.x), h.Free(s.y), s.group.Heap().Free(s.gt), s.group.Close(), r.HostBarrier(r.Stream()))
	}))
}

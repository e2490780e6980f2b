package irisrt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/internal/fixtures"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kernelModel plays, for the fake platform, what the device header does
// with launch numbers and checks (irisgen.h: begin, spin's slow path and
// sync's check), in the order a test makes its launches: at a launch it
// records (launch, check) in the rank's control block as begin does, then
// waits for each peer as a sync does: when the peer refused this launch
// (its refused word names it) it fills record 0 with a refusal, when it
// began the same launch with another check, with a mismatch. Kernels that
// do not meet their peers (launch 0) do nothing.
func kernelModel(fake *fakegpu.Platform) func(l fakegpu.Launch) error {
	le := binary.LittleEndian
	return func(l fakegpu.Launch) error {
		a := l.Args
		rank, world := int(le.Uint32(a[core.CtxOffRank:])), int(le.Uint32(a[core.CtxOffWorld:]))
		n, check := le.Uint32(a[core.CtxOffLaunch:]), le.Uint32(a[core.CtxOffCheck:])
		errDev := gpu.DevicePtr(le.Uint64(a[core.CtxOffErr:]))
		base := func(p int) gpu.DevicePtr { return gpu.DevicePtr(le.Uint64(a[8*p:])) }
		if n == 0 {
			return nil
		}
		begun := le.AppendUint64(nil, uint64(n)<<32|uint64(check))
		if err := fake.Write(base(rank)+core.OffBegun+gpu.DevicePtr(8*(n%core.ControlRing)), begun); err != nil {
			return err
		}
		fail := func(code uint32, peer int, epoch, info uint64) error {
			return fake.Update(errDev, core.ErrRecordBytes, func(b []byte) {
				if le.Uint32(b) != 0 {
					return // the first error is the cause
				}
				le.PutUint32(b[4:], uint32(rank))
				le.PutUint32(b[8:], uint32(peer))
				le.PutUint32(b[12:], 0)
				le.PutUint64(b[16:], epoch)
				le.PutUint64(b[24:], info)
				le.PutUint32(b, code)
			})
		}
		// A sync waits for every peer, one thread each.
		for p := 0; p < world; p++ {
			if p == rank {
				continue
			}
			w, err := fake.Uint64(base(rank) + core.OffRefused + gpu.DevicePtr(8*p))
			if err != nil {
				return err
			}
			if uint32(w) == n {
				return fail(core.ErrCodeRefused, p, uint64(base(rank)), uint64(n)<<32|w>>32)
			}
			b, err := fake.Uint64(base(p) + core.OffBegun + gpu.DevicePtr(8*(n%core.ControlRing)))
			if err != nil {
				return err
			}
			if uint32(b>>32) == n && uint32(b) != check {
				return fail(core.ErrCodeMismatch, p, uint64(n), b<<32|uint64(check))
			}
		}
		return nil
	}
}

// refusalWorld is a world of 2 of the rooted collective (params_test.go)
// whose kernels the model plays, in process or as two processes.
func refusalWorld(t *testing.T, processes bool) ([]*irisrt.Rank, *irisimpl.Table, *fakegpu.Platform) {
	t.Helper()
	fake := fakegpu.New(2)
	w, tab := fixtures.RootedWorld(t, 2, fake)
	fake.OnLaunch(kernelModel(fake))
	if !processes {
		return w.Ranks(), tab, fake
	}
	ranks := irisrt.JoinFakeProcesses(t, fake, 2, irisrt.Options{HeapBytes: 1 << 20, RendezvousTimeout: 10 * time.Second})
	t.Cleanup(func() { irisrt.CloseAll(t, ranks) })
	return ranks, tab, fake
}

// rootedPlans makes the rooted collective's pull plan on every rank, and
// its tensors.
func rootedPlans(t *testing.T, ranks []*irisrt.Rank, tab *irisimpl.Table) ([]*irisimpl.VariantPlan, [][]irisrt.Tensor) {
	t.Helper()
	plans, tensors := make([]*irisimpl.VariantPlan, len(ranks)), make([][]irisrt.Tensor, len(ranks))
	for k, err := range irisrt.EachProcess(ranks, func(r *irisrt.Rank) error {
		p, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "", 8)
		plans[r.Rank()] = p
		tensors[r.Rank()], _ = fixtures.RootedTensors(t, r, 8)
		return err
	}) {
		require.NoError(t, err, "rank %d", k)
	}
	return plans, tensors
}

// TestRefusedLaunchReachesPeers (issue 25 family 10): a rank whose launch
// is refused on the host makes the peer's kernel of that launch give up
// at once with a *PeerRefusedError that names it and its reason (its own
// error in an in-process world); the fault is sticky until the world is
// restarted, and the peer's next launch, refused for it, reaches the
// refusing rank the same way. In both kinds of world, eager and under
// graph replay (where the refusal happens at capture time).
func TestRefusedLaunchReachesPeers(t *testing.T) {
	for _, processes := range []bool{false, true} {
		for _, replay := range []bool{false, true} {
			name := map[bool]string{false: "in-process", true: "multi-process"}[processes] + map[bool]string{false: "/eager", true: "/replay"}[replay]
			t.Run(name, func(t *testing.T) {
				ranks, tab, fake := refusalWorld(t, processes)
				plans, ts := rootedPlans(t, ranks, tab)
				r0, r1 := ranks[0], ranks[1]
				ps := fixtures.RootedParams(1, 2, 0.5, 0)
				bad := []irisrt.Tensor{{Ptr: ts[1][0].Ptr, DType: irismodel.BF16, Len: 8}, ts[1][1], ts[1][2]} // rank 1 is the root: its input is checked
				fake.ClearLaunches()
				var de *irisrt.DTypeError
				if replay {
					_, err := r1.Capture(r1.Stream(), func() error { return plans[1].LaunchParams(r1.Stream(), bad, ps, irismodel.BarrierDevice) })
					require.ErrorAs(t, err, &de, "the refusal at capture time")
					g, err := r0.Capture(r0.Stream(), func() error { return plans[0].LaunchParams(r0.Stream(), ts[0], ps, irismodel.BarrierDevice) })
					require.NoError(t, err)
					defer g.Destroy()
					require.Len(t, fake.Launches(), 1, "captured only")
					err = g.Replay(r0.Stream())
					checkRefused(t, err, processes)
				} else {
					require.ErrorAs(t, plans[1].LaunchParams(r1.Stream(), bad, ps, irismodel.BarrierDevice), &de)
					require.NoError(t, plans[0].LaunchParams(r0.Stream(), ts[0], ps, irismodel.BarrierDevice), "the launch itself goes ahead")
					require.NoError(t, r0.Device().StreamSynchronize(r0.Stream()))
					checkRefused(t, r0.Check(), processes)
				}
				// Written where the header reads it: refused[1] of rank 0's
				// control block holds (reason, launch 1).
				w, err := fake.Uint64(r0.Heap().Base(0) + core.OffRefused + 8)
				require.NoError(t, err)
				assert.Equal(t, uint64(irisrt.RefusedDType)<<32|1, w)

				// Sticky: rank 0 refuses its next launch, and that refusal
				// reaches rank 1's kernel of launch 2.
				require.ErrorIs(t, r0.Check(), irisrt.ErrPeerRefused, "a world fault stays")
				require.ErrorIs(t, plans[0].LaunchParams(r0.Stream(), ts[0], ps, irismodel.BarrierDevice), irisrt.ErrPeerRefused)
				require.NoError(t, plans[1].LaunchParams(r1.Stream(), ts[1], ps, irismodel.BarrierDevice))
				var pe *irisrt.PeerRefusedError
				require.ErrorAs(t, r1.Check(), &pe)
				assert.Equal(t, 0, pe.Peer)
				assert.Equal(t, uint32(2), pe.Launch)
				assert.Equal(t, irisrt.RefusedWorldFault, pe.Reason)
			})
		}
	}
}

// checkRefused checks rank 0's error after rank 1 refused launch 1 with a
// wrong dtype.
func checkRefused(t *testing.T, err error, processes bool) {
	t.Helper()
	var pe *irisrt.PeerRefusedError
	require.ErrorAs(t, err, &pe)
	require.ErrorIs(t, err, irisrt.ErrPeerRefused)
	assert.Equal(t, irisrt.PeerRefusedError{Rank: 0, Peer: 1, Launch: 1, Reason: irisrt.RefusedDType, Err: pe.Err}, *pe)
	assert.Contains(t, err.Error(), "rank 1 refused its launch 1 on the host (a tensor of the wrong dtype")
	assert.Contains(t, err.Error(), "close the world and start it again")
	if processes {
		assert.Nil(t, pe.Err, "no host path carries it between processes")
		return
	}
	var de *irisrt.DTypeError
	require.ErrorAs(t, pe.Err, &de, "the refusing rank's own error travels in process")
	assert.Contains(t, err.Error(), `has dtype bf16, want f32`)
	assert.False(t, errors.As(err, &de), "but it is not this rank's error")
}

// TestRefusalEverywhereLeavesTheWorldUsable: when every rank refuses a
// launch, nothing waits for it, and the next launches (later numbers) run
// and meet as usual.
func TestRefusalEverywhereLeavesTheWorldUsable(t *testing.T) {
	ranks, tab, fake := refusalWorld(t, false)
	plans, ts := rootedPlans(t, ranks, tab)
	for _, err := range irisrt.EachProcess(ranks, func(r *irisrt.Rank) error {
		s := r.Stream()
		var pe *irisrt.ParamError
		if err := plans[r.Rank()].LaunchParams(s, ts[r.Rank()], fixtures.RootedParams(5, 2, 0.5, 0), irismodel.BarrierDevice); !errors.As(err, &pe) {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		return plans[r.Rank()].LaunchParams(s, ts[r.Rank()], fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierDevice)
	}) {
		require.NoError(t, err)
	}
	require.Len(t, fake.Launches(), 2)
	for _, r := range ranks {
		require.NoError(t, r.Check())
		assert.Equal(t, uint32(2), binary.LittleEndian.Uint32(fake.Launches()[r.Rank()].Args[core.CtxOffLaunch:]))
	}
}

// TestLaunchNumbers enumerates what a launch number counts: every launch
// call of a plan that meets its peers, refused, empty or not, through a
// plan or the convenience call (once), eager or captured (a replay repeats
// the number it captured); a group counts its own; a plan that never meets
// its peers is not counted (0), so one rank may launch it alone. The check
// is equal on every rank for the same launch and differs with the number,
// a parameter, the mode or the plan.
func TestLaunchNumbers(t *testing.T) {
	fake := fakegpu.New(1)
	w, tab := fixtures.RootedWorld(t, 1, fake)
	r := w.Rank(0)
	s := r.Stream()
	c := &tab.Collectives[0]
	p, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &c.Variants[0], irismodel.F32, "", 8)
	require.NoError(t, err)
	empty, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &c.Variants[0], irismodel.F32, "", 0)
	require.NoError(t, err)
	local, err := irisrt.NewPlan(r, core.PlanSpec{Op: "rooted", Variant: "pull", Module: "rooted", SpecHash: "h3", Kernel: "irisgen_rooted_pull_f32",
		Package: tab.ImportPath, Threads: 64, Blocks: 1, Barriers: []irismodel.Barrier{irismodel.BarrierNone}, Local: true})
	require.NoError(t, err)
	ts, _ := fixtures.RootedTensors(t, r, 8)
	ps := fixtures.RootedParams(0, 2, 0.5, 0)
	last := func() (uint32, uint32) {
		ls := fake.Launches()
		a := ls[len(ls)-1].Args
		return binary.LittleEndian.Uint32(a[core.CtxOffLaunch:]), binary.LittleEndian.Uint32(a[core.CtxOffCheck:])
	}
	require.NoError(t, p.LaunchParams(s, ts, ps, irismodel.BarrierDevice))
	n, check := last()
	assert.Equal(t, uint32(1), n)
	assert.Equal(t, p.Plan().Check(1, irismodel.BarrierDevice, ps), check)
	require.Error(t, p.LaunchParams(s, ts[:2], ps, irismodel.BarrierDevice), "2: refused")
	require.NoError(t, empty.LaunchParams(s, []irisrt.Tensor{{}, {}, {}}, ps, irismodel.BarrierDevice), "3: empty")
	require.NoError(t, local.LaunchNumbered(s, irismodel.BarrierNone), "not counted")
	n, _ = last()
	assert.Zero(t, n, "a plan that never meets its peers")
	require.NoError(t, c.RunParams(r, s, "pull", irismodel.F32, "", nil, ts, ps, irismodel.BarrierDevice), "4: the convenience call")
	n, _ = last()
	assert.Equal(t, uint32(4), n)
	require.Error(t, c.RunParams(r, s, "nope", irismodel.F32, "", nil, ts, ps, irismodel.BarrierDevice), "5: refused before a plan")
	g, err := r.Capture(s, func() error { return p.LaunchParams(s, ts, ps, irismodel.BarrierDevice) }) // 6
	require.NoError(t, err)
	defer g.Destroy()
	require.NoError(t, p.LaunchParams(s, ts, ps, irismodel.BarrierNone)) // 7
	n, _ = last()
	assert.Equal(t, uint32(7), n)
	require.NoError(t, g.Replay(s))
	n, check = last()
	assert.Equal(t, uint32(6), n, "a replay repeats its captured number")
	assert.Equal(t, p.Plan().Check(6, irismodel.BarrierDevice, ps), check)
	grp, err := r.NewGroup([]int{0}, 1<<14)
	require.NoError(t, err)
	gp, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](grp, &c.Variants[0], irismodel.F32, "", 8)
	require.NoError(t, err)
	gts, _ := fixtures.RootedTensors(t, grp, 8)
	require.NoError(t, gp.LaunchParams(s, gts, fixtures.RootedParams(0, 2, 0.5, 0), irismodel.BarrierDevice))
	n, _ = last()
	assert.Equal(t, uint32(1), n, "a group counts its own launches")
	require.NoError(t, p.LaunchParams(s, ts, ps, irismodel.BarrierDevice))
	n, _ = last()
	assert.Equal(t, uint32(8), n)

	// The check.
	twin, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &c.Variants[0], irismodel.F32, "", 8)
	require.NoError(t, err)
	defer twin.Close()
	pc := p.Plan().Check
	base := pc(9, irismodel.BarrierDevice, ps)
	assert.Equal(t, base, pc(9, irismodel.BarrierDevice, fixtures.RootedParams(0, 2, 0.5, 0)), "a function of the values")
	for what, other := range map[string]uint32{
		"number": pc(10, irismodel.BarrierDevice, ps), "root": pc(9, irismodel.BarrierDevice, fixtures.RootedParams(1, 2, 0.5, 0)),
		"eps": pc(9, irismodel.BarrierDevice, fixtures.RootedParams(0, 2, 0.25, 0)), "mode": pc(9, irismodel.BarrierNone, ps),
		"plan": empty.Plan().Check(9, irismodel.BarrierDevice, ps), "another plan of the same spec": twin.Plan().Check(9, irismodel.BarrierDevice, ps),
	} {
		assert.NotEqual(t, base, other, what)
	}
	require.NoError(t, errors.Join(g.Destroy(), gp.Close(), grp.Close(), local.Close(), empty.Close(), p.Close()))
}

// TestMismatchOnTheDevice (issue 25 item 2b, as the model plays it): ranks
// that launch the same plan with another root, or another plan, as the
// same launch get a *MismatchError naming the peer, a world fault.
func TestMismatchOnTheDevice(t *testing.T) {
	for _, c := range []struct {
		name  string
		other func(plans []*irisimpl.VariantPlan, other *irisimpl.VariantPlan, ts []irisrt.Tensor, s gpu.Stream) error
	}{
		{"root", func(plans []*irisimpl.VariantPlan, _ *irisimpl.VariantPlan, ts []irisrt.Tensor, s gpu.Stream) error {
			return plans[1].LaunchParams(s, ts, fixtures.RootedParams(0, 2, 0.5, 0), irismodel.BarrierDevice)
		}},
		{"plan", func(_ []*irisimpl.VariantPlan, other *irisimpl.VariantPlan, ts []irisrt.Tensor, s gpu.Stream) error {
			return other.LaunchParams(s, ts, fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierDevice)
		}},
		{"mode", func(plans []*irisimpl.VariantPlan, _ *irisimpl.VariantPlan, ts []irisrt.Tensor, s gpu.Stream) error {
			return plans[1].LaunchParams(s, ts, fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierNone)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ranks, tab, _ := refusalWorld(t, false)
			plans, ts := rootedPlans(t, ranks, tab)
			others := make([]*irisimpl.VariantPlan, 2)
			for _, err := range irisrt.EachProcess(ranks, func(r *irisrt.Rank) error {
				var err error
				others[r.Rank()], err = irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[1], irismodel.F32, "", 8)
				return err
			}) {
				require.NoError(t, err)
			}
			r0, r1 := ranks[0], ranks[1]
			require.NoError(t, c.other(plans, others[1], ts[1], r1.Stream()), "rank 1 first")
			require.NoError(t, plans[0].LaunchParams(r0.Stream(), ts[0], fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierDevice))
			var me *irisrt.MismatchError
			require.ErrorAs(t, r0.Check(), &me)
			assert.Equal(t, 1, me.Peer)
			assert.Equal(t, uint32(1), me.Launch)
			assert.True(t, me.World)
			assert.NotEqual(t, me.Check, me.PeerCheck)
			assert.Contains(t, me.Error(), "close the world and start it again")
			require.ErrorIs(t, plans[0].LaunchParams(r0.Stream(), ts[0], fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierDevice), irisrt.ErrMismatch, "sticky")
		})
	}
}

// TestMismatchAtTheHostBarrier: in mode host the ranks compare the launch
// at the barrier before the kernel: every rank gets a *MismatchError (no
// world fault) and nothing is launched; the launch is recorded in the
// control block first, where a peer that launched it in mode device finds
// it.
func TestMismatchAtTheHostBarrier(t *testing.T) {
	ranks, tab, fake := refusalWorld(t, false)
	plans, ts := rootedPlans(t, ranks, tab)
	fake.ClearLaunches()
	errs := irisrt.EachProcess(ranks, func(r *irisrt.Rank) error {
		return plans[r.Rank()].LaunchParams(r.Stream(), ts[r.Rank()], fixtures.RootedParams(int64(r.Rank()), 2, 0.5, 0), irismodel.BarrierHost)
	})
	for k, err := range errs {
		var me *irisrt.MismatchError
		require.ErrorAs(t, err, &me, "rank %d", k)
		assert.Equal(t, irisrt.MismatchError{Rank: k, Peer: 1 - k, Launch: 1, Block: -1, Check: me.Check, PeerCheck: me.PeerCheck}, *me)
		assert.Contains(t, err.Error(), "Nothing was launched")
		require.NoError(t, ranks[k].Check(), "no world fault")
		b, err := fake.Uint64(ranks[k].Heap().Base(k) + core.OffBegun + 8)
		require.NoError(t, err)
		assert.Equal(t, uint64(1)<<32|uint64(plans[k].Plan().Check(1, irismodel.BarrierHost, fixtures.RootedParams(int64(k), 2, 0.5, 0))), b)
	}
	assert.Empty(t, fake.Launches())
	// The same parameters meet.
	for _, err := range irisrt.EachProcess(ranks, func(r *irisrt.Rank) error {
		return plans[r.Rank()].LaunchParams(r.Stream(), ts[r.Rank()], fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierHost)
	}) {
		require.NoError(t, err)
	}
}

// TestRecoveryAfterRefusal: after a peer's refusal the world closes and a
// new one on the same GPUs works, its launches numbered from 1 again on
// heaps whose control blocks start zeroed.
func TestRecoveryAfterRefusal(t *testing.T) {
	fake := fakegpu.New(2)
	w, tab := fixtures.RootedWorld(t, 2, fake)
	fake.OnLaunch(kernelModel(fake))
	for round := 0; round < 2; round++ {
		if round > 0 {
			var err error
			w, err = irisrt.NewLocalWorld(2, irisrt.Options{Platform: fake, HeapBytes: 1 << 20})
			require.NoError(t, err)
		}
		plans, ts := rootedPlans(t, w.Ranks(), tab)
		r0, r1 := w.Rank(0), w.Rank(1)
		for k, r := range w.Ranks() {
			mem, err := fake.Read(r.Heap().Base(k), core.ControlBytes)
			require.NoError(t, err)
			assert.Equal(t, make([]byte, core.ControlBytes), mem, "a zeroed control block")
		}
		var pe *irisrt.ParamError
		require.ErrorAs(t, plans[1].LaunchParams(r1.Stream(), ts[1], fixtures.RootedParams(7, 2, 0.5, 0), irismodel.BarrierDevice), &pe)
		require.NoError(t, plans[0].LaunchParams(r0.Stream(), ts[0], fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierDevice))
		var re *irisrt.PeerRefusedError
		require.ErrorAs(t, r0.Check(), &re)
		assert.Equal(t, irisrt.RefusedParam, re.Reason)
		assert.Equal(t, uint32(1), re.Launch)
		require.NoError(t, w.Close())
	}
}

// TestGroupControlBlocks: a group's heap has a control block of its own,
// zeroed when the group is made (its reservation held other memory), and
// its refusals reach its members' control blocks, not the world's.
func TestGroupControlBlocks(t *testing.T) {
	ranks, tab, fake := refusalWorld(t, false)
	w0 := ranks[0]
	// Dirty the memory the group's reservation will take.
	junk := make([]*irisrt.Tensor, 2)
	for _, err := range irisrt.EachProcess(ranks, func(r *irisrt.Rank) error {
		x, err := r.Heap().Alloc(irismodel.U64, 1<<10)
		junk[r.Rank()] = &x
		if err == nil {
			err = fake.Write(x.Ptr, bytes.Repeat([]byte{0xEE}, 8<<10))
		}
		if err == nil {
			err = r.Heap().Free(x)
		}
		return err
	}) {
		require.NoError(t, err)
	}
	groups := make([]*irisrt.Rank, 2)
	for _, err := range irisrt.EachProcess(ranks, func(r *irisrt.Rank) error {
		var err error
		groups[r.Rank()], err = r.NewGroup([]int{0, 1}, 1<<14)
		return err
	}) {
		require.NoError(t, err)
	}
	g0, g1 := groups[0], groups[1]
	assert.Equal(t, junk[0].Ptr, g0.Heap().Base(0), "the group's heap took the dirty memory")
	for k, g := range groups {
		mem, err := fake.Read(g.Heap().Base(k), core.ControlBytes)
		require.NoError(t, err)
		assert.Equal(t, make([]byte, core.ControlBytes), mem, "rank %d: the group's control block is zeroed", k)
	}
	plans, ts := rootedPlans(t, groups, tab)
	require.Error(t, plans[1].LaunchParams(g1.Stream(), ts[1][:1], fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierDevice))
	require.NoError(t, plans[0].LaunchParams(g0.Stream(), ts[0], fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierDevice))
	var pe *irisrt.PeerRefusedError
	require.ErrorAs(t, g0.Check(), &pe)
	assert.Equal(t, irisrt.RefusedOther, pe.Reason, "a wrong tensor count")
	require.Error(t, pe.Err, "the group's rank 1's own error")
	w, err := fake.Uint64(w0.Heap().Base(0) + core.OffRefused + 8)
	require.NoError(t, err)
	assert.Zero(t, w, "the world's control block is untouched")
}

// TestRefusalWhileCapturing: a refusal inside a capture tells the peers
// through the rank's control stream, not the capturing stream: the
// capture holds nothing of it, in both capture modes.
func TestRefusalWhileCapturing(t *testing.T) {
	ranks, tab, fake := refusalWorld(t, true) // a multi-process world captures in global mode
	plans, ts := rootedPlans(t, ranks, tab)
	r1 := ranks[1]
	assert.Equal(t, gpu.CaptureGlobal, r1.CaptureMode())
	fake.ClearLaunches()
	g, err := r1.Capture(r1.Stream(), func() error {
		var pe *irisrt.ParamError
		if err := plans[1].LaunchParams(r1.Stream(), ts[1], fixtures.RootedParams(9, 2, 0.5, 0), irismodel.BarrierDevice); !errors.As(err, &pe) {
			return err
		}
		return plans[1].LaunchParams(r1.Stream(), ts[1], fixtures.RootedParams(1, 2, 0.5, 0), irismodel.BarrierDevice)
	})
	require.NoError(t, err, "the capture survives the refusal")
	defer g.Destroy()
	w, err := fake.Uint64(ranks[0].Heap().Base(0) + core.OffRefused + 8)
	require.NoError(t, err)
	assert.Equal(t, uint64(irisrt.RefusedParam)<<32|1, w)
	require.Len(t, fake.GraphLaunches(g.Exec()), 1, "the graph holds the launch that went ahead, nothing else")
}

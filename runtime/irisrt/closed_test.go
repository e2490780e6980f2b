package irisrt_test

import (
	"errors"
	"sync"
	"testing"
	"time"
	"unsafe"

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

// tracePlatform is a fake platform whose devices record every call that
// reaches the GPU library (not the accessors Ordinal and Platform).
type tracePlatform struct {
	*fakegpu.Platform
	mu    *sync.Mutex
	calls *[]string
}

func newTracePlatform(n int) tracePlatform {
	return tracePlatform{fakegpu.New(n), &sync.Mutex{}, &[]string{}}
}

func (p tracePlatform) Open(i int) (gpu.Device, error) {
	d, err := p.Platform.Open(i)
	return traceDevice{d, p}, err
}

// take returns the calls so far and forgets them.
func (p tracePlatform) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := *p.calls
	*p.calls = nil
	return c
}

type traceDevice struct {
	d gpu.Device
	p tracePlatform
}

func (d traceDevice) note(call string) {
	d.p.mu.Lock()
	*d.p.calls = append(*d.p.calls, call)
	d.p.mu.Unlock()
}

func unwrap(peer gpu.Device) gpu.Device {
	if t, ok := peer.(traceDevice); ok {
		return t.d
	}
	return peer
}

func (d traceDevice) Ordinal() int           { return d.d.Ordinal() }
func (d traceDevice) Platform() gpu.Platform { return d.d.Platform() }
func (d traceDevice) Alloc(bytes int64, fine bool) (gpu.DevicePtr, error) {
	d.note("Alloc")
	return d.d.Alloc(bytes, fine)
}
func (d traceDevice) Free(p gpu.DevicePtr) error { d.note("Free"); return d.d.Free(p) }
func (d traceDevice) AllocHostMapped(bytes int64) (unsafe.Pointer, gpu.DevicePtr, error) {
	d.note("AllocHostMapped")
	return d.d.AllocHostMapped(bytes)
}
func (d traceDevice) FreeHost(host unsafe.Pointer) error {
	d.note("FreeHost")
	return d.d.FreeHost(host)
}
func (d traceDevice) CopyHtoD(dst gpu.DevicePtr, src unsafe.Pointer, bytes int64) error {
	d.note("CopyHtoD")
	return d.d.CopyHtoD(dst, src, bytes)
}
func (d traceDevice) CopyDtoH(dst unsafe.Pointer, src gpu.DevicePtr, bytes int64) error {
	d.note("CopyDtoH")
	return d.d.CopyDtoH(dst, src, bytes)
}
func (d traceDevice) CopyDtoDAsync(dst, src gpu.DevicePtr, bytes int64, s gpu.Stream) error {
	d.note("CopyDtoDAsync")
	return d.d.CopyDtoDAsync(dst, src, bytes, s)
}
func (d traceDevice) CopyHtoDAsync(dst gpu.DevicePtr, src unsafe.Pointer, bytes int64, s gpu.Stream) error {
	d.note("CopyHtoDAsync")
	return d.d.CopyHtoDAsync(dst, src, bytes, s)
}
func (d traceDevice) CopyDtoHAsync(dst unsafe.Pointer, src gpu.DevicePtr, bytes int64, s gpu.Stream) error {
	d.note("CopyDtoHAsync")
	return d.d.CopyDtoHAsync(dst, src, bytes, s)
}
func (d traceDevice) MemsetD8Async(dst gpu.DevicePtr, v byte, bytes int64, s gpu.Stream) error {
	d.note("MemsetD8Async")
	return d.d.MemsetD8Async(dst, v, bytes, s)
}
func (d traceDevice) MemsetD32Async(dst gpu.DevicePtr, v uint32, n int64, s gpu.Stream) error {
	d.note("MemsetD32Async")
	return d.d.MemsetD32Async(dst, v, n, s)
}
func (d traceDevice) WriteValue32(dst gpu.DevicePtr, v uint32, s gpu.Stream) error {
	d.note("WriteValue32")
	return d.d.WriteValue32(dst, v, s)
}
func (d traceDevice) WaitValue32(dst gpu.DevicePtr, v uint32, s gpu.Stream) error {
	d.note("WaitValue32")
	return d.d.WaitValue32(dst, v, s)
}
func (d traceDevice) Synchronize() error { d.note("Synchronize"); return d.d.Synchronize() }
func (d traceDevice) NewStream() (gpu.Stream, error) {
	d.note("NewStream")
	return d.d.NewStream()
}
func (d traceDevice) DestroyStream(s gpu.Stream) error {
	d.note("DestroyStream")
	return d.d.DestroyStream(s)
}
func (d traceDevice) StreamSynchronize(s gpu.Stream) error {
	d.note("StreamSynchronize")
	return d.d.StreamSynchronize(s)
}
func (d traceDevice) NewEvent(timing bool) (gpu.Event, error) {
	d.note("NewEvent")
	return d.d.NewEvent(timing)
}
func (d traceDevice) DestroyEvent(e gpu.Event) error {
	d.note("DestroyEvent")
	return d.d.DestroyEvent(e)
}
func (d traceDevice) RecordEvent(e gpu.Event, s gpu.Stream) error {
	d.note("RecordEvent")
	return d.d.RecordEvent(e, s)
}
func (d traceDevice) SynchronizeEvent(e gpu.Event) error {
	d.note("SynchronizeEvent")
	return d.d.SynchronizeEvent(e)
}
func (d traceDevice) Elapsed(start, end gpu.Event) (time.Duration, error) {
	d.note("Elapsed")
	return d.d.Elapsed(start, end)
}
func (d traceDevice) LoadModule(image []byte) (gpu.Module, error) {
	d.note("LoadModule")
	return d.d.LoadModule(image)
}
func (d traceDevice) UnloadModule(m gpu.Module) error {
	d.note("UnloadModule")
	return d.d.UnloadModule(m)
}
func (d traceDevice) Function(m gpu.Module, name string) (gpu.Function, error) {
	d.note("Function")
	return d.d.Function(m, name)
}
func (d traceDevice) Global(m gpu.Module, name string) (gpu.DevicePtr, int64, error) {
	d.note("Global")
	return d.d.Global(m, name)
}
func (d traceDevice) Launch(f gpu.Function, grid, block gpu.Dim3, shared uint32, s gpu.Stream, args []byte) error {
	d.note("Launch")
	return d.d.Launch(f, grid, block, shared, s, args)
}
func (d traceDevice) CanAccessPeer(peer gpu.Device) (bool, error) {
	d.note("CanAccessPeer")
	return d.d.CanAccessPeer(unwrap(peer))
}
func (d traceDevice) EnablePeerAccess(peer gpu.Device) error {
	d.note("EnablePeerAccess")
	return d.d.EnablePeerAccess(unwrap(peer))
}
func (d traceDevice) IPCGetHandle(p gpu.DevicePtr) (gpu.IPCHandle, error) {
	d.note("IPCGetHandle")
	return d.d.IPCGetHandle(p)
}
func (d traceDevice) IPCOpenHandle(h gpu.IPCHandle) (gpu.DevicePtr, error) {
	d.note("IPCOpenHandle")
	return d.d.IPCOpenHandle(h)
}
func (d traceDevice) IPCCloseHandle(p gpu.DevicePtr) error {
	d.note("IPCCloseHandle")
	return d.d.IPCCloseHandle(p)
}
func (d traceDevice) BeginCapture(s gpu.Stream, mode gpu.CaptureMode) error {
	d.note("BeginCapture")
	return d.d.BeginCapture(s, mode)
}
func (d traceDevice) EndCapture(s gpu.Stream) (gpu.Graph, error) {
	d.note("EndCapture")
	return d.d.EndCapture(s)
}
func (d traceDevice) CaptureStatus(s gpu.Stream) (gpu.CaptureStatus, error) {
	d.note("CaptureStatus")
	return d.d.CaptureStatus(s)
}
func (d traceDevice) Instantiate(g gpu.Graph) (gpu.GraphExec, error) {
	d.note("Instantiate")
	return d.d.Instantiate(g)
}
func (d traceDevice) LaunchGraph(g gpu.GraphExec, s gpu.Stream) error {
	d.note("LaunchGraph")
	return d.d.LaunchGraph(g, s)
}
func (d traceDevice) DestroyGraph(g gpu.Graph) error {
	d.note("DestroyGraph")
	return d.d.DestroyGraph(g)
}
func (d traceDevice) DestroyGraphExec(g gpu.GraphExec) error {
	d.note("DestroyGraphExec")
	return d.d.DestroyGraphExec(g)
}

// closedState is everything a rank holds when its world is closed: plans
// (made with NewPlan, of a variant, and one already closed), a heap tensor,
// a group with a plan and a tensor, a live graph and a destroyed one.
type closedState struct {
	r, grp                 *irisrt.Rank
	plan, shut, groupPlan  *irisrt.Plan
	vp                     *irisimpl.VariantPlan
	x, gx                  irisrt.Tensor
	live, gone             *irisrt.Graph
	ts                     []irisrt.Tensor
	coll                   *irisimpl.Collective
	spec                   core.PlanSpec
	variant                *irisimpl.Variant
	groupStream, rankStrem gpu.Stream
}

// closedCalls are the runtime's calls that could reach the GPU, each
// named, on a rank's state.
func closedCalls(st *closedState) map[string]func() error {
	r, s := st.r, st.rankStrem
	ps := fixtures.RootedParams(0, 2, 0.5, 0)
	return map[string]func() error{
		"Rank.HostBarrier": func() error { return r.HostBarrier(s) },
		"Rank.Capturing":   func() error { _, err := r.Capturing(s); return err },
		"Rank.Capture": func() error {
			_, err := r.Capture(s, func() error { return nil })
			return err
		},
		"Rank.Check":       func() error { return r.Check() },
		"Rank.NewGroup":    func() error { _, err := r.NewGroup([]int{0, 1}, 1<<14); return err },
		"loading a kernel": func() error { return r.LoadKernel(st.spec) },
		"Heap.Alloc":       func() error { _, err := r.Heap().Alloc(irismodel.F32, 4); return err },
		"Heap.AllocBytes":  func() error { _, err := r.Heap().AllocBytes(64); return err },
		"Heap.Free":        func() error { return r.Heap().Free(st.x) },
		"Heap.FreeBytes":   func() error { return r.Heap().FreeBytes(st.x.Ptr) },
		"NewPlan":          func() error { _, err := irisrt.NewPlan(r, st.spec); return err },
		"NewPlanOf": func() error {
			_, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, st.variant, irismodel.F32, "", 8)
			return err
		},
		"Plan.Launch":               func() error { return st.plan.LaunchNumbered(s, irismodel.BarrierDevice) },
		"Plan.Skip":                 func() error { return st.plan.SkipNumbered(s, irismodel.BarrierDevice) },
		"Plan.Close":                func() error { return st.plan.Close() },
		"closed Plan.Launch":        func() error { return st.shut.LaunchNumbered(s, irismodel.BarrierDevice) },
		"VariantPlan.LaunchParams":  func() error { return st.vp.LaunchParams(s, st.ts, ps, irismodel.BarrierDevice) },
		"VariantPlan.LaunchTensors": func() error { return st.vp.LaunchTensors(s, st.ts, irismodel.BarrierDevice) },
		"VariantPlan.Close":         func() error { return st.vp.Close() },
		"Collective.RunParams": func() error {
			return st.coll.RunParams(r, s, "pull", irismodel.F32, "", nil, st.ts, ps, irismodel.BarrierDevice)
		},
		"Collective.Run":         func() error { return st.coll.Run(r, s, "pull", irismodel.F32, "", nil, st.ts, irismodel.BarrierDevice) },
		"Graph.Launch":           func() error { return st.live.Launch(s) },
		"Graph.Replay":           func() error { return st.live.Replay(s) },
		"destroyed Graph.Launch": func() error { return st.gone.Launch(s) },
		"group HostBarrier":      func() error { return st.grp.HostBarrier(st.groupStream) },
		"group Heap.Alloc":       func() error { _, err := st.grp.Heap().Alloc(irismodel.F32, 4); return err },
		"group Heap.Free":        func() error { return st.grp.Heap().Free(st.gx) },
		"group NewPlan":          func() error { _, err := irisrt.NewPlan(st.grp, st.spec); return err },
		"group Plan.Launch":      func() error { return st.groupPlan.LaunchNumbered(st.groupStream, irismodel.BarrierDevice) },
		"group Plan.Close":       func() error { return st.groupPlan.Close() },
		"group Check":            func() error { return st.grp.Check() },
		"group Close":            func() error { return st.grp.Close() },
	}
}

// makeClosedState sets up a rank's state (collective: on every rank).
func makeClosedState(t *testing.T, r *irisrt.Rank, tab *irisimpl.Table) *closedState {
	c := &tab.Collectives[0]
	st := &closedState{r: r, coll: c, variant: &c.Variants[0], rankStrem: r.Stream()}
	var err error
	st.vp, err = irisimpl.NewPlanOf[irisimpl.VariantPlan](r, st.variant, irismodel.F32, "", 8)
	require.NoError(t, err)
	st.spec = st.vp.Plan().Spec()
	st.plan, err = irisrt.NewPlan(r, st.spec)
	require.NoError(t, err)
	st.shut, err = irisrt.NewPlan(r, st.spec)
	require.NoError(t, err)
	require.NoError(t, st.shut.Close())
	st.ts, _ = fixtures.RootedTensors(t, r, 8)
	st.x = st.ts[0]
	st.grp, err = r.NewGroup([]int{0, 1}, 1<<14)
	require.NoError(t, err)
	st.groupStream = st.grp.Stream()
	st.groupPlan, err = irisrt.NewPlan(st.grp, st.spec)
	require.NoError(t, err)
	st.gx, err = st.grp.Heap().Alloc(irismodel.F32, 8)
	require.NoError(t, err)
	return st
}

// capture makes the state's graphs (one rank at a time: in the fake
// multi-process world the ranks share a platform, where a capture in
// global mode refuses the other ranks' allocations).
func (st *closedState) capture(t *testing.T) {
	r := st.r
	s := r.Stream()
	var err error
	st.live, err = r.Capture(s, func() error {
		return st.vp.LaunchParams(s, st.ts, fixtures.RootedParams(0, 2, 0.5, 0), irismodel.BarrierDevice)
	})
	require.NoError(t, err)
	st.gone, err = r.Capture(s, func() error { return st.plan.LaunchNumbered(s, irismodel.BarrierDevice) })
	require.NoError(t, err)
	require.NoError(t, st.gone.Destroy())
}

// TestClosedWorld (issue 25 family 12): after World.Close (Rank.Close in a
// multi-process world) every call of the runtime that could reach the GPU
// returns a *ClosedError (errors.Is ErrClosed) and calls nothing of the
// GPU library; closing again is not an error, and neither is destroying a
// graph the world's close destroyed.
func TestClosedWorld(t *testing.T) {
	for _, processes := range []bool{false, true} {
		t.Run(map[bool]string{false: "in-process", true: "multi-process"}[processes], func(t *testing.T) {
			tp := newTracePlatform(2)
			t.Setenv("IRISGEN_KERNELS", "")
			tab := fixtures.RootedTable(fixtures.Path(t))
			irisimpl.Register(tab)
			tp.AddModule([]byte("rooted image of "+tab.ImportPath), []string{"irisgen_rooted_pull_f32", "irisgen_rooted_push_f32"},
				map[string][]byte{irismodel.SpecHashSymbol("rooted"): append([]byte("h3"), 0)})
			opts := irisrt.Options{Platform: tp, HeapBytes: 1 << 20, RendezvousTimeout: 10 * time.Second}
			var ranks []*irisrt.Rank
			var w *irisrt.World
			if processes {
				ranks = irisrt.JoinFakeProcesses(t, tp.Platform, 2, opts)
				// joinFakeProcesses gives the bare fake: trace it from here.
				for _, r := range ranks {
					r.WrapDevice(func(d gpu.Device) gpu.Device { return traceDevice{d, tp} })
				}
			} else {
				var err error
				w, err = irisrt.NewLocalWorld(2, opts)
				require.NoError(t, err)
				ranks = w.Ranks()
			}
			states := make([]*closedState, 2)
			for _, err := range irisrt.EachProcess(ranks, func(r *irisrt.Rank) error {
				states[r.Rank()] = makeClosedState(t, r, tab)
				return nil
			}) {
				require.NoError(t, err)
			}
			for _, st := range states {
				st.capture(t)
			}
			if processes {
				irisrt.CloseAll(t, ranks)
				irisrt.CloseAll(t, ranks)
			} else {
				require.NoError(t, w.Close())
				require.NoError(t, w.Close(), "closing again")
				require.ErrorIs(t, w.Run(func(*irisrt.Rank) error { return nil }), irisrt.ErrClosed)
			}
			tp.take()
			calls := closedCalls(states[0])
			for name, call := range calls {
				err := call()
				require.ErrorIs(t, err, irisrt.ErrClosed, name)
				var ce *irisrt.ClosedError
				require.ErrorAs(t, err, &ce, name)
				assert.Contains(t, err.Error(), "is closed: make a new one", name)
				assert.Empty(t, tp.take(), "%s reached the GPU library", name)
			}
			assert.Len(t, calls, 32, "the enumerated surface")
			require.NoError(t, states[0].live.Destroy(), "the world's close destroyed it already")
			assert.Empty(t, tp.take())
		})
	}
}

// TestClosedPlanAndGroup: a closed plan's launches and a closed group's
// calls return a *ClosedError, without launching anything; the plan's
// refusal reaches the peers like any other (memsets into their control
// blocks on the rank's control stream, and a wait for them: the only GPU
// calls); closing again is not an error.
func TestClosedPlanAndGroup(t *testing.T) {
	tp := newTracePlatform(2)
	t.Setenv("IRISGEN_KERNELS", "")
	tab := fixtures.RootedTable(fixtures.Path(t))
	irisimpl.Register(tab)
	tp.AddModule([]byte("rooted image of "+tab.ImportPath), []string{"irisgen_rooted_pull_f32", "irisgen_rooted_push_f32"},
		map[string][]byte{irismodel.SpecHashSymbol("rooted"): append([]byte("h3"), 0)})
	w := fixtures.NewFakeWorld(t, 2, irisrt.Options{Platform: tp})
	type state struct {
		vp  *irisimpl.VariantPlan
		grp *irisrt.Rank
		ts  []irisrt.Tensor
	}
	sts := make([]state, 2)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		vp, err := irisimpl.NewPlanOf[irisimpl.VariantPlan](r, &tab.Collectives[0].Variants[0], irismodel.F32, "", 8)
		require.NoError(t, err)
		grp, err := r.NewGroup([]int{0, 1}, 1<<14)
		require.NoError(t, err)
		ts, _ := fixtures.RootedTensors(t, r, 8)
		sts[r.Rank()] = state{vp, grp, ts}
		return errors.Join(vp.Close(), vp.Close(), grp.Close(), grp.Close())
	}))
	tp.take()
	r := w.Rank(0)
	st := sts[0]
	s := r.Stream()
	for name, call := range map[string]func() error{
		"LaunchParams": func() error {
			return st.vp.LaunchParams(s, st.ts, fixtures.RootedParams(0, 2, 0.5, 0), irismodel.BarrierDevice)
		},
		"Plan.Launch": func() error { return st.vp.Plan().LaunchNumbered(s, irismodel.BarrierDevice) },
		"Plan.Skip":   func() error { return st.vp.Plan().SkipNumbered(s, irismodel.BarrierDevice) },
	} {
		err := call()
		require.ErrorIs(t, err, irisrt.ErrClosed, name)
		assert.Contains(t, err.Error(), "a closed plan cannot be launched", name)
		calls := tp.take()
		assert.NotEmpty(t, calls, name)
		assert.Equal(t, []string{"MemsetD32Async", "MemsetD32Async", "CaptureStatus", "StreamSynchronize"}, calls,
			"%s: only the peers are told (the refused words, then a wait for them)", name)
	}
	for name, call := range map[string]func() error{
		"HostBarrier": func() error { return st.grp.HostBarrier(s) },
		"Check":       func() error { return st.grp.Check() },
		"NewPlan":     func() error { _, err := irisrt.NewPlan(st.grp, st.vp.Plan().Spec()); return err },
		"Heap.Alloc":  func() error { _, err := st.grp.Heap().Alloc(irismodel.F32, 1); return err },
	} {
		err := call()
		require.ErrorIs(t, err, irisrt.ErrClosed, "group "+name)
		assert.Contains(t, err.Error(), "is closed: make a new one", "group "+name)
		assert.Empty(t, tp.take(), "group %s reached the GPU library", name)
	}
	require.NoError(t, w.Run(func(r *irisrt.Rank) error { return r.HostBarrier(r.Stream()) }), "the world itself is open")
}

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

func TestLocalWorld(t *testing.T) {
	for _, n := range []int{2, 4} {
		w := newFakeWorld(t, n, Options{Timeout: 3 * time.Second})
		assert.False(t, w.SharesGPUs())
		p := fakeOf(w.Rank(0))
		require.Equal(t, n, w.Size())
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i != j {
					assert.True(t, p.PeerEnabled(i, j), "peer access %d->%d", i, j)
				}
			}
		}
		for k, r := range w.Ranks() {
			assert.Equal(t, k, r.Rank())
			assert.Equal(t, n, r.World())
			assert.Equal(t, k, r.Device().Ordinal())
			h := r.Heap()
			fine, err := p.Fine(h.Base(k))
			require.NoError(t, err)
			assert.True(t, fine, "heaps are fine-grained")
			mem, err := p.Read(h.Base(k), h.Size())
			require.NoError(t, err)
			assert.Equal(t, make([]byte, h.Size()), mem, "heap zeroed")
			// The ctx template: every rank's base, err record, timeout, rank, world.
			ctx := r.ctxBytes()
			require.Len(t, ctx, core.CtxBytes)
			le := binary.LittleEndian
			for peer := 0; peer < MaxWorld; peer++ {
				want := uint64(0)
				if peer < n {
					want = uint64(w.Rank(peer).Heap().Base(peer))
					assert.Equal(t, w.Rank(peer).Heap().Base(peer), h.Base(peer))
				}
				assert.Equal(t, want, le.Uint64(ctx[8*peer:]), "base[%d]", peer)
			}
			assert.Equal(t, uint64(0), le.Uint64(ctx[64:]), "flags: per plan")
			assert.Equal(t, uint64(0), le.Uint64(ctx[72:]), "epochs: per plan")
			assert.Equal(t, uint64(r.errDev), le.Uint64(ctx[80:]))
			assert.Equal(t, uint32(3e6), le.Uint32(ctx[88:]), "timeout_us")
			assert.Equal(t, uint32(0), le.Uint32(ctx[92:]), "launch: per launch")
			assert.Equal(t, uint32(k), le.Uint32(ctx[96:]))
			assert.Equal(t, uint32(n), le.Uint32(ctx[100:]))
			assert.Equal(t, uint32(0), le.Uint32(ctx[104:]))
			assert.Equal(t, uint32(0), le.Uint32(ctx[108:]), "check: per launch")
		}
		require.NoError(t, w.Run(func(r *Rank) error {
			for i := 0; i < 50; i++ {
				if err := r.HostBarrier(r.Stream()); err != nil {
					return err
				}
			}
			return nil
		}))
	}
}

func TestLocalWorldCloseFreesEverything(t *testing.T) {
	p := fakegpu.New(2)
	w, err := NewLocalWorld(2, Options{Platform: p, HeapBytes: 1 << 16})
	require.NoError(t, err)
	require.Positive(t, p.LiveRegions())
	require.NoError(t, w.Close())
	assert.Zero(t, p.LiveRegions())
	assert.Error(t, w.Run(func(*Rank) error { return nil }), "closed")
}

func TestLocalWorldNeedsPeerAccess(t *testing.T) {
	p := fakegpu.New(3)
	p.SetPeerTopology(func(from, to int) bool { return !(from == 2 && to == 0) })
	_, err := NewLocalWorld(3, Options{Platform: p, HeapBytes: 1 << 16})
	require.ErrorContains(t, err, "GPU 2 cannot access GPU 0")
	_, err = NewLocalWorld(4, Options{Platform: fakegpu.New(3), HeapBytes: 1 << 16})
	require.ErrorContains(t, err, "only 3 GPU")
	_, err = NewLocalWorld(9, Options{Platform: fakegpu.New(9)})
	require.Error(t, err)

	p = fakegpu.New(2)
	p.SetMemoryLimit(1, 1<<16)
	_, err = NewLocalWorld(2, Options{Platform: p, HeapBytes: 1 << 20})
	var he *HeapError
	require.ErrorAs(t, err, &he)
	assert.Contains(t, he.Error(), "IRISGEN_HEAP_BYTES")
	assert.Zero(t, p.LiveRegions(), "a failed world frees what it made")
}

func TestRunAbortsOnFailure(t *testing.T) {
	w := newFakeWorld(t, 3, Options{})
	boom := errors.New("boom")
	start := time.Now()
	err := w.Run(func(r *Rank) error {
		if r.Rank() == 1 {
			return boom
		}
		return r.HostBarrier(r.Stream()) // would wait forever for rank 1
	})
	assert.Less(t, time.Since(start), 10*time.Second)
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, err, ErrWorld)
	assert.Regexp(t, `^rank 1: boom`, err.Error(), "the root cause comes first")

	err = w.Run(func(r *Rank) error {
		if r.Rank() == 0 {
			panic("kaboom")
		}
		return r.HostBarrier(r.Stream())
	})
	require.ErrorContains(t, err, "rank 0 panicked: kaboom")

	// After failures the world works again.
	require.NoError(t, w.Run(func(r *Rank) error { return r.HostBarrier(r.Stream()) }))
}

func TestHostBarrierDetectsDivergentHeaps(t *testing.T) {
	w := newFakeWorld(t, 2, Options{})
	err := w.Run(func(r *Rank) error {
		if _, err := r.Heap().Alloc(irismodel.F32, int64(10+r.Rank())*100); err != nil {
			return err
		}
		return r.HostBarrier(r.Stream())
	})
	var he *HeapError
	require.ErrorAs(t, err, &he)
	assert.Contains(t, he.Error(), "Alloc and Free are collective")

	// The same layout reached through different histories is fine.
	w = newFakeWorld(t, 2, Options{})
	require.NoError(t, w.Run(func(r *Rank) error {
		h := r.Heap()
		if r.Rank() == 1 {
			x, _ := h.Alloc(irismodel.U64, 1000)
			if err := h.Free(x); err != nil {
				return err
			}
		}
		if _, err := h.Alloc(irismodel.F32, 100); err != nil {
			return err
		}
		return r.HostBarrier(r.Stream())
	}))
}

func TestHostBarrierRefusedWhileCapturing(t *testing.T) {
	w := newFakeWorld(t, 1, Options{})
	r := w.Rank(0)
	defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
	require.NoError(t, r.Device().BeginCapture(r.Stream(), gpu.CaptureGlobal))
	var ce *CaptureError
	require.ErrorAs(t, r.HostBarrier(r.Stream()), &ce)
	assert.Contains(t, ce.Error(), "BarrierDevice")
	_, err := r.Device().EndCapture(r.Stream())
	require.NoError(t, err, "the capture was not invalidated")
}

func TestCheckReadsErrorRecord(t *testing.T) {
	w := newFakeWorld(t, 2, Options{})
	r := w.Rank(1)
	p := fakeOf(r)
	require.NoError(t, r.Check())
	rec := make([]byte, 32)
	le := binary.LittleEndian
	le.PutUint32(rec[0:], 1)
	le.PutUint32(rec[4:], 1)
	le.PutUint32(rec[8:], 0)
	le.PutUint32(rec[12:], 5)
	le.PutUint64(rec[16:], 42)
	require.NoError(t, p.Write(r.errDev, rec)) // as a kernel would, through the device address
	err := r.Check()
	var te *BarrierTimeoutError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, BarrierTimeoutError{Rank: 1, Peer: 0, Block: 5, Epoch: 42}, *te)
	assert.ErrorIs(t, err, ErrBarrierTimeout)
	assert.Error(t, r.Check(), "the record is sticky")

	err = w.Run(func(r *Rank) error { return r.HostBarrier(r.Stream()) })
	require.ErrorAs(t, err, &te, "a host barrier reports the record")
}

// joinFakeProcesses joins a process world of n ranks on goroutines, each
// with its own config as its own process would have, on one fake platform.
func joinFakeProcesses(t *testing.T, p *fakegpu.Platform, n int, opts Options) []*Rank {
	t.Helper()
	port := freePort(t)
	ranks, errs := make([]*Rank, n), make([]error, n)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Platform = p
			cfg := ProcessConfig{Rank: k, WorldSize: n, LocalRank: k, MasterAddr: "127.0.0.1", MasterPort: port}
			ranks[k], errs[k] = JoinProcessWorldConfig(cfg, o)
		}()
	}
	wg.Wait()
	for k, err := range errs {
		require.NoError(t, err, "rank %d", k)
	}
	return ranks
}

func closeAll(t *testing.T, ranks []*Rank) {
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for k, r := range ranks {
		wg.Add(1)
		go func() { defer wg.Done(); errs[k] = r.Close() }()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestProcessWorld(t *testing.T) {
	p := fakegpu.New(2)
	ranks := joinFakeProcesses(t, p, 2, Options{HeapBytes: 1 << 16, RendezvousTimeout: 10 * time.Second})
	r0, r1 := ranks[0], ranks[1]
	// Each rank sees the peer's heap through an IPC mapping of its own.
	require.NotEqual(t, r0.Heap().Base(0), r1.Heap().Base(0))
	x, err := r0.Heap().Alloc(irismodel.U64, 4)
	require.NoError(t, err)
	y, err := r1.Heap().Alloc(irismodel.U64, 4)
	require.NoError(t, err)
	require.NoError(t, p.Write(x.Ptr, []byte("written by rank 0 on its heap...")))
	got, err := p.Read(r1.Heap().Peer(y.Ptr, 0), 32)
	require.NoError(t, err)
	assert.Equal(t, "written by rank 0 on its heap...", string(got))
	assert.Equal(t, uint64(r1.Heap().Base(0)), binary.LittleEndian.Uint64(r1.ctxBytes()), "ctx base[0] on rank 1 is the IPC mapping")

	errs := make([]error, 2)
	var wg sync.WaitGroup
	for k, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20 && errs[k] == nil; i++ {
				errs[k] = r.HostBarrier(r.Stream())
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	closeAll(t, ranks)
	assert.Zero(t, p.LiveRegions(), "Close frees heaps, IPC mappings, error records")
}

func TestProcessWorldSetupFailureReachesEveryRank(t *testing.T) {
	p := fakegpu.New(2)
	p.SetMemoryLimit(1, 1<<10) // rank 1 cannot allocate its heap
	port := freePort(t)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := ProcessConfig{Rank: k, WorldSize: 2, LocalRank: k, MasterAddr: "127.0.0.1", MasterPort: port}
			_, errs[k] = JoinProcessWorldConfig(cfg, Options{Platform: p, HeapBytes: 1 << 16, RendezvousTimeout: 10 * time.Second})
		}()
	}
	wg.Wait()
	var he *HeapError
	require.ErrorAs(t, errs[1], &he)
	var we *WorldError
	require.ErrorAs(t, errs[0], &we)
	assert.Equal(t, 1, we.Peer)
	assert.Zero(t, p.LiveRegions())
}

func TestProcessConfigFromEnv(t *testing.T) {
	for _, v := range []string{"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} {
		t.Setenv(v, "")
	}
	_, err := JoinProcessWorld(Options{Platform: fakegpu.New(1)})
	require.ErrorContains(t, err, "RANK is not set")
	assert.Contains(t, err.Error(), "irisgen run -n N -- prog")
	t.Setenv("RANK", "1")
	t.Setenv("WORLD_SIZE", "2")
	t.Setenv("LOCAL_RANK", "1")
	t.Setenv("MASTER_PORT", "x")
	_, err = ProcessConfigFromEnv()
	require.ErrorContains(t, err, `MASTER_PORT="x"`)
	t.Setenv("MASTER_PORT", "29500")
	_, err = ProcessConfigFromEnv()
	require.ErrorContains(t, err, "MASTER_ADDR is not set")
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	cfg, err := ProcessConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, ProcessConfig{Rank: 1, WorldSize: 2, LocalRank: 1, MasterAddr: "127.0.0.1", MasterPort: 29500}, cfg)

	_, err = JoinProcessWorldConfig(ProcessConfig{Rank: 2, WorldSize: 2}, Options{})
	require.ErrorContains(t, err, "RANK=2")
}

var _ gpu.Platform = (*fakegpu.Platform)(nil)

// TestShareGPUs: ranks may share GPUs only when asked; rank i then runs on
// GPU i mod the device count, peer access is enabled only between distinct
// GPUs, and the ranks' host barriers and heaps work as in any world.
func TestShareGPUs(t *testing.T) {
	_, err := NewLocalWorld(3, Options{Platform: fakegpu.New(1), HeapBytes: 1 << 16})
	require.ErrorContains(t, err, "IRISGEN_SHARE_GPUS=1")

	for _, c := range []struct{ gpus, world int }{{1, 2}, {1, 4}, {2, 4}, {3, 8}} {
		p := fakegpu.New(c.gpus)
		w := newFakeWorld(t, c.world, Options{Platform: p, ShareGPUs: true})
		for k, r := range w.Ranks() {
			assert.Equal(t, k%c.gpus, r.Device().Ordinal(), "%d GPUs, world %d: rank %d", c.gpus, c.world, k)
			assert.Equal(t, w.Rank(k).Heap().Base(k), w.Rank(0).Heap().Base(k), "every rank sees rank %d's heap at one address", k)
		}
		for i := 0; i < c.gpus; i++ {
			for j := 0; j < c.gpus; j++ {
				assert.Equal(t, i != j, p.PeerEnabled(i, j), "%d GPUs: peer access %d->%d", c.gpus, i, j)
			}
		}
		require.NoError(t, w.Run(func(r *Rank) error { return r.HostBarrier(r.Stream()) }))
	}

	t.Setenv("IRISGEN_SHARE_GPUS", "1")
	w := newFakeWorld(t, 2, Options{Platform: fakegpu.New(1)})
	assert.Equal(t, 0, w.Rank(1).Device().Ordinal())
	assert.True(t, w.SharesGPUs())
	t.Setenv("IRISGEN_SHARE_GPUS", "yes")
	_, err = NewLocalWorld(2, Options{Platform: fakegpu.New(1), HeapBytes: 1 << 16})
	require.ErrorContains(t, err, `IRISGEN_SHARE_GPUS="yes"`)
	t.Setenv("IRISGEN_SHARE_GPUS", "0")
	_, err = NewLocalWorld(2, Options{Platform: fakegpu.New(1), HeapBytes: 1 << 16})
	require.ErrorContains(t, err, "only 1 GPU")
}

// TestShareGPUsProcessWorld: in a multi-process world LOCAL_RANK picks the
// GPU modulo the device count when ranks share GPUs.
func TestShareGPUsProcessWorld(t *testing.T) {
	p := fakegpu.New(1)
	ranks := joinFakeProcesses(t, p, 3, Options{HeapBytes: 1 << 16, RendezvousTimeout: 10 * time.Second, ShareGPUs: true})
	defer closeAll(t, ranks)
	for _, r := range ranks {
		assert.Equal(t, 0, r.Device().Ordinal())
	}
	errs := eachProcess(ranks, func(r *Rank) error { return r.HostBarrier(r.Stream()) })
	for k, err := range errs {
		require.NoError(t, err, "rank %d", k)
	}
}

// TestShareGPUsCloseWaitsForCaptures: ranks sharing a GPU share its
// context, so a plan's close, which synchronizes the context, waits until
// every rank has reached it: here rank 1 is still capturing a graph when
// rank 0 closes, and the capture must come through intact.
func TestShareGPUsCloseWaitsForCaptures(t *testing.T) {
	opts := kernelOptions(1, testHash)
	opts.ShareGPUs, opts.HeapBytes = true, 1<<20
	w, err := NewLocalWorld(2, opts)
	require.NoError(t, err)
	defer func() { require.NoError(t, w.Close()) }()
	capturing := make(chan struct{})
	require.NoError(t, w.Run(func(r *Rank) error {
		a, err := newPlan(r, testSpec())
		if err != nil {
			return err
		}
		b, err := newPlan(r, testSpec())
		if err != nil {
			return err
		}
		if r.Rank() == 0 {
			<-capturing
			return errors.Join(a.Close(), b.Close())
		}
		g, err := r.Capture(r.Stream(), func() error {
			close(capturing)
			time.Sleep(50 * time.Millisecond) // rank 0 is in Close by now
			return b.testLaunch(r.Stream(), irismodel.BarrierNone, b.testArgs())
		})
		if err != nil {
			return err
		}
		return errors.Join(g.Destroy(), a.Close(), b.Close())
	}))
}

// TestProcessWorldCaptureKeepsItsThread: a rank of a process world captures
// in global mode, which CUDA ends only on the thread that began it; a
// capture whose launches block (here: a host rendezvous, as a host-side
// step of any launch can) must still end there, capture after capture (a
// 4-process probe on H200s failed with CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD
// before Capture pinned its thread).
func TestProcessWorldCaptureKeepsItsThread(t *testing.T) {
	p := fakegpu.New(2)
	ranks := joinFakeProcesses(t, p, 2, Options{HeapBytes: 1 << 16, RendezvousTimeout: 10 * time.Second})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for k, r := range ranks {
		require.Equal(t, gpu.CaptureGlobal, r.CaptureMode())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30 && errs[k] == nil; i++ {
				var g *Graph
				g, errs[k] = r.Capture(r.Stream(), func() error {
					for range 3 { // block: the goroutine may wake on another thread
						time.Sleep(100 * time.Microsecond)
					}
					return nil
				})
				if errs[k] == nil {
					errs[k] = g.Destroy()
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	closeAll(t, ranks)
}

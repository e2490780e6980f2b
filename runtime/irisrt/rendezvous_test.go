package irisrt

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// joinTCP forms a TCP group of n ranks on goroutines; delay[k] postpones
// rank k's join.
func joinTCP(t *testing.T, n int, join, op time.Duration, delay map[int]time.Duration) ([]Group, []error) {
	t.Helper()
	port := freePort(t)
	groups, errs := make([]Group, n), make([]error, n)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay[k])
			cfg := ProcessConfig{Rank: k, WorldSize: n, LocalRank: k, MasterAddr: "127.0.0.1", MasterPort: port}
			groups[k], errs[k] = dialGroup(cfg, join, op)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, g := range groups {
			if g != nil {
				g.Close()
			}
		}
	})
	return groups, errs
}

// eachRank runs fn for every group on its own goroutine.
func eachRank(groups []Group, fn func(g Group) error) []error {
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for k, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = fn(g)
		}()
	}
	wg.Wait()
	return errs
}

// exercise runs many barriers and all-gathers with rank-specific data of
// varying sizes, checking every result.
func exercise(g Group) error {
	for i := 0; i < 200; i++ {
		if err := g.Barrier(); err != nil {
			return err
		}
		mine := bytes.Repeat([]byte{byte(g.Rank()), byte(i)}, (g.Rank()*37+i)%50)
		all, err := g.AllGather(mine)
		if err != nil {
			return err
		}
		if len(all) != g.Size() {
			return fmt.Errorf("got %d parts", len(all))
		}
		for p, b := range all {
			want := bytes.Repeat([]byte{byte(p), byte(i)}, (p*37+i)%50)
			if !bytes.Equal(b, want) {
				return fmt.Errorf("rank %d round %d: part of rank %d is %x, want %x", g.Rank(), i, p, b, want)
			}
		}
	}
	return nil
}

func localGroups(n int, timeout time.Duration) ([]Group, *localGroup) {
	lg := newLocalGroup(n, timeout)
	gs := make([]Group, n)
	for k := range gs {
		gs[k] = lg.endpoint(k)
	}
	return gs, lg
}

func TestLocalGroupBarriersAndAllGather(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		gs, _ := localGroups(n, 10*time.Second)
		for _, err := range eachRank(gs, exercise) {
			require.NoError(t, err)
		}
	}
}

func TestLocalGroupAbortAndTimeout(t *testing.T) {
	gs, lg := localGroups(3, 10*time.Second)
	start := time.Now()
	errs := eachRank(gs, func(g Group) error {
		if g.Rank() == 2 {
			lg.abort(2, "failed", errors.New("boom"))
			return nil
		}
		return g.Barrier()
	})
	assert.Less(t, time.Since(start), 5*time.Second)
	for k := 0; k < 2; k++ {
		var we *WorldError
		require.ErrorAs(t, errs[k], &we)
		assert.Equal(t, 2, we.Peer)
		assert.Contains(t, we.Error(), "boom")
	}
	lg.reset()
	for _, err := range eachRank(gs, func(g Group) error { return g.Barrier() }) {
		require.NoError(t, err, "a reset group works again")
	}

	gs, _ = localGroups(2, 100*time.Millisecond)
	errs = eachRank(gs, func(g Group) error {
		if g.Rank() == 1 {
			return nil // never arrives
		}
		return g.Barrier()
	})
	var we *WorldError
	require.ErrorAs(t, errs[0], &we)
	assert.Equal(t, 1, we.Peer)
	assert.Contains(t, we.Error(), "did not arrive")
}

func TestTCPGroup(t *testing.T) {
	gs, errs := joinTCP(t, 4, 10*time.Second, 10*time.Second, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, err := range eachRank(gs, exercise) {
		require.NoError(t, err)
	}
	// A large all-gather survives framing.
	big := bytes.Repeat([]byte("irisgen"), 1<<18)
	for _, err := range eachRank(gs, func(g Group) error {
		all, err := g.AllGather(big)
		if err == nil && !bytes.Equal(all[3], big) {
			err = errors.New("large all-gather corrupted")
		}
		return err
	}) {
		require.NoError(t, err)
	}
}

func TestTCPGroupLateConnector(t *testing.T) {
	// Rank 2 joins 700ms late and rank 0 (the listener) 300ms late: the
	// others keep dialing.
	gs, errs := joinTCP(t, 3, 10*time.Second, 10*time.Second, map[int]time.Duration{0: 300 * time.Millisecond, 2: 700 * time.Millisecond})
	for _, err := range errs {
		require.NoError(t, err)
	}
	for _, err := range eachRank(gs, func(g Group) error { return g.Barrier() }) {
		require.NoError(t, err)
	}
}

// TestJoinFrameLimit: while joining, a frame's length is bounded by
// maxJoinFrame, so a stray connection's first bytes read as a length (an
// HTTP "GET " is 542 MB) are refused at once, nothing allocated for them;
// a hello of the real size is read.
func TestJoinFrameLimit(t *testing.T) {
	for _, c := range []struct {
		name, sent string
		want       string // "": read
	}{
		{"http", "GET / HTTP/1.0\r\n\r\n", "corrupt frame length 542393671"},
		{"short", "\x08\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00\x01", "corrupt frame length 8"},
		{"hello", string(helloFrame(2, 4)), ""},
	} {
		a, b := net.Pipe()
		go func() { _, _ = a.Write([]byte(c.sent)); a.Close() }()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f, err := readFrame(b, time.Now().Add(5*time.Second), maxJoinFrame)
		runtime.ReadMemStats(&after)
		b.Close()
		if c.want != "" {
			require.ErrorContains(t, err, c.want, c.name)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "%s: refused without allocating the length it claims", c.name)
			continue
		}
		require.NoError(t, err, c.name)
		assert.Equal(t, byte(frameHello), f.kind, c.name)
	}
}

// helloFrame is the bytes of rank's hello to a world of n.
func helloFrame(rank, n int) []byte {
	var buf bytes.Buffer
	a, b := net.Pipe()
	go func() {
		_ = writeFrame(a, time.Now().Add(5*time.Second), frame{kind: frameHello, payload: helloPayload(rank, n)})
		a.Close()
	}()
	_, _ = buf.ReadFrom(b)
	return buf.Bytes()
}

// TestTCPGroupStrayConnections: connections that are not ranks (silent,
// garbage, closed at once) reach rank 0 before the ranks do; the world
// forms at once anyway, and a silent one is dropped.
func TestTCPGroupStrayConnections(t *testing.T) {
	port := freePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	groups, errs := make([]Group, 3), make([]error, 3)
	var wg sync.WaitGroup
	join := func(k int) {
		defer wg.Done()
		cfg := ProcessConfig{Rank: k, WorldSize: 3, LocalRank: k, MasterAddr: "127.0.0.1", MasterPort: port}
		groups[k], errs[k] = dialGroup(cfg, 30*time.Second, 30*time.Second)
	}
	wg.Add(1)
	go join(0)
	silent, err := dialRetry(addr, time.Now().Add(10*time.Second))
	require.NoError(t, err)
	defer silent.Close()
	garbage, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, _ = garbage.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	defer garbage.Close()
	closed, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	closed.Close()
	time.Sleep(50 * time.Millisecond) // the strays are accepted first
	start := time.Now()
	wg.Add(2)
	go join(1)
	go join(2)
	wg.Wait()
	for k, err := range errs {
		require.NoError(t, err, "rank %d", k)
		defer groups[k].Close()
	}
	assert.Less(t, time.Since(start), 3*time.Second, "stray connections must not hold up the join")
	for _, err := range eachRank(groups, exercise) {
		require.NoError(t, err)
	}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = silent.Read(make([]byte, 1))
	assert.Error(t, err, "rank 0 drops the silent connection once the world has formed")
	var ne net.Error
	assert.False(t, errors.As(err, &ne) && ne.Timeout(), "dropped, not left open: %v", err)
}

func TestTCPGroupRankNeverComes(t *testing.T) {
	port := freePort(t)
	errs := make([]error, 2)
	start := time.Now()
	var wg sync.WaitGroup
	for k := 0; k < 2; k++ { // ranks 0 and 1 of a world of 3; rank 2 never comes
		wg.Add(1)
		go func() {
			defer wg.Done()
			var g Group
			g, errs[k] = dialGroup(ProcessConfig{Rank: k, WorldSize: 3, MasterAddr: "127.0.0.1", MasterPort: port}, 700*time.Millisecond, time.Second)
			if g != nil {
				g.Close()
			}
		}()
	}
	wg.Wait()
	assert.Less(t, time.Since(start), 5*time.Second)
	for k, err := range errs {
		var we *WorldError
		require.ErrorAs(t, err, &we, "rank %d", k)
	}
	assert.Contains(t, errs[0].Error(), "[2] did not join")
}

func TestTCPGroupDeadRank(t *testing.T) {
	gs, errs := joinTCP(t, 3, 10*time.Second, 20*time.Second, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	start := time.Now()
	errs = eachRank(gs, func(g Group) error {
		if err := g.Barrier(); err != nil {
			return err
		}
		if g.Rank() == 2 {
			// Die: drop the connection without saying goodbye.
			return g.(*tcpGroup).conn.Close()
		}
		return g.Barrier()
	})
	assert.Less(t, time.Since(start), 10*time.Second, "a dead peer fails the group at once, not at the timeout")
	require.NoError(t, errs[2])
	for k := 0; k < 2; k++ {
		var we *WorldError
		require.ErrorAs(t, errs[k], &we, "rank %d", k)
		assert.Equal(t, 2, we.Peer, "rank %d: %v", k, errs[k])
	}
	// The group stays failed.
	require.Error(t, gs[0].Barrier())
}

func TestTCPGroupOutOfStep(t *testing.T) {
	gs, errs := joinTCP(t, 2, 10*time.Second, 5*time.Second, nil)
	for _, err := range errs {
		require.NoError(t, err)
	}
	// rank 1 sends a frame of the wrong generation.
	g1 := gs[1].(*tcpGroup)
	require.NoError(t, writeFrame(g1.conn, time.Now().Add(time.Second), frame{gen: 99, kind: frameGather}))
	err := gs[0].Barrier()
	require.ErrorContains(t, err, "out of step")
	require.Error(t, gs[1].Barrier())
}

func TestTCPGroupRejectsBadConfig(t *testing.T) {
	port := freePort(t)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for k, cfg := range []ProcessConfig{{Rank: 0, WorldSize: 2}, {Rank: 1, WorldSize: 3}} {
		cfg.MasterAddr, cfg.MasterPort = "127.0.0.1", port
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[k] = dialGroup(cfg, 3*time.Second, time.Second)
		}()
	}
	wg.Wait()
	require.ErrorContains(t, errs[0], "WORLD_SIZE=3")
	require.ErrorContains(t, errs[1], "refused")
}

package irisrt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Group is the host-side rendezvous of a world's ranks, seen from one rank.
// Every operation is collective: all ranks call it in the same order. When a
// rank fails, leaves or does not arrive in time, the operation returns a
// *WorldError on every other rank instead of hanging, and the group stays
// failed.
type Group interface {
	Rank() int
	Size() int
	// AllGather returns every rank's data, indexed by rank.
	AllGather(data []byte) ([][]byte, error)
	// Barrier returns when every rank has called it.
	Barrier() error
	// Close leaves the group; later operations fail on every rank.
	Close() error
}

// ---------------------------------------------------------------------------
// In-process group: one goroutine per rank, a mutex and a condition variable.

type localGroup struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	timeout time.Duration
	gen     uint64
	arrived []bool
	count   int
	slots   [][]byte
	result  [][]byte
	failed  *groupFailure
}

// groupFailure is why a group stopped working.
type groupFailure struct {
	peer int // rank that failed, -1 when not one rank's fault
	msg  string
	err  error
}

func newLocalGroup(n int, timeout time.Duration) *localGroup {
	g := &localGroup{n: n, timeout: timeout, arrived: make([]bool, n), slots: make([][]byte, n)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// abort fails the group: every waiting and future operation returns an error
// naming peer.
func (g *localGroup) abort(peer int, msg string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed == nil {
		g.failed = &groupFailure{peer: peer, msg: msg, err: err}
	}
	g.cond.Broadcast()
}

// reset makes a failed group usable again; only when no rank is inside an
// operation (World.Run calls it before starting the ranks).
func (g *localGroup) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failed = nil
	g.gen++
	g.count = 0
	clear(g.arrived)
	clear(g.slots)
}

func (g *localGroup) endpoint(rank int) *localEndpoint { return &localEndpoint{g: g, rank: rank} }

type localEndpoint struct {
	g      *localGroup
	rank   int
	closed bool
}

func (e *localEndpoint) Rank() int { return e.rank }
func (e *localEndpoint) Size() int { return e.g.n }

func (e *localEndpoint) Barrier() error {
	_, err := e.allGather("barrier", nil)
	return err
}

func (e *localEndpoint) AllGather(data []byte) ([][]byte, error) {
	return e.allGather("all-gather", data)
}

func (e *localEndpoint) Close() error {
	e.g.abort(e.rank, "left the world (closed)", nil)
	return nil
}

func (e *localEndpoint) worldErr(op string, f *groupFailure) error {
	return &WorldError{Rank: e.rank, Op: op, Peer: f.peer, Msg: f.msg, Err: f.err}
}

func (e *localEndpoint) allGather(op string, data []byte) ([][]byte, error) {
	g := e.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed != nil {
		return nil, e.worldErr(op, g.failed)
	}
	if g.arrived[e.rank] {
		return nil, &WorldError{Rank: e.rank, Op: op, Peer: -1, Msg: "rank entered the same rendezvous twice (two goroutines using one rank's group)"}
	}
	g.arrived[e.rank] = true
	g.slots[e.rank] = bytes.Clone(data)
	g.count++
	if g.count == g.n {
		g.result = g.slots
		g.slots = make([][]byte, g.n)
		clear(g.arrived)
		g.count = 0
		g.gen++
		g.cond.Broadcast()
		return append([][]byte(nil), g.result...), nil
	}
	gen := g.gen
	timer := time.AfterFunc(g.timeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.gen != gen || g.failed != nil {
			return
		}
		missing := -1
		for r, ok := range g.arrived {
			if !ok {
				missing = r
				break
			}
		}
		g.failed = &groupFailure{peer: missing, msg: fmt.Sprintf("did not arrive within %v (raise Options.RendezvousTimeout / IRISGEN_RENDEZVOUS_TIMEOUT if it was merely slow)", g.timeout)}
		g.cond.Broadcast()
	})
	defer timer.Stop()
	for g.gen == gen && g.failed == nil {
		g.cond.Wait()
	}
	if g.gen == gen {
		return nil, e.worldErr(op, g.failed)
	}
	return append([][]byte(nil), g.result...), nil
}

// ---------------------------------------------------------------------------
// TCP group: rank 0 listens on MASTER_ADDR:MASTER_PORT, the others dial it
// (a star). Every message is a frame: uint32 length, uint64 generation,
// uint8 kind, payload. Rank 0 collects one frame per peer per operation and
// answers with the gathered result.

const (
	frameHello  = 1 // payload: magic, rank u32, world u32
	frameWelcom = 2
	frameReject = 3 // payload: message
	frameGather = 4 // payload: data
	frameResult = 5 // payload: world x (u32 length, bytes)
	frameAbort  = 6 // payload: i32 failed rank, message
	frameBye    = 7

	helloMagic = "IRISGEN1"
	maxFrame   = 1 << 30
	// maxJoinFrame bounds the frames of the join, before a connection has
	// shown it is a rank: a hello, or rank 0's welcome or refusal. A stray
	// connection's bytes read as a length (an HTTP "GET " is 542 MB) are
	// refused there instead of allocated.
	maxJoinFrame = 64 << 10
)

type frame struct {
	gen     uint64
	kind    byte
	payload []byte
}

func writeFrame(c net.Conn, deadline time.Time, f frame) error {
	hdr := make([]byte, 13, 13+len(f.payload))
	binary.LittleEndian.PutUint32(hdr, uint32(9+len(f.payload)))
	binary.LittleEndian.PutUint64(hdr[4:], f.gen)
	hdr[12] = f.kind
	_ = c.SetWriteDeadline(deadline)
	_, err := c.Write(append(hdr, f.payload...))
	return err
}

// readFrame reads one frame of at most limit bytes (maxFrame, or
// maxJoinFrame while joining).
func readFrame(c net.Conn, deadline time.Time, limit uint32) (frame, error) {
	_ = c.SetReadDeadline(deadline)
	var hdr [13]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return frame{}, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n < 9 || n > limit {
		return frame{}, fmt.Errorf("corrupt frame length %d (is something other than an irisgen rank talking to this port?)", n)
	}
	f := frame{gen: binary.LittleEndian.Uint64(hdr[4:]), kind: hdr[12], payload: make([]byte, n-9)}
	_, err := io.ReadFull(c, f.payload)
	return f, err
}

func encodeParts(parts [][]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

func decodeParts(b []byte, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range out {
		if len(b) < 4 {
			return nil, errors.New("truncated all-gather result")
		}
		l := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if uint64(len(b)) < uint64(l) {
			return nil, errors.New("truncated all-gather result")
		}
		out[i], b = b[:l:l], b[l:]
	}
	if len(b) != 0 {
		return nil, errors.New("trailing bytes in all-gather result")
	}
	return out, nil
}

type tcpGroup struct {
	rank, n int
	timeout time.Duration

	opMu sync.Mutex // one operation at a time
	gen  uint64

	// rank 0
	peers []net.Conn
	inbox []chan frame

	// other ranks
	conn net.Conn

	mu     sync.Mutex
	failed *groupFailure
	closed bool
	done   chan struct{} // closed on failure
}

func (g *tcpGroup) Rank() int { return g.rank }
func (g *tcpGroup) Size() int { return g.n }

// fail records the first failure and tears the connections down, so every
// other rank learns about it at once (rank 0 first tells them who failed).
func (g *tcpGroup) fail(f *groupFailure) {
	g.mu.Lock()
	if g.failed != nil {
		g.mu.Unlock()
		return
	}
	g.failed = f
	close(g.done)
	g.mu.Unlock()
	if g.rank == 0 {
		msg := binary.LittleEndian.AppendUint32(nil, uint32(int32(f.peer)))
		text := f.msg
		if f.err != nil {
			text += ": " + f.err.Error()
		}
		msg = append(msg, text...)
		for p, c := range g.peers {
			if c != nil && p != f.peer {
				_ = writeFrame(c, time.Now().Add(time.Second), frame{kind: frameAbort, payload: msg})
			}
		}
		for _, c := range g.peers {
			if c != nil {
				_ = c.Close()
			}
		}
	} else if g.conn != nil {
		_ = g.conn.Close()
	}
}

func (g *tcpGroup) failure() *groupFailure {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

func (g *tcpGroup) worldErr(op string, f *groupFailure) error {
	return &WorldError{Rank: g.rank, Op: op, Peer: f.peer, Msg: f.msg, Err: f.err}
}

// readLoop runs on rank 0 for each peer: it forwards the peer's frames and
// turns a lost connection into a group failure even while no operation runs.
func (g *tcpGroup) readLoop(peer int) {
	c := g.peers[peer]
	for {
		f, err := readFrame(c, time.Time{}, maxFrame)
		if err != nil {
			msg := "lost connection (the process died or closed its world)"
			if errors.Is(err, io.EOF) {
				err = nil
			}
			g.fail(&groupFailure{peer: peer, msg: msg, err: err})
			return
		}
		if f.kind == frameBye {
			g.fail(&groupFailure{peer: peer, msg: "left the world (closed)"})
			return
		}
		select {
		case g.inbox[peer] <- f:
		case <-g.done:
			return
		}
	}
}

func (g *tcpGroup) Barrier() error {
	_, err := g.op("barrier", nil)
	return err
}

func (g *tcpGroup) AllGather(data []byte) ([][]byte, error) { return g.op("all-gather", data) }

func (g *tcpGroup) op(name string, data []byte) ([][]byte, error) {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	if f := g.failure(); f != nil {
		return nil, g.worldErr(name, f)
	}
	g.gen++
	if g.rank == 0 {
		return g.rootOp(name, data)
	}
	return g.leafOp(name, data)
}

func (g *tcpGroup) rootOp(name string, data []byte) ([][]byte, error) {
	parts := make([][]byte, g.n)
	parts[0] = bytes.Clone(data)
	timer := time.NewTimer(g.timeout)
	defer timer.Stop()
	for p := 1; p < g.n; p++ {
		select {
		case f := <-g.inbox[p]:
			if f.kind != frameGather || f.gen != g.gen {
				g.fail(&groupFailure{peer: p, msg: fmt.Sprintf("out of step: sent frame kind %d of generation %d during generation %d (ranks must make the same collective calls in the same order)", f.kind, f.gen, g.gen)})
				return nil, g.worldErr(name, g.failure())
			}
			parts[p] = f.payload
		case <-g.done:
			return nil, g.worldErr(name, g.failure())
		case <-timer.C:
			g.fail(&groupFailure{peer: p, msg: fmt.Sprintf("did not arrive within %v (raise Options.RendezvousTimeout / IRISGEN_RENDEZVOUS_TIMEOUT if it was merely slow)", g.timeout)})
			return nil, g.worldErr(name, g.failure())
		}
	}
	res := frame{gen: g.gen, kind: frameResult, payload: encodeParts(parts)}
	deadline := time.Now().Add(g.timeout)
	for p := 1; p < g.n; p++ {
		if err := writeFrame(g.peers[p], deadline, res); err != nil {
			g.fail(&groupFailure{peer: p, msg: "lost connection", err: err})
			return nil, g.worldErr(name, g.failure())
		}
	}
	return parts, nil
}

func (g *tcpGroup) leafOp(name string, data []byte) ([][]byte, error) {
	deadline := time.Now().Add(g.timeout)
	if err := writeFrame(g.conn, deadline, frame{gen: g.gen, kind: frameGather, payload: data}); err != nil {
		g.fail(&groupFailure{peer: 0, msg: "lost connection to rank 0", err: err})
		return nil, g.worldErr(name, g.failure())
	}
	f, err := readFrame(g.conn, deadline, maxFrame)
	switch {
	case err != nil:
		var ne net.Error
		msg := "lost connection to rank 0 (it failed or closed its world)"
		if errors.As(err, &ne) && ne.Timeout() {
			msg = fmt.Sprintf("no answer from rank 0 within %v: some rank did not arrive (raise Options.RendezvousTimeout / IRISGEN_RENDEZVOUS_TIMEOUT if it was merely slow)", g.timeout)
			err = nil
		} else if errors.Is(err, io.EOF) {
			err = nil
		}
		g.fail(&groupFailure{peer: 0, msg: msg, err: err})
	case f.kind == frameAbort && len(f.payload) >= 4:
		peer := int(int32(binary.LittleEndian.Uint32(f.payload)))
		g.fail(&groupFailure{peer: peer, msg: string(f.payload[4:])})
	case f.kind != frameResult || f.gen != g.gen:
		g.fail(&groupFailure{peer: 0, msg: fmt.Sprintf("out of step: got frame kind %d of generation %d during generation %d", f.kind, f.gen, g.gen)})
	default:
		parts, err := decodeParts(f.payload, g.n)
		if err != nil {
			g.fail(&groupFailure{peer: 0, msg: "corrupt answer", err: err})
			break
		}
		return parts, nil
	}
	return nil, g.worldErr(name, g.failure())
}

// Close leaves the group. Peers still in (or entering) an operation get a
// *WorldError; call it after a final barrier.
func (g *tcpGroup) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	if g.rank != 0 && g.failure() == nil {
		_ = writeFrame(g.conn, time.Now().Add(time.Second), frame{kind: frameBye})
	}
	g.fail(&groupFailure{peer: g.rank, msg: "left the world (closed)"})
	return nil
}

// dialGroup forms the TCP group of cfg: rank 0 accepts every other rank,
// the others dial with retries, all until joinTimeout.
func dialGroup(cfg ProcessConfig, joinTimeout, opTimeout time.Duration) (Group, error) {
	return dialGroupOn(cfg, nil, joinTimeout, opTimeout)
}

// dialGroupOn is dialGroup where rank 0 may bring its listener already open
// (ln, closed on return); nil: it listens on MASTER_ADDR:MASTER_PORT.
func dialGroupOn(cfg ProcessConfig, ln net.Listener, joinTimeout, opTimeout time.Duration) (Group, error) {
	addr := net.JoinHostPort(cfg.MasterAddr, strconv.Itoa(cfg.MasterPort))
	g := &tcpGroup{rank: cfg.Rank, n: cfg.WorldSize, timeout: opTimeout, done: make(chan struct{})}
	deadline := time.Now().Add(joinTimeout)
	joinErr := func(peer int, msg string, err error) error {
		return &WorldError{Rank: cfg.Rank, Op: "join " + addr, Peer: peer, Msg: msg, Err: err}
	}
	if cfg.Rank == 0 {
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", addr); err != nil {
				return nil, joinErr(-1, "rank 0 cannot listen on MASTER_ADDR:MASTER_PORT (port in use? pick another MASTER_PORT)", err)
			}
		}
		defer ln.Close()
		if err := g.accept(ln.(*net.TCPListener), deadline); err != nil {
			for _, c := range g.peers {
				if c != nil {
					_ = writeFrame(c, time.Now().Add(time.Second), frame{kind: frameReject, payload: []byte(err.Error())})
					_ = c.Close()
				}
			}
			return nil, err
		}
		g.inbox = make([]chan frame, g.n)
		for p := 1; p < g.n; p++ {
			g.inbox[p] = make(chan frame, 1)
			go g.readLoop(p)
		}
		return g, nil
	}
	c, err := dialRetry(addr, deadline)
	if err != nil {
		return nil, joinErr(0, fmt.Sprintf("could not reach rank 0 within %v", joinTimeout), err)
	}
	if err := writeFrame(c, deadline, frame{kind: frameHello, payload: helloPayload(cfg.Rank, cfg.WorldSize)}); err != nil {
		c.Close()
		return nil, joinErr(0, "lost connection to rank 0", err)
	}
	f, err := readFrame(c, deadline, maxJoinFrame)
	switch {
	case err != nil:
		c.Close()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, joinErr(-1, fmt.Sprintf("not every rank joined within %v", joinTimeout), nil)
		}
		return nil, joinErr(0, "lost connection to rank 0 while joining (it failed, or another rank never came)", err)
	case f.kind == frameReject:
		c.Close()
		return nil, joinErr(0, "rank 0 refused the world: "+string(f.payload), nil)
	case f.kind != frameWelcom:
		c.Close()
		return nil, joinErr(0, fmt.Sprintf("unexpected frame kind %d while joining", f.kind), nil)
	}
	g.conn = c
	return g, nil
}

// helloPayload is rank's hello to rank 0 in a world of n: the magic, the
// rank and the world size.
func helloPayload(rank, n int) []byte {
	hello := binary.LittleEndian.AppendUint32([]byte(helloMagic), uint32(rank))
	return binary.LittleEndian.AppendUint32(hello, uint32(n))
}

func dialRetry(addr string, deadline time.Time) (net.Conn, error) {
	wait := 20 * time.Millisecond
	for {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			return c, nil
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// accept takes hellos until every rank 1..n-1 has joined, then welcomes them.
// Every connection says hello on a goroutine of its own, so a stray one
// (a port scanner, a health check) that says nothing holds up no rank.
func (g *tcpGroup) accept(ln *net.TCPListener, deadline time.Time) error {
	g.peers = make([]net.Conn, g.n)
	type hello struct {
		c           net.Conn // nil: the listener failed (the deadline passed)
		err         error
		rank, world int
		ok          bool // a well-formed hello
	}
	hellos := make(chan hello)
	done := make(chan struct{})
	var mu sync.Mutex
	pending := map[net.Conn]bool{} // connections that have not said hello yet
	defer func() {
		close(done)
		mu.Lock()
		for c := range pending {
			c.Close() // a stray connection's reader returns
		}
		mu.Unlock()
	}()
	go func() {
		for {
			_ = ln.SetDeadline(deadline)
			c, err := ln.Accept()
			if err != nil {
				select {
				case hellos <- hello{err: err}:
				case <-done:
				}
				return
			}
			mu.Lock()
			pending[c] = true
			mu.Unlock()
			go func() {
				f, err := readFrame(c, deadline, maxJoinFrame)
				mu.Lock()
				delete(pending, c)
				mu.Unlock()
				h := hello{c: c}
				if err == nil && f.kind == frameHello && len(f.payload) == len(helloMagic)+8 && string(f.payload[:len(helloMagic)]) == helloMagic {
					h.ok = true
					h.rank = int(binary.LittleEndian.Uint32(f.payload[len(helloMagic):]))
					h.world = int(binary.LittleEndian.Uint32(f.payload[len(helloMagic)+4:]))
				}
				select {
				case hellos <- h:
				case <-done:
					c.Close()
				}
			}()
		}
	}()
	for joined := 1; joined < g.n; {
		h := <-hellos
		if h.c == nil {
			var missing []int
			for p := 1; p < g.n; p++ {
				if g.peers[p] == nil {
					missing = append(missing, p)
				}
			}
			return &WorldError{Rank: 0, Op: "join", Peer: missing[0], Msg: fmt.Sprintf("ranks %v did not join before the deadline", missing), Err: h.err}
		}
		if !h.ok {
			h.c.Close() // not a rank (or it died): keep waiting for the real ones
			continue
		}
		var bad string
		switch {
		case h.world != g.n:
			bad = fmt.Sprintf("rank %d says WORLD_SIZE=%d, rank 0 has %d", h.rank, h.world, g.n)
		case h.rank < 1 || h.rank >= g.n:
			bad = fmt.Sprintf("a rank says RANK=%d, outside 1..%d", h.rank, g.n-1)
		case g.peers[h.rank] != nil:
			bad = fmt.Sprintf("two processes say RANK=%d", h.rank)
		}
		if bad != "" {
			_ = writeFrame(h.c, time.Now().Add(time.Second), frame{kind: frameReject, payload: []byte(bad)})
			h.c.Close()
			return &WorldError{Rank: 0, Op: "join", Peer: -1, Msg: bad}
		}
		g.peers[h.rank] = h.c
		joined++
	}
	for p := 1; p < g.n; p++ {
		if err := writeFrame(g.peers[p], deadline, frame{kind: frameWelcom}); err != nil {
			return &WorldError{Rank: 0, Op: "join", Peer: p, Msg: "lost connection while joining", Err: err}
		}
	}
	return nil
}

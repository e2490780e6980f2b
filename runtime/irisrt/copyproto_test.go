package irisrt

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// The fake runs a stream's operations when they are enqueued, so the copy
// tests see only the orders in which the ranks' host calls happen to run.
// On a GPU the host enqueues launch after launch ahead of the streams, and
// the streams (the launch's and the plan's lanes, on every rank) run in
// any order their waits allow. TestCopyProtocolInterleavings takes the
// operations that the runtime's own code enqueues for copy-engine launches
// in mode device (Plan.issueCopies, and Plan.hollow for a refused launch),
// recorded instead of run, and runs them on every interleaving of all the
// ranks' streams, checking what copy.go's protocol promises:
//
//   - no interleaving waits for ever;
//   - a flag word is never raised while it holds 1 (the lost raise that
//     makes its reader wait for ever);
//   - enter: a rank's copies of launch i start after every rank ended its
//     work before launch i, on every stream;
//   - done: a rank's work after launch i starts after every rank's copies
//     of launch i ended;
//   - the seen copy runs after the rank's enter waits (so it finds the
//     refused words of a peer whose hollow launch released them);
//   - every word ends at 0, as a launch found it (but a faulty rank's own:
//     after its world fault it takes no raise, and its world is closed).

// protoKind is the kind of a recorded stream operation.
type protoKind int

const (
	protoWrite     protoKind = iota // word = value (a raise, or the reader's reset)
	protoWait                       // until (int32)(word - value) >= 0
	protoData                       // a copy that moves a launch's bytes
	protoSeen                       // the seen copy (after the enter barrier's waits)
	protoRecord                     // an event recorded
	protoWaitEvent                  // a wait for the event record rec
	// The host's waits of a world fault's release (Plan.unblock), put on
	// the control stream before the raises that the host enqueues after
	// them (so the search lets nothing enqueued after them run before them):
	protoDrain // a StreamQuery answered done: until stream at.stream has run its first at.index operations
	protoPoll  // a read of word until it held 0 (Rank.peerWord)
)

// protoWord is a word of a rank's heap.
type protoWord struct {
	owner  int
	offset int64
}

// protoOp is a stream operation of launch launch of rank rank.
type protoOp struct {
	kind   protoKind
	word   protoWord
	value  uint32
	rec    int // protoRecord: its id; protoWaitEvent: the record waited for (0: none, no wait)
	at     protoAt
	copied bool // protoWrite: a raise as a 4-byte copy (Rank.raise without peer stream writes)
	enter  bool // protoWait: a wait on the rank's own enter row
	rank   int
	launch int
}

func (o protoOp) String() string {
	switch o.kind {
	case protoWrite:
		return fmt.Sprintf("rank %d launch %d: store %d into rank %d's word %#x", o.rank, o.launch, o.value, o.word.owner, o.word.offset)
	case protoWait:
		return fmt.Sprintf("rank %d launch %d: wait for rank %d's word %#x >= %d", o.rank, o.launch, o.word.owner, o.word.offset, o.value)
	case protoData:
		return fmt.Sprintf("rank %d launch %d: copy", o.rank, o.launch)
	case protoSeen:
		return fmt.Sprintf("rank %d launch %d: seen copy", o.rank, o.launch)
	case protoRecord:
		return fmt.Sprintf("rank %d launch %d: record %d", o.rank, o.launch, o.rec)
	case protoDrain:
		return fmt.Sprintf("rank %d launch %d: wait until stream %d ran %d operations", o.rank, o.launch, o.at.stream, o.at.index)
	case protoPoll:
		return fmt.Sprintf("rank %d launch %d: poll rank %d's word %#x until it holds 0", o.rank, o.launch, o.word.owner, o.word.offset)
	}
	return fmt.Sprintf("rank %d launch %d: wait for record %d", o.rank, o.launch, o.rec)
}

// protoStreams are the recorded streams of a world, and the records.
type protoStreams struct {
	ops     [][]protoOp
	index   map[[2]int]int // (rank, stream) -> ops index
	records int
	// faulty: a rank with a world fault, -1 for none: it takes no raise
	// after its fault, so its own words may end at 1 (the world is closed).
	faulty int
}

func (ps *protoStreams) add(rank int, s gpu.Stream, o protoOp) {
	k := [2]int{rank, int(s)}
	i, ok := ps.index[k]
	if !ok {
		i = len(ps.ops)
		ps.index[k] = i
		ps.ops = append(ps.ops, nil)
	}
	ps.ops[i] = append(ps.ops[i], o)
}

// protoDevice records the stream operations a rank's copy-engine launches
// enqueue instead of running them; anything else goes to the fake.
type protoDevice struct {
	gpu.Device
	r      *Rank
	ps     *protoStreams
	enter  gpu.DevicePtr // the plan's enter row
	launch int
	latest map[gpu.Event]int
}

func (d *protoDevice) word(p gpu.DevicePtr) protoWord {
	h := d.r.heap
	for j, b := range h.bases {
		if p >= b && p < b+gpu.DevicePtr(h.size) {
			return protoWord{j, int64(p - b)}
		}
	}
	panic(fmt.Sprintf("rank %d: %#x is on no heap", d.r.rank, uint64(p)))
}

func (d *protoDevice) add(s gpu.Stream, o protoOp) {
	o.rank, o.launch = d.r.rank, d.launch
	d.ps.add(d.r.rank, s, o)
}

func (d *protoDevice) ValueOps(ops []gpu.ValueOp, s gpu.Stream) error {
	for _, o := range ops {
		k := protoWrite
		if o.Wait {
			k = protoWait
		}
		d.add(s, protoOp{kind: k, word: d.word(o.Dst), value: o.Value, enter: o.Wait && o.Dst >= d.enter && o.Dst < d.enter+4*MaxWorld})
	}
	return nil
}

// WriteValue32 and WaitValue32 record too, so that a stream memory
// operation enqueued without a batch cannot run on the fake unseen.
func (d *protoDevice) WriteValue32(dst gpu.DevicePtr, v uint32, s gpu.Stream) error {
	return d.ValueOps([]gpu.ValueOp{{Dst: dst, Value: v}}, s)
}

func (d *protoDevice) WaitValue32(dst gpu.DevicePtr, v uint32, s gpu.Stream) error {
	return d.ValueOps([]gpu.ValueOp{{Dst: dst, Value: v, Wait: true}}, s)
}

func (d *protoDevice) CopyDtoDAsync(dst, src gpu.DevicePtr, bytes int64, s gpu.Stream) error {
	switch {
	case d.r.one != 0 && src == d.r.one: // Rank.raise without peer stream writes
		d.add(s, protoOp{kind: protoWrite, word: d.word(dst), value: 1, copied: true})
	case d.r.seen != nil && dst == d.r.seen.dev+copyPollOff: // Rank.peerWord
		// The search holds the control stream here until the word holds
		// 0; the host reads 0 (the copy does not run).
		d.add(s, protoOp{kind: protoPoll, word: d.word(src)})
		atomic.StoreUint32((*uint32)(unsafe.Add(d.r.seen.host, copyPollOff)), 0)
	case d.r.seen != nil && dst == d.r.seen.dev:
		d.add(s, protoOp{kind: protoSeen})
	default:
		d.add(s, protoOp{kind: protoData})
	}
	return nil
}

func (d *protoDevice) RecordEvent(e gpu.Event, s gpu.Stream) error {
	d.ps.records++
	d.latest[e] = d.ps.records
	d.add(s, protoOp{kind: protoRecord, rec: d.ps.records})
	return nil
}

// WaitEvent waits for the event's latest record enqueued before it, as
// cuStreamWaitEvent does.
func (d *protoDevice) WaitEvent(s gpu.Stream, e gpu.Event) error {
	d.add(s, protoOp{kind: protoWaitEvent, rec: d.latest[e]})
	return nil
}

// StreamQuery answers done, and a query of a stream with operations
// recorded on it waits, on the control stream (where the host's release
// enqueues its next operations), until that stream has run them all. The
// control stream's own queries (Rank.peerWord's) record nothing.
func (d *protoDevice) StreamQuery(s gpu.Stream) (bool, error) {
	if s == d.r.control {
		return true, nil
	}
	if i, ok := d.ps.index[[2]int{d.r.rank, int(s)}]; ok {
		d.add(d.r.control, protoOp{kind: protoDrain, at: protoAt{i, len(d.ps.ops[i])}})
	}
	return true, nil
}

// protoStep is what a rank enqueues for a launch of the plan.
type protoStep int

const (
	stepLaunch  protoStep = iota // the launch
	stepHollow                   // its refusal: the barriers without the copies (Plan.hollow)
	stepUnblock                  // its refusal after a world fault: the words raised from the control stream (Plan.unblock)
	stepNone                     // nothing (after a world fault)
)

// recordProtocol enqueues launches launches of a copy-engine plan on every
// rank of a world of n, rank r's launch i as step(r, i) says, and returns
// the recorded streams. Each rank copies its
// block into every rank's output, its own included (all_gather
// copy_push out of place), so the plan's lanes take copies too.
func recordProtocol(t *testing.T, n, launches, copyStreams int, peerWrites bool, step func(r, i int) protoStep) *protoStreams {
	fake := fakegpu.New(n)
	fake.SetPeerValueWrites(peerWrites)
	w := newFakeWorld(t, n, Options{Platform: fake, CopyStreams: copyStreams})
	ranks := make([]*Rank, n)
	for i := range ranks {
		ranks[i] = w.Rank(i)
	}
	plans := copyPlans(t, ranks)
	ps := &protoStreams{index: map[[2]int]int{}, faulty: -1}
	for _, r := range ranks {
		const bytes = 64
		in, err := r.heap.Alloc(irismodel.F32, 16)
		require.NoError(t, err)
		out, err := r.heap.Alloc(irismodel.F32, 16*int64(n))
		require.NoError(t, err)
		var copies []core.Copy
		for j := range n {
			copies = append(copies, core.Copy{Src: in.Ptr, Dst: r.heap.Peer(out.Ptr+gpu.DevicePtr(bytes*r.rank), j), Bytes: bytes})
		}
		p := plans[r.rank]
		real, wait := r.dev, gpu.EventWaiter(nil)
		d := &protoDevice{Device: real, r: r, ps: ps, enter: p.flags + copyEnterRow, latest: map[gpu.Event]int{}}
		r.dev = d
		if p.lanes != nil {
			wait, p.lanes.wait = p.lanes.wait, d
		}
		for i := 1; i <= launches; i++ {
			d.launch = i
			if k := step(r.rank, i); k == stepUnblock || k == stepNone {
				ps.faulty = r.rank
			}
			switch step(r.rank, i) {
			case stepLaunch:
				_, err := p.issueCopies(r.stream, irismodel.BarrierDevice, copies)
				require.NoError(t, err)
			case stepHollow:
				require.NoError(t, p.hollow(r.stream))
			case stepUnblock: // as Plan.refuse makes it
				require.NoError(t, p.unblock(r.stream))
			}
		}
		r.dev = real
		if p.lanes != nil {
			p.lanes.wait = wait
		}
	}
	return ps
}

// The promises explore checks, by the name it reports a broken one under.
const (
	brokeDeadlock = "deadlock"
	brokeLost     = "lost raise"
	brokeEnter    = "enter"
	brokeDone     = "done"
	brokeFinal    = "final words"
	brokeSeen     = "seen"
)

// protoAt is an operation's place: its stream and its index there.
type protoAt struct{ stream, index int }

// protoState is where each stream is, and which flag words hold 1 (bit i:
// word i of explore's list; the protocol only stores 0 and 1).
type protoState struct {
	pcs []uint16
	mem uint64
}

func (s protoState) key() string {
	b := make([]byte, 0, 2*len(s.pcs)+8)
	for _, pc := range s.pcs {
		b = append(b, byte(pc), byte(pc>>8))
	}
	for i := range 8 {
		b = append(b, byte(s.mem>>(8*i)))
	}
	return string(b)
}

// explore runs the streams on every interleaving (a search over the
// states) and returns, for each promise broken on some interleaving, the
// first such break it met (a path ends at its break), and the number of
// states.
func (ps *protoStreams) explore() (map[string]string, int) { return ps.search(true) }

// liveness is explore that checks no promise but the first: after a world
// fault only liveness matters.
func (ps *protoStreams) liveness() (map[string]string, int) { return ps.search(false) }

func (ps *protoStreams) search(promises bool) (map[string]string, int) {
	recordAt := map[int]protoAt{}
	enterWaits := map[[2]int][]protoAt{} // (rank, launch) -> its waits on its enter row
	launches := 0
	bit := map[protoWord]int{} // the flag words, numbered
	var words []protoWord
	for x, ops := range ps.ops {
		for i, o := range ops {
			switch o.kind {
			case protoRecord:
				recordAt[o.rec] = protoAt{x, i}
			case protoWrite, protoWait, protoPoll:
				if o.enter {
					k := [2]int{o.rank, o.launch}
					enterWaits[k] = append(enterWaits[k], protoAt{x, i})
				}
				if _, ok := bit[o.word]; !ok {
					bit[o.word] = len(words)
					words = append(words, o.word)
				}
			}
			launches = max(launches, o.launch)
		}
	}
	if len(words) > 64 {
		panic("more flag words than a state holds")
	}
	// first[x][i]: the index of stream x's first operation of launch i or
	// later; lastData[x][i]: one past its last copy of launch i (0: none).
	first := make([][]int, len(ps.ops))
	lastData := make([][]int, len(ps.ops))
	for x, ops := range ps.ops {
		first[x] = make([]int, launches+2)
		lastData[x] = make([]int, launches+2)
		for i := range first[x] {
			first[x][i] = len(ops)
		}
		for k := len(ops) - 1; k >= 0; k-- {
			for i := 0; i <= ops[k].launch; i++ {
				first[x][i] = k
			}
		}
		for k, o := range ops {
			if o.kind == protoData {
				lastData[x][o.launch] = k + 1
			}
		}
	}
	broken := map[string]string{}
	breaks := func(what, how string) {
		if _, ok := broken[what]; !ok {
			broken[what] = how
		}
	}
	start := protoState{pcs: make([]uint16, len(ps.ops))}
	seen := map[string]bool{start.key(): true}
	todo := []protoState{start}
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		moved, finished := false, true
		for x, ops := range ps.ops {
			pc := int(s.pcs[x])
			if pc == len(ops) {
				continue
			}
			finished = false
			o := ops[pc]
			set := o.kind == protoWrite || o.kind == protoWait || o.kind == protoPoll
			holds := set && s.mem>>bit[o.word]&1 == 1
			switch o.kind {
			case protoWait:
				if o.value > 1 || (o.value == 1 && !holds) {
					continue
				}
			case protoPoll:
				if holds {
					continue
				}
			case protoDrain:
				if int(s.pcs[o.at.stream]) < o.at.index {
					continue
				}
			case protoWaitEvent:
				if r, ok := recordAt[o.rec]; o.rec != 0 && ok && int(s.pcs[r.stream]) <= r.index {
					continue
				}
			}
			moved = true
			if what, how := ps.promise(s.pcs, holds, x, first, lastData, enterWaits); promises && what != "" {
				breaks(what, what+": "+how)
				continue // this path ends here
			}
			next := protoState{pcs: append([]uint16(nil), s.pcs...), mem: s.mem}
			next.pcs[x]++
			if o.kind == protoWrite {
				next.mem &^= 1 << bit[o.word]
				next.mem |= uint64(o.value) << bit[o.word]
			}
			if k := next.key(); !seen[k] {
				seen[k] = true
				todo = append(todo, next)
			}
		}
		switch {
		case finished:
			for i, w := range words {
				if promises && s.mem>>i&1 == 1 && w.owner != ps.faulty {
					breaks(brokeFinal, fmt.Sprintf("%s: every stream ended, but rank %d's word %#x holds 1", brokeFinal, w.owner, w.offset))
				}
			}
		case !moved:
			var b strings.Builder
			for x, ops := range ps.ops {
				if int(s.pcs[x]) < len(ops) {
					fmt.Fprintf(&b, "\n  %v", ops[s.pcs[x]])
				}
			}
			breaks(brokeDeadlock, brokeDeadlock+": no stream can go on; they wait at:"+b.String())
		}
	}
	return broken, len(seen)
}

// promise returns the promise that running stream x's next operation
// breaks where the streams are at pcs and its word holds 1 or not (its
// name, one of the broke* constants, and how), or "".
func (ps *protoStreams) promise(pcs []uint16, holds bool, x int, first, lastData [][]int, enterWaits map[[2]int][]protoAt) (what, how string) {
	o := ps.ops[x][pcs[x]]
	switch {
	case o.kind == protoSeen:
		for _, w := range enterWaits[[2]int{o.rank, o.launch}] {
			if int(pcs[w.stream]) <= w.index {
				return brokeSeen, fmt.Sprintf("%v before %v: it may miss a refusal that released the barrier", o, ps.ops[w.stream][w.index])
			}
		}
	case o.kind == protoWrite && o.value == 1 && holds:
		return brokeLost, fmt.Sprintf("%v, but it holds 1 already", o)
	case o.kind == protoData:
		for y := range ps.ops {
			if int(pcs[y]) < first[y][o.launch] {
				return brokeEnter, fmt.Sprintf("%v before %v", o, ps.ops[y][pcs[y]])
			}
		}
	}
	if o.launch > 1 && int(pcs[x]) == first[x][o.launch] {
		for y := range ps.ops {
			if int(pcs[y]) < lastData[y][o.launch-1] {
				return brokeDone, fmt.Sprintf("%v while %v has not run", o, ps.ops[y][pcs[y]])
			}
		}
	}
	return "", ""
}

// TestCopyProtocolInterleavings runs the copy-engine protocol as the
// runtime enqueues it on every interleaving of the ranks' streams, for
// every pattern of refused (hollow) launches: worlds of 2 with the plan's
// lanes, with stream writes into peers' memory and without (CUDA 13.1 and
// later: the flags copied), three launches; worlds of 3, two launches, on
// one stream a rank and with the lanes.
func TestCopyProtocolInterleavings(t *testing.T) {
	for _, c := range []struct {
		n, launches, copyStreams int
		peerWrites               bool
	}{
		{2, 3, 0, true},
		{2, 3, 0, false},
		{3, 2, 1, true},
		{3, 2, 0, true},
	} {
		t.Run(fmt.Sprintf("world=%d/launches=%d/streams=%d/peerwrites=%v", c.n, c.launches, c.copyStreams, c.peerWrites), func(t *testing.T) {
			cells := c.n * c.launches
			states := 0
			for pattern := range 1 << cells {
				step := func(r, i int) protoStep { // bit 1: stepHollow, 0: stepLaunch
					return protoStep(pattern >> (r*c.launches + i - 1) & 1)
				}
				ps := recordProtocol(t, c.n, c.launches, c.copyStreams, c.peerWrites, step)
				for _, ops := range ps.ops {
					for _, o := range ops {
						require.False(t, o.copied && c.peerWrites, "a raise copied although the device writes into peers' memory")
						require.False(t, o.kind == protoWrite && o.value == 1 && !o.copied && !c.peerWrites, "a raise written although the device cannot")
						require.False(t, o.kind == protoWrite && o.value > 1, "%v: the words hold 0 and 1 only", o)
					}
				}
				broken, n := ps.explore()
				require.Empty(t, broken, "refusals %0*b (bit r*launches+i-1: rank r refused launch i)", cells, pattern)
				states += n
			}
			t.Logf("%d refusal patterns, %d states", 1<<cells, states)
		})
	}
}

// without returns ps with the k-th operation (from 0, in the order of the
// streams and their operations) of rank's that matches drop removed.
func (ps *protoStreams) without(rank, k int, drop func(protoOp) bool) *protoStreams {
	out := &protoStreams{index: ps.index, records: ps.records, faulty: ps.faulty}
	for _, ops := range ps.ops {
		var kept []protoOp
		for _, o := range ops {
			if o.rank == rank && drop(o) {
				k--
				if k == -1 {
					continue
				}
			}
			kept = append(kept, o)
		}
		out.ops = append(out.ops, kept)
	}
	return out
}

// TestCopyProtocolCatches: the search reports each promise broken when the
// recorded protocol of a world of 2 (three launches, the lanes in use)
// loses the operation that keeps it, so TestCopyProtocolInterleavings can
// fail.
func TestCopyProtocolCatches(t *testing.T) {
	ps := recordProtocol(t, 2, 3, 0, true, func(r, i int) protoStep { return stepLaunch })
	require.Len(t, ps.ops, 4, "two streams a rank: the launch's and a lane")
	data := 0
	for _, ops := range ps.ops {
		for _, o := range ops {
			if o.kind == protoData {
				data++
			}
		}
	}
	require.Equal(t, 2*2*3, data, "every rank copies into both ranks at every launch")
	broken, _ := ps.explore()
	require.Empty(t, broken)

	is := func(k protoKind, v uint32) func(protoOp) bool {
		return func(o protoOp) bool { return o.kind == k && o.value == v }
	}
	// Rank 0's launch stream holds, a launch: the enter barrier (raise,
	// wait, reset), the seen copy, the fork, a copy, the join, the done
	// barrier (raise, wait, reset); its lane: the fork's wait, a copy, the
	// join's record.
	for _, c := range []struct {
		name string
		ps   *protoStreams
		want string
	}{
		{"rank 0 resets no enter word at launch 1", ps.without(0, 0, is(protoWrite, 0)), brokeLost},
		{"rank 0 resets no done word at launch 3", ps.without(0, 5, is(protoWrite, 0)), brokeFinal},
		{"rank 0 waits for no peer at launch 2's enter", ps.without(0, 2, is(protoWait, 1)), brokeEnter},
		{"rank 0 joins no lane at launch 1", ps.without(0, 0, func(o protoOp) bool { return o.kind == protoWaitEvent }), brokeDone},
		{"rank 0 raises no done word at launch 1", ps.without(0, 1, is(protoWrite, 1)), brokeDeadlock},
	} {
		broken, _ := c.ps.explore()
		require.Contains(t, broken, c.want, "%s: %v", c.name, broken)
	}

	// The seen copy moved ahead of launch 2's enter barrier (as onto a lane
	// forked before it).
	early := &protoStreams{index: ps.index, records: ps.records, faulty: ps.faulty}
	for _, ops := range ps.ops {
		ops = append([]protoOp(nil), ops...)
		for k, o := range ops {
			if o.rank == 0 && o.kind == protoSeen && o.launch == 2 {
				start := slices.IndexFunc(ops, func(o protoOp) bool { return o.launch == 2 })
				copy(ops[start+1:k+1], ops[start:k])
				ops[start] = o
			}
		}
		early.ops = append(early.ops, ops)
	}
	broken, _ = early.explore()
	require.Contains(t, broken, brokeSeen, "%v", broken)

	// A refused launch that enqueued its enter barrier alone would leave its
	// peer waiting at the done barrier.
	refused := recordProtocol(t, 2, 2, 0, true, func(r, i int) protoStep {
		if r == 1 && i == 1 {
			return stepHollow
		}
		return stepLaunch
	})
	broken, _ = refused.explore()
	require.Empty(t, broken)
	half := refused
	for range 3 { // rank 1's second batch: its launch 1's done barrier
		half = half.without(1, 3, func(o protoOp) bool { return o.kind == protoWrite || o.kind == protoWait })
	}
	broken, _ = half.explore()
	require.Contains(t, broken, brokeDeadlock, "%v", broken)
}

// TestCopyProtocolWorldFault: a rank with a world fault refuses with
// Plan.unblock, which raises its words on the peers from its control
// stream, after waiting on the host until its launch stream has finished
// (a drain) and until each peer's copy of each word reads 0 (a poll). The
// recording device records those waits where the host makes them (the
// drain answered by StreamQuery, the poll by Rank.peerWord's copy), so the
// search runs the release as the runtime makes it, in worlds of 2 (three
// launches) and 3 (two), with and without stream writes into peers'
// memory:
//
//   - the peers launch up to launch f, which the faulty rank refuses after
//     launches of its own before it: no interleaving loses a raise or waits
//     for ever, and every promise of a launch holds (the peers' copies of
//     the released launch start after the faulty rank's earlier work, every
//     word ends at 0);
//   - the peers launch on, and the faulty rank refuses every launch from f
//     (releases one after another): no interleaving waits for ever (the
//     peers' raises into the faulty rank's words, which it never takes,
//     are of no matter: the world is closed);
//   - without the drain, without the polls, or without both (the release
//     of old: raises from the control stream, no waits) the search finds
//     the lost raise and the peer's stream waiting for ever in a world of
//     2, so this test can fail.
func TestCopyProtocolWorldFault(t *testing.T) {
	faultFrom := func(faulty, f int) func(r, i int) protoStep {
		return func(r, i int) protoStep {
			if r == faulty && i >= f {
				return stepUnblock
			}
			return stepLaunch
		}
	}
	count := func(ps *protoStreams, rank int, k protoKind) int {
		n := 0
		for _, ops := range ps.ops {
			for _, o := range ops {
				if o.rank == rank && o.kind == k {
					n++
				}
			}
		}
		return n
	}
	for _, c := range []struct {
		n, launches int
		peerWrites  bool
	}{{2, 3, true}, {2, 3, false}, {3, 2, true}} {
		faulty, polls := c.n-1, 2*(c.n-1)
		for f := 1; f <= c.launches; f++ {
			name := fmt.Sprintf("world %d, peerwrites=%v, a fault at launch %d", c.n, c.peerWrites, f)
			ps := recordProtocol(t, c.n, f, 0, c.peerWrites, faultFrom(faulty, f))
			require.Equal(t, polls, count(ps, faulty, protoPoll), "%s: a poll a word a peer", name)
			drains := count(ps, faulty, protoDrain)
			require.Equal(t, min(f-1, 1), drains, "%s: the drain of the launch stream, where it holds launches", name)
			broken, _ := ps.explore()
			require.Empty(t, broken, name)

			on := recordProtocol(t, c.n, c.launches, 0, c.peerWrites, faultFrom(faulty, f))
			broken, _ = on.liveness()
			require.Empty(t, broken, "%s, the peers launching on to launch %d", name, c.launches)
			if f == 1 || c.n > 2 {
				continue // nothing earlier to drain or to take; a world of 3 without them takes seconds
			}
			noPolls := ps
			for range polls {
				noPolls = noPolls.without(faulty, 0, func(o protoOp) bool { return o.kind == protoPoll })
			}
			isDrain := func(o protoOp) bool { return o.kind == protoDrain }
			for _, m := range []struct {
				what  string
				ps    *protoStreams
				waits int
			}{
				{"no drain", ps.without(faulty, 0, isDrain), polls},
				{"no polls", noPolls, drains},
				{"neither", noPolls.without(faulty, 0, isDrain), 0},
			} {
				require.Equal(t, m.waits, count(m.ps, faulty, protoPoll)+count(m.ps, faulty, protoDrain), "%s, %s", name, m.what)
				broken, _ := m.ps.explore()
				require.Contains(t, broken, brokeLost, "%s, %s", name, m.what)
				broken, _ = m.ps.liveness()
				require.Contains(t, broken, brokeDeadlock, "%s, %s: the peer's stream waits for ever", name, m.what)
			}
		}
	}
}

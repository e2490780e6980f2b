package tests

import (
	"fmt"
	"testing"
)

// The credits of the rooted Lamport variants (runtime/include/irisgen.h:
// lamport_empty, lamport_ack, lamport_credit; templates/*_lamport.hip.tmpl)
// as a model, every interleaving of a few ranks' calls explored: one block
// a rank, one element a slot row (the blocks and elements of a kernel run
// the same protocol side by side, each on its own part of the slots and its
// own row of the flags), every store and wait a step of its own (but a
// rank's acks, one step). The model checks that no writer stores into a
// slot row its reader has not emptied, that no rank empties a slot row
// holding data it has not read, that every reader gets the data of its
// call from its writer, and that no state waits for ever, for every
// sequence of roots (sources and destinations) over the calls. A rank that
// forwards (the lamport_relay variants' relay) reads its rows before it
// stores what it read (or their sum) into its peers'. Where readers empty
// what they read in the call itself (reduce lamport_relay), a rank empties
// nothing at the start of a call but the first.

// lamportShape is who stores into whose slot in a call of one collective,
// for the launch parameter a (root, or src * w + dst).
type lamportShape struct {
	name  string
	rows  func(w int) int              // rows of a slot
	args  func(w int) int              // values of the parameter
	first []int                        // the first call's: one of each class of sequences alike but for the ranks' names
	edges func(w, a int) []lamportEdge // the stores of a call
	relay func(w, a int) int           // the rank that forwards in a call (it reads first); nil: none
	// emptyOnRead: a reader empties the rows it read at the end of the
	// call, not at the start of the next.
	emptyOnRead bool
}

// lamportEdge is one store of a call: writer into row of reader's slot.
type lamportEdge struct{ writer, reader, row int }

var lamportShapes = []lamportShape{
	{"broadcast, scatter", func(int) int { return 1 }, func(w int) int { return w }, []int{0}, func(w, root int) []lamportEdge {
		var es []lamportEdge
		for p := range w {
			if p != root {
				es = append(es, lamportEdge{root, p, 0})
			}
		}
		return es
	}, nil, false},
	{"gather, reduce", func(w int) int { return w }, func(w int) int { return w }, []int{0}, func(w, root int) []lamportEdge {
		var es []lamportEdge
		for p := range w {
			if p != root {
				es = append(es, lamportEdge{p, root, p})
			}
		}
		return es
	}, nil, false},
	{"send_recv", func(int) int { return 1 }, func(w int) int { return w * w }, []int{0, 1}, func(w, a int) []lamportEdge { // a = src * w + dst: first 0 -> 0 and 0 -> 1
		if src, dst := a/w, a%w; src != dst {
			return []lamportEdge{{src, dst, 0}}
		}
		return nil
	}, nil, false},
	broadcastRelayShape(0),
	broadcastRelayShape(1),
	reduceRelayShape(0),
	reduceRelayShape(1),
}

// relayOf is the relay of block b in the lamport_relay variants: rank
// root+1+b mod (w-1).
func relayOf(b int) func(w, root int) int {
	return func(w, root int) int { return (root + 1 + b%(w-1)) % w }
}

// broadcastRelayShape is broadcast lamport_relay's block b: the root stores
// into the slot of its relay, which stores what it read into the other
// ranks' slots.
func broadcastRelayShape(b int) lamportShape {
	return lamportShape{fmt.Sprintf("broadcast relay, block %d", b), func(int) int { return 1 }, func(w int) int { return w }, []int{0}, func(w, root int) []lamportEdge {
		relay := relayOf(b)(w, root)
		es := []lamportEdge{{root, relay, 0}}
		for p := range w {
			if p != root && p != relay {
				es = append(es, lamportEdge{relay, p, 0})
			}
		}
		return es
	}, relayOf(b), false}
}

// reduceRelayShape is reduce lamport_relay's block b: every rank but the
// relay (the root too) stores into its row of the relay's slot, and the
// relay stores the sum into the root's row of the root's slot; readers
// empty what they read at the end of the call.
func reduceRelayShape(b int) lamportShape {
	return lamportShape{fmt.Sprintf("reduce relay, block %d", b), func(w int) int { return w }, func(w int) int { return w }, []int{0}, func(w, root int) []lamportEdge {
		relay := relayOf(b)(w, root)
		var es []lamportEdge
		for p := range w {
			if p != relay {
				es = append(es, lamportEdge{p, relay, p})
			}
		}
		return append(es, lamportEdge{relay, root, root})
	}, relayOf(b), true}
}

// The steps of a call, in a rank's program order.
const (
	pcEmpty  = iota // lamport_empty: the slot of the call before (at call 1 all three, then the sync)
	pcSync          // call 1: publish the sync's flag
	pcSyncIn        // call 1: wait for every peer's
	pcAck           // lamport_ack: every peer's flag (one step: each is read by another rank, and only grows)
	pcCredit        // lamport_credit: wait for the readers of this rank's stores
	pcPut           // lamport_put: one store at a time (sub = the edge)
	pcGet           // lamport_get*: one row at a time (sub = the edge)
	pcClear         // emptyOnRead: empty the rows read in the call
	pcDone
)

// lamportModel is one exploration: w ranks, the parameter of each call.
type lamportModel struct {
	w, rows int
	calls   []int           // the parameter of call k at calls[k-1]
	edges   [][]lamportEdge // the stores of each call
	lag     int             // a writer at call k waits for its readers' ack of k-lag (lamport_credit: 2)
	fwd     [][4]bool       // fwd[k-1][r]: rank r forwards in call k (reads, then stores what it read)
	onRead  bool            // readers empty what they read at the end of the call
}

// newLamportModel is the model of shape's calls with the parameters calls
// on w ranks.
func newLamportModel(shape lamportShape, w int, calls []int, lag int) *lamportModel {
	m := &lamportModel{w: w, rows: shape.rows(w), calls: calls, lag: lag, onRead: shape.emptyOnRead}
	for _, a := range calls {
		var fwd [4]bool
		if shape.relay != nil {
			fwd[shape.relay(w, a)] = true
		}
		m.edges = append(m.edges, shape.edges(w, a))
		m.fwd = append(m.fwd, fwd)
	}
	return m
}

// lamportState is every rank's position and memory. box[r][s][row] holds 0
// (empty) or the tag call*16 + writer + 1; flags[r][p] the last call p
// published to r.
type lamportState struct {
	k, pc, sub [4]int
	box        [4][3][4]int
	flags      [4][4]int
}

func (m *lamportModel) tag(k, writer int) int { return k*16 + writer + 1 }

// nextEdge is the index of the first edge of es from index from on that
// belongs to rank r's side (writer or reader), -1 when there is none.
func nextEdge(es []lamportEdge, from, r int, writer bool) int {
	for i := from; i < len(es); i++ {
		if writer && es[i].writer == r || !writer && es[i].reader == r {
			return i
		}
	}
	return -1
}

// step returns the state rank r moves to from s, false when it waits or is
// done, or an error when the move breaks a rule.
func (m *lamportModel) step(s lamportState, r int) (lamportState, bool, error) {
	k := s.k[r]
	if k > len(m.calls) {
		return s, false, nil
	}
	es := m.edges[k-1]
	next := s
	advance := func(pc int) { next.pc[r], next.sub[r] = pc, 0 }
	// A relay reads, then stores what it read; the others store, then read.
	forwards := m.fwd[k-1][r]
	done := func() {
		if m.onRead {
			advance(pcClear)
		} else {
			next.k[r], next.pc[r], next.sub[r] = k+1, pcEmpty, 0
		}
	}
	switch s.pc[r] {
	case pcEmpty:
		slots := []int{(k + 2) % 3}
		switch {
		case k == 1:
			slots = []int{0, 1, 2}
		case m.onRead:
			slots = nil
		}
		for _, sl := range slots {
			for row := range m.rows {
				if v := s.box[r][sl][row]; v != 0 && (k == 1 || v/16 != k-1) {
					return s, false, fmt.Errorf("rank %d call %d empties slot %d row %d holding call %d's data", r, k, sl, row, v/16)
				}
				next.box[r][sl][row] = 0
			}
		}
		if k == 1 {
			advance(pcSync)
		} else {
			advance(pcAck)
		}
	case pcSync:
		for p := range m.w {
			if p != r {
				next.flags[p][r] = max(next.flags[p][r], 1)
			}
		}
		advance(pcSyncIn)
	case pcSyncIn:
		for p := range m.w {
			if p != r && s.flags[r][p] < 1 {
				return s, false, nil
			}
		}
		advance(pcAck)
	case pcAck:
		for p := range m.w {
			if p != r {
				next.flags[p][r] = k
			}
		}
		advance(pcCredit)
	case pcCredit:
		for _, e := range es {
			if e.writer == r && k > m.lag && s.flags[r][e.reader] < k-m.lag {
				return s, false, nil
			}
		}
		if forwards {
			advance(pcGet)
		} else {
			advance(pcPut)
		}
	case pcPut:
		i := nextEdge(es, s.sub[r], r, true)
		switch {
		case i < 0 && forwards:
			done()
		case i < 0:
			advance(pcGet)
		}
		if i < 0 {
			break
		}
		e := es[i]
		if v := s.box[e.reader][k%3][e.row]; v != 0 {
			return s, false, fmt.Errorf("rank %d call %d stores into rank %d's slot %d row %d, which holds call %d's data", r, k, e.reader, k%3, e.row, v/16)
		}
		next.box[e.reader][k%3][e.row] = m.tag(k, r)
		next.sub[r] = i + 1
	case pcGet:
		i := nextEdge(es, s.sub[r], r, false)
		switch {
		case i < 0 && forwards:
			advance(pcPut)
		case i < 0:
			done()
		}
		if i < 0 {
			break
		}
		e := es[i]
		switch v := s.box[r][k%3][e.row]; {
		case v == 0:
			return s, false, nil
		case v != m.tag(k, e.writer):
			return s, false, fmt.Errorf("rank %d call %d reads call %d's data from rank %d, want call %d's from rank %d", r, k, v/16, v%16-1, k, e.writer)
		}
		next.sub[r] = i + 1
	case pcClear:
		for _, e := range es {
			if e.reader != r {
				continue
			}
			if v := s.box[r][k%3][e.row]; v != m.tag(k, e.writer) {
				return s, false, fmt.Errorf("rank %d call %d empties slot %d row %d holding call %d's data from rank %d, not the data it read", r, k, k%3, e.row, v/16, v%16-1)
			}
			next.box[r][k%3][e.row] = 0
		}
		next.k[r], next.pc[r], next.sub[r] = k+1, pcEmpty, 0
	}
	return next, true, nil
}

// explore visits every state reachable from the start and returns the
// number of states, or the first rule broken or wait for ever.
func (m *lamportModel) explore() (int, error) {
	var start lamportState
	for r := range m.w {
		start.k[r] = 1
	}
	done := func(s lamportState) bool { return pastCall(s.k[:m.w], len(m.calls)) }
	return explore(start, m.w, m.step, done, func(s lamportState) error {
		return fmt.Errorf("every rank waits: calls %v, positions %v, steps %v, flags %v", s.k[:m.w], s.pc[:m.w], s.sub[:m.w], s.flags)
	})
}

// TestLamportCreditsModel explores every interleaving of 5 calls of 2 and
// 3 ranks for every sequence of parameters (4 calls of send_recv's 9
// pairs on 3 ranks), each collective's shape of stores; the first call's
// parameter is one of each class (root 0; 0 -> 0, 0 -> 1), the others are
// the same but for the ranks' names.
func TestLamportCreditsModel(t *testing.T) {
	for _, shape := range lamportShapes {
		for _, w := range []int{2, 3} {
			calls := 5
			if shape.args(w) > 4 {
				calls = 4
			}
			t.Run(fmt.Sprintf("%s/world%d", shape.name, w), func(t *testing.T) {
				seqs, states := 0, 0
				seq := make([]int, calls)
				var each func(i int)
				each = func(i int) {
					if t.Failed() {
						return
					}
					if i < calls {
						as := shape.first
						if i > 0 {
							as = nil
							for a := range shape.args(w) {
								as = append(as, a)
							}
						}
						for _, a := range as {
							seq[i] = a
							each(i + 1)
						}
						return
					}
					n, err := newLamportModel(shape, w, seq, 2).explore()
					if err != nil {
						t.Fatalf("parameters %v: %v", seq, err)
					}
					seqs++
					states += n
				}
				each(0)
				t.Logf("%d sequences of parameters, %d states", seqs, states)
			})
		}
	}
}

// TestLamportCreditsModelFinds checks that the model can fail, for every
// shape in a world of 3: with a credit one call short (a writer at call k
// waits for the ack of k-3), a writer that runs ahead stores into a slot its
// reader has not emptied (in a world of 2 reduce lamport_relay's data alone
// keeps its two ranks within a call of each other).
func TestLamportCreditsModelFinds(t *testing.T) {
	for _, shape := range lamportShapes {
		t.Run(shape.name, func(t *testing.T) {
			a := shape.first[len(shape.first)-1] // send_recv: 0 -> 1
			calls := []int{a, a, a, a, a}
			if _, err := newLamportModel(shape, 3, calls, 2).explore(); err != nil {
				t.Fatalf("the protocol as built: %v", err)
			}
			_, err := newLamportModel(shape, 3, calls, 3).explore()
			if err == nil {
				t.Fatal("with credits one call short the model found nothing")
			}
			t.Logf("found: %v", err)
		})
	}
}

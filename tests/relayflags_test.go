package tests

import (
	"fmt"
	"testing"
)

// reduce relay's hand-over (templates/reduce_relay.hip.tmpl; the header's
// raise_flag and wait_flags) as a model, every interleaving of a few ranks'
// calls explored, as the Lamport credits' model does: one block (its relay
// is relayOf's), two pieces, every store, flag and wait a step of its own.
// A call starts with the kernel's sync of every rank; every other rank
// stores its part into its row of the relay's stage a piece at a time,
// raising its flag in the relay's flags after each; the relay waits for a
// piece's flags, reads the rows and stores the sum into the root's output,
// then raises its flag in the root's flags; the root waits for it, and its
// caller reads the output. A flag holds the call times 256 plus the pieces
// done. The model checks that no rank stores into a stage row or an output
// its reader has not read yet, that the relay reads every row of its call
// (not an older one), that the root's output is whole when the root
// returns, and that no state waits for ever, for every sequence of roots.

const relayPieces = 2

// relayModel is one exploration: w ranks, block b, the root of each call.
type relayModel struct {
	w, b  int
	roots []int
	// The two conditions the protocol rests on; the tests turn each off
	// to see the model fail.
	sync  bool // every rank meets the others at the start of a call
	epoch bool // a flag's value carries the call (else only the pieces done)
}

// relayState is every rank's position and memory: start[r][p] the last
// call whose start p published to r, flags[r][p] rank p's flag in r's
// flags, stage[r][p][i] the tag (call*4 + writer + 1) of what rank r's
// stage row p holds in piece i and taken[r][p][i] whether r has read it,
// out[r][i] the tag of the root r's output piece i and got[r][i] whether
// r's caller has read it.
type relayState struct {
	k, pc, sub [3]int
	start      [3][3]int
	flags      [3][3]int
	stage      [3][3][relayPieces]int
	taken      [3][3][relayPieces]bool
	out        [3][relayPieces]int
	got        [3][relayPieces]bool
}

// The steps of a call, in a rank's program order.
const (
	rsStart   = iota // the kernel's start: publish this call to every peer
	rsStartIn        // wait for every peer's start
	rsStore          // a sender stores piece sub into the relay's stage
	rsRaise          // and raises its flag
	rsWait           // the relay waits for piece sub's flags
	rsReduce         // reads the rows and stores the sum into the root's output
	rsDone           // the relay raises its flag in the root's flags
	rsRootIn         // the root waits for it; its caller reads the output
)

func (m *relayModel) base(k int) int {
	if m.epoch {
		return k * 256
	}
	return 0
}

func relayTag(k, writer int) int { return k*4 + writer + 1 }

// step returns the state rank r moves to from s, false when it waits or is
// done, or an error when the move breaks a rule.
func (m *relayModel) step(s relayState, r int) (relayState, bool, error) {
	k := s.k[r]
	if k > len(m.roots) {
		return s, false, nil
	}
	root := m.roots[k-1]
	relay := relayOf(m.b)(m.w, root)
	next := s
	advance := func(pc int) { next.pc[r], next.sub[r] = pc, 0 }
	finish := func() { next.k[r], next.pc[r], next.sub[r] = k+1, rsStart, 0 }
	role := func() {
		if r == relay {
			advance(rsWait)
		} else {
			advance(rsStore)
		}
	}
	i := s.sub[r]
	switch s.pc[r] {
	case rsStart:
		if !m.sync {
			role()
			break
		}
		for p := range m.w {
			if p != r {
				next.start[p][r] = k
			}
		}
		advance(rsStartIn)
	case rsStartIn:
		for p := range m.w {
			if p != r && s.start[r][p] < k {
				return s, false, nil
			}
		}
		role()
	case rsStore:
		if v := s.stage[relay][r][i]; v != 0 && !s.taken[relay][r][i] {
			return s, false, fmt.Errorf("rank %d call %d stores piece %d into rank %d's stage, which holds call %d's, not yet read", r, k, i, relay, v/4)
		}
		next.stage[relay][r][i], next.taken[relay][r][i] = relayTag(k, r), false
		next.pc[r] = rsRaise
	case rsRaise:
		next.flags[relay][r] = m.base(k) + i + 1
		switch {
		case i+1 < relayPieces:
			next.pc[r], next.sub[r] = rsStore, i+1
		case r == root:
			advance(rsRootIn)
		default:
			finish()
		}
	case rsWait:
		for p := range m.w {
			if p != r && s.flags[r][p] < m.base(k)+i+1 {
				return s, false, nil
			}
		}
		next.pc[r] = rsReduce
	case rsReduce:
		for p := range m.w {
			if p == r {
				continue
			}
			if v := s.stage[r][p][i]; v != relayTag(k, p) {
				return s, false, fmt.Errorf("relay %d call %d reads piece %d of rank %d's row holding call %d's (tag %d), want call %d's", r, k, i, p, v/4, v, k)
			}
			next.taken[r][p][i] = true
		}
		if v := s.out[root][i]; v != 0 && !s.got[root][i] {
			return s, false, fmt.Errorf("relay %d call %d stores piece %d into root %d's output, which holds call %d's, not yet read", r, k, i, root, v/4)
		}
		next.out[root][i], next.got[root][i] = relayTag(k, r), false
		if i+1 < relayPieces {
			next.pc[r], next.sub[r] = rsWait, i+1
		} else {
			advance(rsDone)
		}
	case rsDone:
		next.flags[root][r] = m.base(k) + relayPieces
		finish()
	case rsRootIn:
		if s.flags[r][relay] < m.base(k)+relayPieces {
			return s, false, nil
		}
		for j := range relayPieces {
			if v := s.out[r][j]; v != relayTag(k, relay) {
				return s, false, fmt.Errorf("root %d returns from call %d with piece %d of its output holding tag %d, want call %d's from relay %d", r, k, j, v, k, relay)
			}
			next.got[r][j] = true
		}
		finish()
	}
	return next, true, nil
}

// explore visits every state reachable from the start and returns the
// number of states, or the first rule broken or wait for ever.
func (m *relayModel) explore() (int, error) {
	var start relayState
	for r := range m.w {
		start.k[r] = 1
	}
	done := func(s relayState) bool { return pastCall(s.k[:m.w], len(m.roots)) }
	return explore(start, m.w, m.step, done, func(s relayState) error {
		return fmt.Errorf("every rank waits: calls %v, positions %v, pieces %v, flags %v", s.k[:m.w], s.pc[:m.w], s.sub[:m.w], s.flags)
	})
}

// TestRelayFlagsModel explores every interleaving of 5 calls of 2 and 3
// ranks, blocks 0 and 1, for every sequence of roots from root 0 (the
// others are the same but for the ranks' names).
func TestRelayFlagsModel(t *testing.T) {
	for _, w := range []int{2, 3} {
		for _, b := range []int{0, 1} {
			t.Run(fmt.Sprintf("world%d/block%d", w, b), func(t *testing.T) {
				seqs, states := 0, 0
				roots := make([]int, 5)
				var each func(i int)
				each = func(i int) {
					if t.Failed() {
						return
					}
					if i == len(roots) {
						n, err := (&relayModel{w: w, b: b, roots: roots, sync: true, epoch: true}).explore()
						if err != nil {
							t.Fatalf("roots %v: %v", roots, err)
						}
						seqs++
						states += n
						return
					}
					last := w - 1
					if i == 0 {
						last = 0
					}
					for a := 0; a <= last; a++ {
						roots[i] = a
						each(i + 1)
					}
				}
				each(0)
				t.Logf("%d sequences of roots, %d states", seqs, states)
			})
		}
	}
}

// TestRelayFlagsModelFinds checks that the model can fail: without the
// start's sync a sender runs into the next call and stores into a stage
// row its relay has not read, and with flags that do not carry the call
// the relay takes the last call's flags for this call's and reads an old
// row.
func TestRelayFlagsModelFinds(t *testing.T) {
	roots := []int{0, 0, 1, 2}
	for _, c := range []struct {
		name        string
		sync, epoch bool
	}{{"without the start's sync", false, true}, {"without the call in the flags", true, false}} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := (&relayModel{w: 3, roots: roots, sync: true, epoch: true}).explore(); err != nil {
				t.Fatalf("the protocol as built: %v", err)
			}
			_, err := (&relayModel{w: 3, roots: roots, sync: c.sync, epoch: c.epoch}).explore()
			if err == nil {
				t.Fatal("the model found nothing")
			}
			t.Logf("found: %v", err)
		})
	}
}

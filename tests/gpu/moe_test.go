//go:build gpu

package gpu_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// moeCase is one MoE configuration: t tokens of h elements, k experts per
// token out of e, a routing rule, cap receive rows per source rank.
type moeCase struct {
	t, h, k, e int64
	cap        int64  // 0: t, which never overflows (a token goes to a rank at most once)
	routing    string // random, skewed (every pair to expert 0), half (only the first half of the ranks' experts)
	dt         irismodel.DType
	ids32      bool // expert ids as int32 (else int64)
	noWeights  bool // weights left out (every weight 1)
}

func (c moeCase) String() string {
	s := fmt.Sprintf("%s/t=%d/h=%d/k=%d/e=%d/%s", c.dt, c.t, c.h, c.k, c.e, c.routing)
	if c.cap > 0 {
		s += fmt.Sprintf("/cap=%d", c.cap)
	}
	if c.ids32 {
		s += "/ids32"
	}
	if c.noWeights {
		s += "/noweights"
	}
	return s
}

func (c moeCase) capacity() int64 {
	if c.cap > 0 {
		return c.cap
	}
	return c.t
}

// owner is the rank expert ex lives on (expert x on rank x / ceil(e/world)),
// or -1 for an id out of range (dispatch skips it).
func (c moeCase) owner(ex int64, world int) int {
	if ex < 0 || ex >= c.e {
		return -1
	}
	return int(ex / ((c.e + int64(world) - 1) / int64(world)))
}

// expertSign is the suite's expert: it negates the rows of odd experts
// (exact in every dtype), so a row summed with another entry's expert or
// weight, or an entry left out, changes the result.
func expertSign(ex int64) float64 {
	if ex%2 == 1 {
		return -1
	}
	return 1
}

// moeInput is one rank's generated input of one round.
type moeInput struct {
	tokens  []byte // encoded [t, h]
	ids     []int64
	weights []float32
}

func moeInputs(c moeCase, world, rank int, round uint64) moeInput {
	seed := stream(uint64(c.t*131+c.h*7+c.k), uint64(rank), round)
	in := moeInput{tokens: encode(c.dt, values(c.dt, c.t*c.h, seed))}
	n := c.t * c.k
	in.ids, in.weights = make([]int64, n), make([]float32, n)
	perRank := (c.e + int64(world) - 1) / int64(world)
	for p := int64(0); p < n; p++ {
		u := splitmix64(seed ^ uint64(p+1)*0x9e3779b97f4a7c15)
		switch c.routing {
		case "skewed":
			in.ids[p] = 0
		case "half":
			in.ids[p] = int64(u>>33) % max(perRank*int64(max(world/2, 1)), 1)
		default:
			in.ids[p] = int64(u>>33) % c.e
		}
		in.weights[p] = float32(u&0xffff) / 65536
		if c.noWeights {
			in.weights[p] = 1
		}
	}
	return in
}

func i32Bytes(v []int64) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(x)))
	}
	return b
}

func i64Bytes(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i64s(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

// moeRig holds one rank's plans and tensors for a configuration.
type moeRig struct {
	c                                                  moeCase
	cap                                                int64
	dispatch                                           *collectives.MoeDispatchPushPlan
	combine                                            *collectives.MoeCombinePushPlan
	tokens, ids, weights                               irisrt.Tensor
	recvTokens, recvIDs, recvW, recvSrc, cnt, sendSlot irisrt.Tensor
	expertOut, out                                     irisrt.Tensor
	free                                               []func()
}

func newMoeRig(r *irisrt.Rank, c moeCase) (*moeRig, error) {
	w := int64(r.World())
	g := &moeRig{c: c, cap: c.capacity()}
	var err error
	if g.dispatch, err = collectives.NewMoeDispatchPushPlan(r, c.dt, c.t, c.h, c.k, c.e, g.cap); err != nil {
		return nil, err
	}
	g.free = append(g.free, func() { g.dispatch.Close() })
	if g.combine, err = collectives.NewMoeCombinePushPlan(r, c.dt, c.t, c.h, c.k, c.e, g.cap); err != nil {
		g.close()
		return nil, err
	}
	g.free = append(g.free, func() { g.combine.Close() })
	alloc := func(dt irismodel.DType, n int64) irisrt.Tensor {
		if err != nil {
			return irisrt.Tensor{}
		}
		var t irisrt.Tensor
		t, err = r.Heap().Alloc(dt, n)
		if err == nil {
			g.free = append(g.free, func() { r.Heap().Free(t) })
		}
		return t
	}
	idt := irismodel.I64
	if c.ids32 {
		idt = irismodel.I32
	}
	g.tokens, g.ids = alloc(c.dt, c.t*c.h), alloc(idt, c.t*c.k)
	if !c.noWeights {
		g.weights = alloc(irismodel.F32, c.t*c.k)
	}
	g.recvTokens, g.recvIDs = alloc(c.dt, w*g.cap*c.h), alloc(irismodel.I64, w*g.cap*c.k)
	g.recvW, g.recvSrc, g.cnt = alloc(irismodel.F32, w*g.cap*c.k), alloc(irismodel.I64, w*g.cap), alloc(irismodel.I64, w)
	g.sendSlot = alloc(irismodel.I64, c.t*w)
	g.expertOut, g.out = alloc(c.dt, c.k*w*g.cap*c.h), alloc(c.dt, c.t*c.h)
	if err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *moeRig) close() {
	for i := len(g.free) - 1; i >= 0; i-- {
		g.free[i]()
	}
}

func (g *moeRig) upload(r *irisrt.Rank, in moeInput) error {
	ids := i64Bytes(in.ids)
	if g.c.ids32 {
		ids = i32Bytes(in.ids)
	}
	for _, x := range []struct {
		t irisrt.Tensor
		b []byte
	}{{g.tokens, in.tokens}, {g.ids, ids}, {g.weights, f32Bytes(in.weights)}} {
		if x.t.Ptr == 0 {
			continue // weights left out
		}
		if err := upload(r, x.t, x.b); err != nil {
			return err
		}
	}
	return nil
}

func (g *moeRig) launchDispatch(s gpu.Stream, mode irismodel.Barrier) error {
	if err := g.dispatch.Launch(s, g.tokens, g.ids, g.weights, g.recvTokens, g.recvIDs, g.recvW, g.recvSrc, g.cnt, g.sendSlot, mode); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	return nil
}

func (g *moeRig) launchCombine(s gpu.Stream, mode irismodel.Barrier) error {
	if err := g.combine.Launch(s, g.expertOut, g.recvIDs, g.recvW, g.recvSrc, g.cnt, g.sendSlot, g.out, mode); err != nil {
		return fmt.Errorf("combine: %w", err)
	}
	return nil
}

// launch runs dispatch, the identity expert (every plane of expert_out a
// copy of the received rows) and combine on s: all of it capturable.
func (g *moeRig) launch(r *irisrt.Rank, s gpu.Stream, mode irismodel.Barrier) error {
	if err := g.launchDispatch(s, mode); err != nil {
		return err
	}
	plane := g.recvTokens.Len
	for j := range g.c.k {
		if err := r.Device().CopyDtoDAsync(g.expertOut.Slice(j*plane, plane).Ptr, g.recvTokens.Ptr, g.recvTokens.Bytes(), s); err != nil {
			return err
		}
	}
	return g.launchCombine(s, mode)
}

// moeReceived is what dispatch left on one rank.
type moeReceived struct {
	counts, src, ids []int64
	weights          []float32
	tokens           []byte
}

// checkDispatch compares this rank's received rows with the CPU reference
// built from every rank's input of the round: from each source s, one row
// for each token of s with an expert here (as a set, in any order; only
// cap of them when more came), its entries (the token's expert ids and
// weights where they live here, -1 and 0 elsewhere) and its row; and each
// source's send_slot, read from its heap, names the row it got here or -1.
func (g *moeRig) checkDispatch(r *irisrt.Rank, all []moeInput) (*moeReceived, error) {
	c, w, me := g.c, r.World(), r.Rank()
	es := c.dt.Size()
	var got moeReceived
	bs := make([][]byte, 5)
	for i, t := range []irisrt.Tensor{g.cnt, g.recvSrc, g.recvIDs, g.recvW, g.recvTokens} {
		var err error
		if bs[i], err = download(r, t); err != nil {
			return nil, err
		}
	}
	got.counts, got.src, got.ids, got.tokens = i64s(bs[0]), i64s(bs[1]), i64s(bs[2]), bs[4]
	got.weights = make([]float32, len(bs[3])/4)
	for i := range got.weights {
		got.weights[i] = math.Float32frombits(binary.LittleEndian.Uint32(bs[3][4*i:]))
	}
	row := c.h * es
	for s := 0; s < w; s++ {
		// Source s's send_slot, from its heap.
		peerSlot := g.sendSlot
		peerSlot.Ptr = r.Heap().Base(s) + (g.sendSlot.Ptr - r.Heap().Base(me))
		sb, err := download(r, peerSlot)
		if err != nil {
			return nil, fmt.Errorf("reading rank %d's send_slot: %w", s, err)
		}
		sent := i64s(sb)
		want := map[int64]bool{} // tokens of s with an expert here
		for tok := range c.t {
			for j := range c.k {
				if c.owner(all[s].ids[tok*c.k+j], w) == me {
					want[tok] = true
				}
			}
		}
		n := got.counts[s]
		if wantN := min(int64(len(want)), g.cap); n != wantN {
			return nil, fmt.Errorf("rank %d: %d rows from rank %d, want %d (%d tokens routed here, capacity %d)", me, n, s, wantN, len(want), g.cap)
		}
		for j := int64(0); j < n; j++ {
			slot := int64(s)*g.cap + j
			tok := got.src[slot]
			if !want[tok] {
				return nil, fmt.Errorf("rank %d: row %d from rank %d names token %d, which has no expert here or came twice", me, j, s, tok)
			}
			delete(want, tok)
			if sent[tok*int64(w)+int64(me)] != j {
				return nil, fmt.Errorf("rank %d: rank %d's send_slot of token %d names row %d, but it arrived in row %d", me, s, tok, sent[tok*int64(w)+int64(me)], j)
			}
			for jj := range c.k {
				ex, wt := all[s].ids[tok*c.k+jj], all[s].weights[tok*c.k+jj]
				if c.owner(ex, w) != me {
					ex, wt = -1, 0
				}
				if gotEx, gotW := got.ids[slot*c.k+jj], got.weights[slot*c.k+jj]; gotEx != ex || gotW != wt {
					return nil, fmt.Errorf("rank %d: token %d of rank %d, entry %d: expert %d weight %g, want %d, %g", me, tok, s, jj, gotEx, gotW, ex, wt)
				}
			}
			if !bytes.Equal(got.tokens[slot*row:(slot+1)*row], all[s].tokens[tok*row:(tok+1)*row]) {
				return nil, fmt.Errorf("rank %d: token %d of rank %d: the row differs", me, tok, s)
			}
		}
		for tok := range want { // over capacity: not sent
			if sent[tok*int64(w)+int64(me)] != -1 {
				return nil, fmt.Errorf("rank %d: token %d of rank %d did not arrive, but its send_slot names row %d", me, tok, s, sent[tok*int64(w)+int64(me)])
			}
		}
		for tok := range c.t {
			routed := false
			for j := range c.k {
				routed = routed || c.owner(all[s].ids[tok*c.k+j], w) == me
			}
			if !routed && sent[tok*int64(w)+int64(me)] != -1 {
				return nil, fmt.Errorf("rank %d: token %d of rank %d has no expert here, but its send_slot names row %d", me, tok, s, sent[tok*int64(w)+int64(me)])
			}
		}
	}
	return &got, nil
}

// nanBits is a quiet NaN of dt: the expert leaves it in every entry combine
// must not read.
func nanBits(dt irismodel.DType) []byte {
	switch dt {
	case irismodel.F32:
		return []byte{0, 0, 0xc0, 0x7f}
	case irismodel.F16:
		return []byte{0, 0x7e}
	}
	return []byte{0xc0, 0x7f}
}

// hostExpert writes expert_out on the host: plane j of row r of source s
// is the row times expertSign of its entry j's expert, where that entry is
// not -1; every other element is NaN, which combine must never read.
func (g *moeRig) hostExpert(r *irisrt.Rank, rec *moeReceived) error {
	c, w := g.c, int64(r.World())
	es := c.dt.Size()
	row := c.h * es
	out := make([]byte, g.expertOut.Bytes())
	nan := nanBits(c.dt)
	parallel(int64(len(out))/es, func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			copy(out[i*es:], nan)
		}
	})
	plane := w * g.cap * row
	parallel(w*g.cap, func(lo, hi int64) {
		for slot := lo; slot < hi; slot++ {
			if slot%g.cap >= rec.counts[slot/g.cap] {
				continue
			}
			src := rec.tokens[slot*row : (slot+1)*row]
			for j := range c.k {
				ex := rec.ids[slot*c.k+j]
				if ex < 0 {
					continue
				}
				dst := out[j*plane+slot*row : j*plane+(slot+1)*row]
				copy(dst, src)
				if expertSign(ex) < 0 {
					for b := es - 1; b < row; b += es { // the sign bit of every element
						dst[b] ^= 0x80
					}
				}
			}
		}
	})
	return upload(r, g.expertOut, out)
}

// checkOutput compares this rank's combined output with the reference
// out[t] = sum over j of weights[t,j] * expert(ids[t,j]) * x[t], entries with
// an id out of range left out, and with sent (this rank's send_slot, nil:
// every token reached every rank it was routed to) those whose rank the
// token did not reach; expert is expertSign (signed) or the identity.
func (g *moeRig) checkOutput(r *irisrt.Rank, all []moeInput, signed bool, sent []int64) error {
	c, me, w := g.c, r.Rank(), r.World()
	ob, err := download(r, g.out)
	if err != nil {
		return err
	}
	got := decode(c.dt, ob)
	x := decode(c.dt, all[me].tokens)
	var bad error
	parallel(c.t, func(lo, hi int64) {
		for t := lo; t < hi && bad == nil; t++ {
			for hh := int64(0); hh < c.h; hh++ {
				var want, mag float64
				for j := range c.k {
					ex := all[me].ids[t*c.k+j]
					p := c.owner(ex, w)
					if p < 0 || sent != nil && sent[t*int64(w)+int64(p)] < 0 {
						continue
					}
					v := float64(all[me].weights[t*c.k+j]) * float64(x[t*c.h+hh])
					if signed {
						v *= expertSign(ex)
					}
					want += v
					mag += math.Abs(v)
				}
				// One rounding of each rank's sum on its way back, one of the
				// total: within (k+1) roundings, each of the magnitudes
				// (eps) or, below the normal range, of the subnormal
				// spacing (tiny): f16 outputs near 1e-7 are subnormal.
				if d := math.Abs(float64(got[t*c.h+hh]) - want); !(d <= float64(c.k+1)*(eps(c.dt)*mag+tiny(c.dt))) {
					bad = fmt.Errorf("rank %d: output[%d][%d] = %g, want %g", me, t, hh, got[t*c.h+hh], want)
					return
				}
			}
		}
	})
	return bad
}

// check compares what launch (dispatch, the identity expert, combine) left
// on this rank with the reference: the received rows and the output.
func (g *moeRig) check(r *irisrt.Rank, all []moeInput) error {
	if _, err := g.checkDispatch(r, all); err != nil {
		return err
	}
	return g.checkOutput(r, all, false, nil)
}

// moeRound runs dispatch, the suite's expert on the host and combine in
// mode, checking what dispatch delivered and the combined output.
func moeRound(r *irisrt.Rank, g *moeRig, mode irismodel.Barrier, round uint64) error {
	w := r.World()
	all := make([]moeInput, w)
	for s := 0; s < w; s++ {
		all[s] = moeInputs(g.c, w, s, round)
	}
	if err := g.upload(r, all[r.Rank()]); err != nil {
		return err
	}
	s := r.Stream()
	if err := r.HostBarrier(s); err != nil { // inputs everywhere before mode none
		return err
	}
	if err := g.launchDispatch(s, mode); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	rec, err := g.checkDispatch(r, all)
	if err != nil {
		return fmt.Errorf("round %d (%s): %w", round, mode, err)
	}
	if err := g.hostExpert(r, rec); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if err := g.launchCombine(s, mode); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if err := g.checkOutput(r, all, true, nil); err != nil {
		return fmt.Errorf("round %d (%s): %w", round, mode, err)
	}
	return r.HostBarrier(s)
}

func moeCases() []moeCase {
	var cs []moeCase
	for _, dt := range dataTypes() {
		for _, shape := range [][3]int64{{1, 128, 1}, {7, 129, 2}, {512, 128, 8}, {512, 7168, 1}, {8192, 128, 8}} {
			for _, routing := range []string{"random", "skewed", "half"} {
				cs = append(cs, moeCase{t: shape[0], h: shape[1], k: shape[2], e: 8, routing: routing, dt: dt})
			}
		}
	}
	cs = append(cs, moeCase{t: 100, h: 256, k: 2, e: 13, routing: "random", dt: irismodel.BF16}) // e not a multiple of world
	// int32 ids, weights left out, and both; every k from 1 to 8.
	for _, dt := range dataTypes() {
		cs = append(cs, moeCase{t: 512, h: 128, k: 8, e: 8, routing: "random", dt: dt, ids32: true},
			moeCase{t: 7, h: 129, k: 2, e: 8, routing: "random", dt: dt, noWeights: true},
			moeCase{t: 300, h: 256, k: 4, e: 8, routing: "half", dt: dt, ids32: true, noWeights: true})
	}
	for k := int64(1); k <= 8; k++ {
		cs = append(cs, moeCase{t: 257, h: 136, k: k, e: 16, routing: "random", dt: irismodel.BF16})
	}
	if os.Getenv("IRISGEN_TEST_QUICK") == "" {
		cs = append(cs, moeCase{t: 8192, h: 7168, k: 8, e: 16, routing: "random", dt: irismodel.BF16})
	}
	return cs
}

func moeOpts() irisrt.Options {
	o := defaultOpts()
	o.HeapBytes = 8 << 30
	return o
}

// TestMoE runs dispatch -> the suite's expert -> combine for every case, in
// modes device, host and none, and checks the received rows (as a set per
// source rank), their entries, counts and send slots, and the combined
// output.
func TestMoE(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, moeOpts(), func(t *testing.T, w *irisrt.World) {
		for _, c := range moeCases() {
			t.Run(c.String(), func(t *testing.T) {
				if err := w.Run(func(r *irisrt.Rank) error { return moeRank(r, c) }); err != nil {
					t.Fatal(err)
				}
				cases.add(1)
			})
		}
	})
}

func moeRank(r *irisrt.Rank, c moeCase) error {
	g, err := newMoeRig(r, c)
	if err != nil {
		return err
	}
	defer g.close()
	for round, mode := range []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone, irismodel.BarrierDevice} {
		if err := moeRound(r, g, mode, uint64(round)); err != nil {
			return err
		}
	}
	return nil
}

// TestMoEGraph captures dispatch, the identity expert and combine once and
// replays them 100 times with a new routing, new tokens and new weights
// before every replay: int64 ids with weights, and int32 ids with the
// weights left out.
func TestMoEGraph(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, moeOpts(), func(t *testing.T, w *irisrt.World) {
		counts := make([]int, w.Size())
		if err := w.Run(func(r *irisrt.Rank) (err error) {
			counts[r.Rank()], err = moeGraphRank(r)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		cases.add(counts[0])
	})
}

// moeGraphRank runs moeGraphCase for two configurations and returns the
// rounds it checked.
func moeGraphRank(r *irisrt.Rank) (int, error) {
	checked := 0
	for _, c := range []moeCase{
		{t: 512, h: 256, k: 8, e: 4 * int64(r.World()), routing: "random", dt: irismodel.BF16},
		{t: 300, h: 256, k: 2, e: 4 * int64(r.World()), routing: "random", dt: irismodel.F16, ids32: true, noWeights: true},
	} {
		if err := moeGraphCase(r, c); err != nil {
			return checked, fmt.Errorf("%s: %w", c, err)
		}
		checked += rounds(moeGraphRounds)
	}
	return checked, nil
}

// moeGraphRounds are the rounds of a moeGraphCase.
const moeGraphRounds = 100

func moeGraphCase(r *irisrt.Rank, c moeCase) error {
	g, err := newMoeRig(r, c)
	if err != nil {
		return err
	}
	defer g.close()
	s := r.Stream()
	exec, err := r.Capture(s, func() error { return g.launch(r, s, irismodel.BarrierDevice) })
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	defer exec.Destroy()
	w := r.World()
	for round := uint64(0); round < uint64(rounds(moeGraphRounds)); round++ {
		all := make([]moeInput, w)
		for src := 0; src < w; src++ {
			all[src] = moeInputs(c, w, src, 1000+round)
		}
		if err := g.upload(r, all[r.Rank()]); err != nil {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if round%10 == 9 {
			err = g.launch(r, s, irismodel.BarrierDevice) // eager rounds between replays
		} else {
			err = exec.Launch(s)
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if err := g.check(r, all); err != nil {
			return fmt.Errorf("replay %d: %w", round, err)
		}
	}
	return nil
}

// moeFault runs dispatch, the identity expert and combine of c once on a
// fresh 2-rank world, with edit changing each rank's input first, and
// returns each rank's error record as the check after the stream reports it
// (a call fault: the next check is clean). The three are captured in one
// graph before anything runs, so combine runs after a faulting dispatch
// whatever the runtime does with later launches after a fault. Then it
// checks what dispatch delivered and the combined output (each token's
// experts on the ranks send_slot says it reached) against the reference of
// the edited inputs, and runs then (if not nil) on every rank before the
// plans close: the world stays usable after a call fault.
func moeFault(t *testing.T, c moeCase, edit func(rank int, in *moeInput), then func(r *irisrt.Rank, g *moeRig) error) []error {
	w, err := irisrt.NewLocalWorld(2, moeOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rigs := make([]*moeRig, 2)
	all := make([]moeInput, 2)
	for s := range all {
		all[s] = moeInputs(c, 2, s, 0)
		edit(s, &all[s])
	}
	errs := make([]error, 2)
	err = w.Run(func(r *irisrt.Rank) error {
		g, err := newMoeRig(r, c)
		if err != nil {
			return err
		}
		rigs[r.Rank()] = g
		if err := g.upload(r, all[r.Rank()]); err != nil {
			return err
		}
		s := r.Stream()
		exec, err := r.Capture(s, func() error { return g.launch(r, s, irismodel.BarrierDevice) })
		if err != nil {
			return fmt.Errorf("capture: %w", err)
		}
		defer exec.Destroy()
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if err := exec.Launch(s); err != nil {
			return err
		}
		if err := r.Device().StreamSynchronize(s); err != nil {
			return err
		}
		errs[r.Rank()] = r.Check()
		if err := r.Check(); err != nil {
			return fmt.Errorf("a call fault is reported once, then: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every rank's kernels have finished: check what they delivered, then
	// close the plans (collective).
	err = w.Run(func(r *irisrt.Rank) error {
		g := rigs[r.Rank()]
		defer g.close()
		if _, err := g.checkDispatch(r, all); err != nil {
			return err
		}
		sb, err := download(r, g.sendSlot)
		if err != nil {
			return err
		}
		if err := g.checkOutput(r, all, false, i64s(sb)); err != nil {
			return err
		}
		if then != nil {
			return then(r, g)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

// TestMoEBadExpert routes one entry to a nonexistent expert: the launch goes
// ahead, the entry is skipped (the token still goes to the ranks of its
// other experts, and combine sums the others), and the next check on that
// rank returns the device's index error (a call fault: reported once). The
// world stays usable: the next round, with valid ids, is correct on every
// rank.
func TestMoEBadExpert(t *testing.T) {
	cases := countCases(t)
	c := moeCase{t: 64, h: 128, k: 2, e: 8, routing: "random", dt: irismodel.BF16}
	errs := moeFault(t, c, func(rank int, in *moeInput) {
		if rank == 1 {
			in.ids[5] = c.e + 3
		}
	}, func(r *irisrt.Rank, g *moeRig) error { return moeRound(r, g, irismodel.BarrierDevice, 1) })
	var de *irisrt.DeviceFaultError
	if !errors.As(errs[1], &de) || de.World || de.Info != uint64(c.e+3) {
		t.Fatalf("rank 1: got %v, want the device's index error naming expert %d", errs[1], c.e+3)
	}
	if errs[0] != nil {
		t.Fatalf("rank 0: %v", errs[0])
	}
	cases.add(1)
	t.Logf("rank 1: %v", errs[1])
}

// TestMoECapacity sends more tokens to one rank than its capacity: every
// token of both ranks goes to expert 0 (rank 0), 300 tokens into 100 rows
// a source. Dispatch delivers the first 100 it gets from each source intact
// (recv_counts says 100; send_slot names their rows and is -1 for the
// others); combine returns those tokens' sums and 0 for the tokens that
// found no room; each source's check returns the capacity error (code 3)
// with its count, as a call fault.
func TestMoECapacity(t *testing.T) {
	cases := countCases(t)
	c := moeCase{t: 300, h: 128, k: 2, e: 8, cap: 100, routing: "skewed", dt: irismodel.BF16}
	errs := moeFault(t, c, func(int, *moeInput) {}, nil)
	for rank, err := range errs {
		var de *irisrt.DeviceFaultError
		if !errors.As(err, &de) || de.World || de.Code != 3 || de.Info != uint64(c.t) {
			t.Fatalf("rank %d: got %v, want the device's capacity error (code 3) counting %d rows", rank, err, c.t)
		}
		t.Logf("rank %d: %v", rank, err)
	}
	cases.add(1)
}

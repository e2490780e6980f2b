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
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// moeCase is one MoE configuration: t tokens of h elements, k experts per
// token out of e, a routing rule.
type moeCase struct {
	t, h, k, e int64
	routing    string // random, skewed (every pair to expert 0), half (only the first half of the ranks' experts)
	dt         irisrt.DType
	ids32      bool // expert ids as int32 (else int64)
	noWeights  bool // weights left out (every weight 1)
}

func (c moeCase) String() string {
	s := fmt.Sprintf("%s/t=%d/h=%d/k=%d/e=%d/%s", c.dt, c.t, c.h, c.k, c.e, c.routing)
	if c.ids32 {
		s += "/ids32"
	}
	if c.noWeights {
		s += "/noweights"
	}
	return s
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

// moeRig holds one rank's plans and tensors for a configuration.
type moeRig struct {
	c                                        moeCase
	cap                                      int64
	dispatch                                 *collectives.MoeDispatchPushPlan
	combine                                  *collectives.MoeCombinePushPlan
	tokens, ids, weights                     irisrt.Tensor
	recvTokens, recvIDs, recvW, recvSrc, cnt irisrt.Tensor
	out                                      irisrt.Tensor
	free                                     []func()
}

func newMoeRig(r *irisrt.Rank, c moeCase) (*moeRig, error) {
	w := int64(r.World())
	g := &moeRig{c: c, cap: c.t * c.k}
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
	alloc := func(dt irisrt.DType, n int64) irisrt.Tensor {
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
	idt := irisrt.I64
	if c.ids32 {
		idt = irisrt.I32
	}
	g.tokens, g.ids = alloc(c.dt, c.t*c.h), alloc(idt, c.t*c.k)
	if !c.noWeights {
		g.weights = alloc(irisrt.F32, c.t*c.k)
	}
	g.recvTokens, g.recvIDs = alloc(c.dt, w*g.cap*c.h), alloc(irisrt.I64, w*g.cap)
	g.recvW, g.recvSrc, g.cnt = alloc(irisrt.F32, w*g.cap), alloc(irisrt.I64, w*g.cap), alloc(irisrt.I64, w)
	g.out = alloc(c.dt, c.t*c.h)
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

// launch runs dispatch, then combine with the identity expert (the received
// tokens are the expert outputs).
func (g *moeRig) launch(r *irisrt.Rank, s gpu.Stream, mode irisrt.Barrier) error {
	if err := g.dispatch.Launch(s, g.tokens, g.ids, g.weights, g.recvTokens, g.recvIDs, g.recvW, g.recvSrc, g.cnt, mode); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if err := g.combine.Launch(s, g.recvTokens, g.recvSrc, g.cnt, g.ids, g.weights, g.out, mode); err != nil {
		return fmt.Errorf("combine: %w", err)
	}
	return nil
}

// check compares this rank's received rows and combined output with the CPU
// reference built from every rank's input of the round.
func (g *moeRig) check(r *irisrt.Rank, all []moeInput) error {
	c, w, me := g.c, r.World(), r.Rank()
	es := c.dt.Size()
	perRank := (c.e + int64(w) - 1) / int64(w)
	cntB, err := download(r, g.cnt)
	if err != nil {
		return err
	}
	rt, err := download(r, g.recvTokens)
	if err != nil {
		return err
	}
	ridB, err := download(r, g.recvIDs)
	if err != nil {
		return err
	}
	rwB, err := download(r, g.recvW)
	if err != nil {
		return err
	}
	rsB, err := download(r, g.recvSrc)
	if err != nil {
		return err
	}
	row := c.h * es
	for s := 0; s < w; s++ {
		// The pairs of rank s whose expert lives here, as a set.
		want := map[int64]bool{}
		for p, ex := range all[s].ids {
			if ex/perRank == int64(me) {
				want[int64(p)] = true
			}
		}
		got := int64(binary.LittleEndian.Uint64(cntB[8*s:]))
		if got != int64(len(want)) {
			return fmt.Errorf("rank %d: %d rows from rank %d, want %d", me, got, s, len(want))
		}
		for j := int64(0); j < got; j++ {
			slot := int64(s)*g.cap + j
			p := int64(binary.LittleEndian.Uint64(rsB[8*slot:]))
			if !want[p] {
				return fmt.Errorf("rank %d: row %d from rank %d names pair %d, which is not routed here or came twice", me, j, s, p)
			}
			delete(want, p)
			if ex := int64(binary.LittleEndian.Uint64(ridB[8*slot:])); ex != all[s].ids[p] {
				return fmt.Errorf("rank %d: pair %d of rank %d: expert %d, want %d", me, p, s, ex, all[s].ids[p])
			}
			if wt := math.Float32frombits(binary.LittleEndian.Uint32(rwB[4*slot:])); wt != all[s].weights[p] {
				return fmt.Errorf("rank %d: pair %d of rank %d: weight %g, want %g", me, p, s, wt, all[s].weights[p])
			}
			tok := p / c.k
			if !bytes.Equal(rt[slot*row:(slot+1)*row], all[s].tokens[tok*row:(tok+1)*row]) {
				return fmt.Errorf("rank %d: pair %d of rank %d: the token row differs", me, p, s)
			}
		}
	}
	// Combine with the identity expert: out[t] = x[t] * sum of valid weights.
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
				for j := int64(0); j < c.k; j++ {
					wt := float64(all[me].weights[t*c.k+j])
					v := wt * float64(x[t*c.h+hh])
					want += v
					mag += math.Abs(v)
				}
				if d := math.Abs(float64(got[t*c.h+hh]) - want); d > float64(c.k+1)*eps(c.dt)*mag+tiny(c.dt) {
					bad = fmt.Errorf("rank %d: output[%d][%d] = %g, want %g", me, t, hh, got[t*c.h+hh], want)
					return
				}
			}
		}
	})
	return bad
}

func moeRound(r *irisrt.Rank, g *moeRig, mode irisrt.Barrier, round uint64) error {
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
	if err := g.launch(r, s, mode); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if err := g.check(r, all); err != nil {
		return fmt.Errorf("round %d (%s): %w", round, mode, err)
	}
	return r.HostBarrier(s)
}

func moeCases() []moeCase {
	var cs []moeCase
	for _, dt := range dataTypes {
		for _, shape := range [][3]int64{{1, 128, 1}, {7, 129, 2}, {512, 128, 8}, {512, 7168, 1}, {8192, 128, 8}} {
			for _, routing := range []string{"random", "skewed", "half"} {
				cs = append(cs, moeCase{t: shape[0], h: shape[1], k: shape[2], e: 8, routing: routing, dt: dt})
			}
		}
	}
	cs = append(cs, moeCase{t: 100, h: 256, k: 2, e: 13, routing: "random", dt: irisrt.BF16}) // e not a multiple of world
	// int32 ids, weights left out, and both.
	for _, dt := range dataTypes {
		cs = append(cs, moeCase{t: 512, h: 128, k: 8, e: 8, routing: "random", dt: dt, ids32: true},
			moeCase{t: 7, h: 129, k: 2, e: 8, routing: "random", dt: dt, noWeights: true},
			moeCase{t: 300, h: 256, k: 4, e: 8, routing: "half", dt: dt, ids32: true, noWeights: true})
	}
	if os.Getenv("IRISGEN_TEST_QUICK") == "" {
		cs = append(cs, moeCase{t: 8192, h: 7168, k: 8, e: 16, routing: "random", dt: irisrt.BF16})
	}
	return cs
}

func moeOpts() irisrt.Options {
	o := defaultOpts()
	o.HeapBytes = 8 << 30
	return o
}

// TestMoE runs dispatch -> identity expert -> combine for every case, in
// modes device, host and none, and checks the received rows (as a set per
// source rank), their metadata and counts, and the combined output.
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
	for round, mode := range []irisrt.Barrier{irisrt.BarrierDevice, irisrt.BarrierHost, irisrt.BarrierNone, irisrt.BarrierDevice} {
		if err := moeRound(r, g, mode, uint64(round)); err != nil {
			return err
		}
	}
	return nil
}

// TestMoEGraph captures dispatch and combine once and replays them 100 times
// with a new routing, new tokens and new weights before every replay: int64
// ids with weights, and int32 ids with the weights left out.
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
	rounds := 0
	for _, c := range []moeCase{
		{t: 512, h: 256, k: 8, e: 4 * int64(r.World()), routing: "random", dt: irisrt.BF16},
		{t: 300, h: 256, k: 2, e: 4 * int64(r.World()), routing: "random", dt: irisrt.F16, ids32: true, noWeights: true},
	} {
		if err := moeGraphCase(r, c); err != nil {
			return rounds, fmt.Errorf("%s: %w", c, err)
		}
		rounds += moeGraphRounds
	}
	return rounds, nil
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
	exec, err := r.Capture(s, func() error { return g.launch(r, s, irisrt.BarrierDevice) })
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	defer exec.Destroy()
	w := r.World()
	for round := uint64(0); round < moeGraphRounds; round++ {
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
			err = g.launch(r, s, irisrt.BarrierDevice) // eager rounds between replays
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

// TestMoEBadExpert routes one pair to a nonexistent expert: the launch goes
// ahead, the pair is skipped, and the next check on that rank returns the
// device's index error (a call fault: reported once). The world stays
// usable: the next round, with valid ids, is correct on every rank.
func TestMoEBadExpert(t *testing.T) {
	cases := countCases(t)
	w, err := irisrt.NewLocalWorld(2, moeOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := moeCase{t: 64, h: 128, k: 2, e: 8, routing: "random", dt: irisrt.BF16}
	errs := make([]error, 2)
	err = w.Run(func(r *irisrt.Rank) error {
		g, err := newMoeRig(r, c)
		if err != nil {
			return err
		}
		defer g.close()
		in := moeInputs(c, 2, r.Rank(), 0)
		if r.Rank() == 1 {
			in.ids[5] = c.e + 3
		}
		if err := g.upload(r, in); err != nil {
			return err
		}
		s := r.Stream()
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if err := g.launch(r, s, irisrt.BarrierDevice); err != nil {
			return err
		}
		if err := r.Device().StreamSynchronize(s); err != nil {
			return err
		}
		errs[r.Rank()] = r.Check()
		if err := r.Check(); err != nil {
			return fmt.Errorf("a call fault is reported once, then: %w", err)
		}
		return moeRound(r, g, irisrt.BarrierDevice, 1)
	})
	if err != nil {
		t.Fatal(err)
	}
	var de *irisrt.DeviceFaultError
	if !errors.As(errs[1], &de) || de.Info != uint64(c.e+3) {
		t.Fatalf("rank 1: got %v, want the device's index error naming expert %d", errs[1], c.e+3)
	}
	if errs[0] != nil {
		t.Fatalf("rank 0: %v", errs[0])
	}
	cases.add(1)
	t.Logf("rank 1: %v", errs[1])
}

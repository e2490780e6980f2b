package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"

	"example.com/stencil/internal/gen/coll"
)

// The collectives of irisgen's catalogue this repository uses (irisgen.yaml:
// catalogue), generated into package coll beside its own and built by the
// same `go tool irisgen kernels`: all_reduce, and the MoE pair
// moe_dispatch and moe_combine.

// AllReduceInput is rank's input of an all_reduce of n elements. Sums of
// up to 8 ranks' values (multiples of 1/8 in [-4, 4)) are exact in bf16,
// in any order.
func AllReduceInput(rank int, n int64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = Value(rank, 2, int64(i))
	}
	return v
}

// AllReduceWant is the CPU reference of every rank's output: the sum of
// every rank's input.
func AllReduceWant(world int, n int64) []float32 {
	v := make([]float32, n)
	for r := 0; r < world; r++ {
		for i, x := range AllReduceInput(r, n) {
			v[i] += x
		}
	}
	return v
}

// AllReduceVariants are the variants All runs: every one, and auto, which
// picks one from the measured table by the world and the size.
var AllReduceVariants = []coll.AllReduceVariant{
	coll.AllReduceOneShot, coll.AllReduceOneShotStaged, coll.AllReduceOneShotPush, coll.AllReduceOneShotLamport,
	coll.AllReduceTwoShot, coll.AllReduceAtomic, coll.AllReduceSpinlock, coll.AllReduceRing, coll.AllReduceAuto,
}

// AllReduce is one all_reduce (sum) case.
type AllReduce struct {
	Variant coll.AllReduceVariant
	DType   irismodel.DType
	N       int64
	// HeapInput puts input on the symmetric heap; otherwise it is plain
	// device memory, which the variants whose peers read it stage onto
	// the heap.
	HeapInput bool
}

func (c AllReduce) String() string {
	return fmt.Sprintf("all_reduce/%s %s n=%d heap input=%v", c.Variant, c.DType, c.N, c.HeapInput)
}

// RunAllReduce runs c once eagerly and replays it from a graph, checking
// output after each. A named variant runs on a plan of its own, made
// through the package's catalogue (coll.Lookup) and closed at the end;
// auto runs through the convenience call, which keeps its plan in the
// rank's cache.
func RunAllReduce(r *irisrt.Rank, c AllReduce) (err error) {
	bf, err := newBuffers(r, c.DType, c.N, c.N, c.HeapInput)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, bf.free()) }()
	var launch func() error
	if c.Variant == coll.AllReduceAuto {
		launch = func() error {
			return coll.AllReduce(r, r.Stream(), coll.AllReduceAuto, c.DType, coll.AllReduceOpSum, bf.a, bf.b, irismodel.BarrierDevice)
		}
	} else {
		e, ok := coll.Lookup("all_reduce", string(c.Variant))
		if !ok {
			return fmt.Errorf("no all_reduce variant %q", c.Variant)
		}
		p, err := e.New(r, c.DType, string(coll.AllReduceOpSum), []int64{c.N})
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, p.Close()) }()
		launch = func() error { return p.LaunchTensors(r.Stream(), []irisrt.Tensor{bf.a, bf.b}, irismodel.BarrierDevice) }
	}
	in, err := irismodel.Encode(c.DType, AllReduceInput(r.Rank(), c.N))
	if err != nil {
		return err
	}
	want, err := irismodel.Encode(c.DType, AllReduceWant(r.World(), c.N))
	if err != nil {
		return err
	}
	return run(r, c.String(), bf, in, want, launch)
}

// MoE is one case of the MoE pair: moe_dispatch sends every token once to
// each rank that owns one of its K experts, an identity expert gives every
// expert's output as the received row, and moe_combine sums each token's
// weighted outputs on the experts' ranks and then over the ranks:
// output[t] = sum over j of weights[t,j] * tokens[t] (a plain sum without
// weights).
type MoE struct {
	DType irismodel.DType
	// T tokens of H elements, K experts a token; E experts in all.
	T, H, K, E int64
	// IDs is the expert ids' type (I64 or I32); Weights passes weights
	// (else the optional tensor is left out).
	IDs     irismodel.DType
	Weights bool
}

func (c MoE) String() string {
	return fmt.Sprintf("moe_dispatch+moe_combine %s t=%d h=%d k=%d e=%d ids %s weights=%v", c.DType, c.T, c.H, c.K, c.E, c.IDs, c.Weights)
}

// Cap is the receive capacity per source rank: a token goes to a rank at
// most once, so T rows never overflow.
func (c MoE) Cap() int64 { return c.T }

// Expert is the expert of pair (t, j) on rank: in range, different for the
// K pairs of a token, spread over the ranks.
func (c MoE) Expert(rank int, t, j int64) int64 { return (t*7 + j*3 + int64(rank)) % c.E }

// Owner is the rank that holds expert x: x / ceil(E / world), as the spec
// says.
func (c MoE) Owner(x int64, world int) int {
	per := (c.E + int64(world) - 1) / int64(world)
	return int(x / per)
}

// Weight is the weight of pair (t, j): 1/2, 1/4, ...; exact products.
func (c MoE) Weight(t, j int64) float32 { return float32(math.Ldexp(1, -int(j+1))) }

// Tokens is rank's tokens, row-major [T, H].
func (c MoE) Tokens(rank int) []float32 {
	v := make([]float32, c.T*c.H)
	for i := range v {
		v[i] = Value(rank, 3, int64(i))
	}
	return v
}

// Want is the CPU reference of rank's combined output, [T, H].
func (c MoE) Want(rank int) []float32 {
	tok := c.Tokens(rank)
	v := make([]float32, len(tok))
	for t := int64(0); t < c.T; t++ {
		var w float32
		for j := int64(0); j < c.K; j++ {
			if c.Weights {
				w += c.Weight(t, j)
			} else {
				w++
			}
		}
		for i := int64(0); i < c.H; i++ {
			v[t*c.H+i] = w * tok[t*c.H+i]
		}
	}
	return v
}

// WantCounts is the CPU reference of rank's recv_counts: how many tokens
// each source rank sends it (those with at least one expert here).
func (c MoE) WantCounts(rank, world int) []int64 {
	v := make([]int64, world)
	for s := 0; s < world; s++ {
		for t := int64(0); t < c.T; t++ {
			for j := int64(0); j < c.K; j++ {
				if c.Owner(c.Expert(s, t, j), world) == rank {
					v[s]++
					break
				}
			}
		}
	}
	return v
}

// moeTensors are the pair's tensors on one rank, all on the heap.
type moeTensors struct {
	tokens, ids, weights, recvTokens, recvIds, recvWeights, recvSrc, recvCounts, sendSlot, expertOut, output irisrt.Tensor
}

// RunMoE makes the two plans, launches dispatch, the identity expert and
// combine once eagerly, then captures the three in one graph and replays
// it, checking the combined output and the receive counts after each.
func RunMoE(r *irisrt.Rank, c MoE) (err error) {
	world := int64(r.World())
	disp, err := coll.NewMoeDispatchPushPlan(r, c.DType, c.T, c.H, c.K, c.E, c.Cap())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, disp.Close()) }()
	comb, err := coll.NewMoeCombinePushPlan(r, c.DType, c.T, c.H, c.K, c.E, c.Cap())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, comb.Close()) }()
	var x moeTensors
	var allocated []irisrt.Tensor
	defer func() {
		for _, t := range allocated {
			err = errors.Join(err, r.Heap().Free(t))
		}
	}()
	for _, a := range []struct {
		t  *irisrt.Tensor
		dt irismodel.DType
		n  int64
	}{
		{&x.tokens, c.DType, c.T * c.H}, {&x.ids, c.IDs, c.T * c.K}, {&x.weights, irismodel.F32, c.T * c.K},
		{&x.recvTokens, c.DType, world * c.Cap() * c.H}, {&x.recvIds, irismodel.I64, world * c.Cap() * c.K},
		{&x.recvWeights, irismodel.F32, world * c.Cap() * c.K}, {&x.recvSrc, irismodel.I64, world * c.Cap()},
		{&x.recvCounts, irismodel.I64, world}, {&x.sendSlot, irismodel.I64, c.T * world},
		{&x.expertOut, c.DType, c.K * world * c.Cap() * c.H}, {&x.output, c.DType, c.T * c.H},
	} {
		if *a.t, err = r.Heap().Alloc(a.dt, a.n); err != nil {
			return err
		}
		allocated = append(allocated, *a.t)
	}
	weights := irisrt.Tensor{} // optional: left out
	if c.Weights {
		weights = x.weights
	}
	launch := func() error {
		s := r.Stream()
		if err := disp.Launch(s, x.tokens, x.ids, weights, x.recvTokens, x.recvIds, x.recvWeights, x.recvSrc, x.recvCounts, x.sendSlot, irismodel.BarrierDevice); err != nil {
			return err
		}
		// The identity expert: each of the K planes of expert_out
		// ([K, world, cap, H]) is the received rows ([world, cap, H]).
		// Device-to-device copies on the stream: capturable.
		for j := int64(0); j < c.K; j++ {
			plane := x.expertOut.Slice(j*x.recvTokens.Len, x.recvTokens.Len)
			if err := r.Device().CopyDtoDAsync(plane.Ptr, x.recvTokens.Ptr, x.recvTokens.Bytes(), s); err != nil {
				return err
			}
		}
		return comb.Launch(s, x.expertOut, x.recvIds, x.recvWeights, x.recvSrc, x.recvCounts, x.sendSlot, x.output, irismodel.BarrierDevice)
	}

	tokens, err := irismodel.Encode(c.DType, c.Tokens(r.Rank()))
	if err != nil {
		return err
	}
	ids := make([]byte, x.ids.Bytes())
	ws := make([]float32, c.T*c.K)
	for t := int64(0); t < c.T; t++ {
		for j := int64(0); j < c.K; j++ {
			i, e := t*c.K+j, c.Expert(r.Rank(), t, j)
			if c.IDs == irismodel.I32 {
				binary.LittleEndian.PutUint32(ids[4*i:], uint32(e))
			} else {
				binary.LittleEndian.PutUint64(ids[8*i:], uint64(e))
			}
			ws[i] = c.Weight(t, j)
		}
	}
	weightBytes, err := irismodel.Encode(irismodel.F32, ws)
	if err != nil {
		return err
	}
	want, err := irismodel.Encode(c.DType, c.Want(r.Rank()))
	if err != nil {
		return err
	}
	counts := make([]byte, 8*world)
	for s, n := range c.WantCounts(r.Rank(), r.World()) {
		binary.LittleEndian.PutUint64(counts[8*s:], uint64(n))
	}
	prepare := func() error {
		for _, u := range []struct {
			t irisrt.Tensor
			b []byte
		}{{x.tokens, tokens}, {x.ids, ids}, {x.weights, weightBytes}, {x.output, poison(len(want))}, {x.recvCounts, poison(len(counts))}} {
			if err := upload(r, u.t, u.b); err != nil {
				return err
			}
		}
		// Peers store into this rank's receive tensors: every rank has
		// poisoned its own before any launches.
		return r.HostBarrier(r.Stream())
	}
	check := func(how string) error {
		if err := r.Device().StreamSynchronize(r.Stream()); err != nil {
			return fmt.Errorf("%s, %s: %w", c, how, err)
		}
		if err := r.Check(); err != nil {
			return fmt.Errorf("%s, %s: %w", c, how, err)
		}
		if !checkValues {
			return nil
		}
		for _, w := range []struct {
			name string
			t    irisrt.Tensor
			want []byte
		}{{"recv_counts", x.recvCounts, counts}, {"output", x.output, want}} {
			got, err := download(r, w.t)
			if err != nil {
				return err
			}
			if i := firstDiff(got, w.want); i >= 0 {
				es := int(w.t.DType.Size())
				return fmt.Errorf("%s, %s: rank %d, %s element %d of %d: got bytes %x, want %x", c, how, r.Rank(), w.name, i/es, w.t.Len,
					got[i/es*es:i/es*es+es], w.want[i/es*es:i/es*es+es])
			}
		}
		return nil
	}
	if err := prepare(); err != nil {
		return err
	}
	if err := launch(); err != nil {
		return fmt.Errorf("%s: %w", c, err)
	}
	if err := check("eager"); err != nil {
		return err
	}
	g, err := r.Capture(r.Stream(), launch)
	if err != nil {
		return fmt.Errorf("%s: capturing: %w", c, err)
	}
	defer g.Destroy()
	for i := 0; i < Replays; i++ {
		if err := prepare(); err != nil {
			return err
		}
		if err := g.Replay(r.Stream()); err != nil {
			return fmt.Errorf("%s: replay %d: %w", c, i, err)
		}
		if err := check(fmt.Sprintf("replay %d", i)); err != nil {
			return err
		}
	}
	return nil
}

// moeCases are the MoE cases All runs for dtype dt: a few tokens with
// weights and int64 ids, and many without weights and with int32 ids.
func moeCases(dt irismodel.DType, world int) []MoE {
	e := int64(2*world + 1) // experts not a multiple of the world
	return []MoE{
		{DType: dt, T: 5, H: 7, K: 2, E: e, IDs: irismodel.I64, Weights: true},
		{DType: dt, T: 129, H: 4096 + 8, K: 2, E: e, IDs: irismodel.I32, Weights: false},
	}
}

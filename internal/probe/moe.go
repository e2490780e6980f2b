package probe

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/irisgen/irisgen/internal/moepair"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// MoE shapes of the probe: tokens and hidden size off the vector width, two
// experts a token, four experts a rank.
const (
	moeTokens  = 257
	moeHidden  = 1031
	moeK       = 2
	moePerRank = 4
)

// scenario probes collectives that a comparison with an eager launch
// cannot check, as data: the collectives it needs (all in the package,
// else it does not apply), those it probes instead of the comparison, and
// its probe of one case.
type scenario struct {
	needs, owns []string
	probe       func(st *stepper, res Result, mode irismodel.Barrier, dt irismodel.DType, cfg Config) (Result, error)
}

// scenarios are the probe's: the MoE pair.
var scenarios = []scenario{{needs: []string{moepair.Dispatch, moepair.Combine}, owns: []string{moepair.Dispatch, moepair.Combine}, probe: probeMoE}}

// applicable lists the scenarios whose collectives entries hold.
func applicable(entries []irisimpl.Entry) []scenario {
	var out []scenario
	for _, sc := range scenarios {
		if !slices.ContainsFunc(sc.needs, func(c string) bool {
			return !slices.ContainsFunc(entries, func(e irisimpl.Entry) bool { return e.Collective == c })
		}) {
			out = append(out, sc)
		}
	}
	return out
}

// probeMoE probes moe_dispatch and moe_combine as the pair they are used
// as: one graph holds dispatch, the identity expert (copies of the rows
// dispatch received) and combine. Every replay gets new tokens, new random
// routing and new weights, and its output must equal the CPU reference
// x * (sum of the token's weights), exactly: tokens and weights are
// multiples of 1/8 in [-1, 1], so every product and partial sum (each
// rank's, rounded to dt on the way back, and the total) is a multiple of
// 1/64 of magnitude at most 2, exact in every dt. Dispatch alone cannot be
// compared byte for byte with an eager launch: the order of received rows
// depends on which block takes a row first.
func probeMoE(st *stepper, res Result, mode irismodel.Barrier, dt irismodel.DType, cfg Config) (Result, error) {
	r := st.r
	experts := int64(moePerRank * r.World())
	var pair *moepair.Pair
	err := st.step(func() (err error) {
		pair, err = moepair.New(r, cfg.Entries, dt, []int64{moeTokens, moeHidden, moeK, experts, moeTokens})
		return err
	})
	if pair != nil {
		defer pair.Close()
	}
	if res, done, fatal := verdict(res, err, "making the pair"); done {
		return res, fatal
	}
	dev, s := r.Device(), r.Stream()
	tensors := pair.Tensors
	exec, res, ok := capture(r, res, func() error { return pair.Launch(s, mode) })
	if exec != 0 {
		defer dev.DestroyGraphExec(exec)
	}
	if res, done, fatal := agreeCapture(st, res, ok); done {
		return res, fatal
	}
	rng := rand.New(rand.NewPCG(uint64(r.Rank())+1, 0x30e))
	out := tensors["output"]
	for k := 0; k < cfg.Replays; k++ {
		x := eighths(dt, moeTokens*moeHidden, rng)
		wts := eighths(irismodel.F32, moeTokens*moeK, rng)
		ids := make([]byte, 8*moeTokens*moeK)
		for i := range moeTokens * moeK {
			binary.LittleEndian.PutUint64(ids[8*i:], uint64(rng.Int64N(experts)))
		}
		write := func() error {
			for name, b := range map[string][]byte{"tokens": x, "weights": wts, "ids": ids} {
				if err := put(r, tensors[name], b); err != nil {
					return fmt.Errorf("writing %s: %w", name, err)
				}
			}
			if err := dev.MemsetD8Async(out.Ptr, 0xA5, out.Bytes(), s); err != nil {
				return fmt.Errorf("poisoning the output: %w", err)
			}
			return nil
		}
		barrier := func() error { return r.HostBarrier(s) } // every rank's routing written; then done everywhere, error record read
		check := func() error {
			got, err := get(r, out)
			if err != nil {
				return fmt.Errorf("reading the output: %w", err)
			}
			if i := moeMismatch(dt, got, x, wts); i >= 0 {
				return fmt.Errorf("output element %d (token %d) is not the token times the sum of its weights", i, i/moeHidden)
			}
			return nil
		}
		for _, f := range []func() error{write, barrier, func() error { return dev.LaunchGraph(exec, s) }, barrier, check} {
			if res, done, fatal := verdict(res, st.step(f), "replay %d", k); done {
				return res, fatal
			}
		}
		res.Replays++
	}
	return res, nil
}

// moeMismatch returns the first element of out (dt) that differs from
// x (dt) times the sum of its token's moeK weights (f32), or -1.
func moeMismatch(dt irismodel.DType, out, x, wts []byte) int {
	es := int(dt.Size())
	for i := range len(out) / es {
		t := i / moeHidden
		var sum float32
		for j := range moeK {
			sum += math.Float32frombits(binary.LittleEndian.Uint32(wts[4*(t*moeK+j):]))
		}
		want := decode(dt, x[i*es:]) * sum
		if got := decode(dt, out[i*es:]); got != want {
			return i
		}
	}
	return -1
}

// decode reads one element of dt.
func decode(dt irismodel.DType, b []byte) float32 {
	v, err := irismodel.Decode(dt, b[:dt.Size()])
	if err != nil {
		panic(err) // the probe only decodes f32, f16 and bf16
	}
	return v[0]
}

package bench

import (
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/irisgen/irisgen/internal/moepair"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// MoE benchmark shapes (issue 7): tokens per rank, hidden size, experts per
// token; 8 experts a rank, receive capacity t*k, random routing, bf16.
var (
	MoETokens       = []int64{128, 512, 4096}
	MoEHidden int64 = 7168
	MoEK            = []int64{1, 8}
)

const moeExpertsPerRank = 8

// runMoE times moe_dispatch and moe_combine (each alone; combine on the
// rows of one dispatch). Rows: Bytes is the token bytes per rank (t*h*2),
// Collective "moe_dispatch_k<K>" or "moe_combine_k<K>".
func runMoE(w *irisrt.World, cfg Config, add func(Row)) error {
	for _, k := range MoEK {
		for _, t := range MoETokens {
			for _, mode := range cfg.Modes {
				var us [2][][]float64
				for i := range us {
					us[i] = make([][]float64, w.Size())
				}
				err := w.Run(func(r *irisrt.Rank) error {
					d, c, err := timeMoE(r, t, k, mode, cfg.Warmup, cfg.repeats())
					us[0][r.Rank()], us[1][r.Rank()] = d, c
					return err
				})
				if err != nil {
					return fmt.Errorf("moe t=%d k=%d %s: %w", t, k, mode, err)
				}
				for i, coll := range []string{"moe_dispatch", "moe_combine"} {
					// k in the collective's name: tables compare like with like.
					row := Row{Collective: fmt.Sprintf("%s_k%d", coll, k), Variant: "push", DType: "bf16", Bytes: t * MoEHidden * 2, Mode: mode}
					Summarize(slowestBatches(us[i])).set(&row)
					add(row)
				}
			}
		}
	}
	return nil
}

func timeMoE(r *irisrt.Rank, t, k int64, mode string, warmup, repeats int) ([]float64, []float64, error) {
	e := moeExpertsPerRank * int64(r.World())
	pair, err := moepair.New(r, irisrt.BF16, []int64{t, MoEHidden, k, e, t * k})
	if err != nil {
		return nil, nil, err
	}
	defer pair.Close()
	tensors := pair.Tensors
	// Random routing; weights of one (the timing does not depend on them).
	rng := rand.New(rand.NewPCG(uint64(r.Rank()), 7))
	ids := make([]int64, t*k)
	ones := make([]float32, t*k)
	for i := range ids {
		ids[i], ones[i] = rng.Int64N(e), 1
	}
	dev := r.Device()
	if err := dev.CopyHtoD(tensors["ids"].Ptr, unsafe.Pointer(&ids[0]), int64(len(ids))*8); err != nil {
		return nil, nil, err
	}
	if err := dev.CopyHtoD(tensors["weights"].Ptr, unsafe.Pointer(&ones[0]), int64(len(ones))*4); err != nil {
		return nil, nil, err
	}
	if err := dev.MemsetD8Async(tensors["tokens"].Ptr, 0, tensors["tokens"].Bytes(), r.Stream()); err != nil {
		return nil, nil, err
	}
	s := r.Stream()
	dUS, err := timeCalls(r, mode, Iterations(t*MoEHidden*2), warmup, repeats, func() error { return pair.Dispatch.LaunchTensors(s, pair.DispatchArgs, irisrt.BarrierDevice) })
	if err != nil {
		return nil, nil, fmt.Errorf("dispatch: %w", err)
	}
	cUS, err := timeCalls(r, mode, Iterations(t*MoEHidden*2), warmup, repeats, func() error { return pair.Combine.LaunchTensors(s, pair.CombineArgs, irisrt.BarrierDevice) })
	if err != nil {
		return nil, nil, fmt.Errorf("combine: %w", err)
	}
	return dUS, cUS, nil
}

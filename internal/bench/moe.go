package bench

import (
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/irisgen/irisgen/generated/collectives"
	irt "github.com/irisgen/irisgen/runtime"
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
func runMoE(w *irt.World, cfg Config, add func(Row)) error {
	disp, ok1 := collectives.Lookup("moe_dispatch", "push")
	comb, ok2 := collectives.Lookup("moe_combine", "push")
	if !ok1 || !ok2 {
		return fmt.Errorf("the catalogue has no moe_dispatch/push or moe_combine/push")
	}
	for _, k := range MoEK {
		for _, t := range MoETokens {
			for _, mode := range cfg.Modes {
				var us [2][]float64
				for i := range us {
					us[i] = make([]float64, w.Size())
				}
				err := w.Run(func(r *irt.Rank) error {
					d, c, err := timeMoE(r, disp, comb, t, k, mode, cfg.Warmup)
					us[0][r.Rank()], us[1][r.Rank()] = d, c
					return err
				})
				if err != nil {
					return fmt.Errorf("moe t=%d k=%d %s: %w", t, k, mode, err)
				}
				for i, coll := range []string{"moe_dispatch", "moe_combine"} {
					// k in the collective's name: tables compare like with like.
					row := Row{Collective: fmt.Sprintf("%s_k%d", coll, k), Variant: "push", DType: "bf16", Bytes: t * MoEHidden * 2, Mode: mode}
					for _, x := range us[i] {
						row.TimeUS = max(row.TimeUS, x)
					}
					add(row)
				}
			}
		}
	}
	return nil
}

func timeMoE(r *irt.Rank, disp, comb collectives.Entry, t, k int64, mode string, warmup int) (float64, float64, error) {
	world := int64(r.World())
	e := moeExpertsPerRank * world
	sizes := []int64{t, MoEHidden, k, e, t * k}
	dt := irt.BF16
	h := r.Heap()
	tensors := map[string]irt.Tensor{}
	defer func() {
		for _, x := range tensors {
			h.Free(x)
		}
	}()
	alloc := func(ent collectives.Entry) ([]irt.Tensor, error) {
		var ts []irt.Tensor
		for _, ti := range ent.Tensors {
			name := ti.Name
			if name == "expert_out" {
				name = "recv_tokens" // the identity expert
			}
			if x, ok := tensors[name]; ok {
				ts = append(ts, x)
				continue
			}
			d := ti.DType
			if d == 0 {
				d = dt
			}
			x, err := h.Alloc(d, ti.Numel(r.World(), sizes))
			if err != nil {
				return nil, err
			}
			tensors[name] = x
			ts = append(ts, x)
		}
		return ts, nil
	}
	pd, err := disp.New(r, dt, "", sizes)
	if err != nil {
		return 0, 0, err
	}
	defer pd.Close()
	pc, err := comb.New(r, dt, "", sizes)
	if err != nil {
		return 0, 0, err
	}
	defer pc.Close()
	dts, err := alloc(disp)
	if err != nil {
		return 0, 0, err
	}
	cts, err := alloc(comb)
	if err != nil {
		return 0, 0, err
	}
	// Random routing; weights of one (the timing does not depend on them).
	rng := rand.New(rand.NewPCG(uint64(r.Rank()), 7))
	ids := make([]int64, t*k)
	ones := make([]float32, t*k)
	for i := range ids {
		ids[i], ones[i] = rng.Int64N(e), 1
	}
	dev := r.Device()
	if err := dev.CopyHtoD(tensors["ids"].Ptr, unsafe.Pointer(&ids[0]), int64(len(ids))*8); err != nil {
		return 0, 0, err
	}
	if err := dev.CopyHtoD(tensors["weights"].Ptr, unsafe.Pointer(&ones[0]), int64(len(ones))*4); err != nil {
		return 0, 0, err
	}
	if err := dev.MemsetD8Async(tensors["tokens"].Ptr, 0, tensors["tokens"].Bytes(), r.Stream()); err != nil {
		return 0, 0, err
	}
	s := r.Stream()
	dUS, err := timeCalls(r, mode, Iterations(t*MoEHidden*2), warmup, func() error { return pd.LaunchTensors(s, dts, irt.BarrierDevice) })
	if err != nil {
		return 0, 0, fmt.Errorf("dispatch: %w", err)
	}
	cUS, err := timeCalls(r, mode, Iterations(t*MoEHidden*2), warmup, func() error { return pc.LaunchTensors(s, cts, irt.BarrierDevice) })
	if err != nil {
		return 0, 0, fmt.Errorf("combine: %w", err)
	}
	return dUS, cUS, nil
}

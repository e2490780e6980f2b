package bench

import (
	"fmt"
	"math/rand/v2"
	"unsafe"

	"github.com/irisgen/irisgen/internal/moepair"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// MoE benchmark shapes (issue 7): tokens per rank, hidden size, experts per
// token; 8 experts a rank, receive capacity t (a token goes to a rank at
// most once), random routing, bf16.
var (
	MoETokens       = []int64{128, 512, 4096}
	MoEHidden int64 = 7168
	MoEK            = []int64{1, 8}
)

const moeExpertsPerRank = 8

// DefaultLinkGBps is the link rate the MoE rows are compared with unless
// Config says otherwise: a plain copy kernel writing into the peer over one
// H200 NV18 pair (docs/gpu-machines.md).
const DefaultLinkGBps = 370

// moeScenario times the package's moe_dispatch and moe_combine as the pair
// they are used as (moepair): at MoETokens tokens of MoEHidden bf16
// elements, MoEK experts a token, each alone (combine on the rows of one
// dispatch). Not a chain: the routing and the expert between the two are
// its own.
func moeScenario() scenario {
	return scenario{name: "moe", needs: []string{moepair.Dispatch, moepair.Combine}, owns: []string{moepair.Dispatch, moepair.Combine},
		torch: true, time: runMoE}
}

// runMoE times moe_dispatch and moe_combine (each alone; combine on the
// rows of one dispatch). Rows: Bytes is the token bytes per rank (t*h*2),
// Collective "moe_dispatch_k<K>" or "moe_combine_k<K>"; Note gives the bytes
// the protocol must move over the busiest rank's links and the time's
// share of the link rate.
func runMoE(w *irisrt.World, cfg Config, add func(Row)) error {
	link := cfg.LinkGBps
	if link <= 0 {
		link = DefaultLinkGBps
	}
	for _, k := range MoEK {
		for _, t := range MoETokens {
			e := moeExpertsPerRank * int64(w.Size())
			routes := make([][]int64, w.Size())
			for r := range routes {
				routes[r] = moeRouting(r, t, k, e)
			}
			moved := [2]int64{ // dispatch also sends each row's k entries and source index
				MoELinkBytes(routes, k, e, MoEHidden*2+k*12+8),
				MoELinkBytes(routes, k, e, MoEHidden*2),
			}
			for _, mode := range cfg.Modes {
				var us [2][][]float64
				for i := range us {
					us[i] = make([][]float64, w.Size())
				}
				err := w.Run(func(r *irisrt.Rank) error {
					d, c, err := timeMoE(r, cfg.Entries, routes[r.Rank()], t, k, mode, cfg.Warmup, cfg.repeats())
					us[0][r.Rank()], us[1][r.Rank()] = d, c
					return err
				})
				if err != nil {
					return fmt.Errorf("moe t=%d k=%d %s: %w", t, k, mode, err)
				}
				for i, coll := range []string{moepair.Dispatch, moepair.Combine} {
					// k in the collective's name: tables compare like with like.
					row := Row{Collective: fmt.Sprintf("%s_k%d", coll, k), Variant: moepair.Variant, DType: "bf16", Bytes: t * MoEHidden * 2, Mode: mode}
					Summarize(slowestBatches(us[i])).set(&row)
					row.Note = linkNote(moved[i], row.TimeUS, link)
					add(row)
				}
			}
		}
	}
	return nil
}

// linkNote says how many bytes the busiest rank moves over its links and
// what share of the link rate (GB/s) that is in us microseconds.
func linkNote(bytes int64, us, link float64) string {
	if bytes == 0 {
		return "no link traffic"
	}
	return fmt.Sprintf("link %.1f MB (busiest rank), %.0f%% of %g GB/s", float64(bytes)/1e6, 100*float64(bytes)/(us*1e3)/link, link)
}

// moeRouting is rank's expert ids in the benchmark: t*k experts of e drawn
// uniformly, the same for the same arguments.
func moeRouting(rank int, t, k, e int64) []int64 {
	rng := rand.New(rand.NewPCG(uint64(rank), 7))
	ids := make([]int64, t*k)
	for i := range ids {
		ids[i] = rng.Int64N(e)
	}
	return ids
}

// MoELinkBytes is what the deduplicated protocol moves over the links of the
// busiest rank, one way, in one dispatch (or combine): every token goes, as
// one row of rowBytes, to each other rank that owns one of its k experts
// (expert x on rank x / ceil(e/world)); routes[r] are rank r's expert ids,
// t*k of them. A rank's links carry what it sends and what it receives, so
// the busiest is the larger of the two over all ranks.
func MoELinkBytes(routes [][]int64, k, e, rowBytes int64) int64 {
	w := len(routes)
	perRank := (e + int64(w) - 1) / int64(w)
	out, in := make([]int64, w), make([]int64, w)
	for src, ids := range routes {
		for t := int64(0); t < int64(len(ids))/k; t++ {
			var dests uint64
			for _, x := range ids[t*k : (t+1)*k] {
				if x >= 0 && x < e {
					dests |= 1 << (x / perRank)
				}
			}
			for d := range w {
				if d != src && dests&(1<<d) != 0 {
					out[src] += rowBytes
					in[d] += rowBytes
				}
			}
		}
	}
	var most int64
	for r := range w {
		most = max(most, out[r], in[r])
	}
	return most
}

func timeMoE(r *irisrt.Rank, entries []irisimpl.Entry, ids []int64, t, k int64, mode string, warmup, repeats int) ([]float64, []float64, error) {
	e := moeExpertsPerRank * int64(r.World())
	pair, err := moepair.New(r, entries, irismodel.BF16, []int64{t, MoEHidden, k, e, t})
	if err != nil {
		return nil, nil, err
	}
	defer pair.Close()
	tensors := pair.Tensors
	// Weights of one (the timing does not depend on them).
	ones := make([]float32, t*k)
	for i := range ones {
		ones[i] = 1
	}
	dev, s := r.Device(), r.Stream()
	if err := dev.CopyHtoD(tensors["ids"].Ptr, unsafe.Pointer(&ids[0]), int64(len(ids))*8); err != nil {
		return nil, nil, err
	}
	if err := dev.CopyHtoD(tensors["weights"].Ptr, unsafe.Pointer(&ones[0]), int64(len(ones))*4); err != nil {
		return nil, nil, err
	}
	if err := dev.MemsetD8Async(tensors["tokens"].Ptr, 0, tensors["tokens"].Bytes(), s); err != nil {
		return nil, nil, err
	}
	dUS, err := timeCalls(r, mode, Iterations(t*MoEHidden*2), warmup, repeats, func() error { return pair.Dispatch.LaunchTensors(s, pair.DispatchArgs, irismodel.BarrierDevice) })
	if err != nil {
		return nil, nil, fmt.Errorf("dispatch: %w", err)
	}
	if err := pair.Expert(s); err != nil { // combine sums real rows
		return nil, nil, err
	}
	cUS, err := timeCalls(r, mode, Iterations(t*MoEHidden*2), warmup, repeats, func() error { return pair.Combine.LaunchTensors(s, pair.CombineArgs, irismodel.BarrierDevice) })
	if err != nil {
		return nil, nil, fmt.Errorf("combine: %w", err)
	}
	return dUS, cUS, nil
}

package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Fused all_reduce + residual add + RMSNorm (issue 18): tokens per rank at
// one hidden size, bf16, beside the unfused path measured in the same run.
var (
	RMSNormTokens       = []int64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}
	RMSNormHidden int64 = 7168
)

// UnfusedImpl is the Impl of the unfused irisgen path's rows: an
// all_reduce, then residual_rmsnorm (the residual add and the norm in one
// kernel). Not "irisgen", so the tables count it among the baselines and
// the auto tables (Tune) among no variant of all_reduce_rmsnorm.
const UnfusedImpl = "irisgen_unfused"

// rmsnormScenario times every variant of all_reduce_rmsnorm at
// RMSNormTokens tokens of RMSNormHidden bf16 elements (a row's Bytes: one
// rank's input), beside the unfused path: each all_reduce variant not slow
// by design into a heap buffer, then residual_rmsnorm of that sum, the
// fastest reported (its note naming the all_reduce). -tails times the
// fused variants at TailTokens.
func rmsnormScenario() scenario {
	th := [][]string{{"tokens"}, {"hidden"}}
	return scenario{
		name: "all_reduce_rmsnorm", needs: []string{"all_reduce_rmsnorm", "residual_rmsnorm", "all_reduce"},
		owns: []string{"all_reduce_rmsnorm", "residual_rmsnorm"}, torch: true,
		chain: &chain{
			dtype: irismodel.BF16,
			grid:  []axis{{"tokens", RMSNormTokens}, {"hidden", []int64{RMSNormHidden}}},
			tails: []axis{{"tokens", TailTokens}, {"hidden", []int64{RMSNormHidden}}},
			call:  []link{{collective: "all_reduce_rmsnorm", sizes: th}},
			baseline: []link{
				{collective: "all_reduce", sizes: [][]string{{"tokens", "hidden"}}},
				{collective: "residual_rmsnorm", variant: "local", sizes: th, from: map[string]tensorRef{"input": {0, "output"}}},
			},
			baselineImpl: UnfusedImpl, baselineVariant: "all_reduce+residual_rmsnorm",
		},
	}
}

// FusionTable is the Markdown table of fusing's speed-up per size and
// world: all_reduce_rmsnorm's fastest variant against the fastest unfused
// irisgen path and against torch's (NCCL's all_reduce, the residual add
// and torch's rms_norm), for each mode; "" when rows hold no
// all_reduce_rmsnorm. A ratio above 1 is fusing's gain.
func FusionTable(rows []Row) string {
	type key struct {
		world int
		mode  string
		bytes int64
	}
	type cell struct {
		fused, unfused, torch Row
	}
	cells := map[key]*cell{}
	var keys []key
	faster := func(r, than Row) bool { return than.Impl == "" || r.TimeUS < than.TimeUS }
	for _, r := range rows {
		if r.Collective != "all_reduce_rmsnorm" || r.Forced() || math.IsNaN(r.TimeUS) || r.TimeUS <= 0 || math.IsInf(r.TimeUS, 0) {
			continue
		}
		k := key{r.World, r.Mode, r.Bytes}
		c := cells[k]
		if c == nil {
			c = &cell{}
			cells[k] = c
			keys = append(keys, k)
		}
		switch {
		case r.Impl == "irisgen" && faster(r, c.fused):
			c.fused = r
		case r.Impl == UnfusedImpl && faster(r, c.unfused):
			c.unfused = r
		case strings.HasPrefix(r.Impl, "torch") && faster(r, c.torch):
			c.torch = r
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.SortFunc(keys, func(a, b key) int {
		switch {
		case a.world != b.world:
			return a.world - b.world
		case a.mode != b.mode:
			return strings.Compare(a.mode, b.mode)
		}
		return int(a.bytes - b.bytes)
	})
	var b strings.Builder
	b.WriteString("### all_reduce_rmsnorm: the speed-up of fusing\n\n")
	fmt.Fprintf(&b, "bf16, hidden %d; unfused: irisgen's fastest all_reduce, then residual_rmsnorm; torch: NCCL's all_reduce, the residual add, torch's rms_norm. Speed-up: unfused time / fused time.\n\n", RMSNormHidden)
	b.WriteString("| world | mode | tokens | size | fused us (variant) | unfused us (all_reduce) | speed-up | torch us | speed-up vs torch |\n|---|---|---|---|---|---|---|---|---|\n")
	us := func(r Row, what string) string {
		if r.Impl == "" {
			return "-"
		}
		if what == "" {
			return fmt.Sprintf("%.1f", r.TimeUS)
		}
		return fmt.Sprintf("%.1f (%s)", r.TimeUS, what)
	}
	ratio := func(slow, fast Row) string {
		if slow.Impl == "" || fast.Impl == "" {
			return "-"
		}
		return fmt.Sprintf("%.2f", slow.TimeUS/fast.TimeUS)
	}
	for _, k := range keys {
		c := cells[k]
		ar := strings.TrimSuffix(strings.TrimPrefix(c.unfused.Note, "all_reduce "), ", then residual_rmsnorm local")
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %s | %s | %s |\n", k.world, k.mode, k.bytes/(RMSNormHidden*2), HumanBytes(k.bytes),
			us(c.fused, c.fused.Variant), us(c.unfused, ar), ratio(c.unfused, c.fused), us(c.torch, ""), ratio(c.torch, c.fused))
	}
	b.WriteString("\n")
	return b.String()
}

package bench

import (
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	st := Summarize([]float64{5, 1, 3})
	require.Equal(t, Stats{Median: 3, Min: 1, Max: 5, N: 3}, st)
	st = Summarize([]float64{4, 1, 3, 2})
	require.Equal(t, 2.5, st.Median)
	require.True(t, math.IsNaN(Summarize(nil).Median))
	// Per batch the slowest rank; ranks may have timed fewer batches.
	require.Equal(t, []float64{3, 5, 2}, slowestBatches([][]float64{{1, 5, 2}, {3, 4}}))
}

// TestCompare enumerates the verdicts: within the spread, beyond it, faster,
// tolerance, and cells missing on one side.
func TestCompare(t *testing.T) {
	cell := func(variant string, med, lo, hi float64) Row {
		return Row{Impl: "irisgen", Collective: "all_reduce", Variant: variant, DType: "bf16", World: 2, Bytes: 1 << 20,
			Mode: "graph", TimeUS: med, MinUS: lo, MaxUS: hi, Repeats: 7}
	}
	base := []Row{
		cell("ring", 100, 98, 102),    // spread 2
		cell("same", 100, 98, 102),    // new within the spreads
		cell("fast", 100, 99, 101),    // new clearly faster
		cell("tol", 100, 100, 100),    // no spread: only the tolerance helps
		cell("gone", 100, 99, 101),    // absent from the new run
		cell("nan", math.NaN(), 0, 0), // no time: skipped
	}
	cur := []Row{
		cell("ring", 106, 105, 107), // 6 more, spreads 2 + 1: slower by 3
		cell("same", 103, 102, 104), // 3 more, spreads 2 + 1: not beyond
		cell("fast", 80, 79, 81),
		cell("tol", 101, 101, 101),
		cell("new", 50, 50, 50),
		cell("nan", 10, 10, 10),
	}
	ds := Compare(base, cur, 0)
	got := map[string]Delta{}
	for _, d := range ds {
		got[d.New.Variant] = d
	}
	require.Len(t, got, 4)
	require.True(t, got["ring"].Regressed)
	require.InDelta(t, 3, got["ring"].Slower, 1e-9)
	require.False(t, got["same"].Regressed)
	require.False(t, got["fast"].Regressed)
	require.True(t, got["tol"].Regressed)
	require.Equal(t, "ring", ds[0].New.Variant, "worst first")
	for _, d := range Compare(base, cur, 0.02) {
		if d.New.Variant == "tol" {
			require.False(t, d.Regressed, "1%% slower is within a 2%% tolerance")
		}
	}
	md := FormatCompare(ds)
	require.Contains(t, md, "SLOWER by 3.00 us")
	require.Contains(t, md, "| faster |")
	require.Contains(t, md, "4 cells compared, 2 slower")
	// A different world, dtype, size or mode is another cell.
	other := cell("ring", 500, 500, 500)
	other.World = 4
	require.Empty(t, Compare(base[:1], []Row{other}, 0))
}

func TestBestNCCL(t *testing.T) {
	r := func(variant string, us float64, bytes int64) Row {
		return Row{Impl: "nccl", Collective: "all_gather", Variant: variant, DType: "bf16", World: 2, Bytes: bytes, Mode: "graph", TimeUS: us, Note: "out of place"}
	}
	rows := []Row{r("plain", 10, 8192), r("sym", 6, 8192), r("plain", 100, 1<<30), r("sym", 140, 1<<30),
		{Impl: "irisgen", Collective: "all_gather", Variant: "ring", Bytes: 8192, TimeUS: 5}}
	best := BestNCCL(rows)
	require.Len(t, best, 3)
	byBytes := map[int64]Row{}
	for _, b := range best {
		if b.Impl == "nccl" {
			require.Equal(t, "best", b.Variant)
			byBytes[b.Bytes] = b
		}
	}
	require.Equal(t, 6.0, byBytes[8192].TimeUS)
	require.Equal(t, "sym, out of place", byBytes[8192].Note)
	require.Equal(t, 100.0, byBytes[1<<30].TimeUS)
}

// TestOldCSV reads a CSV written before the bench timed repeats.
func TestOldCSV(t *testing.T) {
	const csv = "impl,collective,variant,dtype,world,bytes,mode,time_us,algbw_gbps,busbw_gbps,device,date,note\n" +
		"irisgen,all_reduce,ring,bf16,2,67108864,graph,203.000,330.6,330.6,2x NVIDIA H200,2026-11-22,\n"
	rows, err := ReadCSV(strings.NewReader(csv))
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, 203.0, rows[0].TimeUS)
	require.True(t, math.IsNaN(rows[0].MinUS))
	require.Equal(t, 0, rows[0].Repeats)
	require.Equal(t, 0.0, halfRange(rows[0]))
}

func TestHostBarrier(t *testing.T) {
	b := newHostBarrier(3)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				require.NoError(t, b.wait())
			}
		}()
	}
	wg.Wait()
	// A failing rank breaks it: the others return instead of waiting.
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- b.wait() }()
	}
	b.abort()
	require.ErrorIs(t, <-errs, errBarrierBroken)
	require.ErrorIs(t, <-errs, errBarrierBroken)
	require.ErrorIs(t, b.wait(), errBarrierBroken)
}

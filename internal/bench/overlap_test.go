package bench

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/bench/compute/fma"
	"github.com/irisgen/irisgen/runtime/irisimpl"
)

// TestEnqueue: side by side, the lanes' steps interleave in proportion to
// their counts, so that neither stream runs ahead or is left alone at the
// end; a failing step stops the run with its error.
func TestEnqueue(t *testing.T) {
	var got []string
	mk := func(name string, n int) lane {
		l := lane{calls: n}
		for i := range n {
			l.steps = append(l.steps, func() error { got = append(got, name+string(rune('0'+i))); return nil })
		}
		return l
	}
	require.NoError(t, enqueue([]lane{mk("a", 2), mk("b", 4)}))
	assert.Equal(t, []string{"a0", "b0", "b1", "a1", "b2", "b3"}, got)
	got = nil
	require.NoError(t, enqueue([]lane{mk("c", 3), mk("g", 1)}))
	assert.Equal(t, []string{"c0", "g0", "c1", "c2"}, got, "a graph launch (one step) goes right after the first call")
	got = nil
	require.NoError(t, enqueue([]lane{mk("a", 3)}))
	assert.Equal(t, []string{"a0", "a1", "a2"}, got)
	boom := errors.New("boom")
	l := mk("a", 3)
	l.steps[1] = func() error { return boom }
	got = nil
	require.ErrorIs(t, enqueue([]lane{l, mk("b", 3)}), boom)
	assert.Equal(t, []string{"a0", "b0"}, got)
}

func TestLaunchesFor(t *testing.T) {
	assert.Equal(t, 16, launchesFor(8, 100, 50), "8 calls of 100 us: 16 launches of 50 us")
	assert.Equal(t, 1, launchesFor(100, 0.1, 50), "at least one")
	assert.Equal(t, 3, launchesFor(100, 1.4, 50))
	assert.Equal(t, 1, launchesFor(8, math.NaN(), 50))
	assert.Equal(t, 1, launchesFor(8, 10, 0))
}

// TestComputeKernel: the compute kernel's package is the one bench names,
// registered (so the fake and the runtime find its code objects), and its
// variant's grid is the full one newCompute sizes the data for.
func TestComputeKernel(t *testing.T) {
	table := irisimpl.Registered(ComputePackage)
	require.NotNil(t, table, "%s is not registered", ComputePackage)
	require.Equal(t, fma.Catalogue, table.Entries())
	e, err := computeEntry()
	require.NoError(t, err)
	v := e.Descriptor()
	n := int64(v.MaxBlocks) * int64(v.Threads) * int64(v.VectorBytes) / 4
	blocks, threads := irisimpl.Grid(n*4, v.Threads, v.VectorBytes, v.MinBlocks, v.MaxBlocks)
	assert.Equal(t, [2]int{v.MaxBlocks, v.Threads}, [2]int{blocks, threads}, "the data of newCompute gets the full grid of full blocks")
	assert.Equal(t, 1024, v.MaxBlocks)
	require.Len(t, e.Params, 1)
	assert.Equal(t, "iters", e.Params[0].Name)
}

// pairSample is the pairs of one cell of irisgen's copy_push and one of
// NCCL at 1 MiB, on two ranks over two batches.
func pairSample() []Row {
	base := func(impl, variant string) Row {
		return Row{Impl: impl, Collective: "all_gather", Variant: variant, DType: "bf16", World: 2, Bytes: 1 << 20, Mode: "graph", Device: "2x H200", Date: "2026-11-27"}
	}
	copyPush := []pairTimes{
		{alone: []float64{10, 11}, beside: []float64{10.5, 11}, computeAlone: []float64{50, 50}, computeBeside: []float64{50.5, 51}, launches: 20},
		{alone: []float64{12, 10}, beside: []float64{11, 12}, computeAlone: []float64{49, 52}, computeBeside: []float64{50, 52}, launches: 22},
	}
	ncclPlain := []pairTimes{
		{alone: []float64{8, 8}, beside: []float64{16, 16}, computeAlone: []float64{50, 50}, computeBeside: []float64{60, 60}, launches: 3},
		{alone: []float64{8, 8}, beside: []float64{16, 16}, computeAlone: []float64{50, 50}, computeBeside: []float64{60, 60}, launches: 3},
	}
	comp := Compute{Iters: 3000, LaunchUS: 50}
	return append(pairRows(base("irisgen", "copy_push"), copyPush, comp), pairRows(base("nccl", "plain"), ncclPlain, comp)...)
}

// TestPairRows: a cell's four rows, each batch its slowest rank's, the
// median reported; the compute kernel's rows name the collective's
// series and the launches of a batch, and have no bandwidth.
func TestPairRows(t *testing.T) {
	rows := pairSample()
	require.Len(t, rows, 8)
	alone, beside, ca, cb := rows[0], rows[1], rows[2], rows[3]
	assert.Equal(t, []any{"irisgen", "copy_push", "", 11.5, 11.0, 12.0}, []any{alone.Impl, alone.Variant, alone.Beside, alone.TimeUS, alone.MinUS, alone.MaxUS}, "batches 12 and 11")
	assert.Equal(t, []any{"irisgen", "copy_push", ComputeImpl, 11.5}, []any{beside.Impl, beside.Variant, beside.Beside, beside.TimeUS}, "batches 11 and 12")
	assert.Equal(t, []any{ComputeImpl, "irisgen copy_push", "", 51.0}, []any{ca.Impl, ca.Variant, ca.Beside, ca.TimeUS}, "batches 50 and 52")
	assert.Equal(t, []any{ComputeImpl, "irisgen copy_push", "irisgen copy_push", 51.25}, []any{cb.Impl, cb.Variant, cb.Beside, cb.TimeUS}, "batches 50.5 and 52")
	assert.Equal(t, "20-22 launches of 3000 FMA rounds a batch", ca.Note)
	assert.Equal(t, ca.Note, cb.Note)
	assert.InDelta(t, (1<<20)/11.5e3/2, alone.BusBW, 1e-9, "the collective's bandwidth, as the sweep's")
	assert.True(t, math.IsNaN(ca.AlgBW) && math.IsNaN(cb.BusBW), "the compute kernel moves no collective's bytes")
	assert.Equal(t, "3 launches of 3000 FMA rounds a batch", rows[6].Note, "the same launches on every rank")
	for _, r := range rows {
		assert.Equal(t, r.Impl == ComputeImpl || r.Beside != "", r.Overlap(), "%+v", r)
	}
}

// TestOverlapReports: the pairs' table and plots; the CSV keeps what pairs
// them; the other reports see only the collectives alone.
func TestOverlapReports(t *testing.T) {
	rows := pairSample()
	md := OverlapMarkdown(rows)
	require.Contains(t, md, "### all_gather bf16, 2 GPUs, graph, beside the compute kernel")
	require.Contains(t, md, "| compute slowdown | 1 MiB |\n|---|---|\n| irisgen copy_push | 1.00 |\n| nccl plain | 1.20 |\n")
	require.Contains(t, md, "| collective us, alone -> beside | 1 MiB |\n|---|---|\n| irisgen copy_push | 11.5 -> 11.5 |\n| nccl plain | 8.0 -> 16.0 |\n")
	require.Empty(t, OverlapMarkdown(sample()), "no pairs: no section")

	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, rows))
	back, err := ReadCSV(&b)
	require.NoError(t, err)
	require.Equal(t, md, OverlapMarkdown(back), "the CSV keeps every pair")

	shown := BestNCCL(rows)
	require.Len(t, shown, 8, "NCCL's row beside the compute kernel is not folded into its row alone")
	std := Markdown(shown)
	require.Contains(t, std, "| 1 MiB | 11.0 / 11.5 / 12.0 | 8.0 / 8.0 / 8.0 | 1.44 |", "the collectives alone, against NCCL alone")
	require.NotContains(t, std, "compute")
	require.NotContains(t, VersusNCCL(shown), "| 1.00") // 11.5 / 8: the ratio alone
	require.Contains(t, VersusNCCL(shown), "| all_gather | 1.44 |")
	_, err = Tune(rows, "all_gather", "bf16", "graph", nil)
	require.ErrorContains(t, err, "two or more", "one variant alone: the pair's rows add none")

	dir := t.TempDir()
	files, err := PlotOverlap(rows, dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "all_gather_bf16_w2_graph_overlap.svg")}, files)
	svg, err := os.ReadFile(files[0])
	require.NoError(t, err)
	for _, want := range []string{"beside the compute kernel", "collective beside / alone", "compute kernel beside / alone", ">nccl plain<"} {
		require.Contains(t, string(svg), want)
	}
	require.Equal(t, 6, strings.Count(string(svg), "<polyline"), "two series in three panels")
	plots, err := Plot(shown, dir)
	require.NoError(t, err)
	require.Len(t, plots, 1, "the times alone, as the bench plots them")
}

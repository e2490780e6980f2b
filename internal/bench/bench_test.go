package bench

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/internal/tuning"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

func sample() []Row {
	var rows []Row
	for _, r := range []Row{
		{Impl: "irisgen", Collective: "all_reduce", Variant: "one_shot", TimeUS: 4},
		{Impl: "nccl", Collective: "all_reduce", Variant: "nccl", TimeUS: 40},
		{Impl: "torch_symm_mem", Collective: "all_reduce", Variant: "two_shot", TimeUS: 10},
	} {
		for _, b := range []int64{8 << 10, 1 << 20} {
			r.DType, r.World, r.Bytes, r.Mode, r.Device, r.Date = "bf16", 2, b, "eager", "2x H200", "2026-11-22"
			r.TimeUS *= float64(b) / (8 << 10)
			r.SetBandwidth()
			rows = append(rows, r)
		}
	}
	return rows
}

func TestCSVRoundTrip(t *testing.T) {
	rows := sample()
	rows = append(rows, Row{Impl: "irisgen", Collective: "all_reduce", Variant: "atomic", DType: "bf16", World: 2, Bytes: 1 << 30,
		Mode: "eager", TimeUS: math.NaN(), Note: "skipped above 4 MiB, slow by design"})
	rows[len(rows)-1].SetBandwidth()
	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, rows))
	got, err := ReadCSV(&b)
	require.NoError(t, err)
	require.Len(t, got, len(rows))
	require.Equal(t, rows[0], got[0])
	require.True(t, math.IsNaN(got[len(got)-1].TimeUS))
	_, err = ReadCSV(strings.NewReader("impl,collective\n"))
	require.ErrorContains(t, err, "lacks")
}

// TestForcedRows: a row timed in a mode bench -barrier chose keeps the mode
// through the CSV, is a series of its own, and counts neither as irisgen's
// best nor against NCCL nor in the tuning tables; a CSV without the column
// reads as the default.
func TestForcedRows(t *testing.T) {
	row := func(impl, v, barrier string, med float64) Row {
		return Row{Impl: impl, Collective: "all_gather", Variant: v, DType: "bf16", World: 2, Bytes: 8 << 10, Mode: "graph",
			TimeUS: med, MinUS: med, MaxUS: med, Repeats: 1, Barrier: barrier}
	}
	rows := []Row{row("irisgen", "copy_push", "", 24), row("irisgen", "copy_push", "none", 3), row("irisgen", "push", "", 6), row("nccl", "best", "", 4)}
	for i := range rows {
		rows[i].SetBandwidth()
	}
	var b bytes.Buffer
	require.NoError(t, WriteCSV(&b, rows))
	got, err := ReadCSV(&b)
	require.NoError(t, err)
	require.Len(t, got, len(rows))
	for i := range rows {
		require.Equal(t, rows[i].Barrier, got[i].Barrier)
		require.Equal(t, rows[i].Series(), got[i].Series())
	}
	require.True(t, got[1].Forced())
	require.False(t, got[0].Forced())
	old, err := ReadCSV(strings.NewReader(strings.Join(Header[:len(Header)-1], ",") + "\nirisgen,all_gather,push,bf16,2,8192,graph,6,1,1,d,2026-11-28,,6,6,1,\n"))
	require.NoError(t, err)
	require.Equal(t, "", old[0].Barrier)

	md := Markdown(rows)
	require.Contains(t, md, "| irisgen copy_push us (min / median / max) | irisgen copy_push (barrier none) us (min / median / max) | irisgen push us")
	// irisgen's best is push (6), not the forced 3, nor is the forced row a baseline: 6 / 4.
	require.Contains(t, md, "| 1.50 |")
	forcedBest := []Row{row("irisgen", "push", "", 6), row("irisgen", "push", "none", 3), row("nccl", "best", "", 4)}
	require.Contains(t, VersusNCCL(forcedBest), "| all_gather | 1.50 |")
	require.Empty(t, VersusNCCL(forcedBest[1:]), "a forced row alone is no irisgen cell")
	_, err = Tune([]Row{row("irisgen", "push", "", 6), row("irisgen", "copy_push", "none", 3)}, "all_gather", "bf16", "graph", nil)
	require.ErrorContains(t, err, "1 irisgen variant(s) measured", "the forced row is no variant to choose")
	tab, err := Tune([]Row{row("irisgen", "push", "", 6), row("irisgen", "ring", "", 8), row("irisgen", "copy_push", "none", 3)}, "all_gather", "bf16", "graph", nil)
	require.NoError(t, err)
	require.NotEmpty(t, tab.Rules)
	for _, r := range tab.Rules {
		require.Equal(t, "push", r.Variant, "the tuning tables never choose a forced row's variant")
	}
}

func TestBandwidth(t *testing.T) {
	r := Row{Collective: "all_reduce", World: 4, Bytes: 1 << 30, TimeUS: 1e6}
	r.SetBandwidth()
	require.InDelta(t, 1.073741824, r.AlgBW, 1e-9)
	require.InDelta(t, r.AlgBW*1.5, r.BusBW, 1e-9)
	require.Equal(t, 0.5, BusFactor("all_gather", 2))
}

// TestBaselineRow reads a row as baselines.py writes it (bandwidths left to
// irisgen as "nan") and fills them in.
func TestBaselineRow(t *testing.T) {
	const csv = "impl,collective,variant,dtype,world,bytes,mode,time_us,algbw_gbps,busbw_gbps,device,date,note\n" +
		"nccl,all_gather,nccl,bf16,4,268435456,graph,664.430,nan,nan,NVIDIA H200,2026-11-22,\n"
	rows, err := ReadCSV(strings.NewReader(csv))
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.True(t, math.IsNaN(rows[0].BusBW))
	rows[0].SetBandwidth()
	require.InDelta(t, 303.006, rows[0].BusBW, 0.001) // nccl-tests: (w-1)/w x bytes/time
}

func TestReport(t *testing.T) {
	md := Markdown(sample())
	require.Contains(t, md, "### all_reduce bf16, 2 GPUs, eager")
	require.Contains(t, md, "| size | irisgen one_shot us (min / median / max) | nccl nccl us (min / median / max) | torch_symm_mem two_shot us (min / median / max) |")
	require.Contains(t, md, "| 8 KiB | 4.0 | 40.0 | 10.0 | 0.40 |")
	require.NotContains(t, md, stallMark)
	// A range is shown as min / median / max; a cell whose slowest repeat took
	// more than 3x its fastest is marked, and the table says what the mark
	// means. The rule is against the minimum, so a cell where most repeats
	// stalled (the median too) is marked as well.
	for _, c := range []struct {
		min, med, max float64
		want          string
	}{
		{4, 4.1, 12, "| 8 KiB | 4.0 / 4.1 / 12.0 |"},
		{4, 4.1, 12.1, "| 8 KiB | 4.0 / 4.1 / 12.1 (!) |"},
		{4, 700, 701, "| 8 KiB | 4.0 / 700.0 / 701.0 (!) |"},
	} {
		rows := []Row{{Impl: "irisgen", Collective: "all_reduce", Variant: "one_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Mode: "graph", TimeUS: c.med, MinUS: c.min, MaxUS: c.max}}
		md := Markdown(rows)
		require.Contains(t, md, c.want)
		require.Equal(t, strings.Contains(c.want, stallMark), strings.Contains(md, "slowest repeat took more than 3x"), md)
	}
	dir := t.TempDir()
	rows := append(sample(), Row{Impl: "irisgen", Collective: "barrier", Variant: "device", DType: "-", World: 2, Mode: "eager", TimeUS: 2},
		Row{Impl: "irisgen", Collective: "all_reduce", Variant: "atomic", DType: "f32", World: 2, Bytes: 1 << 30, Mode: "eager", TimeUS: math.NaN()},
		Row{Impl: "irisgen", Collective: "moe_dispatch", Variant: "push k=1", DType: "bf16", World: 2, Bytes: 1 << 20, Mode: "graph", TimeUS: 9},
		Row{Impl: "torch", Collective: "moe_dispatch", Variant: "a2a k=1", DType: "bf16", World: 2, Bytes: 1 << 20, Mode: "graph", TimeUS: math.NaN()})
	files, err := Plot(rows, dir)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, "all_reduce_bf16_w2_eager.svg"), filepath.Join(dir, "moe_dispatch_bf16_w2_graph.svg")}, files)
	svg, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.Contains(t, string(svg), "<svg")
	require.Contains(t, string(svg), "irisgen one_shot")
}

func TestHumanBytes(t *testing.T) {
	require.Equal(t, "8 KiB", HumanBytes(8<<10))
	require.Equal(t, "256 MiB", HumanBytes(256<<20))
	require.Equal(t, "1000 B", HumanBytes(1000))
}

func TestTune(t *testing.T) {
	var rows []Row
	add := func(v string, b int64, us float64) {
		rows = append(rows, Row{Impl: "irisgen", Collective: "all_reduce", Variant: v, DType: "bf16", World: 2, Bytes: b, Mode: "graph", TimeUS: us, Device: "2x H200", Date: "2026-11-22"})
	}
	for _, b := range []int64{8 << 10, 1 << 20, 64 << 20} {
		add("one_shot", b, float64(b>>10))
		add("two_shot", b, float64(b>>10)*0.9+200)
	}
	add("staged", 8<<10, 1)
	rows = append(rows, Row{Impl: "nccl", Collective: "all_reduce", Variant: "nccl", DType: "bf16", World: 2, Bytes: 8 << 10, Mode: "graph", TimeUS: 0.1})
	a, err := Tune(rows, "all_reduce", "bf16", "graph", nil)
	require.NoError(t, err)
	require.Equal(t, "2x H200, 2026-11-22, bf16, graph, irisgen bench", a.Measured)
	require.Equal(t, []string{"staged@2<=8192", "one_shot@2<=1048576", "two_shot@2", "staged<=8192", "one_shot<=1048576", "two_shot"}, rulesOf(a))
	for _, b := range []int64{8 << 10, 64 << 20} {
		rows = append(rows, Row{Impl: "irisgen", Collective: "all_reduce", Variant: "two_shot", DType: "bf16", World: 4, Bytes: b, Mode: "graph", TimeUS: 0.5})
	}
	a, err = Tune(rows, "all_reduce", "bf16", "graph", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"staged@2<=8192", "one_shot@2<=1048576", "two_shot@2", "two_shot@4", "two_shot"}, rulesOf(a), "unmeasured worlds follow world 4")
	_, err = Tune(rows, "all_gather", "bf16", "graph", nil)
	require.ErrorContains(t, err, "needs two or more")

	// A variant whose cell stalled (a repeat over 3x its fastest) is never
	// chosen over one that did not, however fast its median; where every
	// variant stalled, the one whose slowest repeat was the least slow.
	stall := []Row{
		{Impl: "irisgen", Collective: "all_reduce", Variant: "lamport", DType: "bf16", World: 2, Bytes: 8 << 10, Mode: "graph", TimeUS: 1, MinUS: 1, MaxUS: 900},
		{Impl: "irisgen", Collective: "all_reduce", Variant: "one_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Mode: "graph", TimeUS: 3, MinUS: 3, MaxUS: 3.1},
		{Impl: "irisgen", Collective: "all_reduce", Variant: "lamport", DType: "bf16", World: 2, Bytes: 1 << 20, Mode: "graph", TimeUS: 5, MinUS: 5, MaxUS: 900},
		{Impl: "irisgen", Collective: "all_reduce", Variant: "one_shot", DType: "bf16", World: 2, Bytes: 1 << 20, Mode: "graph", TimeUS: 9, MinUS: 8, MaxUS: 800},
	}
	a, err = Tune(stall, "all_reduce", "bf16", "graph", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"one_shot@2", "one_shot"}, rulesOf(a), "1 MiB: one_shot's worst repeat (800) beats lamport's (900)")
	stall[2].MaxUS = 700
	a, err = Tune(stall, "all_reduce", "bf16", "graph", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"one_shot@2<=8192", "lamport@2", "one_shot<=8192", "lamport"}, rulesOf(a))
	// A stall in the other mode counts too.
	stall = append(stall[:2:2], Row{Impl: "irisgen", Collective: "all_reduce", Variant: "one_shot", DType: "bf16", World: 2, Bytes: 8 << 10, Mode: "eager", TimeUS: 4, MinUS: 4, MaxUS: 40},
		Row{Impl: "irisgen", Collective: "all_reduce", Variant: "lamport", DType: "bf16", World: 2, Bytes: 8 << 10, Mode: "eager", TimeUS: 2, MinUS: 2, MaxUS: 2.1})
	stall[0].MaxUS = 1.1 // lamport's graph cell is clean now, one_shot's eager one stalled
	a, err = Tune(stall, "all_reduce", "bf16", "graph", nil)
	require.NoError(t, err)
	require.Equal(t, []string{"lamport@2", "lamport"}, rulesOf(a))
}

// TestTuneLooser enumerates the choice within the spread: a variant with
// looser rules than the fastest takes its place only when its median is
// within the two half-ranges of the fastest's and it did not stall.
func TestTuneLooser(t *testing.T) {
	// looser: lamport < one_shot < two_shot (a strict order, as the
	// descriptors give for all_reduce_rmsnorm).
	order := map[string]int{"lamport": 0, "one_shot": 1, "two_shot": 2}
	looser := func(a, b string) bool { return order[a] < order[b] }
	cell := func(v string, med, lo, hi float64) Row {
		return Row{Impl: "irisgen", Collective: "x", Variant: v, DType: "bf16", World: 4, Bytes: 8 << 10, Mode: "graph", TimeUS: med, MinUS: lo, MaxUS: hi}
	}
	for _, c := range []struct {
		name   string
		rows   []Row
		looser func(a, b string) bool
		want   string
	}{
		{"within the spread, looser: looser", []Row{cell("one_shot", 8.1, 8.0, 8.7), cell("lamport", 8.2, 8.2, 8.8)}, looser, "lamport"},
		{"no looser function: fastest", []Row{cell("one_shot", 8.1, 8.0, 8.7), cell("lamport", 8.2, 8.2, 8.8)}, nil, "one_shot"},
		{"within the spread, not looser: fastest", []Row{cell("one_shot", 8.1, 8.0, 8.7), cell("two_shot", 8.2, 8.2, 8.8)}, looser, "one_shot"},
		{"looser, beyond the spread: fastest", []Row{cell("one_shot", 8.1, 8.0, 8.2), cell("lamport", 8.5, 8.4, 8.6)}, looser, "one_shot"},
		{"at the spread's edge: looser", []Row{cell("one_shot", 8, 7.875, 8.125), cell("lamport", 8.25, 8.125, 8.375)}, looser, "lamport"},
		{"just past the edge: fastest", []Row{cell("one_shot", 8, 7.875, 8.125), cell("lamport", 8.375, 8.25, 8.5)}, looser, "one_shot"},
		{"looser but stalled: fastest", []Row{cell("one_shot", 8.1, 8.0, 8.7), cell("lamport", 8.2, 8.1, 900)}, looser, "one_shot"},
		{"the loosest of several within the spread", []Row{cell("two_shot", 8.0, 7.5, 8.5), cell("one_shot", 8.1, 7.6, 8.6), cell("lamport", 8.3, 7.8, 8.8)}, looser, "lamport"},
		{"the loosest within the spread, not one beyond", []Row{cell("two_shot", 8.0, 7.9, 8.1), cell("one_shot", 8.1, 8.0, 8.2), cell("lamport", 9.0, 8.9, 9.1)}, looser, "one_shot"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := slices.Clone(c.rows)
			if len(rows) < 3 { // Tune needs two variants; a third, slow one changes nothing
				rows = append(rows, cell("ring", 50, 49, 51))
			}
			a, err := Tune(rows, "x", "bf16", "graph", c.looser)
			require.NoError(t, err)
			require.Equal(t, []string{c.want + "@4", c.want}, rulesOf(a))
		})
	}
}

func rulesOf(a *tuning.Table) []string {
	var out []string
	for _, r := range a.Rules {
		s := r.Variant
		if r.World > 0 {
			s += "@" + strconv.Itoa(r.World)
		}
		if r.MaxBytes > 0 {
			s += "<=" + strconv.FormatInt(r.MaxBytes, 10)
		}
		out = append(out, s)
	}
	return out
}

// TestParamCollectiveSizes: irisgen's cells of the collectives with
// parameters hold what NCCL's cells do (ncclCellTimes): broadcast, reduce,
// send_recv and shift the buffer, gather the root's output and scatter the
// root's input (per = bytes/es/world elements a rank); busbw is nccl-tests'.
func TestParamCollectiveSizes(t *testing.T) {
	const world, bytes, es = 4, 1 << 20, 2
	for coll, want := range map[string]int64{
		"broadcast": bytes / es, "reduce": bytes / es, "send_recv": bytes / es, "shift": bytes / es,
		"gather": bytes / es / world, "scatter": bytes / es / world,
	} {
		n := int64(-1)
		for _, e := range collectives.Catalogue {
			if e.Collective == coll {
				sizes, ok := sweepSizes(e, bytes, world, es)
				require.True(t, ok)
				n = sizes[0]
				require.NotEmpty(t, e.SampleParams(world, 0), coll)
			}
		}
		require.Equal(t, want, n, coll)
		require.NotNil(t, knownCollectives[coll].nccl, coll)
	}
	for coll, f := range map[string]float64{"broadcast": 1, "reduce": 1, "send_recv": 1, "shift": 1, "gather": 0.75, "scatter": 0.75} {
		require.Equal(t, f, BusFactor(coll, world), coll)
	}
}

// TestNCCLBaselinesMatchShapes: the per-rank buffers of every NCCL
// baseline are those the catalogue's tensor shapes give at the same size:
// at nccl-tests' size B, a buffer is per rank (B/world) exactly where the
// catalogue's input (send) or output (recv) holds B/world bytes, and the
// in-place offsets follow.
func TestNCCLBaselinesMatchShapes(t *testing.T) {
	const world, bytes, es = 4, 1 << 20, 2
	n := 0
	for coll, k := range knownCollectives {
		if k.nccl == nil {
			continue
		}
		i := slices.IndexFunc(collectives.Catalogue, func(e irisimpl.Entry) bool { return e.Collective == coll })
		require.GreaterOrEqual(t, i, 0, "%s has an NCCL baseline but no catalogue collective", coll)
		e := collectives.Catalogue[i]
		sizes, ok := sweepSizes(e, bytes, world, es)
		require.True(t, ok, coll)
		held := map[string]int64{}
		for _, ti := range e.Tensors {
			held[ti.Name] = ti.Numel(world, sizes) * es
		}
		perRank := func(b bool) int64 {
			if b {
				return bytes / world
			}
			return bytes
		}
		assert.Equal(t, perRank(k.nccl.sendPerRank), held["input"], "%s: send", coll)
		assert.Equal(t, perRank(k.nccl.recvPerRank), held["output"], "%s: recv", coll)
		assert.NotEqual(t, busUnknown, k.bus, "%s: a baseline without a bus bandwidth rule", coll)
		n++
	}
	assert.Equal(t, 10, n)
}

// TestSweepSizes enumerates the size rule: nccl-tests' sizes from the
// shapes for every collective of the catalogue the sweep times, and for
// other shapes the last size the largest that fits, the others 1.
func TestSweepSizes(t *testing.T) {
	const world, bytes, es = 4, 1 << 20, 2
	want := map[string]int64{ // elements of n at 1 MiB of bf16 on 4 ranks
		"all_reduce": bytes / es, "broadcast": bytes / es, "reduce": bytes / es, "send_recv": bytes / es, "shift": bytes / es,
		"all_gather": bytes / es / world, "gather": bytes / es / world, "reduce_scatter": bytes / es / world,
		"scatter": bytes / es / world, "all_to_all": bytes / es / world,
	}
	sel := Config{Entries: collectives.Catalogue}.selection()
	seen := map[string]bool{}
	for _, e := range sel.sweep {
		sizes, ok := sweepSizes(e, bytes, world, es)
		require.True(t, ok, e.Collective)
		require.Equal(t, []int64{want[e.Collective]}, sizes, "%s/%s", e.Collective, e.Variant)
		seen[e.Collective] = true
	}
	require.Len(t, seen, len(want), "the sweep times every single-size collective of the catalogue")

	entry := func(sizes []string, shapes ...string) irisimpl.Entry {
		tab := &irisimpl.Table{ImportPath: "example.com/sizes", Collectives: []irisimpl.Collective{{
			Name: "c", SpecHash: "h", DTypes: []irismodel.DType{irismodel.BF16},
			Variants: []irisimpl.Variant{{Name: "v", Barriers: []irismodel.Barrier{irismodel.BarrierDevice}, Threads: 64, MaxBlocks: 1, VectorBytes: 16}},
		}}}
		c := &tab.Collectives[0]
		for _, s := range sizes {
			c.Sizes = append(c.Sizes, irisimpl.SizeParam{Name: s, From: -1})
		}
		for i, sh := range shapes {
			var dims []irismodel.Dim
			for _, d := range strings.Fields(sh) {
				switch d {
				case "world":
					dims = append(dims, irismodel.DimWorld)
				case "a":
					dims = append(dims, irismodel.DimSize(0))
				case "b":
					dims = append(dims, irismodel.DimSize(1))
				default:
					k, err := strconv.Atoi(d)
					require.NoError(t, err)
					dims = append(dims, irismodel.Dim(k))
				}
			}
			c.Tensors = append(c.Tensors, irismodel.TensorDesc{Name: fmt.Sprintf("t%d", i), Dir: irismodel.InOut, Shape: dims})
			c.Variants[0].Uses = append(c.Variants[0].Uses, irisimpl.UseLocal)
		}
		es := tab.Entries()
		require.Len(t, es, 1)
		return es[0]
	}
	for _, c := range []struct {
		sizes  []string
		shapes []string
		bytes  int64
		want   []int64
		ok     bool
	}{
		{[]string{"a"}, []string{"2 a"}, 1000, []int64{250}, true},              // halo-like [2, a]: 2*250 elements of 2 bytes
		{[]string{"a"}, []string{"a", "world a"}, 1000, []int64{125}, true},     // the larger tensor decides
		{[]string{"a"}, []string{"a a"}, 1 << 20, []int64{724}, true},           // a square: 724^2*2 <= 1 MiB < 725^2*2
		{[]string{"a", "b"}, []string{"a b", "b"}, 1000, []int64{1, 500}, true}, // the last size takes it, the others 1
		{[]string{"a", "b"}, []string{"3 a b"}, 1000, []int64{1, 166}, true},    //
		{[]string{"a"}, []string{"world a"}, 6, []int64{0}, false},              // below one element per rank
		{[]string{"a"}, []string{"16"}, 1000, []int64{500}, true},               // a size no user tensor has: all of it
		{[]string{"a", "b"}, []string{"a 1024"}, 1000, []int64{1, 500}, false},  // even 1 is too much
	} {
		got, ok := sweepSizes(entry(c.sizes, c.shapes...), c.bytes, 4, 2)
		assert.Equal(t, c.ok, ok, "%v %v", c.sizes, c.shapes)
		if c.ok {
			assert.Equal(t, c.want, got, "%v %v", c.sizes, c.shapes)
		}
	}
}

// TestSelection: the catalogue's barrier is timed without a size, the
// collectives of the scenarios only by them, everything else by the
// sweep; a scenario is selected by its name or by a collective it times,
// and applies only where the package holds every collective it launches.
func TestSelection(t *testing.T) {
	names := func(es []irisimpl.Entry) []string {
		var out []string
		for _, e := range es {
			if !slices.Contains(out, e.Collective) {
				out = append(out, e.Collective)
			}
		}
		return out
	}
	scen := func(sel selection) []string {
		var out []string
		for _, sc := range sel.scenarios {
			out = append(out, sc.name)
		}
		return out
	}
	sel := Config{Entries: collectives.Catalogue}.selection()
	assert.Equal(t, []string{"barrier"}, names(sel.fixed))
	assert.Equal(t, []string{"all_gather", "all_reduce", "all_to_all", "broadcast", "gather", "reduce", "reduce_scatter", "scatter", "send_recv", "shift"}, names(sel.sweep))
	assert.Equal(t, []string{"all_reduce_rmsnorm", "moe"}, scen(sel))
	for _, c := range []struct {
		colls        []string
		sweep, scens []string
	}{
		{[]string{"moe"}, nil, []string{"moe"}},
		{[]string{"moe_combine"}, nil, []string{"moe"}},
		{[]string{"residual_rmsnorm", "shift"}, []string{"shift"}, []string{"all_reduce_rmsnorm"}},
		{[]string{"all_reduce"}, []string{"all_reduce"}, nil},
	} {
		sel := Config{Entries: collectives.Catalogue, Collectives: c.colls}.selection()
		assert.Equal(t, c.sweep, names(sel.sweep), "%v", c.colls)
		assert.Equal(t, c.scens, scen(sel), "%v", c.colls)
		assert.Empty(t, sel.fixed, "%v", c.colls)
	}
	// Without all_reduce_rmsnorm, its scenario does not apply and the sweep
	// takes residual_rmsnorm (two sizes: the last takes the size).
	var part []irisimpl.Entry
	for _, e := range collectives.Catalogue {
		if e.Collective != "all_reduce_rmsnorm" && e.Collective != "moe_combine" {
			part = append(part, e)
		}
	}
	sel = Config{Entries: part}.selection()
	assert.Contains(t, names(sel.sweep), "residual_rmsnorm")
	assert.Contains(t, names(sel.sweep), "moe_dispatch")
	assert.Empty(t, scen(sel))
	assert.Equal(t, append(names(collectives.Catalogue), "moe"), Names(collectives.Catalogue), "all_reduce_rmsnorm is a collective and a scenario")
	assert.NotContains(t, Names(part), "moe")
}

// TestFusionTable: per world, mode and size, the fastest fused variant
// against the fastest unfused irisgen row and the torch row, as ratios.
func TestFusionTable(t *testing.T) {
	require.Empty(t, FusionTable([]Row{{Impl: "irisgen", Collective: "all_reduce", TimeUS: 1}}))
	b := RMSNormHidden * 2
	rows := []Row{
		{Impl: "irisgen", Collective: "all_reduce_rmsnorm", Variant: "one_shot", World: 2, Mode: "graph", Bytes: b, TimeUS: 6},
		{Impl: "irisgen", Collective: "all_reduce_rmsnorm", Variant: "one_shot_lamport", World: 2, Mode: "graph", Bytes: b, TimeUS: 4},
		{Impl: UnfusedImpl, Collective: "all_reduce_rmsnorm", Variant: "all_reduce+residual_rmsnorm", World: 2, Mode: "graph", Bytes: b, TimeUS: 10,
			Note: "all_reduce one_shot_push, then residual_rmsnorm local"},
		{Impl: "torch_nccl", Collective: "all_reduce_rmsnorm", Variant: "unfused", World: 2, Mode: "graph", Bytes: b, TimeUS: 30},
		{Impl: "irisgen", Collective: "all_reduce_rmsnorm", Variant: "two_shot", World: 2, Mode: "graph", Bytes: 2048 * b, TimeUS: 50},
		{Impl: "irisgen", Collective: "all_reduce_rmsnorm", Variant: "one_shot", World: 2, Mode: "graph", Bytes: 2048 * b, TimeUS: math.NaN()},
	}
	got := FusionTable(rows)
	require.Contains(t, got, "| 2 | graph | 1 | 14 KiB | 4.0 (one_shot_lamport) | 10.0 (one_shot_push) | 2.50 | 30.0 | 7.50 |")
	require.Contains(t, got, "| 2 | graph | 2048 | 28 MiB | 50.0 (two_shot) | - | - | - | - |")
}

func TestPercentile(t *testing.T) {
	s := make([]float64, 1000)
	for i := range s {
		s[i] = float64(i + 1)
	}
	require.Equal(t, 1.0, Percentile(s, 0))
	require.Equal(t, 500.0, Percentile(s, 0.5))
	require.Equal(t, 990.0, Percentile(s, 0.99))
	require.Equal(t, 999.0, Percentile(s, 0.999))
	require.Equal(t, 1000.0, Percentile(s, 1))
	require.True(t, math.IsNaN(Percentile(nil, 0.5)))
}

// TestTails: one launch stalled for a millisecond in 10,000 is invisible in
// the median and in p99, and still below p99.9 (a single launch); ten of
// them (0.1%) move p99.9 past the rule, and the table marks the cell.
func TestTails(t *testing.T) {
	launches := func(stalls int) []float64 {
		us := make([]float64, 10000)
		for i := range us {
			us[i] = 20 + float64(i%7)*0.1 // machine noise
		}
		for i := range stalls {
			us[i*97] = 1000
		}
		return us
	}
	one := tailOf(launches(1))
	require.Equal(t, 10000, one.Launches)
	require.InDelta(t, 20.3, one.Median, 1e-9)
	require.Equal(t, 1000.0, one.Max)
	require.False(t, one.Stalled())
	many := tailOf(launches(11))
	require.Equal(t, 1000.0, many.P999)
	require.True(t, many.Stalled())
	many.Collective, many.Variant, many.DType, many.World, many.Bytes = "all_reduce", "one_shot_lamport", "bf16", 4, 512<<10
	md := TailsMarkdown([]Tail{many})
	require.Contains(t, md, "| all_reduce | one_shot_lamport | bf16 | 4 | 512 KiB | 10000 | 20.00 | 20.30 |")
	require.Contains(t, md, "(!)")
	require.Contains(t, md, "1 of 1 cells stalled")
	var b bytes.Buffer
	require.NoError(t, WriteTailsCSV(&b, []Tail{many}))
	require.Contains(t, b.String(), "all_reduce,one_shot_lamport,bf16,4,524288,10000,20.000,20.300,")
	require.Contains(t, b.String(), ",1000.000,1000.000,true,")
}

// TestVersusNCCL: the best variant is the fastest one that did not stall,
// a stalled variant counts only where every variant stalled (and is
// marked), and the geometric mean covers the sizes up to 1 MiB.
func TestVersusNCCL(t *testing.T) {
	row := func(impl, v string, bytes int64, med, lo, hi float64) Row {
		return Row{Impl: impl, Collective: "all_reduce", Variant: v, DType: "bf16", World: 2, Bytes: bytes, Mode: "graph", TimeUS: med, MinUS: lo, MaxUS: hi}
	}
	rows := []Row{
		row("irisgen", "lamport", 8<<10, 2, 2, 100), // faster but stalled
		row("irisgen", "one_shot", 8<<10, 4, 4, 4.5),
		row("nccl", "best", 8<<10, 5, 5, 5),
		row("irisgen", "lamport", 1<<20, 20, 19, 900), // every variant stalled
		row("nccl", "best", 1<<20, 10, 10, 10),
		row("irisgen", "ring", 64<<20, 300, 290, 310),
		row("nccl", "best", 64<<20, 200, 200, 200),
		row("irisgen", "ring", 128<<20, 300, 290, 310), // no NCCL cell: not shown
	}
	md := VersusNCCL(rows)
	require.Contains(t, md, "### 2 GPUs, graph")
	require.Contains(t, md, "| collective | 8 KiB | 1 MiB | 64 MiB | geomean <= 1 MiB |")
	require.Contains(t, md, "| all_reduce | 0.80 | 2.00 (!) | 1.50 | 1.26 |")
	require.Contains(t, md, "2 of 3 cells slower than NCCL, 1 stalled.")
	require.Empty(t, VersusNCCL(rows[:2]))
}

// TestMarkSlow: a cell stalled from its first launch to its last (p99.9
// near its min) is caught by its median against the other variants of the
// collective at the same size and world, and only there; a variant slow by
// design (atomic) is not.
func TestMarkSlow(t *testing.T) {
	tail := func(v string, world int, bytes int64, med float64) Tail {
		return Tail{Collective: "all_reduce", Variant: v, DType: "bf16", World: world, Bytes: bytes, Launches: 1000, Min: med * 0.9, Median: med, P99: med * 1.1, P999: med * 1.2, Max: med * 1.3}
	}
	tails := []Tail{
		tail("one_shot", 4, 1<<20, 20),
		tail("lamport", 4, 1<<20, 2000), // stalled throughout
		tail("lamport", 4, 4<<20, 45),   // another size: compared with nothing slower
		tail("ring", 4, 4<<20, 60),
		tail("lamport", 2, 1<<20, 2000), // another world: nothing to compare with
		tail("atomic", 4, 4<<20, 1600),  // slow by design, on every launch
	}
	tails[len(tails)-1].ByDesign = true
	for _, x := range tails {
		require.False(t, x.Stalled(), "p99.9 within 20x the min")
	}
	MarkSlow(tails)
	var slow []string
	for _, x := range tails {
		if x.Stalled() {
			slow = append(slow, fmt.Sprintf("%s@%d/%d", x.Variant, x.World, x.Bytes))
		}
	}
	require.Equal(t, []string{"lamport@4/1048576"}, slow)
}

// TestBusText: a table shows "-" where a cell has no bus bandwidth (a
// collective without nccl-tests' rule reports 0, a barrier NaN), never "0".
func TestBusText(t *testing.T) {
	for in, want := range map[float64]string{0: "-", -1: "-", math.NaN(): "-", 12.4: "12", 351.6: "352"} {
		require.Equal(t, want, busText(in), "%v", in)
	}
}

// TestStalls enumerates the stall rule's cases: over the factor and over
// the floor stalls; either alone does not.
func TestStalls(t *testing.T) {
	for _, c := range []struct {
		min, p999 float64
		want      bool
	}{
		{8.8, 202.3, false},  // 23x, but 194 us beyond: host noise (4 H100s, 2026-11-26)
		{10, 1000, true},     // a millisecond stall of a 10 us kernel
		{50, 1600, true},     // the 2026-11-26 Lamport stalls
		{100, 1900, false},   // 19x
		{20, 401, true},      // just over both
		{20, 320, false},     // 16x, at the floor
		{1000, 19000, false}, // 19x of a slow cell
	} {
		assert.Equal(t, c.want, Stalls(c.min, c.p999), "min %g p99.9 %g", c.min, c.p999)
	}
}

package gputools

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/bench"
	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu/fakekernels"
	"github.com/irisgen/irisgen/runtime/irisimpl"

	_ "github.com/irisgen/irisgen/generated/collectives" // the package the commands run
)

const catalogue = "github.com/irisgen/irisgen/generated/collectives"

// fake is a Program on a fake platform of n GPUs that serves the
// catalogue's kernels, writing into buffers.
func fake(t *testing.T, n int) (Program, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	p := fakegpu.New(n)
	kernels, err := fakekernels.For(p, irisimpl.Registered(catalogue), irisimpl.Registered(bench.ComputePackage))
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	return Program{Name: "tools", Platform: p, Kernels: kernels, Stdout: &stdout, Stderr: &stderr}, &stdout, &stderr
}

// TestBenchOnFake runs bench's planning and dispatch on the fake platform
// (no kernel runs: the times are the fake's): a row per variant, dtype,
// size and mode of what -collectives selects, the barrier without a
// size, the report written, no baseline on the fake.
func TestBenchOnFake(t *testing.T) {
	prog, stdout, stderr := fake(t, 2)
	out := t.TempDir()
	code := prog.Run([]string{"bench", "-n", "2", "-sizes", "8KiB,64KiB", "-dtypes", "bf16", "-repeats", "1", "-warmup", "1",
		"-heap", "67108864", "-collectives", "barrier,all_gather,send_recv", "-out", out})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout.String(), "irisgen bench: 2 GPUs (2x fake)")
	// Every row's log line gives the wall time its measurement took.
	assert.Regexp(t, `(?m)^irisgen all_gather +copy_push +bf16 +8192 graph +[0-9.]+ us \[[0-9]+\.[0-9]{2} s\]`, stdout.String())
	assert.Contains(t, stderr.String(), "no baselines on the fake platform")
	rows := readResults(t, out)
	count := map[string]int{}
	for _, r := range rows {
		assert.Equal(t, "irisgen", r.Impl)
		assert.Greater(t, r.TimeUS, 0.0, "%+v", r)
		count[r.Collective]++
	}
	// barrier: 2 modes; all_gather: 5 variants x 2 sizes x 2 modes; send_recv: 4 variants x 2 x 2.
	assert.Equal(t, map[string]int{"barrier": 2, "all_gather": 20, "send_recv": 16}, count)
	assert.FileExists(t, filepath.Join(out, "results.md"))
}

// TestBenchBarrierOnFake: -barrier times every launch in the mode named,
// its rows carry it; a variant without the mode is left untimed and says
// which it has; host cannot be captured, so its graph cells say so; the
// report shows the rows as a series of their own.
func TestBenchBarrierOnFake(t *testing.T) {
	for _, c := range []struct {
		mode string
		// want: the note of each variant's row by mode ("" timed)
		want map[string]map[string]string
	}{
		{"none", map[string]map[string]string{
			"push":      {"eager": "", "graph": ""},
			"copy_push": {"eager": "send_recv copy_push: barrier mode \"none\" is not supported by this variant; supported: device, host", "graph": "send_recv copy_push: barrier mode \"none\" is not supported"},
		}},
		{"host", map[string]map[string]string{
			"push":      {"eager": "", "graph": "send_recv push cannot be captured in mode host"},
			"copy_push": {"eager": "", "graph": "send_recv copy_push cannot be captured in mode host"},
		}},
	} {
		prog, stdout, stderr := fake(t, 2)
		out := t.TempDir()
		code := prog.Run([]string{"bench", "-n", "2", "-sizes", "8KiB", "-dtypes", "bf16", "-repeats", "1", "-warmup", "1",
			"-heap", "67108864", "-collectives", "send_recv", "-variants", "push,copy_push", "-barrier", c.mode, "-out", out})
		require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		rows := readResults(t, out)
		require.Len(t, rows, 4, c.mode)
		for _, r := range rows {
			assert.Equal(t, c.mode, r.Barrier, "%+v", r)
			want := c.want[r.Variant][r.Mode]
			if want == "" {
				assert.Greater(t, r.TimeUS, 0.0, "%+v", r)
				assert.Empty(t, r.Note, "%+v", r)
			} else {
				assert.True(t, math.IsNaN(r.TimeUS), "%+v", r)
				assert.Contains(t, r.Note, want, "%+v", r)
			}
		}
		md, err := os.ReadFile(filepath.Join(out, "results.md"))
		require.NoError(t, err)
		assert.Contains(t, string(md), "irisgen push (barrier "+c.mode+") us (min / median / max)")
	}
}

// TestBenchVariantsOnFake: -variants keeps the variants named of what
// -collectives selects, and nothing else.
func TestBenchVariantsOnFake(t *testing.T) {
	prog, stdout, stderr := fake(t, 2)
	out := t.TempDir()
	code := prog.Run([]string{"bench", "-n", "2", "-sizes", "8KiB", "-dtypes", "bf16", "-repeats", "1", "-warmup", "1",
		"-heap", "67108864", "-collectives", "all_gather,send_recv", "-variants", "copy_push", "-out", out})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	rows := readResults(t, out)
	count := map[string]int{}
	for _, r := range rows {
		count[r.Collective+"/"+r.Variant]++
		if r.Collective == "all_gather" {
			assert.Contains(t, []string{"in place", "out of place"}, r.Note, "all_gather copy_push runs in place too: timed both ways")
		}
	}
	assert.Equal(t, map[string]int{"all_gather/copy_push": 2, "send_recv/copy_push": 2}, count) // eager and graph
}

// readResults reads OUT/results.csv.
func readResults(t *testing.T, out string) []bench.Row {
	t.Helper()
	f, err := os.Open(filepath.Join(out, "results.csv"))
	require.NoError(t, err)
	defer f.Close()
	rows, err := bench.ReadCSV(f)
	require.NoError(t, err)
	return rows
}

// TestProbeOnFake runs probe's cases on the fake (outputs stay poisoned,
// so eager and replay agree): every claim of the selected collectives
// holds, and the table says whose they are.
func TestProbeOnFake(t *testing.T) {
	t.Setenv("IRISGEN_HEAP_BYTES", "64MiB") // the fake backs it with host memory
	prog, stdout, stderr := fake(t, 2)
	code := prog.Run([]string{"probe", "-n", "2", "-replays", "2", "-elems", "9", "-collectives", "all_gather,broadcast", "-package", catalogue})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout.String(), "all 51 claims hold") // all_gather 5 x 3 modes; broadcast 6 variants x 3 modes x 2 roots
	assert.Contains(t, stdout.String(), catalogue)
	assert.Contains(t, stdout.String(), "broadcast   push")
}

// TestUsage: what the commands refuse, before touching a GPU.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"bench", "-package", "example.com/nope"}, 2, "-package example.com/nope: the program does not link it (it links " + catalogue + ")"},
		{[]string{"probe", "-package", "example.com/nope"}, 2, "the program does not link it"},
		{[]string{"bench", "-collectives", "all_gather,allgather"}, 2, `-collectives: "allgather" is not a collective or scenario of ` + catalogue},
		{[]string{"probe", "-collectives", "moe"}, 2, `"moe" is not a collective or scenario`}, // a bench scenario, not a collective
		{[]string{"bench", "-n", "3"}, 2, "-n 3: this machine has 2 GPUs"},
		{[]string{"probe", "-replays", "0"}, 2, "-replays must be at least 1"},
		{[]string{"bench", "-overlap", "-tails"}, 2, "-tails and -overlap are two scenarios: run one at a time"},
		{[]string{"bench", "-collectives", "send_recv", "-variants", "copy_push,ring"}, 2, `-variants: "ring" is not a variant of the collectives selected (they have push, pull, lamport, copy_push)`},
		{[]string{"bench", "-report", "x.csv", "-variants", "push"}, 2, "-variants chooses what to measure; -report measures nothing"},
		{[]string{"bench", "-barrier", "never"}, 2, `-barrier: unknown barrier mode "never" (want device, host or none)`},
		{[]string{"bench", "-barrier", "none", "-report", "x.csv"}, 2, "-barrier chooses how to measure; -report measures nothing"},
		{[]string{"bench", "-barrier", "none", "-tails"}, 2, "-tails and -overlap launch in their own modes"},
		{[]string{"bench", "-barrier", "host", "-overlap"}, 2, "-tails and -overlap launch in their own modes"},
		{[]string{"nope"}, 2, `unknown command "nope"`},
	} {
		prog, stdout, stderr := fake(t, 2)
		code := prog.Run(c.args)
		assert.Equal(t, c.code, code, "%v: %s%s", c.args, stdout, stderr)
		assert.Contains(t, stderr.String(), c.want, "%v", c.args)
	}
	prog, stdout, _ := fake(t, 2)
	require.Equal(t, 0, prog.Run([]string{"help"}))
	assert.True(t, strings.HasPrefix(stdout.String(), "tools runs irisgen's GPU commands on the generated packages it links ("+catalogue+")"), stdout.String())
}

// TestTailsOnFake runs the stall scenario's planning and dispatch on the
// fake: every variant of the sweep at each size, and the chain scenario's
// fused variants at its token counts.
func TestTailsOnFake(t *testing.T) {
	defer func(ts []int64) { bench.TailTokens = ts }(bench.TailTokens)
	bench.TailTokens = []int64{1, 3} // the fake backs the heap with host memory
	prog, stdout, stderr := fake(t, 2)
	out := t.TempDir()
	code := prog.Run([]string{"bench", "-tails", "-n", "2", "-launches", "20", "-warmup", "1", "-sizes", "8KiB", "-heap", "67108864",
		"-collectives", "all_gather,all_reduce_rmsnorm", "-out", out})
	// The fake's clock ticks for every rank's operations, so a launch's
	// span depends on the ranks' interleaving: a "stall" is the fake's.
	if code != 0 {
		require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
		require.Contains(t, stderr.String(), "a cell stalled")
	}
	md, err := os.ReadFile(filepath.Join(out, "tails.md"))
	require.NoError(t, err)
	assert.Equal(t, 5+3*2, strings.Count(string(md), "| bf16 | 2 |"), "all_gather's 5 variants at 8 KiB, all_reduce_rmsnorm's 3 at 1 and 3 tokens:\n%s", md)
	assert.Contains(t, string(md), "| all_reduce_rmsnorm | one_shot | bf16 | 2 | 42 KiB | 20 |")
}

// TestMoEOnFake runs the MoE scenario's planning and dispatch on the fake
// (shrunk: the fake backs the heap with host memory): the pair from the
// package's own entries, a row for dispatch and one for combine per k,
// tokens and mode.
func TestMoEOnFake(t *testing.T) {
	defer func(ts, ks []int64, h int64) { bench.MoETokens, bench.MoEK, bench.MoEHidden = ts, ks, h }(bench.MoETokens, bench.MoEK, bench.MoEHidden)
	bench.MoETokens, bench.MoEK, bench.MoEHidden = []int64{5, 9}, []int64{1, 2}, 64
	prog, stdout, stderr := fake(t, 2)
	out := t.TempDir()
	code := prog.Run([]string{"bench", "-n", "2", "-repeats", "1", "-warmup", "1", "-heap", "67108864", "-collectives", "moe_dispatch", "-out", out})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	csv, err := os.ReadFile(filepath.Join(out, "results.csv"))
	require.NoError(t, err)
	assert.Equal(t, 1+2*2*2*2, strings.Count(string(csv), "\n"), "dispatch and combine x 2 k x 2 token counts x 2 modes:\n%s", csv)
	assert.Contains(t, string(csv), "irisgen,moe_combine_k2,push,bf16,2,1152,graph,")

	// MoE launches in modes of its own: -barrier does not reach it, so it
	// is refused rather than timed unmarked.
	prog, stdout, stderr = fake(t, 2)
	code = prog.Run([]string{"bench", "-n", "2", "-repeats", "1", "-warmup", "1", "-heap", "67108864", "-collectives", "moe", "-barrier", "none", "-out", t.TempDir()})
	require.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr.String(), "-barrier none does not apply to the moe scenario, whose launches choose their own barrier modes; leave it out of -collectives")
}

// TestOverlapOnFake runs the overlap scenario's wiring on the fake (no
// kernel runs and the times are the fake's clock, so none is judged): the
// compute kernel is calibrated, then every variant of the selected
// collective is timed alone and beside it, four rows a cell, which the
// report pairs; the compute kernel runs its full grid with the calibrated
// rounds on streams of its own, never the collectives' (kernels or
// copies); the report's slowdowns are the rows' ratios.
func TestOverlapOnFake(t *testing.T) {
	prog, stdout, stderr := fake(t, 2)
	fp := prog.Platform.(*fakegpu.Platform)
	type launch struct {
		dev    int
		stream uint64
		iters  int64
	}
	var mu sync.Mutex
	var computeLaunches, collLaunches []launch
	fp.OnLaunch(func(l fakegpu.Launch) error {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case l.Function == "irisgen_compute_fma_f32":
			assert.Equal(t, gpu.Dim3{X: 1024, Y: 1, Z: 1}, l.Grid, "the compute kernel's full grid")
			assert.Equal(t, uint32(512), l.Block.X)
			// iters is the last 8 bytes of its argument struct (ctx, data, n, iters).
			computeLaunches = append(computeLaunches, launch{l.Device, uint64(l.Stream), int64(binary.LittleEndian.Uint64(l.Args[len(l.Args)-8:]))})
		case strings.HasPrefix(l.Function, "irisgen_send_recv_"):
			collLaunches = append(collLaunches, launch{dev: l.Device, stream: uint64(l.Stream)})
		}
		return nil
	})
	out := t.TempDir()
	code := prog.Run([]string{"bench", "-overlap", "-n", "2", "-sizes", "64KiB", "-repeats", "2", "-warmup", "1", "-heap", "67108864",
		"-collectives", "send_recv", "-out", out})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr.String(), "no baselines on the fake platform")

	var iters int64
	_, err := fmt.Sscanf(stdout.String()[strings.Index(stdout.String(), "compute kernel:"):], "compute kernel: %d FMA rounds a launch", &iters)
	require.NoError(t, err, stdout.String())
	require.NotEmpty(t, computeLaunches)
	require.NotEmpty(t, collLaunches)
	collStreams := map[[2]uint64]bool{}
	for _, l := range collLaunches {
		collStreams[[2]uint64{uint64(l.dev), l.stream}] = true
	}
	for _, op := range fp.MemOps() { // copy_push's copies and barriers
		collStreams[[2]uint64{uint64(op.Device), uint64(op.Stream)}] = true
	}
	probes := 0
	for _, l := range computeLaunches {
		assert.False(t, collStreams[[2]uint64{uint64(l.dev), l.stream}], "a compute launch on a collective's stream: %+v", l)
		if l.iters == 1024 {
			probes++ // CalibrateCompute's first launches
			continue
		}
		assert.Equal(t, iters, l.iters, "every other launch has the calibrated rounds")
	}
	assert.Positive(t, probes)

	rows := readResults(t, out)
	require.Len(t, rows, 4*2*4, "send_recv's 4 variants x 2 modes, four rows a cell")
	type pair struct{ alone, beside, computeAlone, computeBeside bench.Row }
	pairs := map[string]*pair{}
	for _, r := range rows {
		require.Equal(t, "send_recv", r.Collective)
		require.Equal(t, int64(64<<10), r.Bytes)
		require.Greater(t, r.TimeUS, 0.0, "%+v", r)
		series := r.Impl + " " + r.Variant
		if r.Impl == bench.ComputeImpl {
			series = r.Variant
			assert.True(t, math.IsNaN(r.BusBW), "the compute kernel has no bandwidth: %+v", r)
			assert.Regexp(t, `^\d+(-\d+)? launches of `+fmt.Sprint(iters)+` FMA rounds a batch$`, r.Note)
		}
		k := series + " " + r.Mode
		if pairs[k] == nil {
			pairs[k] = &pair{}
		}
		switch {
		case r.Impl == bench.ComputeImpl && r.Beside == "":
			pairs[k].computeAlone = r
		case r.Impl == bench.ComputeImpl:
			require.Equal(t, series, r.Beside)
			pairs[k].computeBeside = r
		case r.Beside == "":
			pairs[k].alone = r
		default:
			require.Equal(t, bench.ComputeImpl, r.Beside)
			pairs[k].beside = r
		}
	}
	require.Len(t, pairs, 8)
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	require.NoError(t, err)
	for _, mode := range []string{"eager", "graph"} {
		for _, v := range []string{"push", "pull", "copy_push"} {
			p := pairs["irisgen "+v+" "+mode]
			require.NotNil(t, p, "irisgen %s %s", v, mode)
			for _, r := range []bench.Row{p.alone, p.beside, p.computeAlone, p.computeBeside} {
				require.Equal(t, mode, r.Mode)
			}
			// The compute slowdown and the collective's times, in the group's table.
			// (within the rounding of the CSV's and the table's digits).
			section := string(md)[strings.Index(string(md), "### send_recv bf16, 2 GPUs, "+mode+", beside the compute kernel"):]
			var slowdown, alone, beside float64
			_, err := fmt.Sscanf(section[strings.Index(section, "| irisgen "+v+" |"):], "| irisgen "+v+" | %f |", &slowdown)
			require.NoError(t, err)
			// The table rounds the slowdown to 0.01; the CSV's times carry
			// 3 decimals, so the ratio of them is off by up to its share
			// of 0.0005 us in each.
			ratio := p.computeBeside.TimeUS / p.computeAlone.TimeUS
			tol := 0.005 + ratio*(0.0005/p.computeBeside.TimeUS+0.0005/p.computeAlone.TimeUS) + 1e-9
			assert.InDelta(t, ratio, slowdown, tol, "%s %s", v, mode)
			times := section[strings.Index(section, "| collective us"):]
			_, err = fmt.Sscanf(times[strings.Index(times, "| irisgen "+v+" |"):], "| irisgen "+v+" | %f -> %f", &alone, &beside)
			require.NoError(t, err)
			assert.InDelta(t, p.alone.TimeUS, alone, 0.051, "%s %s", v, mode)
			assert.InDelta(t, p.beside.TimeUS, beside, 0.051, "%s %s", v, mode)
		}
		assert.FileExists(t, filepath.Join(out, "send_recv_bf16_w2_"+mode+"_overlap.svg"))
		assert.FileExists(t, filepath.Join(out, "send_recv_bf16_w2_"+mode+".svg"), "the times alone, as the bench plots them")
	}
}

// TestTuneRefreshesExistingTables: -tune rewrites the tables its directory
// holds and adds one only for a collective named in -collectives (a table
// makes an auto variant); a collective with one variant in the rows gets
// neither a table nor a note.
func TestTuneRefreshesExistingTables(t *testing.T) {
	prog, stdout, stderr := fake(t, 2)
	dir, out := t.TempDir(), t.TempDir()
	csv := filepath.Join(dir, "results.csv")
	var b strings.Builder
	b.WriteString("impl,collective,variant,dtype,world,bytes,mode,time_us,algbw_gbps,busbw_gbps,device,date,note,time_min_us,time_max_us,repeats,beside\n")
	for _, c := range []string{"all_gather", "broadcast"} {
		for _, v := range []struct {
			name string
			us   [2]float64
		}{{"push", [2]float64{5, 40}}, {"pull", [2]float64{6, 30}}} {
			for i, bytes := range []int64{8192, 4 << 20} {
				fmt.Fprintf(&b, "irisgen,%s,%s,bf16,2,%d,graph,%g,1,1,fake,2026-11-26,,%g,%g,3,\n", c, v.name, bytes, v.us[i], v.us[i], v.us[i])
			}
		}
	}
	// A scenario's rows (MoE's): one variant, nothing for auto to choose.
	fmt.Fprintf(&b, "irisgen,moe_combine_k8,push,bf16,2,1835008,graph,30,1,1,fake,2026-11-26,,30,30,3,\n")
	require.NoError(t, os.WriteFile(csv, []byte(b.String()), 0o644))
	tables := filepath.Join(dir, "tuning")
	require.NoError(t, os.MkdirAll(tables, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(tables, "all_gather.yaml"), []byte("old\n"), 0o644))

	code := prog.Run([]string{"bench", "-report", csv, "-out", out, "-tune", tables})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	ag, err := os.ReadFile(filepath.Join(tables, "all_gather.yaml"))
	require.NoError(t, err)
	assert.NotEqual(t, "old\n", string(ag), "the existing table is refreshed")
	assert.Contains(t, string(ag), "pull")
	assert.NoFileExists(t, filepath.Join(tables, "broadcast.yaml"), "no table added for a collective not named")
	assert.Contains(t, stdout.String(), "no auto table for broadcast: ")
	assert.Contains(t, stdout.String(), "name broadcast in -collectives to write one")
	assert.NotContains(t, stdout.String(), "moe_combine_k8", "one variant: no table to offer")

	stdout.Reset()
	code = prog.Run([]string{"bench", "-report", csv, "-out", out, "-tune", tables, "-collectives", "broadcast"})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.FileExists(t, filepath.Join(tables, "broadcast.yaml"), "named: added")
}

// TestReportClocks: the clock log's summary goes to the end of the report
// and to stdout; without one, neither has it.
func TestReportClocks(t *testing.T) {
	out := t.TempDir()
	var stdout bytes.Buffer
	env := &cli.Env{Stdout: &stdout, Stderr: &stdout}
	require.NoError(t, writeReport(env, nil, out, stopClocks(env, nil)))
	b, err := os.ReadFile(filepath.Join(out, "results.md"))
	require.NoError(t, err)
	assert.NotContains(t, string(b), "Clocks during the run")
	assert.NotContains(t, stdout.String(), "Clocks during the run")

	sum, err := bench.ParseClocks(strings.NewReader("0, t, 1980 MHz, 2619 MHz, 156.53 W, 44, 0x0000000000000000\n"))
	require.NoError(t, err)
	require.NoError(t, writeReport(env, nil, out, sum.Markdown()))
	b, err = os.ReadFile(filepath.Join(out, "results.md"))
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(b), sum.Markdown()), string(b))
	assert.Contains(t, stdout.String(), "SM clock 1980-1980 MHz")
}

// TestLooserRules enumerates looserRules on the catalogue's descriptors:
// in place allowed beats forbidden, then fewer heap tensors, and a variant
// is never looser than itself or than one the program does not link.
func TestLooserRules(t *testing.T) {
	for _, c := range []struct {
		coll, a, b string
		want       bool
	}{
		// all_reduce_rmsnorm: one_shot_lamport allows in place; one_shot and
		// two_shot forbid it; two_shot's output must be on the heap.
		{"all_reduce_rmsnorm", "one_shot_lamport", "one_shot", true},
		{"all_reduce_rmsnorm", "one_shot_lamport", "two_shot", true},
		{"all_reduce_rmsnorm", "one_shot", "two_shot", true},
		{"all_reduce_rmsnorm", "two_shot", "one_shot", false},
		{"all_reduce_rmsnorm", "one_shot", "one_shot_lamport", false},
		{"all_reduce_rmsnorm", "one_shot", "one_shot", false},
		{"all_reduce_rmsnorm", "one_shot", "no_such_variant", false},
		{"no_such_collective", "a", "b", false},
	} {
		require.Equal(t, c.want, looserRules(c.coll)(c.a, c.b), "%s: %s looser than %s", c.coll, c.a, c.b)
	}
}

package gputools

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/bench"
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
	kernels, err := fakekernels.For(p, irisimpl.Registered(catalogue))
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
	assert.Contains(t, stderr.String(), "no baselines on the fake platform")
	f, err := os.Open(filepath.Join(out, "results.csv"))
	require.NoError(t, err)
	defer f.Close()
	rows, err := bench.ReadCSV(f)
	require.NoError(t, err)
	count := map[string]int{}
	for _, r := range rows {
		assert.Equal(t, "irisgen", r.Impl)
		assert.Greater(t, r.TimeUS, 0.0, "%+v", r)
		count[r.Collective]++
	}
	// barrier: 2 modes; all_gather: 4 variants x 2 sizes x 2 modes; send_recv: 2 variants x 2 x 2.
	assert.Equal(t, map[string]int{"barrier": 2, "all_gather": 24, "send_recv": 12}, count) // all_gather 6 variants, send_recv 3
	assert.FileExists(t, filepath.Join(out, "results.md"))
}

// TestProbeOnFake runs probe's cases on the fake (outputs stay poisoned,
// so eager and replay agree): every claim of the selected collectives
// holds, and the table says whose they are.
func TestProbeOnFake(t *testing.T) {
	t.Setenv("IRISGEN_HEAP_BYTES", "64MiB") // the fake backs it with host memory
	prog, stdout, stderr := fake(t, 2)
	code := prog.Run([]string{"probe", "-n", "2", "-replays", "2", "-elems", "9", "-collectives", "all_gather,broadcast", "-package", catalogue})
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout.String(), "all 46 claims hold") // all_gather 6 x 3 modes; broadcast (3 + copy_push) x 3 modes x 2 roots, copy_pull 2 modes x 2 roots
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
	assert.Equal(t, 6+3*2, strings.Count(string(md), "| bf16 | 2 |"), "all_gather's 6 variants at 8 KiB, all_reduce_rmsnorm's 3 at 1 and 3 tokens:\n%s", md)
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
}

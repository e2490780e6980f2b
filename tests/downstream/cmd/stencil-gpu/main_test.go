package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/gputools"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu/fakekernels"
	"github.com/irisgen/irisgen/runtime/irisimpl"
)

const pkg = "example.com/stencil/internal/gen/coll"

// run runs this program's commands on a fake platform of 2 GPUs serving
// the package's kernels (the fake runs none: outputs stay as they were,
// times are the fake's) and returns the exit code and the output.
func run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	t.Setenv("IRISGEN_HEAP_BYTES", "64MiB") // the fake backs the heap with host memory
	p := fakegpu.New(2)
	kernels, err := fakekernels.For(p, irisimpl.Registered(pkg))
	require.NoError(t, err)
	var out bytes.Buffer
	code := gputools.Program{Name: "stencil-gpu", Platform: p, Kernels: kernels, Stdout: &out, Stderr: &out}.Run(args)
	return code, out.String()
}

// TestBenchOwnCollectives: the bench times this repository's own
// collectives, which irisgen's tools know nothing of by name, from the
// package's table: every variant at every size, no NCCL baseline.
func TestBenchOwnCollectives(t *testing.T) {
	dir := t.TempDir()
	code, out := run(t, "bench", "-n", "2", "-sizes", "8KiB,1MiB", "-dtypes", "bf16,f32", "-repeats", "1", "-warmup", "1",
		"-heap", "67108864", "-collectives", "halo_exchange,root_broadcast", "-out", dir)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "irisgen bench: 2 GPUs (2x fake)")
	require.Contains(t, out, pkg)
	csv, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	require.NoError(t, err)
	for _, want := range []string{
		"irisgen,halo_exchange,push,bf16,2,8192,eager,", "irisgen,halo_exchange,pull,f32,2,1048576,graph,",
		"irisgen,root_broadcast,push,bf16,2,8192,graph,", "irisgen,root_broadcast,pull,f32,2,1048576,eager,",
	} {
		require.Contains(t, string(csv), want)
	}
	require.Equal(t, 1+2*2*2*2*2, strings.Count(string(csv), "\n"), "header, then 2 collectives x 2 variants x 2 dtypes x 2 sizes x 2 modes:\n%s", csv)
}

// TestProbeOwnCollectives: the probe checks every claim of this
// repository's own collectives and of the catalogue's all_reduce it
// generates, root_broadcast with both sample roots.
func TestProbeOwnCollectives(t *testing.T) {
	code, out := run(t, "probe", "-n", "2", "-replays", "2", "-elems", "9", "-collectives", "halo_exchange,root_broadcast,all_reduce")
	require.Equal(t, 0, code, out)
	// halo_exchange 2 variants x 3 modes; root_broadcast 2 x 3 x 2 roots;
	// all_reduce's 8 variants x 3 modes.
	require.Contains(t, out, "all 42 claims hold", out)
	require.Regexp(t, `root_broadcast +push +root=1 +device +yes +yes +2 +ok`, out)
	code, out = run(t, "probe", "-collectives", "all_gather")
	require.Equal(t, 2, code)
	require.Contains(t, out, `"all_gather" is not a collective or scenario of `+pkg)
}

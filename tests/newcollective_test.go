package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ringMain and ringTest are a program that links the generated package of
// ok-repo-generate (its own collective ring_shift, nothing of the
// catalogue) and calls gputools, and its test on the fake platform.
const ringMain = `package main

import (
	"os"

	"github.com/irisgen/irisgen/gputools"

	_ "example.com/ring/internal/gen/ring"
)

func main() { os.Exit(gputools.Main(os.Args[1:])) }
`

const ringTest = `package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgen/irisgen/gputools"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu/fakekernels"
	"github.com/irisgen/irisgen/runtime/irisimpl"
)

func run(t *testing.T, args ...string) string {
	t.Setenv("IRISGEN_HEAP_BYTES", "64MiB")
	p := fakegpu.New(2)
	kernels, err := fakekernels.For(p, irisimpl.Registered("example.com/ring/internal/gen/ring"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := (gputools.Program{Platform: p, Kernels: kernels, Stdout: &out, Stderr: &out}).Run(args); code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, code, out.String())
	}
	return out.String()
}

func TestBench(t *testing.T) {
	dir := t.TempDir()
	run(t, "bench", "-n", "2", "-sizes", "8KiB,1MiB", "-dtypes", "bf16,f32", "-repeats", "1", "-warmup", "1", "-heap", "67108864", "-out", dir)
	csv, err := os.ReadFile(filepath.Join(dir, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"irisgen,ring_shift,push,bf16,2,8192,eager,", "irisgen,ring_shift,push,f32,2,1048576,graph,"} {
		if !strings.Contains(string(csv), want) {
			t.Errorf("no row %q in\n%s", want, csv)
		}
	}
	if n := strings.Count(string(csv), "\n"); n != 1+2*2*2 {
		t.Errorf("%d lines, want the header and 8 rows (2 dtypes x 2 sizes x 2 modes):\n%s", n, csv)
	}
}

func TestProbe(t *testing.T) {
	out := run(t, "probe", "-n", "2", "-replays", "2")
	if !strings.Contains(out, "all 2 claims hold") { // push in modes device and none
		t.Errorf("%s", out)
	}
}
`

// TestNewCollectiveBenchedAndProbed: a collective irisgen's tools have
// never heard of (ok-repo-generate's ring_shift: a spec and a template,
// nothing else) is generated into a repository's package, then benched and
// probed by irisgen's GPU commands on the fake platform from a main of
// five lines, and `irisgen bench` in the repository builds the same
// program for the package and knows its collectives.
func TestNewCollectiveBenchedAndProbed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	bin := irisgenBinary(t)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	work := filepath.Join(t.TempDir(), "ring")
	copyTree(t, filepath.Join("testdata", "golden", "ok-repo-generate"), work, func(rel string) bool { return strings.HasSuffix(rel, ".golden") })
	gomod, err := os.ReadFile(filepath.Join("downstream", "go.mod"))
	require.NoError(t, err)
	gosum, err := os.ReadFile(filepath.Join("downstream", "go.sum"))
	require.NoError(t, err)
	mod := strings.Replace(string(gomod), "module example.com/stencil", "module example.com/ring", 1)
	mod = strings.Replace(mod, "replace github.com/irisgen/irisgen => ../..", "replace github.com/irisgen/irisgen => "+root, 1)
	for name, body := range map[string]string{"go.mod": mod, "go.sum": string(gosum), "cmd/ring-gpu/main.go": ringMain, "cmd/ring-gpu/main_test.go": ringTest} {
		p := filepath.Join(work, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	run := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(bin, "generate")
	require.NoError(t, err, out)
	out, err = run("go", "test", "-count=1", "./cmd/ring-gpu")
	require.NoError(t, err, out)

	out, err = run(bin, "bench", "-collectives", "ring_shift,all_reduce")
	require.Error(t, err)
	require.Contains(t, out, "irisgen bench: building the GPU commands with example.com/ring/internal/gen/ring linked")
	require.Contains(t, out, `-collectives: "all_reduce" is not a collective or scenario of example.com/ring/internal/gen/ring (it has ring_shift)`)
}

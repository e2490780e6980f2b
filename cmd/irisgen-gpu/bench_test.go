package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/bench"
)

// TestBaselineArgs checks that every flag irisgen passes to baselines.py is
// one the script declares (they live in two languages), and that the
// script at least compiles where python3 is installed (torch is needed only
// to run it).
func TestBaselineArgs(t *testing.T) {
	cfg := bench.Config{World: 2, Sizes: []int64{8192, 1 << 20}, DTypes: []string{"bf16"}, Modes: []string{"eager", "graph"},
		Warmup: 5, Collectives: []string{"barrier", "all_reduce", "moe"}}
	args := baselineArgs("baselines.py", "out.csv", cfg)
	require.Contains(t, strings.Join(args, " "), "--collectives all_reduce,moe")
	require.Contains(t, strings.Join(args, " "), "--moe-hidden 7168")
	require.Contains(t, strings.Join(args, " "), "--repeats 1")
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			require.Contains(t, string(bench.BaselinesScript), `add_argument("`+a+`"`, "baselines.py does not declare %s", a)
		}
	}
	require.Nil(t, baselineArgs("b.py", "o.csv", bench.Config{Collectives: []string{"barrier"}}), "the barrier has no baseline")

	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: baselines.py not compiled")
	}
	script := filepath.Join(t.TempDir(), "baselines.py")
	require.NoError(t, os.WriteFile(script, bench.BaselinesScript, 0o644))
	out, err := exec.Command(py, "-m", "py_compile", script).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

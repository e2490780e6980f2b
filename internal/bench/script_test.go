package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/irisimpl"
)

// TestBaselineArgs checks that every flag irisgen passes to baselines.py is
// one the script declares (they live in two languages), that it names
// only what the script has a baseline of (none for a package of other
// collectives), and that the script at least compiles where python3 is
// installed (torch is needed only to run it).
func TestBaselineArgs(t *testing.T) {
	cfg := Config{World: 2, Entries: collectives.Catalogue, Sizes: []int64{8192, 1 << 20}, DTypes: []string{"bf16"}, Modes: []string{"eager", "graph"},
		Warmup: 5, Collectives: []string{"barrier", "all_reduce", "moe"}}
	args := BaselineArgs("baselines.py", "out.csv", cfg)
	require.Contains(t, strings.Join(args, " "), "--collectives all_reduce,moe")
	require.Contains(t, strings.Join(args, " "), "--moe-hidden 7168")
	require.Contains(t, strings.Join(args, " "), "--repeats 1")
	for _, a := range args {
		if strings.HasPrefix(a, "--") {
			require.Contains(t, string(BaselinesScript), `add_argument("`+a+`"`, "baselines.py does not declare %s", a)
		}
	}
	require.Nil(t, BaselineArgs("b.py", "o.csv", Config{Entries: collectives.Catalogue, Collectives: []string{"barrier"}}), "the barrier has no baseline")
	all := strings.Join(BaselineArgs("b.py", "o.csv", Config{Entries: collectives.Catalogue}), " ")
	require.Contains(t, all, "--collectives all_gather,all_reduce,all_to_all,reduce_scatter,all_reduce_rmsnorm,moe", "everything torch has, by default")
	var own []irisimpl.Entry
	for _, e := range collectives.Catalogue {
		if e.Collective == "broadcast" || e.Collective == "shift" {
			e.Collective = "my_" + e.Collective // a package's own collectives, unknown to the script
		}
		own = append(own, e)
	}
	require.NotContains(t, strings.Join(BaselineArgs("b.py", "o.csv", Config{Entries: own}), " "), "my_")
	require.Nil(t, BaselineArgs("b.py", "o.csv", Config{Entries: own, Collectives: []string{"my_broadcast", "my_shift"}}))

	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: baselines.py not compiled")
	}
	script := filepath.Join(t.TempDir(), "baselines.py")
	require.NoError(t, os.WriteFile(script, BaselinesScript, 0o644))
	out, err := exec.Command(py, "-m", "py_compile", script).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

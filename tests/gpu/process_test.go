//go:build gpu

package gpu_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/irisgen/irisgen/internal/launch"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// TestProcessWorld runs the suite's checks in the multi-process world: in the
// parent it starts this test binary once per GPU the way `irisgen run` does
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), and in each child
// it joins the world and runs the checks as one rank.
func TestProcessWorld(t *testing.T) {
	if os.Getenv("RANK") != "" {
		runProcessRank(t)
		return
	}
	for _, n := range worldSizes(t) {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			args := []string{os.Args[0], "-test.run", "^TestProcessWorld$", "-test.v", "-test.count=1"}
			if err := launch.Run(n, args, os.Stdout, os.Stderr, launch.Options{}); err != nil {
				t.Fatalf("%d ranks: %v", n, err)
			}
		})
	}
}

func runProcessRank(t *testing.T) {
	r, err := irisrt.JoinProcessWorld(moeOpts()) // the largest MoE case needs the room
	if err != nil {
		t.Fatalf("JoinProcessWorld: %v", err)
	}
	defer r.Close()
	if err := hostBarrierRounds(r, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := deviceBarrierRounds(r, 10000); err != nil {
		t.Fatal(err)
	}
	var cases int
	if err := runMatrix(r, nil, &cases); err != nil {
		t.Fatal(err)
	}
	for i := range catalogue {
		vc := &catalogue[i]
		if err := backToBack([]*irisrt.Rank{r}, vc, irisrt.BF16, vc.ops()[0], 4096+3, 100); err != nil {
			t.Fatalf("%s back to back: %v", vc.name(), err)
		}
		if err := checkRules(r, vc); err != nil {
			t.Fatalf("%s rules: %v", vc.name(), err)
		}
	}
	if _, err := convenienceRank(r); err != nil {
		t.Fatalf("convenience calls: %v", err)
	}
	if err := captureRank(r); err != nil {
		t.Fatal(err)
	}
	if err := groupsRank(r); err != nil {
		t.Fatalf("groups: %v", err)
	}
	for _, c := range moeCases() {
		if err := moeRank(r, c); err != nil {
			t.Fatalf("moe %s: %v", c, err)
		}
	}
	if err := moeGraphRank(r); err != nil {
		t.Fatalf("moe graph: %v", err)
	}
	pcases, err := paramProcessRank(r)
	if err != nil {
		t.Fatalf("collectives with parameters: %v", err)
	}
	t.Logf("rank %d of %d: barriers, %d catalogue cases, back-to-back, rules, convenience calls, capture, groups, MoE and %d cases of the collectives with parameters (rules, back-to-back, capture) passed", r.Rank(), r.World(), cases, pcases)
}

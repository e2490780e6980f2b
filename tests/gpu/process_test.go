//go:build gpu

package gpu_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/irisgen/irisgen/internal/launch"
	"github.com/irisgen/irisgen/runtime"
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
			if err := launch.Run(n, 0, args, os.Stdout, os.Stderr); err != nil {
				t.Fatalf("%d ranks: %v", n, err)
			}
		})
	}
}

func runProcessRank(t *testing.T) {
	r, err := runtime.JoinProcessWorld(defaultOpts())
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
	for _, variant := range gatherVariants {
		for _, dt := range dataTypes {
			for _, n := range elementCounts() {
				for _, heapInput := range []bool{true, false} {
					if err := checkGather(r, variant, dt, n, heapInput); err != nil {
						t.Fatalf("all_gather %s %s n=%d heap_input=%v: %v", variant, dt, n, heapInput, err)
					}
				}
			}
		}
	}
	t.Logf("rank %d of %d: barriers and all_gather checks passed", r.Rank(), r.World())
}

//go:build gpu

package gpu_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/irisgen/irisgen/internal/launch"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// TestProcessWorld runs the suite's checks in the multi-process world: in the
// parent it starts this test binary once per GPU the way `irisgen run` does
// (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), and in each child
// it joins the world and runs the checks as one rank (the parts of
// processParts that $IRISGEN_TEST_PARTS picks). `irisgen run -n N --
// gpu.test -test.run '^TestProcessWorld$'` runs the children alone.
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

// processParts are the parts of TestProcessWorld's ranks, in the order
// they run; $IRISGEN_TEST_PARTS (comma-separated) picks some, so run.sh can
// split the multi-process world into shards.
var processParts = []struct {
	name string
	run  func(r *irisrt.Rank) (int, error) // the cases it checked on this rank
}{
	{"barriers", func(r *irisrt.Rank) (int, error) {
		if err := hostBarrierRounds(r, 100); err != nil {
			return 0, err
		}
		_, err := deviceBarrierRounds(r, 10000)
		return 100 + 10000, err
	}},
	{"catalogue", func(r *irisrt.Rank) (int, error) {
		var cases int
		err := runMatrix(r, nil, &cases)
		return cases, err
	}},
	{"b2b", func(r *irisrt.Rank) (int, error) { // back-to-back launches and the rules of every variant
		cases := 0
		for i := range catalogue {
			vc := &catalogue[i]
			if !variantSelected(vc.name()) {
				continue
			}
			if err := backToBack([]*irisrt.Rank{r}, vc, irismodel.BF16, vc.ops()[0], 4096+3, rounds(100)); err != nil {
				return cases, fmt.Errorf("%s back to back: %w", vc.name(), err)
			}
			if err := checkRules(r, vc); err != nil {
				return cases, fmt.Errorf("%s rules: %w", vc.name(), err)
			}
			cases += 100 + 1
		}
		return cases, nil
	}},
	{"convenience", convenienceRank},
	{"capture", captureRank},
	{"groups", groupsRankCount},
	{"moe", func(r *irisrt.Rank) (int, error) {
		cases := 0
		for _, c := range moeCases() {
			if err := moeRank(r, c); err != nil {
				return cases, fmt.Errorf("moe %s: %w", c, err)
			}
			cases++
		}
		return cases, nil
	}},
	{"moegraph", moeGraphRank},
	{"params", paramMatrixRank},
	{"paramrest", paramRestRank},
}

// selectedParts are the names in $IRISGEN_TEST_PARTS (every part when it is
// empty), checked against processParts.
func selectedParts() ([]string, error) {
	var all []string
	for _, p := range processParts {
		all = append(all, p.name)
	}
	v := os.Getenv("IRISGEN_TEST_PARTS")
	if v == "" {
		return all, nil
	}
	picked := strings.Split(v, ",")
	for _, p := range picked {
		if !slices.Contains(all, p) {
			return nil, fmt.Errorf("IRISGEN_TEST_PARTS=%q: no part %q; the parts are %s", v, p, strings.Join(all, ","))
		}
	}
	return picked, nil
}

func runProcessRank(t *testing.T) {
	parts, err := selectedParts()
	if err != nil {
		t.Fatal(err)
	}
	r, err := irisrt.JoinProcessWorld(moeOpts()) // the largest MoE case needs the room
	if err != nil {
		t.Fatalf("JoinProcessWorld: %v", err)
	}
	defer r.Close()
	cases := countCases(t)
	for _, p := range processParts {
		if !slices.Contains(parts, p.name) {
			continue
		}
		start := time.Now()
		n, err := p.run(r)
		cases.add(n)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		t.Logf("rank %d of %d: %s: %d cases passed in %v", r.Rank(), r.World(), p.name, n, time.Since(start).Round(time.Millisecond))
	}
}

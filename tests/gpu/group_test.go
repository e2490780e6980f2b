//go:build gpu

package gpu_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// groupHeap is each group's reservation on the world's heap.
const groupHeap = 256 << 20

// groupsRank makes two groups on r and runs the catalogue in both: group a
// is r's pair (ranks 2i, 2i+1) when the world has 4 or more ranks and an
// even count, else every rank; group b is every rank, so a and b overlap.
// Where ranks share GPUs a group must hold whole GPUs: NewGroup refuses a
// pair that splits one on every rank (*irisrt.SharedGPUGroupError, whose
// rule runtime/irisrt's tests check over every layout), and a is then the
// ranks of r's GPU.
// Every variant is checked in a, then in b, against the group's own
// reference (bf16, 4099 elements, every barrier mode), and then launched
// 30 times back to back in a and b in turn on the one stream, with no host
// sync: plans of two groups over the same ranks must never share a flag.
func groupsRank(r *irisrt.Rank) error {
	_, err := groupsRankCount(r)
	return err
}

// groupsRankCount is groupsRank that also says how many launches it checked
// (checkCase rounds and back-to-back launches, per rank).
func groupsRankCount(r *irisrt.Rank) (int, error) {
	checked := 0
	w := r.World()
	all := make([]int, w)
	for i := range all {
		all[i] = i
	}
	pair := all
	if w >= 4 && w%2 == 0 {
		pair = []int{r.Rank() &^ 1, r.Rank() | 1}
	}
	a, err := r.NewGroup(pair, groupHeap)
	if se := (*irisrt.SharedGPUGroupError)(nil); errors.As(err, &se) {
		// Refused on every rank: the pairs split a GPU the ranks share.
		gpuOf, gerr := sharedGPUs(r)
		if gerr != nil || gpuOf == nil {
			return 0, fmt.Errorf("pair %v refused although no GPU is shared: %v (%v)", pair, se, gerr)
		}
		checked++
		pair = nil // the ranks of r's GPU
		for q := range w {
			if gpuOf(q) == gpuOf(r.Rank()) {
				pair = append(pair, q)
			}
		}
		a, err = r.NewGroup(pair, groupHeap)
	}
	if err != nil {
		return 0, err
	}
	b, err := r.NewGroup(all, groupHeap)
	if err != nil {
		return 0, errors.Join(err, a.Close())
	}
	run := func() error {
		// every variant: groups are one case a variant; shards run TestGroups whole
		for i := range catalogue {
			vc := &catalogue[i]
			for _, g := range []*irisrt.Rank{a, b} {
				if err := checkCase(g, vc, irismodel.BF16, vc.ops()[0], 4096+3, placement{true, true}, allModes); err != nil {
					return fmt.Errorf("%s in a group of %d: %w", vc.name(), g.World(), err)
				}
				checked += len(allModes)
			}
			if err := backToBack([]*irisrt.Rank{a, b}, vc, irismodel.BF16, vc.ops()[0], 4096+3, rounds(30)); err != nil {
				return fmt.Errorf("%s back to back in two groups: %w", vc.name(), err)
			}
			checked += 2 * 30
		}
		return nil
	}
	err = run()
	// Closing is collective over the world, like NewGroup.
	return checked, errors.Join(err, b.Close(), a.Close())
}

// sharedGPUs returns the GPU of every world rank when ranks of r's world
// share GPUs, else nil: with IRISGEN_SHARE_GPUS and more ranks than GPUs,
// rank q runs on GPU q mod the device count in both kinds of world
// (LOCAL_RANK q in a multi-process world on one machine).
func sharedGPUs(r *irisrt.Rank) (func(q int) int, error) {
	share, err := irisrt.ShareGPUsEnv()
	if err != nil {
		return nil, err
	}
	count, err := r.Options().Platform.DeviceCount()
	if err != nil || !share || r.World() <= count {
		return nil, err
	}
	return func(q int) int { return q % count }, nil
}

// TestGroups runs groupsRank in the in-process world.
func TestGroups(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		counts := make([]int, w.Size())
		err := w.Run(func(r *irisrt.Rank) (err error) {
			counts[r.Rank()], err = groupsRankCount(r)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		cases.add(counts[0])
		t.Logf("%d launches checked on each of %d ranks, in two groups (%d variants)", counts[0], w.Size(), len(catalogue))
	})
}

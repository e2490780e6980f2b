//go:build gpu

package gpu_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/internal/probe"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// TestBarrierVisibility checks the device barrier's promise (issue 13 item
// 7): what a rank wrote into a peer's memory before a device barrier, the
// peer sees after it. Every round each rank writes fresh data into its slot
// of every rank's inbox, by a kernel's remote stores (all_gather push in
// barrier mode none, which has no barrier of its own) or by copies to the
// peers' addresses, meets the peers in a device barrier, and copies its
// inbox away: all on the stream with no host sync, eagerly and replayed
// from a graph, in both kinds of world at every world size (2, and 4 on a
// machine with 4 GPUs). Inboxes alternate between two buffers, so a round's
// writes never land in an inbox a slow peer is still copying: the barrier
// of the round in between orders them.
func TestBarrierVisibility(t *testing.T) {
	inBothWorlds(t, "TestBarrierVisibility", defaultOpts(), 4*visRounds, visibilityRank) // rounds of the four styles
}

// visibility is one rank's buffers for TestBarrierVisibility.
type visibility struct {
	r               *irisrt.Rank
	push            *collectives.AllGatherPushPlan
	bar             *collectives.BarrierDevicePlan
	stage, outStage [2]irisrt.Tensor // a double round's inputs and copied inboxes
	inbox           [2]irisrt.Tensor // [world, n] on the heap
	pool, results   irisrt.Tensor    // every round's input, every round's copied inbox
	byKernel        bool
}

const (
	visN      = 64<<10 + 3 // elements of a slot: off the vector width
	visRounds = 200        // rounds per style (an even number: double rounds)
)

func visibilityRank(r *irisrt.Rank) error {
	w, s := int64(r.World()), r.Stream()
	v := &visibility{r: r}
	var err error
	if v.push, err = collectives.NewAllGatherPushPlan(r, irismodel.BF16, visN); err != nil {
		return err
	}
	defer v.push.Close()
	if v.bar, err = newBarrier(r); err != nil {
		return err
	}
	defer v.bar.Close()
	var frees []func()
	defer func() {
		for i := len(frees) - 1; i >= 0; i-- {
			frees[i]()
		}
	}()
	alloc := func(t *irisrt.Tensor, n int64, onHeap bool) {
		if err != nil {
			return
		}
		var free func()
		if *t, free, err = tensor(r, irismodel.BF16, n, onHeap); err == nil {
			frees = append(frees, free)
		}
	}
	for x := range 2 {
		alloc(&v.stage[x], visN, false)
		alloc(&v.outStage[x], w*visN, false)
		alloc(&v.inbox[x], w*visN, true)
	}
	alloc(&v.pool, visRounds*visN, false)
	alloc(&v.results, visRounds*w*visN, false)
	if err != nil {
		return err
	}
	for seed, style := range []struct {
		byKernel, graph bool
	}{{true, false}, {true, true}, {false, false}, {false, true}} {
		v.byKernel = style.byKernel
		if err := v.run(uint64(seed+1), style.graph); err != nil {
			return fmt.Errorf("rank %d, writes by %s, %s: %w", r.Rank(), map[bool]string{true: "a kernel", false: "copies"}[style.byKernel],
				map[bool]string{true: "graph replays", false: "eager"}[style.graph], err)
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
	}
	return nil
}

// doubleRound writes, meets and copies out twice, through inbox 0 then 1.
func (v *visibility) doubleRound() error {
	r, s, dev := v.r, v.r.Stream(), v.r.Device()
	me, es := int64(r.Rank()), int64(2)
	for x := range 2 {
		if v.byKernel {
			if err := v.push.Launch(s, v.stage[x], v.inbox[x], irismodel.BarrierNone); err != nil {
				return err
			}
		} else {
			slot := v.inbox[x].Slice(me*visN, visN).Ptr
			for p := range r.World() {
				if err := dev.CopyDtoDAsync(r.Heap().Peer(slot, p), v.stage[x].Ptr, visN*es, s); err != nil {
					return err
				}
			}
		}
		if err := v.bar.Launch(s, irismodel.BarrierDevice); err != nil {
			return err
		}
		if err := dev.CopyDtoDAsync(v.outStage[x].Ptr, v.inbox[x].Ptr, v.inbox[x].Bytes(), s); err != nil {
			return err
		}
	}
	return nil
}

// run runs visRounds rounds with fresh inputs (from seed) and checks every
// round's inbox.
func (v *visibility) run(seed uint64, graph bool) error {
	r, s, dev := v.r, v.r.Stream(), v.r.Device()
	w, me := r.World(), r.Rank()
	slot := int64(visN * 2)
	host := make([]byte, 0, v.pool.Bytes())
	for k := range visRounds {
		host = append(host, randomBytes(slot, seed, uint64(me), uint64(k))...)
	}
	if err := upload(r, v.pool, host); err != nil {
		return err
	}
	if err := dev.MemsetD8Async(v.results.Ptr, 0xA5, v.results.Bytes(), s); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	var g *irisrt.Graph
	if graph {
		var err error
		if g, err = r.Capture(s, v.doubleRound); err != nil {
			return err
		}
		defer g.Destroy()
	}
	row := int64(w) * visN
	for k := 0; k < visRounds; k += 2 {
		for x := range 2 {
			if err := dev.CopyDtoDAsync(v.stage[x].Ptr, v.pool.Slice(int64(k+x)*visN, visN).Ptr, slot, s); err != nil {
				return err
			}
		}
		var err error
		if graph {
			err = g.Launch(s)
		} else {
			err = v.doubleRound()
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", k, err)
		}
		for x := range 2 {
			if err := dev.CopyDtoDAsync(v.results.Slice(int64(k+x)*row, row).Ptr, v.outStage[x].Ptr, row*2, s); err != nil {
				return err
			}
		}
	}
	if err := syncCheck(r, s); err != nil {
		return err
	}
	got, err := download(r, v.results)
	if err != nil {
		return err
	}
	for k := range visRounds {
		for p := range w {
			off := (int64(k)*row + int64(p)*visN) * 2
			if want := randomBytes(slot, seed, uint64(p), uint64(k)); !bytes.Equal(got[off:off+slot], want) {
				return fmt.Errorf("round %d: rank %d's slot: %s (written before the barrier, not seen after it)", k, p, firstDiff(got[off:off+slot], want, 2))
			}
		}
	}
	return nil
}

// TestProbeProcessWorld runs the capture probe (irisgen probe) as the ranks
// of a multi-process world, capturing in global mode (issue 13 item 7).
func TestProbeProcessWorld(t *testing.T) {
	cases := countCases(t)
	bothWorlds(t, "TestProbeProcessWorld", func(t *testing.T, n int) {
		t.Skip("the in-process probe is `irisgen probe` (tests/gpu/run.sh)")
	}, func(t *testing.T) {
		r, err := irisrt.JoinProcessWorld(probe.Options())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if mode := r.CaptureMode(); mode != gpu.CaptureGlobal {
			t.Fatalf("a process world captures in mode %d, want global", mode)
		}
		res, err := probe.RunRank(r, probe.Config{Entries: collectives.Catalogue, N: 4096 + 3, Replays: 10})
		if err != nil {
			t.Fatal(err)
		}
		cases.add(len(res))
		failed := 0
		for _, x := range res {
			if x.Failed {
				failed++
				t.Errorf("%s %s %s: %s", x.Collective, x.Variant, x.Mode, x.Reason)
			}
		}
		if r.Rank() == 0 {
			fmt.Fprintf(os.Stdout, "probe in a %d-rank process world: %d of %d claims hold\n", r.World(), len(res)-failed, len(res))
		}
	})
}

//go:build gpu

package gpu_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// graphCase is one variant's plan and buffers for capture tests: a pool of
// fresh inputs and room for every replay's result.
type graphCase struct {
	vc            *variantCase
	p             launcher
	in, out       irisrt.Tensor
	pool, results irisrt.Tensor
	inLen, outLen int64
	all           []func(int) []float32
	free          []func()
}

const graphN = 4096 + 3

func newGraphCase(r *irisrt.Rank, vc *variantCase, dt irismodel.DType, rounds int) (*graphCase, error) {
	w := r.World()
	g := &graphCase{vc: vc, inLen: vc.inLen(w, graphN), outLen: vc.outLen(w, graphN)}
	var err error
	if g.p, err = vc.newPlan(r, dt, vc.ops()[0], graphN); err != nil {
		return nil, err
	}
	g.free = append(g.free, func() { g.p.Close() })
	alloc := func(n int64, heap bool) irisrt.Tensor {
		if err != nil {
			return irisrt.Tensor{}
		}
		var t irisrt.Tensor
		var f func()
		t, f, err = tensor(r, dt, n, heap)
		if err == nil {
			g.free = append(g.free, f)
		}
		return t
	}
	// An input the variant reads remotely lives off the heap, so the
	// captured launch includes its import copy.
	g.in = alloc(g.inLen, !vc.importIn())
	g.out = alloc(g.outLen, true)
	g.pool = alloc(g.inLen*int64(rounds), false)
	g.results = alloc(g.outLen*int64(rounds), false)
	if err != nil {
		g.close()
		return nil, err
	}
	host := make([]byte, 0, g.pool.Bytes())
	for k := range rounds {
		g.all = append(g.all, inputs(dt, g.inLen, uint64(0x6a7)^uint64(len(vc.name())), uint64(k)))
		host = append(host, encode(dt, g.all[k](r.Rank()))...)
	}
	if err := upload(r, g.pool, host); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

func (g *graphCase) close() {
	for i := len(g.free) - 1; i >= 0; i-- {
		g.free[i]()
	}
}

// before copies round k's input into the input tensor on s; after copies
// the output away.
func (g *graphCase) before(r *irisrt.Rank, s gpu.Stream, k int) error {
	return r.Device().CopyDtoDAsync(g.in.Ptr, g.pool.Slice(int64(k)*g.inLen, g.inLen).Ptr, g.in.Bytes(), s)
}

func (g *graphCase) after(r *irisrt.Rank, s gpu.Stream, k int) error {
	return r.Device().CopyDtoDAsync(g.results.Slice(int64(k)*g.outLen, g.outLen).Ptr, g.out.Ptr, g.out.Bytes(), s)
}

func (g *graphCase) verify(r *irisrt.Rank, rounds int) error {
	b, err := download(r, g.results)
	if err != nil {
		return err
	}
	dt := g.in.DType
	got := decode(dt, b)
	for k := range rounds {
		if err := g.vc.checkResult(got[int64(k)*g.outLen:int64(k+1)*g.outLen], dt, g.vc.ops()[0], r.World(), r.Rank(), graphN, g.all[k]); err != nil {
			return fmt.Errorf("%s round %d of %d: %w", g.vc.name(), k, rounds, err)
		}
	}
	return nil
}

// replayOne captures one launch of vc and replays it `rounds` times with
// fresh input before every replay; every 10th round runs eagerly instead.
func replayOne(r *irisrt.Rank, vc *variantCase, rounds int) error {
	tracef(r, "replayOne %s: %d rounds", vc.name(), rounds)
	defer tracef(r, "replayOne %s: done", vc.name())
	g, err := newGraphCase(r, vc, irismodel.BF16, rounds)
	if err != nil {
		return err
	}
	defer g.close()
	s := r.Stream()
	exec, err := r.Capture(s, func() error {
		// A host-barrier launch is refused inside the capture and leaves
		// the capture usable.
		var ce *irisrt.CaptureError
		if err := g.p.Launch(s, g.in, g.out, irismodel.BarrierHost); !errors.As(err, &ce) {
			return fmt.Errorf("host-barrier launch while capturing: got %v, want *irisrt.CaptureError", err)
		}
		return g.p.Launch(s, g.in, g.out, irismodel.BarrierDevice)
	})
	if err != nil {
		return fmt.Errorf("%s: capture: %w", vc.name(), err)
	}
	defer exec.Destroy()
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	for k := range rounds {
		if err := g.before(r, s, k); err != nil {
			return err
		}
		if k%10 == 9 {
			err = g.p.Launch(s, g.in, g.out, irismodel.BarrierDevice)
		} else {
			err = exec.Launch(s)
		}
		if err != nil {
			return fmt.Errorf("%s round %d: %w", vc.name(), k, err)
		}
		if err := g.after(r, s, k); err != nil {
			return err
		}
	}
	if err := syncCheck(r, s); err != nil {
		return fmt.Errorf("%s: %w", vc.name(), err)
	}
	if err := g.verify(r, rounds); err != nil {
		return err
	}
	return r.HostBarrier(s)
}

// replayAll captures one launch of every variant, in sequence, into one
// graph and replays it with fresh inputs, eager rounds in between.
func replayAll(r *irisrt.Rank, rounds int) error {
	tracef(r, "replayAll: %d rounds", rounds)
	defer tracef(r, "replayAll: done")
	var gs []*graphCase
	defer func() {
		for _, g := range gs {
			g.close()
		}
	}()
	for i := range catalogue {
		if !variantSelected(catalogue[i].name()) {
			continue
		}
		g, err := newGraphCase(r, &catalogue[i], irismodel.BF16, rounds)
		if err != nil {
			return err
		}
		gs = append(gs, g)
	}
	s := r.Stream()
	launchAll := func() error {
		for _, g := range gs {
			if err := g.p.Launch(s, g.in, g.out, irismodel.BarrierDevice); err != nil {
				return fmt.Errorf("%s: %w", g.vc.name(), err)
			}
		}
		return nil
	}
	exec, err := r.Capture(s, launchAll)
	if err != nil {
		return fmt.Errorf("capturing %d collectives: %w", len(gs), err)
	}
	defer exec.Destroy()
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	for k := range rounds {
		for _, g := range gs {
			if err := g.before(r, s, k); err != nil {
				return err
			}
		}
		if k%10 == 9 {
			err = launchAll()
		} else {
			err = exec.Launch(s)
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", k, err)
		}
		for _, g := range gs {
			if err := g.after(r, s, k); err != nil {
				return err
			}
		}
	}
	if err := syncCheck(r, s); err != nil {
		return err
	}
	for _, g := range gs {
		if err := g.verify(r, rounds); err != nil {
			return err
		}
	}
	return r.HostBarrier(s)
}

// captureRank is the capture suite of one rank: every variant replayed 100
// times (one_shot and two_shot 1000 times), then every variant in one graph.
// It returns the rounds it checked (a round of the one graph counts once a
// variant).
func captureRank(r *irisrt.Rank) (int, error) {
	checked, selected := 0, 0
	for i := range catalogue {
		vc := &catalogue[i]
		if !variantSelected(vc.name()) {
			continue
		}
		n := rounds(100)
		if vc.coll == "all_reduce" && (vc.variant == "one_shot" || vc.variant == "two_shot") {
			n = rounds(1000)
		}
		if err := replayOne(r, vc, n); err != nil {
			return checked, err
		}
		checked += n
		selected++
	}
	if err := replayAll(r, rounds(100)); err != nil {
		return checked, err
	}
	return checked + 100*selected, nil
}

// TestCapture checks that every device-barrier variant is capturable: it
// captures a launch (the stream really capturing), replays it with fresh
// data before every replay, mixes eager launches in, and checks every
// result; then one graph with every variant, replayed 100 times.
func TestCapture(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		counts := make([]int, w.Size())
		if err := w.Run(func(r *irisrt.Rank) (err error) {
			counts[r.Rank()], err = captureRank(r)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		cases.add(counts[0])
	})
}

package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/irisgen/irisgen/generated/collectives"
	irt "github.com/irisgen/irisgen/runtime"
	"github.com/irisgen/irisgen/runtime/gpu"
)

// Config says what Run measures.
type Config struct {
	World       int
	Sizes       []int64  // nccl-tests sizes in bytes
	DTypes      []string // f32, f16, bf16
	Modes       []string // eager, graph
	Collectives []string // empty: all
	Warmup      int
	HeapBytes   int64
	Log         io.Writer // progress, one line a measurement
}

type launcher interface {
	Launch(s gpu.Stream, input, output irt.Tensor, mode irt.Barrier) error
	Close() error
}

// target is one irisgen variant the benchmark times.
type target struct {
	collective, variant string
	// elems is the per-rank n of the plan for an nccl-tests size.
	elems         func(bytes int64, world int, es int64) int64
	inLen, outLen func(world int, n int64) int64
	maxBytes      int64 // larger sizes are skipped (slow by design), 0: no limit
	newPlan       func(r *irt.Rank, dt irt.DType, n int64) (launcher, error)
}

func perRank(bytes int64, _ int, es int64) int64 { return bytes / es }
func shard(bytes int64, w int, es int64) int64   { return bytes / es / int64(w) }
func same(_ int, n int64) int64                  { return n }
func times(w int, n int64) int64                 { return int64(w) * n }

func as[P launcher](p P, err error) (launcher, error) {
	if err != nil {
		return nil, err
	}
	return p, nil
}

var targets = []target{
	{"all_reduce", "one_shot", perRank, same, same, 0, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllReduceOneShotPlan(r, dt, collectives.AllReduceOpSum, n))
	}},
	{"all_reduce", "two_shot", perRank, same, same, 0, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllReduceTwoShotPlan(r, dt, collectives.AllReduceOpSum, n))
	}},
	{"all_reduce", "ring", perRank, same, same, 0, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllReduceRingPlan(r, dt, collectives.AllReduceOpSum, n))
	}},
	{"all_reduce", "atomic", perRank, same, same, 4 << 20, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllReduceAtomicPlan(r, dt, collectives.AllReduceOpSum, n))
	}},
	{"all_reduce", "spinlock", perRank, same, same, 4 << 20, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllReduceSpinlockPlan(r, dt, collectives.AllReduceOpSum, n))
	}},
	{"all_gather", "push", shard, same, times, 0, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllGatherPushPlan(r, dt, n))
	}},
	{"all_gather", "pull", shard, same, times, 0, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllGatherPullPlan(r, dt, n))
	}},
	{"reduce_scatter", "pull", shard, times, same, 0, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewReduceScatterPullPlan(r, dt, collectives.ReduceScatterOpSum, n))
	}},
	{"all_to_all", "push", shard, times, times, 0, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllToAllPushPlan(r, dt, n))
	}},
	{"all_to_all", "pull", shard, times, times, 0, func(r *irt.Rank, dt irt.DType, n int64) (launcher, error) {
		return as(collectives.NewAllToAllPullPlan(r, dt, n))
	}},
}

// Iterations is how many calls one timed batch holds: many for small
// messages, few for large ones (baselines.py uses the same rule).
func Iterations(bytes int64) int {
	switch {
	case bytes <= 1<<20:
		return 100
	case bytes <= 16<<20:
		return 30
	}
	return 8
}

const graphReplays = 5

// Run times every selected irisgen variant in an in-process world of
// cfg.World GPUs and returns one row per measurement.
func Run(cfg Config, device, date string) ([]Row, error) {
	w, err := irt.NewLocalWorld(cfg.World, irt.Options{HeapBytes: cfg.HeapBytes, Timeout: 20 * time.Second})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var rows []Row
	add := func(r Row) {
		r.Impl, r.World, r.Device, r.Date = "irisgen", cfg.World, device, date
		r.SetBandwidth()
		rows = append(rows, r)
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "irisgen %-14s %-9s %-4s %10d %-5s %10.2f us %s\n", r.Collective, r.Variant, r.DType, r.Bytes, r.Mode, r.TimeUS, r.Note)
		}
	}
	if selected(cfg.Collectives, "barrier") {
		for _, mode := range cfg.Modes {
			us, err := slowest(w, func(r *irt.Rank) (float64, error) { return timeBarrier(r, mode, cfg.Warmup) })
			if err != nil {
				return rows, fmt.Errorf("barrier %s: %w", mode, err)
			}
			add(Row{Collective: "barrier", Variant: "device", DType: "-", Mode: mode, TimeUS: us})
		}
	}
	for _, dts := range cfg.DTypes {
		dt, err := irt.ParseDType(dts)
		if err != nil {
			return rows, err
		}
		for _, t := range targets {
			if !selected(cfg.Collectives, t.collective) {
				continue
			}
			for _, size := range cfg.Sizes {
				for _, mode := range cfg.Modes {
					row := Row{Collective: t.collective, Variant: t.variant, DType: dts, Bytes: size, Mode: mode, TimeUS: math.NaN()}
					n := t.elems(size, cfg.World, dt.Size())
					switch {
					case t.maxBytes > 0 && size > t.maxBytes:
						row.Note = fmt.Sprintf("skipped above %s (slow by design)", HumanBytes(t.maxBytes))
						add(row)
						continue
					case n < 1:
						row.Note = "size below one element per rank"
						add(row)
						continue
					}
					us, err := slowest(w, func(r *irt.Rank) (float64, error) { return timeTarget(r, t, dt, n, size, mode, cfg.Warmup) })
					if err != nil {
						return rows, fmt.Errorf("%s %s %s %d bytes %s: %w", t.collective, t.variant, dts, size, mode, err)
					}
					row.TimeUS = us
					add(row)
				}
			}
		}
	}
	return rows, nil
}

func selected(list []string, c string) bool {
	if len(list) == 0 {
		return true
	}
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// slowest runs fn on every rank and returns the largest time.
func slowest(w *irt.World, fn func(r *irt.Rank) (float64, error)) (float64, error) {
	us := make([]float64, w.Size())
	err := w.Run(func(r *irt.Rank) error {
		t, err := fn(r)
		us[r.Rank()] = t
		return err
	})
	m := 0.0
	for _, t := range us {
		m = max(m, t)
	}
	return m, err
}

func timeTarget(r *irt.Rank, t target, dt irt.DType, n, size int64, mode string, warmup int) (float64, error) {
	p, err := t.newPlan(r, dt, n)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	h := r.Heap()
	in, err := h.Alloc(dt, t.inLen(r.World(), n))
	if err != nil {
		return 0, err
	}
	defer h.Free(in)
	out, err := h.Alloc(dt, t.outLen(r.World(), n))
	if err != nil {
		return 0, err
	}
	defer h.Free(out)
	s := r.Stream()
	return timeCalls(r, mode, Iterations(size), warmup, func() error { return p.Launch(s, in, out, irt.BarrierDevice) })
}

func timeBarrier(r *irt.Rank, mode string, warmup int) (float64, error) {
	p, err := collectives.NewBarrierDevicePlan(r)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	s := r.Stream()
	return timeCalls(r, mode, 1000, warmup, func() error { return p.Launch(s, irt.BarrierDevice) })
}

// timeCalls times call on r's stream with GPU events: k back-to-back calls
// (eager), or a graph of k calls replayed graphReplays times (graph). Every
// rank starts its timed batch after a host barrier.
func timeCalls(r *irt.Rank, mode string, k, warmup int, call func() error) (us float64, err error) {
	dev, s := r.Device(), r.Stream()
	for range warmup {
		if err := call(); err != nil {
			return 0, err
		}
	}
	if err := sync(r); err != nil {
		return 0, err
	}
	start, err := dev.NewEvent(true)
	if err != nil {
		return 0, err
	}
	defer dev.DestroyEvent(start)
	end, err := dev.NewEvent(true)
	if err != nil {
		return 0, err
	}
	defer dev.DestroyEvent(end)
	calls := k
	batch := func() error {
		for range k {
			if err := call(); err != nil {
				return err
			}
		}
		return nil
	}
	switch mode {
	case "eager":
	case "graph":
		// Relaxed: the other ranks of this process keep syncing meanwhile.
		if err := dev.BeginCapture(s, gpu.CaptureRelaxed); err != nil {
			return 0, err
		}
		berr := batch()
		g, eerr := dev.EndCapture(s)
		if err := errors.Join(berr, eerr); err != nil {
			return 0, err
		}
		defer dev.DestroyGraph(g)
		exec, err := dev.Instantiate(g)
		if err != nil {
			return 0, err
		}
		defer dev.DestroyGraphExec(exec)
		if err := dev.LaunchGraph(exec, s); err != nil { // warm the graph
			return 0, err
		}
		if err := sync(r); err != nil {
			return 0, err
		}
		calls = k * graphReplays
		batch = func() error {
			for range graphReplays {
				if err := dev.LaunchGraph(exec, s); err != nil {
					return err
				}
			}
			return nil
		}
	default:
		return 0, fmt.Errorf("unknown mode %q (want eager or graph)", mode)
	}
	if err := r.HostBarrier(s); err != nil {
		return 0, err
	}
	if err := dev.RecordEvent(start, s); err != nil {
		return 0, err
	}
	if err := batch(); err != nil {
		return 0, err
	}
	if err := dev.RecordEvent(end, s); err != nil {
		return 0, err
	}
	if err := sync(r); err != nil {
		return 0, err
	}
	d, err := dev.Elapsed(start, end)
	if err != nil {
		return 0, err
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(calls), nil
}

func sync(r *irt.Rank) error {
	if err := r.Device().StreamSynchronize(r.Stream()); err != nil {
		return err
	}
	return r.Check()
}

package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/irisrt"
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

// slowByDesign caps the sizes of variants whose algorithm is not meant for
// large messages (element atomics, lock-protected read-modify-write).
var slowByDesign = map[string]int64{"all_reduce/atomic": 4 << 20, "all_reduce/spinlock": 4 << 20}

// elems is the size parameter of e for an nccl-tests size: the largest user
// tensor holds `bytes` (all_gather's output, reduce_scatter's input, all_to_all's
// per-rank total, all_reduce's buffer); e has one size parameter (Run
// benchmarks no other).
func elems(e collectives.Entry, bytes int64, world int, es int64) int64 {
	per := int64(0)
	for _, t := range e.Tensors {
		per = max(per, t.Numel(world, []int64{1}))
	}
	if per == 0 {
		return 0
	}
	return bytes / es / per
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
	w, err := irisrt.NewLocalWorld(cfg.World, irisrt.Options{HeapBytes: cfg.HeapBytes, Timeout: 20 * time.Second})
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
			us, err := slowest(w, func(r *irisrt.Rank) (float64, error) { return timeBarrier(r, mode, cfg.Warmup) })
			if err != nil {
				return rows, fmt.Errorf("barrier %s: %w", mode, err)
			}
			add(Row{Collective: "barrier", Variant: "device", DType: "-", Mode: mode, TimeUS: us})
		}
	}
	for _, dts := range cfg.DTypes {
		dt, err := irisrt.ParseDType(dts)
		if err != nil {
			return rows, err
		}
		for _, e := range collectives.Catalogue {
			if e.Collective == "barrier" || len(e.Sizes) != 1 || !selected(cfg.Collectives, e.Collective) || !slices.Contains(e.DTypes, dt) {
				continue
			}
			op := ""
			if len(e.Ops) > 0 {
				op = e.Ops[0]
			}
			for _, size := range cfg.Sizes {
				for _, mode := range cfg.Modes {
					row := Row{Collective: e.Collective, Variant: e.Variant, DType: dts, Bytes: size, Mode: mode, TimeUS: math.NaN()}
					n := elems(e, size, cfg.World, dt.Size())
					limit := slowByDesign[e.Collective+"/"+e.Variant]
					switch {
					case limit > 0 && size > limit:
						row.Note = fmt.Sprintf("skipped above %s (slow by design)", HumanBytes(limit))
						add(row)
						continue
					case n < 1:
						row.Note = "size below one element per rank"
						add(row)
						continue
					}
					us, err := slowest(w, func(r *irisrt.Rank) (float64, error) { return timeEntry(r, e, dt, op, n, size, mode, cfg.Warmup) })
					if err != nil {
						return rows, fmt.Errorf("%s %s %s %d bytes %s: %w", e.Collective, e.Variant, dts, size, mode, err)
					}
					row.TimeUS = us
					add(row)
				}
			}
		}
	}
	if selected(cfg.Collectives, "moe") {
		if err := runMoE(w, cfg, add); err != nil {
			return rows, err
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
func slowest(w *irisrt.World, fn func(r *irisrt.Rank) (float64, error)) (float64, error) {
	us := make([]float64, w.Size())
	err := w.Run(func(r *irisrt.Rank) error {
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

// timeEntry times one variant on one rank, its tensors on the heap.
func timeEntry(r *irisrt.Rank, e collectives.Entry, dt irisrt.DType, op string, n, size int64, mode string, warmup int) (float64, error) {
	p, err := e.New(r, dt, op, []int64{n})
	if err != nil {
		return 0, err
	}
	defer p.Close()
	ts, free, err := e.Alloc(r, dt, []int64{n})
	if err != nil {
		return 0, err
	}
	defer free()
	s := r.Stream()
	return timeCalls(r, mode, Iterations(size), warmup, func() error { return p.LaunchTensors(s, ts, irisrt.BarrierDevice) })
}

func timeBarrier(r *irisrt.Rank, mode string, warmup int) (float64, error) {
	e, ok := collectives.Lookup("barrier", "device")
	if !ok {
		return 0, fmt.Errorf("the catalogue has no barrier/device")
	}
	p, err := e.New(r, 0, "", nil)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	s := r.Stream()
	return timeCalls(r, mode, 1000, warmup, func() error { return p.LaunchTensors(s, nil, irisrt.BarrierDevice) })
}

// timeCalls times call on r's stream with GPU events: k back-to-back calls
// (eager), or a graph of k calls replayed graphReplays times (graph). Every
// rank starts its timed batch after a host barrier.
func timeCalls(r *irisrt.Rank, mode string, k, warmup int, call func() error) (us float64, err error) {
	dev, s := r.Device(), r.Stream()
	for range warmup {
		if err := call(); err != nil {
			return 0, err
		}
	}
	if err := drain(r); err != nil {
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
		exec, err := r.Capture(s, batch)
		if err != nil {
			return 0, err
		}
		defer exec.Destroy()
		if err := dev.LaunchGraph(exec.Exec(), s); err != nil { // warm the graph (the host barrier below waits for it)
			return 0, err
		}
		calls = k * graphReplays
		batch = func() error {
			for range graphReplays {
				if err := dev.LaunchGraph(exec.Exec(), s); err != nil {
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
	if err := drain(r); err != nil {
		return 0, err
	}
	d, err := dev.Elapsed(start, end)
	if err != nil {
		return 0, err
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(calls), nil
}

// drain waits for r's stream and reads its error record.
func drain(r *irisrt.Rank) error {
	if err := r.Device().StreamSynchronize(r.Stream()); err != nil {
		return err
	}
	return r.Check()
}

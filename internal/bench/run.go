package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
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
	Repeats     int // timed batches per cell: the median is reported, the spread kept
	HeapBytes   int64
	LinkGBps    float64   // link rate the MoE rows are compared with (0: DefaultLinkGBps)
	Log         io.Writer // progress, one line a measurement
}

// slowByDesign caps the sizes of variants whose algorithm is not meant for
// large messages (element atomics, lock-protected read-modify-write).
var slowByDesign = map[string]int64{"all_reduce/atomic": 4 << 20, "all_reduce/spinlock": 4 << 20}

// elems is the size parameter of e for an nccl-tests size: the largest user
// tensor holds `bytes` (all_gather's and gather's output, reduce_scatter's
// and scatter's input, all_to_all's per-rank total, the buffer of
// all_reduce, broadcast, reduce, shift and send_recv); e has one size
// parameter (Run benchmarks no other).
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

// DefaultRepeats is how many timed batches a cell gets unless Config says.
const DefaultRepeats = 7

// Stats summarises the per-call times of a cell's timed batches, each the
// slowest rank's.
type Stats struct {
	Median, Min, Max float64
	N                int
}

// Summarize returns the median, minimum and maximum of us (NaN when empty).
func Summarize(us []float64) Stats {
	if len(us) == 0 {
		return Stats{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	s := slices.Clone(us)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stats{Median: m, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// set records st in r.
func (st Stats) set(r *Row) { r.TimeUS, r.MinUS, r.MaxUS, r.Repeats = st.Median, st.Min, st.Max, st.N }

func (c Config) repeats() int {
	if c.Repeats > 0 {
		return c.Repeats
	}
	return DefaultRepeats
}

// Run times every selected irisgen variant in an in-process world of
// cfg.World GPUs and returns one row per measurement.
func Run(cfg Config, device, date string) ([]Row, error) {
	w, err := irisrt.NewLocalWorld(cfg.World, irisrt.Options{HeapBytes: cfg.HeapBytes, Timeout: 20 * time.Second})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	return RunOn(w, cfg, device, date)
}

// RunOn is Run in the world w (cfg.World and cfg.HeapBytes are w's).
func RunOn(w *irisrt.World, cfg Config, device, date string) ([]Row, error) {
	cfg.World = w.Size()
	if w.SharesGPUs() {
		return nil, fmt.Errorf("bench: the world of %d ranks shares GPUs (IRISGEN_SHARE_GPUS), so its timings would mean nothing; unset IRISGEN_SHARE_GPUS and bench on as many GPUs as ranks", cfg.World)
	}
	var rows []Row
	add := func(r Row) {
		if r.Impl == "" {
			r.Impl = "irisgen"
		}
		r.World, r.Device, r.Date = cfg.World, device, date
		r.SetBandwidth()
		rows = append(rows, r)
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "%s %-14s %-9s %-4s %10d %-5s %10.2f us %s\n", r.Impl, r.Collective, r.Variant, r.DType, r.Bytes, r.Mode, r.TimeUS, r.Note)
		}
	}
	if selected(cfg.Collectives, "barrier") {
		for _, mode := range cfg.Modes {
			st, err := slowest(w, func(r *irisrt.Rank) ([]float64, error) { return timeBarrier(r, mode, cfg.Warmup, cfg.repeats()) })
			if err != nil {
				return rows, fmt.Errorf("barrier %s: %w", mode, err)
			}
			row := Row{Collective: "barrier", Variant: "device", DType: "-", Mode: mode}
			st.set(&row)
			add(row)
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
					st, err := slowest(w, func(r *irisrt.Rank) ([]float64, error) {
						return timeEntry(r, e, dt, op, n, size, mode, cfg.Warmup, cfg.repeats())
					})
					if err != nil {
						return rows, fmt.Errorf("%s %s %s %d bytes %s: %w", e.Collective, e.Variant, dts, size, mode, err)
					}
					st.set(&row)
					add(row)
				}
			}
		}
	}
	if selected(cfg.Collectives, "all_reduce_rmsnorm") {
		if err := runRMSNorm(w, cfg, add); err != nil {
			return rows, err
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

// slowest runs fn on every rank, each returning the per-call time of every
// timed batch, and summarises the batches' slowest ranks: batch i of every
// rank starts after the same host barrier, so its time is its slowest rank's.
func slowest(w *irisrt.World, fn func(r *irisrt.Rank) ([]float64, error)) (Stats, error) {
	us := make([][]float64, w.Size())
	err := w.Run(func(r *irisrt.Rank) error {
		t, err := fn(r)
		us[r.Rank()] = t
		return err
	})
	return Summarize(slowestBatches(us)), err
}

// slowestBatches is, per batch, the largest time over the ranks.
func slowestBatches(perRank [][]float64) []float64 {
	var out []float64
	for _, ts := range perRank {
		for i, t := range ts {
			if i == len(out) {
				out = append(out, t)
			}
			out[i] = max(out[i], t)
		}
	}
	return out
}

// timeEntry times one variant on one rank, its tensors on the heap, with
// the parameters of Entry.SampleParams 0 (root 0; src 0, dst 1; a ring
// shift of +1, as NCCL's cells): a rank passes the zero Tensor for a
// tensor only another rank uses.
func timeEntry(r *irisrt.Rank, e collectives.Entry, dt irisrt.DType, op string, n, size int64, mode string, warmup, repeats int) ([]float64, error) {
	p, err := e.New(r, dt, op, []int64{n})
	if err != nil {
		return nil, err
	}
	defer p.Close()
	ts, free, err := e.Alloc(r, dt, []int64{n})
	if err != nil {
		return nil, err
	}
	defer free()
	s := r.Stream()
	ps := e.SampleParams(r.World(), 0)
	passed := e.TensorsFor(r.Rank(), ts, ps)
	return timeCalls(r, mode, Iterations(size), warmup, repeats, func() error { return p.LaunchParams(s, passed, ps, irisrt.BarrierDevice) })
}

func timeBarrier(r *irisrt.Rank, mode string, warmup, repeats int) ([]float64, error) {
	e, ok := collectives.Lookup("barrier", "device")
	if !ok {
		return nil, fmt.Errorf("the catalogue has no barrier/device")
	}
	p, err := e.New(r, 0, "", nil)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	s := r.Stream()
	return timeCalls(r, mode, 1000, warmup, repeats, func() error { return p.LaunchTensors(s, nil, irisrt.BarrierDevice) })
}

// timeCalls times call on r's stream with GPU events and returns the
// per-call time of each of `repeats` batches: k back-to-back calls (eager),
// or one replay of a graph of k calls (graph). Every rank starts each batch
// after a host barrier.
func timeCalls(r *irisrt.Rank, mode string, k, warmup, repeats int, call func() error) ([]float64, error) {
	dev, s := r.Device(), r.Stream()
	batch := func() error {
		for range k {
			if err := call(); err != nil {
				return err
			}
		}
		return nil
	}
	var run func() error
	switch mode {
	case "eager":
		run = batch
	case "graph":
		exec, err := r.Capture(s, batch)
		if err != nil {
			return nil, err
		}
		defer exec.Destroy()
		run = func() error { return dev.LaunchGraph(exec.Exec(), s) }
	default:
		return nil, fmt.Errorf("unknown mode %q (want eager or graph)", mode)
	}
	return timeBatches(dev, s, k, repeats, func() error { return r.HostBarrier(s) }, func() error {
		for range warmup {
			if err := call(); err != nil {
				return err
			}
		}
		return drain(r)
	}, run, func() error { return drain(r) })
}

// timeBatches warms up, then times `repeats` runs of run (each k calls)
// between events on s, each after barrier, and returns the per-call
// microseconds of each. done waits for s and reports device errors. It is
// shared by irisgen's and NCCL's measurements, so both are timed alike.
func timeBatches(dev gpu.Device, s gpu.Stream, k, repeats int, barrier, warm, run, done func() error) ([]float64, error) {
	if err := warm(); err != nil {
		return nil, err
	}
	if err := run(); err != nil { // one untimed run: a graph's first launch uploads it
		return nil, err
	}
	if err := done(); err != nil {
		return nil, err
	}
	start, err := dev.NewEvent(true)
	if err != nil {
		return nil, err
	}
	defer dev.DestroyEvent(start)
	end, err := dev.NewEvent(true)
	if err != nil {
		return nil, err
	}
	defer dev.DestroyEvent(end)
	us := make([]float64, 0, repeats)
	for range repeats {
		if err := barrier(); err != nil {
			return nil, err
		}
		if err := dev.RecordEvent(start, s); err != nil {
			return nil, err
		}
		if err := run(); err != nil {
			return nil, err
		}
		if err := dev.RecordEvent(end, s); err != nil {
			return nil, err
		}
		if err := done(); err != nil {
			return nil, err
		}
		d, err := dev.Elapsed(start, end)
		if err != nil {
			return nil, err
		}
		us = append(us, float64(d.Nanoseconds())/1e3/float64(k))
	}
	return us, nil
}

// drain waits for r's stream and reads its error record.
func drain(r *irisrt.Rank) error {
	if err := r.Device().StreamSynchronize(r.Stream()); err != nil {
		return err
	}
	return r.Check()
}

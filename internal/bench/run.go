package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Config says what RunOn measures.
type Config struct {
	World int
	// Entries are the variants to time: the catalogue of one or more
	// generated packages (irisimpl.Table.Entries), every collective with a
	// distinct name.
	Entries []irisimpl.Entry
	Sizes   []int64  // nccl-tests sizes in bytes
	DTypes  []string // f32, f16, bf16
	Modes   []string // eager, graph
	// Collectives selects collectives of Entries and scenarios by name
	// (Names lists them); a collective a scenario times selects it. Empty:
	// all.
	Collectives []string
	Warmup      int
	Repeats     int // timed batches per cell: the median is reported, the spread kept
	HeapBytes   int64
	LinkGBps    float64 // link rate the MoE rows are compared with (0: DefaultLinkGBps)
	// Barrier, when set, is the barrier mode every launch is timed in
	// instead of benchMode's (bench -barrier): what the barriers cost. A
	// variant without that mode is left untimed, its row saying so; the
	// rows carry the mode (Row.Barrier).
	Barrier *irismodel.Barrier
	Log     io.Writer // progress, one line a measurement
}

// sweepSizes are e's size parameters at an nccl-tests size of bytes, the
// rule for any collective: the last is the largest value at which e's
// largest user tensor holds at most bytes in the plan's data type (es
// bytes an element), the others 1. From the shapes alone this gives
// nccl-tests' sizes: all_gather's and gather's output, reduce_scatter's
// and scatter's input, all_to_all's per-rank total, the buffer of
// all_reduce, broadcast, reduce, shift and send_recv. ok is false when not
// even 1 fits (the size is below one element per rank).
func sweepSizes(e irisimpl.Entry, bytes int64, world int, es int64) (sizes []int64, ok bool) {
	sizes = make([]int64, len(e.Sizes))
	for i := range sizes {
		sizes[i] = 1
	}
	if len(sizes) == 0 {
		return sizes, true
	}
	fits := func(n int64) bool {
		sizes[len(sizes)-1] = n
		for _, t := range e.Tensors {
			if k := t.Numel(world, sizes); k < 0 || k > bytes/es {
				return false
			}
		}
		return true
	}
	// The largest n in [1, bytes/es] that fits (a tensor grows with n).
	lo, hi := int64(0), bytes/es
	for lo < hi {
		if mid := hi - (hi-lo)/2; fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	sizes[len(sizes)-1] = lo
	return sizes, lo >= 1
}

// benchMode is the barrier mode e is timed in: device where it has it,
// else its first capturable mode, else its default.
func benchMode(e irisimpl.Entry) irismodel.Barrier {
	switch {
	case slices.Contains(e.Barriers, irismodel.BarrierDevice):
		return irismodel.BarrierDevice
	case len(e.Capturable) > 0:
		return e.Capturable[0]
	}
	return e.Barriers[0]
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

// fixedIterations is the calls of a batch of a collective without a size
// (the barrier).
const fixedIterations = 1000

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

// RunOn times every selected variant in the in-process world w (cfg.World
// and cfg.HeapBytes are w's) and returns one row per measurement: first
// the collectives without a size (the barrier), then the size sweep of
// every other collective no scenario takes, dtype by dtype, then the
// scenarios.
func RunOn(w *irisrt.World, cfg Config, device, date string) ([]Row, error) {
	cfg.World = w.Size()
	if w.SharesGPUs() {
		return nil, fmt.Errorf("bench: the world of %d ranks shares GPUs (IRISGEN_SHARE_GPUS), so its timings would mean nothing; unset IRISGEN_SHARE_GPUS and bench on as many GPUs as ranks", cfg.World)
	}
	if len(cfg.Entries) == 0 {
		return nil, fmt.Errorf("bench: no collectives to time (Config.Entries is empty)")
	}
	sel := cfg.selection()
	if cfg.Barrier != nil {
		// A chain's launches are timeCell's; the others launch in modes of
		// their own (MoE through moepair).
		for _, sc := range sel.scenarios {
			if sc.chain == nil {
				return nil, fmt.Errorf("bench: -barrier %s does not apply to the %s scenario, whose launches choose their own barrier modes; leave it out of -collectives", *cfg.Barrier, sc.name)
			}
		}
	}
	var rows []Row
	// The log gives each row the wall time it took to measure (since the
	// row before), so that a run cut short by a call's limit shows where
	// its time went.
	last := time.Now()
	add := func(r Row) {
		if r.Impl == "" {
			r.Impl = "irisgen"
		}
		r.World, r.Device, r.Date = cfg.World, device, date
		r.SetBandwidth()
		rows = append(rows, r)
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "%s %-14s %-9s %-4s %10d %-5s %10.2f us [%.2f s] %s\n", r.Impl, r.Collective, r.Variant, r.DType, r.Bytes, r.Mode, r.TimeUS, time.Since(last).Seconds(), r.Note)
		}
		last = time.Now()
	}
	for _, e := range sel.fixed {
		dt, dts := irismodel.DType(0), "-"
		if len(e.DTypes) > 0 {
			dt, dts = e.DTypes[0], e.DTypes[0].String()
		}
		for _, mode := range cfg.Modes {
			row := Row{Collective: e.Collective, Variant: e.Variant, DType: dts, Mode: mode, TimeUS: math.NaN()}
			if err := timeCell(w, cfg, &row, []step{{e: e, dt: dt, sizes: []int64{}}}, fixedIterations); err != nil {
				return rows, err
			}
			add(row)
		}
	}
	for _, dts := range cfg.DTypes {
		dt, err := irismodel.ParseDType(dts)
		if err != nil {
			return rows, err
		}
		for _, e := range sel.sweep {
			if !slices.Contains(e.DTypes, dt) {
				continue
			}
			for _, size := range cfg.Sizes {
				for _, mode := range cfg.Modes {
					row := Row{Collective: e.Collective, Variant: e.Variant, DType: dts, Bytes: size, Mode: mode, TimeUS: math.NaN()}
					sizes, ok := sweepSizes(e, size, cfg.World, dt.Size())
					switch limit := slowLimit(e); {
					case limit > 0 && size > limit:
						row.Note = fmt.Sprintf("skipped above %s (slow by design)", HumanBytes(limit))
					case !ok:
						row.Note = "size below one element per rank"
					default:
						if err := timeCell(w, cfg, &row, []step{{e: e, dt: dt, sizes: sizes}}, Iterations(size)); err != nil {
							return rows, err
						}
						// A variant that runs in place is timed both ways,
						// the faster kept, as NCCL's cells are.
						if len(ownBlocks(e)) > 0 && !math.IsNaN(row.TimeUS) {
							in := Row{Collective: row.Collective, Variant: row.Variant, DType: row.DType, Bytes: row.Bytes, Mode: row.Mode, TimeUS: math.NaN()}
							if err := timeCell(w, cfg, &in, []step{{e: e, dt: dt, sizes: sizes, inPlace: true}}, Iterations(size)); err != nil {
								return rows, err
							}
							if in.TimeUS < row.TimeUS {
								row = in
								row.Note = "in place"
							} else {
								row.Note = "out of place"
							}
						}
					}
					add(row)
				}
			}
		}
	}
	for _, sc := range sel.scenarios {
		if err := sc.run(w, cfg, add); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// timeCell times the call of steps in row's mode, k calls a batch, and
// records the times in row; a mode the steps cannot be captured in leaves
// row without a time and says why.
func timeCell(w *irisrt.World, cfg Config, row *Row, steps []step, k int) error {
	if cfg.Barrier != nil {
		row.Barrier = cfg.Barrier.String()
		steps = slices.Clone(steps)
		for i, st := range steps {
			if !slices.Contains(st.e.Barriers, *cfg.Barrier) {
				row.Note = (&irisrt.BarrierModeError{Op: st.e.Collective, Variant: st.e.Variant, Mode: *cfg.Barrier, Supported: st.e.Barriers}).Error()
				return nil
			}
			steps[i].barrier = cfg.Barrier
		}
	}
	if row.Mode == "graph" {
		for _, st := range steps {
			if m := st.mode(); !slices.Contains(st.e.Capturable, m) {
				row.Note = fmt.Sprintf("%s %s cannot be captured in mode %s", st.e.Collective, st.e.Variant, m)
				return nil
			}
		}
	}
	st, err := slowest(w, func(r *irisrt.Rank) ([]float64, error) {
		call, done, err := prepare(r, steps)
		if err != nil {
			return nil, err
		}
		defer done()
		return timeCalls(r, row.Mode, k, cfg.Warmup, cfg.repeats(), call)
	})
	if err != nil {
		return fmt.Errorf("%s %s %s %d bytes %s: %w", row.Collective, row.Variant, row.DType, row.Bytes, row.Mode, err)
	}
	st.set(row)
	return nil
}

// selection is what a Config times.
type selection struct {
	fixed, sweep []irisimpl.Entry // collectives without and with size parameters
	scenarios    []scenario
}

// selection sorts cfg.Entries into the collectives without a size, the
// size sweep and the scenarios that apply to them, keeping those selected.
func (cfg Config) selection() selection {
	var sel selection
	owned := map[string]bool{}
	for _, sc := range applicable(cfg.Entries) {
		for _, c := range sc.owns {
			owned[c] = true
		}
		if selected(cfg.Collectives, sc.name) || slices.ContainsFunc(sc.owns, func(c string) bool { return slices.Contains(cfg.Collectives, c) }) {
			sel.scenarios = append(sel.scenarios, sc)
		}
	}
	for _, e := range cfg.Entries {
		switch {
		case owned[e.Collective] || !selected(cfg.Collectives, e.Collective):
		case len(e.Sizes) == 0:
			sel.fixed = append(sel.fixed, e)
		default:
			sel.sweep = append(sel.sweep, e)
		}
	}
	return sel
}

// Names lists what Config.Collectives may name for entries: their
// collectives, and the scenarios that apply to them.
func Names(entries []irisimpl.Entry) []string {
	var names []string
	for _, e := range entries {
		if !slices.Contains(names, e.Collective) {
			names = append(names, e.Collective)
		}
	}
	for _, sc := range applicable(entries) {
		if !slices.Contains(names, sc.name) {
			names = append(names, sc.name)
		}
	}
	return names
}

// selectedNames lists the collectives and scenarios cfg times.
func (cfg Config) selectedNames() []string {
	sel := cfg.selection()
	var names []string
	for _, e := range append(sel.fixed, sel.sweep...) {
		if !slices.Contains(names, e.Collective) {
			names = append(names, e.Collective)
		}
	}
	for _, sc := range sel.scenarios {
		names = append(names, sc.name)
	}
	return names
}

func selected(list []string, c string) bool {
	return len(list) == 0 || slices.Contains(list, c)
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

// timeCalls times call on r's stream with GPU events and returns the
// per-call time of each of `repeats` batches: k back-to-back calls (eager),
// or one replay of a graph of k calls (graph). Every rank starts each batch
// after a host barrier.
func timeCalls(r *irisrt.Rank, mode string, k, warmup, repeats int, call func() error) ([]float64, error) {
	s := r.Stream()
	l, free, err := newLane(s, mode, k, call, rankCapture(r))
	if err != nil {
		return nil, err
	}
	defer free()
	us, err := timeBatches(r.Device(), []lane{l}, repeats, func() error { return r.HostBarrier(s) }, func() error {
		for range warmup {
			if err := call(); err != nil {
				return err
			}
		}
		return drain(r)
	}, func() error { return drain(r) })
	if err != nil {
		return nil, err
	}
	return us[0], nil
}

// lane is one stream's part of a timed batch: its steps enqueue calls
// calls on s (k eager launches, or one launch of a graph of k).
type lane struct {
	s     gpu.Stream
	calls int
	steps []func() error
}

// capturer records on s what batch enqueues into a graph and returns what
// launches it on s and what frees it.
type capturer func(s gpu.Stream, batch func() error) (launch func() error, free func(), err error)

// rankCapture captures through r (Rank.Capture: the plans a graph launches
// are held by it).
func rankCapture(r *irisrt.Rank) capturer {
	return func(s gpu.Stream, batch func() error) (func() error, func(), error) {
		g, err := r.Capture(s, batch)
		if err != nil {
			return nil, nil, err
		}
		return func() error { return r.Device().LaunchGraph(g.Exec(), s) }, func() { g.Destroy() }, nil
	}
}

// newLane is k calls of call on s in mode: k steps (eager), or one launch
// of a graph of the k calls, recorded by capture (graph).
func newLane(s gpu.Stream, mode string, k int, call func() error, capture capturer) (lane, func(), error) {
	switch mode {
	case "eager":
		steps := make([]func() error, k)
		for i := range steps {
			steps[i] = call
		}
		return lane{s: s, calls: k, steps: steps}, func() {}, nil
	case "graph":
		launch, free, err := capture(s, func() error {
			for range k {
				if err := call(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return lane{}, nil, err
		}
		return lane{s: s, calls: k, steps: []func() error{launch}}, free, nil
	}
	return lane{}, nil, fmt.Errorf("unknown mode %q (want eager or graph)", mode)
}

// enqueue runs the lanes' steps interleaved in proportion to their
// counts (the lane furthest behind its share goes next, the first on a
// tie), so that side by side no stream starts far ahead of another or is
// left to run alone at the end.
func enqueue(lanes []lane) error {
	done := make([]int, len(lanes))
	for {
		next := -1
		for i, l := range lanes {
			if done[i] < len(l.steps) && (next < 0 || done[i]*len(lanes[next].steps) < done[next]*len(l.steps)) {
				next = i
			}
		}
		if next < 0 {
			return nil
		}
		if err := lanes[next].steps[done[next]](); err != nil {
			return err
		}
		done[next]++
	}
}

// timeBatches warms up, then times `repeats` runs of the lanes (each run
// enqueues every lane's steps, interleaved) between events on each lane's
// stream, each run after barrier, and returns per lane the per-call
// microseconds of each run. done waits for the streams and reports device
// errors. It is shared by irisgen's and NCCL's measurements, alone and
// beside the compute kernel (-overlap), so all are timed alike.
func timeBatches(dev gpu.Device, lanes []lane, repeats int, barrier, warm, done func() error) (_ [][]float64, err error) {
	if err := warm(); err != nil {
		return nil, err
	}
	if err := enqueue(lanes); err != nil { // one untimed run: a graph's first launch uploads it
		return nil, err
	}
	if err := done(); err != nil {
		return nil, err
	}
	var events []gpu.Event
	defer func() {
		for _, e := range events {
			err = errors.Join(err, dev.DestroyEvent(e))
		}
	}()
	for range 2 * len(lanes) { // lane i: start 2i, end 2i+1
		e, err := dev.NewEvent(true)
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	us := make([][]float64, len(lanes))
	for range repeats {
		if err := barrier(); err != nil {
			return nil, err
		}
		for i, l := range lanes {
			if err := dev.RecordEvent(events[2*i], l.s); err != nil {
				return nil, err
			}
		}
		if err := enqueue(lanes); err != nil {
			return nil, err
		}
		for i, l := range lanes {
			if err := dev.RecordEvent(events[2*i+1], l.s); err != nil {
				return nil, err
			}
		}
		if err := done(); err != nil {
			return nil, err
		}
		for i, l := range lanes {
			d, err := dev.Elapsed(events[2*i], events[2*i+1])
			if err != nil {
				return nil, err
			}
			us[i] = append(us[i], float64(d.Nanoseconds())/1e3/float64(l.calls))
		}
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

package bench

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/irisgen/irisgen/internal/bench/compute/fma"
	"github.com/irisgen/irisgen/internal/chart"
	"github.com/irisgen/irisgen/internal/nccl"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// The overlap scenario (irisgen bench -overlap): every collective beside a
// compute-bound kernel that fills every SM, on a second stream of the same
// GPUs, as a tensor-parallel all_gather runs beside a GEMM. Per cell it
// reports the collective's time alone and beside the kernel, and the
// kernel's time alone and beside the collective, whose ratio is its
// slowdown: what the collective takes from the compute (a kernel variant
// takes SMs, a copy-engine variant none).
//
// The compute kernel is the spec compute.yaml of internal/bench/compute,
// generated into a package of its own (compute/fma), so that users of the
// catalogue never see it; gputools leaves that package out of what bench
// and probe run.
//
//go:generate go run github.com/irisgen/irisgen/cmd/irisgen generate -config compute/irisgen.yaml

// ComputePackage is the import path of the compute kernel's generated
// package: a helper of the benchmark, not a package of collectives.
const ComputePackage = "github.com/irisgen/irisgen/internal/bench/compute/fma"

// OverlapSizes are the scenario's default sizes.
var OverlapSizes = []int64{1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20}

// ComputeLaunchUS is the time one compute launch is calibrated to take
// alone (CalibrateCompute): long enough that launches queue up faster than
// they run, short enough that a batch of them matches a batch of
// collective calls to within one launch.
var ComputeLaunchUS = 50.0

// computeProbeIters is the FMA rounds of the launch CalibrateCompute times
// first.
const computeProbeIters = 1024

// Compute is the compute kernel's calibration on a world.
type Compute struct {
	Iters    int64   // FMA rounds a launch (the kernel's iters)
	LaunchUS float64 // one launch's time alone, slowest rank
}

// computeEntry is the compute kernel's variant.
func computeEntry() (irisimpl.Entry, error) {
	e, ok := fma.Lookup("compute", "fma")
	if !ok {
		return e, fmt.Errorf("bench: the compute kernel's package %s has no compute/fma: regenerate it (go generate ./internal/bench)", ComputePackage)
	}
	return e, nil
}

// computeOn is the compute kernel made ready on one rank: a plan, its data
// and a stream of its own.
type computeOn struct {
	r        *irisrt.Rank
	s        gpu.Stream
	stream   bool // s was made
	plan     irisimpl.AnyPlan
	data     []irisrt.Tensor
	freeData func()
	ps       []irismodel.Param
}

// newCompute makes the compute kernel's plan (collective: every rank does
// it, in the same order) launching iters FMA rounds, its zeroed data (the
// elements of its full grid, one a thread) and a new stream.
func newCompute(r *irisrt.Rank, iters int64) (_ *computeOn, err error) {
	e, err := computeEntry()
	if err != nil {
		return nil, err
	}
	v := e.Descriptor()
	n := int64(v.MaxBlocks) * int64(v.Threads) * int64(v.VectorBytes) / irismodel.F32.Size()
	c := &computeOn{r: r, ps: []irismodel.Param{irismodel.IntParam(iters)}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.close())
		}
	}()
	if c.plan, err = e.New(r, irismodel.F32, "", []int64{n}); err != nil {
		return nil, err
	}
	if c.data, c.freeData, err = e.Alloc(r, irismodel.F32, []int64{n}); err != nil {
		return nil, err
	}
	if c.s, err = r.Device().NewStream(); err != nil {
		return nil, err
	}
	c.stream = true
	for _, t := range c.data {
		if err := r.Device().MemsetD8Async(t.Ptr, 0, t.Bytes(), c.s); err != nil {
			return nil, err
		}
	}
	return c, c.sync()
}

// launch enqueues one launch of the compute kernel on its stream.
func (c *computeOn) launch() error {
	return c.plan.LaunchParams(c.s, c.data, c.ps, irismodel.BarrierNone)
}

func (c *computeOn) sync() error { return c.r.Device().StreamSynchronize(c.s) }

// close frees what newCompute made, in reverse.
func (c *computeOn) close() error {
	var errs []error
	if c.stream {
		errs = append(errs, c.sync(), c.r.Device().DestroyStream(c.s))
	}
	if c.freeData != nil {
		c.freeData()
	}
	if c.plan != nil {
		errs = append(errs, c.plan.Close())
	}
	return errors.Join(errs...)
}

// CalibrateCompute finds the compute kernel's FMA rounds a launch for
// ComputeLaunchUS on w's GPUs: it times a launch of computeProbeIters
// rounds (the median of cfg's repeats, slowest rank), scales the rounds
// to the target (the time is the rounds' work: a grid of four blocks an SM
// does little else), and times a launch of those.
func CalibrateCompute(w *irisrt.World, cfg Config) (Compute, error) {
	e, err := computeEntry()
	if err != nil {
		return Compute{}, err
	}
	time := func(iters int64) (float64, error) {
		st, err := slowest(w, func(r *irisrt.Rank) (_ []float64, err error) {
			c, err := newCompute(r, iters)
			if err != nil {
				return nil, err
			}
			defer func() { err = errors.Join(err, c.close()) }()
			one := lane{s: c.s, calls: 1, steps: []func() error{c.launch}}
			us, err := timeBatches(r.Device(), []lane{one}, cfg.repeats(), func() error { return r.HostBarrier(c.s) },
				func() error { return nil }, func() error { return errors.Join(c.sync(), r.Check()) })
			if err != nil {
				return nil, err
			}
			return us[0], nil
		})
		if err == nil && !(st.Median > 0) {
			err = fmt.Errorf("a launch of %d rounds took %g us: no time to scale", iters, st.Median)
		}
		return st.Median, err
	}
	t, err := time(computeProbeIters)
	if err != nil {
		return Compute{}, fmt.Errorf("calibrating the compute kernel: %w", err)
	}
	d := e.Params[0]
	iters := min(max(int64(math.Round(computeProbeIters*ComputeLaunchUS/t)), max(d.Min, 1)), d.Max)
	if t, err = time(iters); err != nil {
		return Compute{}, fmt.Errorf("calibrating the compute kernel: %w", err)
	}
	return Compute{Iters: iters, LaunchUS: t}, nil
}

// pairTimes are one rank's times of one overlap cell, per timed batch:
// the collective's per call alone and beside the compute kernel, the
// compute kernel's per launch alone and beside the collective. launches
// is the compute launches of a batch.
type pairTimes struct {
	alone, beside, computeAlone, computeBeside []float64
	launches                                   int
}

// timePair measures one cell on one rank: coll is the collective's batch
// on its stream (warmed up, captured in mode graph), c the compute kernel
// on its own. The compute batch is sized to span the collective's: its
// launches from the collective's time alone, then once more from a run
// side by side, where either may take longer. barrier and done are the
// timed runs' (timeBatches), over both streams.
func timePair(c *computeOn, coll lane, mode string, launchUS float64, repeats int, barrier, done func() error) (out pairTimes, err error) {
	dev := c.r.Device()
	none := func() error { return nil } // warmed up before coll was captured
	us, err := timeBatches(dev, []lane{coll}, repeats, barrier, none, done)
	if err != nil {
		return out, err
	}
	out.alone = us[0]
	side := func(m, repeats int, alone bool) ([][]float64, error) {
		l, free, err := newLane(c.s, mode, m, c.launch, rankCapture(c.r))
		if err != nil {
			return nil, err
		}
		defer free()
		lanes := []lane{coll, l}
		if alone {
			lanes = lanes[1:]
		}
		return timeBatches(dev, lanes, repeats, barrier, none, done)
	}
	m := launchesFor(coll.calls, Summarize(out.alone).Median, launchUS)
	if us, err = side(m, 1, false); err != nil {
		return out, err
	}
	out.launches = launchesFor(coll.calls, us[0][0], us[1][0])
	if us, err = side(out.launches, repeats, true); err != nil {
		return out, err
	}
	out.computeAlone = us[0]
	if us, err = side(out.launches, repeats, false); err != nil {
		return out, err
	}
	out.beside, out.computeBeside = us[0], us[1]
	return out, nil
}

// launchesFor is how many compute launches of launchUS each span calls
// collective calls of callUS each: at least 1.
func launchesFor(calls int, callUS, launchUS float64) int {
	if !(callUS > 0) || !(launchUS > 0) {
		return 1
	}
	return max(1, int(math.Round(float64(calls)*callUS/launchUS)))
}

// pairBarrier and pairDone are timePair's barrier and done on r, the
// collective on stream s.
func pairBarrier(c *computeOn, s gpu.Stream) func() error {
	return func() error {
		if err := c.sync(); err != nil {
			return err
		}
		return c.r.HostBarrier(s)
	}
}

func pairDone(c *computeOn, s gpu.Stream) func() error {
	return func() error {
		return errors.Join(c.r.Device().StreamSynchronize(s), c.sync(), c.r.Check())
	}
}

// pairRows are a cell's four rows from its ranks' times (each batch its
// slowest rank's): base (the collective alone), base beside the compute
// kernel, and the compute kernel (Impl ComputeImpl, Variant base's
// series) alone and beside it.
func pairRows(base Row, perRank []pairTimes, comp Compute) []Row {
	stats := func(f func(pairTimes) []float64) Stats {
		us := make([][]float64, len(perRank))
		for i, t := range perRank {
			us[i] = f(t)
		}
		return Summarize(slowestBatches(us))
	}
	lo, hi := math.MaxInt, 0
	for _, t := range perRank {
		lo, hi = min(lo, t.launches), max(hi, t.launches)
	}
	launches := fmt.Sprint(lo)
	if hi != lo {
		launches = fmt.Sprintf("%d-%d", lo, hi)
	}
	alone, beside := base, base
	beside.Beside = ComputeImpl
	stats(func(t pairTimes) []float64 { return t.alone }).set(&alone)
	stats(func(t pairTimes) []float64 { return t.beside }).set(&beside)
	ca := base
	ca.Impl, ca.Variant = ComputeImpl, base.Series()
	ca.Note = fmt.Sprintf("%s launches of %d FMA rounds a batch", launches, comp.Iters)
	cb := ca
	cb.Beside = base.Series()
	stats(func(t pairTimes) []float64 { return t.computeAlone }).set(&ca)
	stats(func(t pairTimes) []float64 { return t.computeBeside }).set(&cb)
	rows := []Row{alone, beside, ca, cb}
	for i := range rows {
		rows[i].SetBandwidth()
	}
	return rows
}

// logPair prints a cell's four rows as one line.
func logPair(cfg Config, rows []Row) {
	if cfg.Log == nil || len(rows) != 4 {
		return
	}
	a, b, ca, cb := rows[0], rows[1], rows[2], rows[3]
	fmt.Fprintf(cfg.Log, "overlap %-7s %-14s %-14s %-4s %10d %-5s %10.2f us alone %10.2f beside; compute %8.2f -> %8.2f us a launch (x%.3f), %s\n",
		a.Impl, a.Collective, a.Variant, a.DType, a.Bytes, a.Mode, a.TimeUS, b.TimeUS, ca.TimeUS, cb.TimeUS, cb.TimeUS/ca.TimeUS, ca.Note)
}

// RunOverlap times every variant of the selected collectives (those of the
// size sweep: not the barrier, not a scenario's) beside the compute kernel
// calibrated by CalibrateCompute, at cfg.Sizes, in cfg.DTypes and
// cfg.Modes, and returns four rows a cell (pairRows). A variant is timed
// in its benchMode; one that cannot be captured is left out of graph mode,
// one slow by design above its limit.
func RunOverlap(w *irisrt.World, cfg Config, comp Compute, device, date string) ([]Row, error) {
	var rows []Row
	for _, dts := range cfg.DTypes {
		dt, err := irismodel.ParseDType(dts)
		if err != nil {
			return rows, err
		}
		for _, e := range cfg.selection().sweep {
			if !slices.Contains(e.DTypes, dt) {
				continue
			}
			for _, size := range cfg.Sizes {
				sizes, ok := sweepSizes(e, size, w.Size(), dt.Size())
				if limit := slowLimit(e); !ok || (limit > 0 && size > limit) {
					continue
				}
				for _, mode := range cfg.Modes {
					if mode == "graph" && !slices.Contains(e.Capturable, benchMode(e)) {
						continue
					}
					perRank := make([]pairTimes, w.Size())
					err := w.Run(func(r *irisrt.Rank) (err error) {
						call, free, err := prepare(r, []step{{e: e, dt: dt, sizes: sizes}})
						if err != nil {
							return err
						}
						defer free()
						c, err := newCompute(r, comp.Iters)
						if err != nil {
							return err
						}
						defer func() { err = errors.Join(err, c.close()) }()
						s := r.Stream()
						for range cfg.Warmup {
							if err := call(); err != nil {
								return err
							}
						}
						if err := errors.Join(c.launch(), drain(r), c.sync()); err != nil {
							return err
						}
						coll, lfree, err := newLane(s, mode, Iterations(size), call, rankCapture(r))
						if err != nil {
							return err
						}
						defer lfree()
						perRank[r.Rank()], err = timePair(c, coll, mode, comp.LaunchUS, cfg.repeats(), pairBarrier(c, s), pairDone(c, s))
						return err
					})
					if err != nil {
						return rows, fmt.Errorf("%s %s %s %d bytes %s beside the compute kernel: %w", e.Collective, e.Variant, dts, size, mode, err)
					}
					cell := pairRows(Row{Impl: "irisgen", Collective: e.Collective, Variant: e.Variant, DType: dts, World: w.Size(), Bytes: size, Mode: mode,
						Device: device, Date: date}, perRank, comp)
					logPair(cfg, cell)
					rows = append(rows, cell...)
				}
			}
		}
	}
	return rows, nil
}

// RunOverlapNCCL times NCCL beside the compute kernel as RunOverlap times
// irisgen, for the selected collectives NCCL has a call for, out of place:
// with plain buffers (as programs call it by default) and, for those NCCL
// runs on copy engines, with the symmetric windows of a zero-CTA
// communicator (its SM-free path, the one to run beside compute): on every
// rank of w (which holds the compute kernel's plans), its goroutine locked
// to its OS thread with the device current, communicators of its own and
// NCCL's calls on a stream of their own, as RunNCCL. NCCL must be loaded
// (NCCLVersion). Rows have Impl "nccl" and Variant "plain" or "cta0".
func RunOverlapNCCL(w *irisrt.World, cfg Config, comp Compute, device, date string) ([]Row, error) {
	cells := ncclCells(cfg, ncclSelected(cfg), []string{"plain", ncclZeroCTA}, false)
	if len(cells) == 0 {
		return nil, nil
	}
	ids, err := newNCCLIDs(cells)
	if err != nil {
		return nil, err
	}
	perCell := make([][]pairTimes, len(cells))
	for i := range perCell {
		perCell[i] = make([]pairTimes, w.Size())
	}
	// rows[i]: cell i's rows, made by rank 0 once every rank measured it
	// (and logged then, so that a run cut short has them in its log).
	rows := make([][]Row, len(cells))
	runErr := w.Run(func(r *irisrt.Rank) error {
		return withNCCLRank(r.Device(), w.Size(), r.Rank(), ids, func(comms ncclComms, s gpu.Stream) error {
			for i, c := range cells {
				t, err := ncclPair(cfg, comp, r, s, comms.of(c), c)
				if err != nil {
					return fmt.Errorf("nccl %s %s %s %d bytes %s beside the compute kernel: %w", c.coll, c.buffers, c.dtype, c.bytes, c.mode, err)
				}
				perCell[i][r.Rank()] = t
				if err := r.HostBarrier(s); err != nil {
					return err
				}
				if r.Rank() == 0 && t.alone != nil { // nil: below one element per rank
					rows[i] = pairRows(Row{Impl: "nccl", Collective: c.coll, Variant: c.buffers, DType: c.dtype, World: w.Size(), Bytes: c.bytes,
						Mode: c.mode, Device: device, Date: date, Note: "out of place"}, perCell[i], comp)
					logPair(cfg, rows[i])
				}
			}
			return nil
		})
	})
	return slices.Concat(rows...), runErr
}

// ncclPair measures one NCCL cell beside the compute kernel on r (zero
// times when the size is below one element per rank).
func ncclPair(cfg Config, comp Compute, r *irisrt.Rank, s gpu.Stream, comm *nccl.Comm, cell ncclCell) (_ pairTimes, err error) {
	dev := r.Device()
	call, free, err := ncclCellCall(dev, s, comm, cell)
	if err != nil || call == nil {
		return pairTimes{}, err
	}
	defer func() { err = errors.Join(err, free()) }()
	c, err := newCompute(r, comp.Iters)
	if err != nil {
		return pairTimes{}, err
	}
	defer func() { err = errors.Join(err, c.close()) }()
	if err := errors.Join(ncclWarm(dev, s, cfg.Warmup, call), c.launch(), c.sync()); err != nil {
		return pairTimes{}, err
	}
	coll, lfree, err := newLane(s, cell.mode, Iterations(cell.bytes), call, ncclCapture(dev))
	if err != nil {
		return pairTimes{}, err
	}
	defer lfree()
	return timePair(c, coll, cell.mode, comp.LaunchUS, cfg.repeats(), pairBarrier(c, s), pairDone(c, s))
}

// overlapCell is one pair of the overlap scenario: a collective's series
// at one size, dtype, world and mode, and its four rows (pairRows).
type overlapCell struct {
	alone, beside, computeAlone, computeBeside Row
}

// timed reports whether r has a time.
func timed(r Row) bool { return r.TimeUS > 0 && !math.IsInf(r.TimeUS, 0) }

// slowdown is the collective's time beside the compute kernel over its
// time alone, and the compute kernel's (NaN where a row is missing).
func (c *overlapCell) slowdown() (collective, compute float64) {
	ratio := func(a, b Row) float64 {
		if !timed(a) || !timed(b) {
			return math.NaN()
		}
		return a.TimeUS / b.TimeUS
	}
	return ratio(c.beside, c.alone), ratio(c.computeBeside, c.computeAlone)
}

// overlapGroup is the pairs of one collective, dtype, world and mode;
// Rows are the collective's rows beside the compute kernel, which name
// the series and sizes.
type overlapGroup struct {
	group
	cells map[string]*overlapCell // cellKey of the collective's row beside
}

func (g *overlapGroup) cell(series string, bytes int64) *overlapCell {
	r, _ := g.at(series, bytes)
	if r.Impl == "" {
		return nil
	}
	return g.cells[cellKey(r)]
}

// overlapGroups collects the overlap scenario's rows into pairs, grouped
// as the standard tables are.
func overlapGroups(rows []Row) []*overlapGroup {
	sorted := slices.Clone(rows)
	Sort(sorted)
	var out []*overlapGroup
	idx := map[string]*overlapGroup{}
	cells := map[string]*overlapCell{}
	// pair keys a row by its collective's series (the compute kernel's rows
	// name it in Variant).
	pair := func(r Row, series string) string {
		return fmt.Sprintf("%s|%s|%d|%s|%d|%s", r.Collective, r.DType, r.World, r.Mode, r.Bytes, series)
	}
	for _, r := range sorted {
		if r.Beside != ComputeImpl {
			continue
		}
		k := fmt.Sprintf("%s|%s|%d|%s", r.Collective, r.DType, r.World, r.Mode)
		g := idx[k]
		if g == nil {
			g = &overlapGroup{group: group{Collective: r.Collective, DType: r.DType, Mode: r.Mode, World: r.World}, cells: map[string]*overlapCell{}}
			idx[k] = g
			out = append(out, g)
		}
		g.Rows = append(g.Rows, r)
		c := &overlapCell{beside: r}
		g.cells[cellKey(r)] = c
		cells[pair(r, r.Series())] = c
	}
	for _, r := range rows {
		series := r.Series()
		if r.Impl == ComputeImpl {
			series = r.Variant
		}
		c := cells[pair(r, series)]
		switch {
		case c == nil:
		case r.Impl == ComputeImpl && r.Beside == "":
			c.computeAlone = r
		case r.Impl == ComputeImpl:
			c.computeBeside = r
		case r.Beside == "":
			c.alone = r
		}
	}
	return out
}

// OverlapMarkdown renders the overlap scenario's rows (bench -overlap):
// per collective, dtype, world and mode, the compute kernel's slowdown
// beside each series and size, and the collective's time alone and beside
// the compute kernel; "" when rows hold none.
func OverlapMarkdown(rows []Row) string {
	gs := overlapGroups(rows)
	if len(gs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Beside a compute kernel that fills every SM (bench -overlap)\n\n")
	b.WriteString("Each collective on its stream, an FMA kernel on another of the same GPUs, batches of each sized to span the other. " +
		"Compute slowdown: the kernel's time a launch beside the collective / alone (1.00: the collective took nothing from it). " +
		"Collective: its time a call alone -> beside the kernel, us, slowest rank, median of the repeats.\n\n")
	for _, g := range gs {
		sizes, series := g.sizes(), g.series()
		fmt.Fprintf(&b, "### %s, beside the compute kernel\n\n", g.title())
		header := func(first string) {
			fmt.Fprintf(&b, "| %s |", first)
			for _, s := range sizes {
				fmt.Fprintf(&b, " %s |", HumanBytes(s))
			}
			b.WriteString("\n|---|")
			for range sizes {
				b.WriteString("---|")
			}
			b.WriteString("\n")
		}
		header("compute slowdown")
		for _, s := range series {
			fmt.Fprintf(&b, "| %s |", s)
			for _, size := range sizes {
				c := g.cell(s, size)
				if c == nil {
					b.WriteString(" - |")
					continue
				}
				if _, x := c.slowdown(); !math.IsNaN(x) {
					fmt.Fprintf(&b, " %.2f |", x)
				} else {
					b.WriteString(" - |")
				}
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
		header("collective us, alone -> beside")
		marked := false
		for _, s := range series {
			fmt.Fprintf(&b, "| %s |", s)
			for _, size := range sizes {
				c := g.cell(s, size)
				if c == nil || !timed(c.alone) || !timed(c.beside) {
					b.WriteString(" - |")
					continue
				}
				mark := ""
				if c.alone.Stalled() || c.beside.Stalled() {
					mark, marked = " "+stallMark, true
				}
				fmt.Fprintf(&b, " %.1f -> %.1f%s |", c.alone.TimeUS, c.beside.TimeUS, mark)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
		if marked {
			fmt.Fprintf(&b, "%s: the slowest repeat took more than %gx the fastest.\n\n", stallMark, TailFactor)
		}
	}
	return b.String()
}

// PlotOverlap writes one SVG per group of the overlap scenario's rows into
// dir, OUT/<collective>_<dtype>_w<N>_<mode>_overlap.svg: the collective's
// time a call beside the compute kernel (log axes), its slowdown beside
// it and the compute kernel's slowdown (linear), against size, a line per
// series. It returns the files written.
func PlotOverlap(rows []Row, dir string) ([]string, error) {
	var files []string
	bytesTick := func(v float64) string { return HumanBytes(int64(math.Round(v))) }
	for _, g := range overlapGroups(rows) {
		panel := func(title, ylabel string, linear bool) chart.Chart {
			return chart.Chart{Title: g.title() + ": " + title, XLabel: "bytes", YLabel: ylabel, XTick: bytesTick, XBase: 2, YLinear: linear}
		}
		panels := []chart.Chart{
			panel("time per call beside the compute kernel", "microseconds", false),
			panel("collective beside / alone", "slowdown", true),
			panel("compute kernel beside / alone", "slowdown", true),
		}
		for _, s := range g.series() {
			lines := []chart.Series{{Name: s}, {Name: s}, {Name: s}}
			for _, size := range g.sizes() {
				c := g.cell(s, size)
				if c == nil {
					continue
				}
				coll, comp := c.slowdown()
				x := float64(size)
				lines[0].Points = append(lines[0].Points, chart.Point{X: x, Y: c.beside.TimeUS})
				lines[1].Points = append(lines[1].Points, chart.Point{X: x, Y: coll})
				lines[2].Points = append(lines[2].Points, chart.Point{X: x, Y: comp})
			}
			for i := range panels { // every series keeps its place (and colour) in every panel
				panels[i].Series = append(panels[i].Series, lines[i])
			}
		}
		path := filepath.Join(dir, g.file()+"_overlap.svg")
		if err := writeSVG(path, panels); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

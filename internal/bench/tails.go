package bench

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// The stall scenario (irisgen bench -tails): many back-to-back launches of
// every variant, each launch timed on its own, so a rare millisecond stall
// shows in the tail instead of vanishing into a batch's mean or a median.

// TailSizes are the scenario's default sizes: where the one_shot_lamport
// stalls of 2026-11-26 were seen.
var TailSizes = []int64{512 << 10, 1 << 20, 2 << 20, 4 << 20}

// TailTokens are the all_reduce_rmsnorm token counts of the scenario (of
// RMSNormHidden bf16 elements: 448 KiB to 14 MiB a rank), where its Lamport
// variant's stalls were seen.
var TailTokens = []int64{32, 64, 256, 512, 1024}

// DefaultTailLaunches is the launches a cell gets (slow-by-design variants
// a tenth of it).
const DefaultTailLaunches = 10000

// StallFactor and StallFloorUS are the scenario's rule (Stalls): a cell
// stalls when its 99.9th percentile launch took more than StallFactor
// times its fastest and more than StallFloorUS beyond it. It is wide on
// purpose: a millisecond stall of a 10-50 us kernel breaks it, machine
// noise does not (on 4 H100s, 2026-11-26, an 8.8 us all_to_all lamport
// launch had a p99.9 of 202 us once: a host pause of one rank's goroutine
// in an in-process world, which its peer's kernel waits out).
const (
	StallFactor  = 20.0
	StallFloorUS = 300.0
)

// Stalls reports whether a cell whose fastest launch took min and whose
// 99.9th percentile launch took p999 microseconds breaks the rule.
func Stalls(min, p999 float64) bool {
	return p999 > StallFactor*min && p999 > min+StallFloorUS
}

// Tail is the per-launch time distribution of one variant at one size,
// each launch's time its slowest rank's, in microseconds.
type Tail struct {
	Collective, Variant, DType  string
	World                       int
	Bytes                       int64
	Launches                    int
	Min, Median, P99, P999, Max float64
	Device, Date                string
	// Slow: the median launch took more than StallFactor times the fastest
	// median of the collective's variants at this size and world (set by
	// MarkSlow): a cell stalled from its first launch to its last has a
	// p99.9 close to its min, and only the other variants show it.
	Slow bool
	// ByDesign: the variant is slow by design (SlowByDesign), and MarkSlow
	// does not mark it.
	ByDesign bool
}

// Stalled reports whether t breaks one of the scenario's rules: its 99.9th
// percentile launch stalled (Stalls), or it is Slow.
func (t Tail) Stalled() bool { return Stalls(t.Min, t.P999) || t.Slow }

// MarkSlow sets Slow on every tail whose median exceeds StallFactor times
// the smallest median among the tails of the same collective, dtype, world
// and size, but on the variants slow by design (ByDesign).
func MarkSlow(tails []Tail) {
	type key struct {
		coll, dtype string
		world       int
		bytes       int64
	}
	fastest := map[key]float64{}
	for _, t := range tails {
		k := key{t.Collective, t.DType, t.World, t.Bytes}
		if f, ok := fastest[k]; !ok || t.Median < f {
			fastest[k] = t.Median
		}
	}
	for i, t := range tails {
		tails[i].Slow = !t.ByDesign && t.Median > StallFactor*fastest[key{t.Collective, t.DType, t.World, t.Bytes}]
	}
}

// Percentile is the p-th percentile (0 <= p <= 1) of sorted values, by the
// nearest rank.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// tailOf summarises per-launch times.
func tailOf(us []float64) Tail {
	s := slices.Clone(us)
	slices.Sort(s)
	return Tail{Launches: len(s), Min: Percentile(s, 0), Median: Percentile(s, 0.5), P99: Percentile(s, 0.99),
		P999: Percentile(s, 0.999), Max: Percentile(s, 1)}
}

// TailConfig says what RunTails measures.
type TailConfig struct {
	Entries     []irisimpl.Entry // the variants, as Config.Entries
	Sizes       []int64          // bytes, as Config.Sizes
	DTypes      []string         // f32, f16, bf16
	Collectives []string         // as Config.Collectives; empty: all (the sweep, and the chain scenarios with a tails grid: all_reduce_rmsnorm)
	Launches    int              // per cell; 0: DefaultTailLaunches
	Warmup      int
	Log         io.Writer
}

// RunTails times cfg.Launches back-to-back launches of every selected
// variant at every size on every rank of w, each between two GPU events
// (the previous launch's end and its own), and returns one Tail per cell,
// the slow ones marked (MarkSlow).
func RunTails(w *irisrt.World, cfg TailConfig, device, date string) ([]Tail, error) {
	out, err := runTails(w, cfg, device, date)
	MarkSlow(out)
	return out, err
}

func runTails(w *irisrt.World, cfg TailConfig, device, date string) ([]Tail, error) {
	if w.SharesGPUs() {
		return nil, fmt.Errorf("bench: the world of %d ranks shares GPUs (IRISGEN_SHARE_GPUS), so its timings would mean nothing", w.Size())
	}
	launches := cfg.Launches
	if launches <= 0 {
		launches = DefaultTailLaunches
	}
	var out []Tail
	cell := func(coll, variant, dts string, bytes int64, k int, steps []step) error {
		perRank := make([][]float64, w.Size())
		err := w.Run(func(r *irisrt.Rank) error {
			call, done, err := prepare(r, steps)
			if err != nil {
				return err
			}
			defer done()
			perRank[r.Rank()], err = LaunchTimes(r, k, cfg.Warmup, call)
			return err
		})
		if err != nil {
			return fmt.Errorf("%s %s %s %d bytes: %w", coll, variant, dts, bytes, err)
		}
		t := tailOf(slowestBatches(perRank))
		t.Collective, t.Variant, t.DType, t.World, t.Bytes, t.Device, t.Date = coll, variant, dts, w.Size(), bytes, device, date
		t.ByDesign = SlowByDesign(steps[0].e)
		out = append(out, t)
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "tails %-18s %-16s %-4s %9d %6d launches: min %8.2f median %8.2f p99.9 %9.2f max %9.2f us%s\n",
				t.Collective, t.Variant, t.DType, t.Bytes, t.Launches, t.Min, t.Median, t.P999, t.Max, map[bool]string{true: "  STALL"}[t.Stalled()])
		}
		return nil
	}
	sel := Config{Entries: cfg.Entries, Collectives: cfg.Collectives}.selection()
	for _, dts := range cfg.DTypes {
		dt, err := irismodel.ParseDType(dts)
		if err != nil {
			return out, err
		}
		for _, e := range sel.sweep {
			if !slices.Contains(e.DTypes, dt) {
				continue
			}
			k := launches
			if slowLimit(e) > 0 {
				k = max(launches/10, 1)
			}
			for _, size := range cfg.Sizes {
				sizes, ok := sweepSizes(e, size, w.Size(), dt.Size())
				if !ok {
					continue
				}
				if err := cell(e.Collective, e.Variant, dts, size, k, []step{{e: e, dt: dt, sizes: sizes}}); err != nil {
					return out, err
				}
			}
		}
	}
	for _, sc := range sel.scenarios {
		c := sc.chain
		if c == nil || c.tails == nil || !slices.Contains(cfg.DTypes, c.dtype.String()) {
			continue
		}
		for _, v := range choices(cfg.Entries, c.call) {
			for _, p := range points(c.tails) {
				steps, err := resolve(cfg.Entries, c.call, c.dtype, p, v)
				if err != nil {
					return out, fmt.Errorf("%s: %w", sc.name, err)
				}
				if err := cell(sc.name, steps[0].e.Variant, c.dtype.String(), bytesOf(steps[0], w.Size()), launches, steps); err != nil {
					return out, err
				}
			}
		}
	}
	return out, nil
}

// LaunchTimes warms up, meets the other ranks, then launches call k times
// back to back with an event after each (and one before the first), and
// returns each launch's time: the span between its event and the one
// before. The launches queue up faster than they run, so a span is the
// launch's time on the GPU.
func LaunchTimes(r *irisrt.Rank, k, warmup int, call func() error) (_ []float64, err error) {
	dev, s := r.Device(), r.Stream()
	for range warmup {
		if err := call(); err != nil {
			return nil, err
		}
	}
	if err := drain(r); err != nil {
		return nil, err
	}
	evs := make([]gpu.Event, 0, k+1)
	defer func() {
		for _, e := range evs {
			err = errors.Join(err, dev.DestroyEvent(e))
		}
	}()
	for range k + 1 {
		e, err := dev.NewEvent(true)
		if err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	if err := r.HostBarrier(s); err != nil {
		return nil, err
	}
	if err := dev.RecordEvent(evs[0], s); err != nil {
		return nil, err
	}
	for i := range k {
		if err := call(); err != nil {
			return nil, err
		}
		if err := dev.RecordEvent(evs[i+1], s); err != nil {
			return nil, err
		}
	}
	if err := drain(r); err != nil {
		return nil, err
	}
	us := make([]float64, k)
	for i := range k {
		d, err := dev.Elapsed(evs[i], evs[i+1])
		if err != nil {
			return nil, err
		}
		us[i] = float64(d.Nanoseconds()) / 1e3
	}
	return us, nil
}

// TailHeader is the CSV header of WriteTailsCSV.
var TailHeader = []string{"collective", "variant", "dtype", "world", "bytes", "launches", "min_us", "median_us", "p99_us", "p999_us", "max_us", "stalled", "device", "date"}

// WriteTailsCSV writes tails with TailHeader.
func WriteTailsCSV(w io.Writer, tails []Tail) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(TailHeader); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, t := range tails {
		if err := cw.Write([]string{t.Collective, t.Variant, t.DType, strconv.Itoa(t.World), strconv.FormatInt(t.Bytes, 10),
			strconv.Itoa(t.Launches), f(t.Min), f(t.Median), f(t.P99), f(t.P999), f(t.Max), strconv.FormatBool(t.Stalled()), t.Device, t.Date}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// TailsMarkdown renders tails as one table, stalled cells marked.
func TailsMarkdown(tails []Tail) string {
	var b strings.Builder
	b.WriteString("| collective | variant | dtype | GPUs | size | launches | min us | median us | p99 us | p99.9 us | max us | max / min |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	stalled := 0
	for _, t := range tails {
		mark := ""
		if t.Stalled() {
			mark, stalled = " "+stallMark, stalled+1
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f%s |\n", t.Collective, t.Variant, t.DType,
			t.World, HumanBytes(t.Bytes), t.Launches, t.Min, t.Median, t.P99, t.P999, t.Max, t.Max/t.Min, mark)
	}
	fmt.Fprintf(&b, "\n%d of %d cells stalled (%s: the 99.9th percentile launch took more than %gx the fastest and %g us beyond it, or the median more than %gx the fastest median of the collective's variants at that size).\n", stalled, len(tails), stallMark, StallFactor, StallFloorUS, StallFactor)
	return b.String()
}

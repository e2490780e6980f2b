// Package bench times the collectives of any generated package (irisgen's
// catalogue, or a downstream repository's) beside NCCL and PyTorch
// symmetric memory, and reports the results as CSV, Markdown and plots.
// The Go runner (RunOn) times every variant it is given from its table
// alone: a size sweep at nccl-tests' sizes, the size parameters derived
// from the tensor shapes. What it knows about collectives by name is data
// (knownCollectives: bus bandwidth rules, NCCL baselines, variants slow by
// design), and so are the scenarios that time collectives as programs use
// them together (scenarios: MoE dispatch and combine, the fused
// all_reduce + RMSNorm beside the unfused path). The torch baselines come
// from baselines.py, which writes the same CSV schema.
package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// Row is one measurement: one implementation of one collective at one size,
// dtype, world size and mode, timed on the slowest rank.
type Row struct {
	Impl       string // irisgen, irisgen_unfused (UnfusedImpl), nccl (its C API), torch_nccl (NCCL through torch.distributed), torch_symm_mem, torch
	Collective string // the collective (all_reduce, ...), or the scenario's rows' name (moe_dispatch_k8, all_reduce_rmsnorm)
	Variant    string
	DType      string
	World      int
	Bytes      int64   // nccl-tests size: all_gather and gather the output, reduce_scatter and scatter the input, else per rank (all_reduce_rmsnorm: the input)
	Mode       string  // eager or graph
	TimeUS     float64 // median of the repeats
	MinUS      float64 // fastest and slowest repeat (NaN when unknown: older CSVs, the torch baselines)
	MaxUS      float64
	Repeats    int     // timed batches behind TimeUS (0: unknown)
	AlgBW      float64 // GB/s
	BusBW      float64 // GB/s
	Device     string
	Date       string
	Note       string // why a measurement is missing
	// Beside is what ran on another stream of the same GPUs during the
	// measurement (bench -overlap): "" nothing; ComputeImpl for a
	// collective timed beside the compute kernel; the collective's series
	// ("irisgen copy_push", "nccl plain") for the compute kernel timed
	// beside it.
	Beside string
	// Barrier is the barrier mode bench -barrier timed the launches in;
	// "": the default (device where the variant has it). Such a row
	// measures what the barriers cost, not a way to run the collective
	// that the default would not choose: the reports show it as a series
	// of its own and leave it out of irisgen's best, the tables against
	// NCCL and the tuning tables (Forced).
	Barrier string
}

// Forced reports whether r was timed in a barrier mode bench -barrier
// chose (Row.Barrier).
func (r Row) Forced() bool { return r.Barrier != "" }

// ComputeImpl is the Impl of the rows of bench -overlap's compute kernel
// (Variant: the series of the collective it was paired with), and the
// Beside of a collective's rows timed beside it.
const ComputeImpl = "compute"

// Overlap reports whether r belongs to bench -overlap's pairs: a
// measurement beside another stream's work, or the compute kernel's. Their
// tables and plots are OverlapMarkdown's and PlotOverlap's; the other
// reports (Markdown, Plot, VersusNCCL, Tune) leave them out.
func (r Row) Overlap() bool { return r.Beside != "" || r.Impl == ComputeImpl }

// Header is the CSV header, shared with baselines.py.
var Header = []string{"impl", "collective", "variant", "dtype", "world", "bytes", "mode",
	"time_us", "algbw_gbps", "busbw_gbps", "device", "date", "note", "time_min_us", "time_max_us", "repeats", "beside", "barrier"}

// optionalColumns are the columns of Header that CSVs written before the
// bench timed repeats (or ran -overlap, or took -barrier) lack, as
// baselines.py's do; ReadCSV reads those as unknown.
var optionalColumns = map[string]bool{"time_min_us": true, "time_max_us": true, "repeats": true, "beside": true, "barrier": true}

// BusFactor is nccl-tests' ratio of bus bandwidth to algorithm bandwidth
// for a collective (knownCollectives); 0 for one nccl-tests has no rule
// for.
func BusFactor(collective string, world int) float64 {
	w := float64(world)
	switch knownCollectives[collective].bus {
	case busAllReduce:
		return 2 * (w - 1) / w
	case busShared:
		return (w - 1) / w
	case busOne:
		return 1
	}
	return 0
}

// SetBandwidth fills AlgBW and BusBW from Bytes and TimeUS.
func (r *Row) SetBandwidth() {
	if r.TimeUS <= 0 || math.IsNaN(r.TimeUS) || r.Bytes == 0 || r.Impl == ComputeImpl { // the compute kernel moves no collective's bytes
		r.AlgBW, r.BusBW = math.NaN(), math.NaN()
		return
	}
	r.AlgBW = float64(r.Bytes) / (r.TimeUS * 1e3)
	r.BusBW = r.AlgBW * BusFactor(r.Collective, r.World)
}

// Series names the line a row belongs to in tables and plots.
func (r *Row) Series() string {
	if r.Forced() {
		return r.Impl + " " + r.Variant + " (barrier " + r.Barrier + ")"
	}
	return r.Impl + " " + r.Variant
}

// WriteCSV writes rows with the header.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Header); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, r := range rows {
		rec := []string{r.Impl, r.Collective, r.Variant, r.DType, strconv.Itoa(r.World), strconv.FormatInt(r.Bytes, 10), r.Mode,
			f(r.TimeUS), f(r.AlgBW), f(r.BusBW), r.Device, r.Date, r.Note, f(r.MinUS), f(r.MaxUS), strconv.Itoa(r.Repeats), r.Beside, r.Barrier}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadCSV reads rows written by WriteCSV or baselines.py.
func ReadCSV(r io.Reader) ([]Row, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("empty CSV: want the header %v", Header)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range Header {
		if _, ok := col[h]; !ok && !optionalColumns[h] {
			return nil, fmt.Errorf("CSV header lacks %q (want %v)", h, Header)
		}
	}
	var rows []Row
	for line, rec := range recs[1:] {
		get := func(h string) string {
			i, ok := col[h]
			if !ok {
				return "nan" // an optional column this CSV lacks
			}
			return rec[i]
		}
		num := func(h string) (float64, error) {
			v, err := strconv.ParseFloat(get(h), 64)
			if err != nil {
				return 0, fmt.Errorf("line %d: %s: %w", line+2, h, err)
			}
			return v, nil
		}
		var r Row
		r.Impl, r.Collective, r.Variant, r.DType, r.Mode = get("impl"), get("collective"), get("variant"), get("dtype"), get("mode")
		r.Device, r.Date, r.Note = get("device"), get("date"), get("note")
		if _, ok := col["beside"]; ok {
			r.Beside = get("beside")
		}
		if _, ok := col["barrier"]; ok {
			r.Barrier = get("barrier")
		}
		w, err := strconv.Atoi(get("world"))
		if err != nil {
			return nil, fmt.Errorf("line %d: world: %w", line+2, err)
		}
		r.World = w
		if r.Bytes, err = strconv.ParseInt(get("bytes"), 10, 64); err != nil {
			return nil, fmt.Errorf("line %d: bytes: %w", line+2, err)
		}
		if r.TimeUS, err = num("time_us"); err != nil {
			return nil, err
		}
		if r.AlgBW, err = num("algbw_gbps"); err != nil {
			return nil, err
		}
		if r.BusBW, err = num("busbw_gbps"); err != nil {
			return nil, err
		}
		if r.MinUS, err = num("time_min_us"); err != nil {
			return nil, err
		}
		if r.MaxUS, err = num("time_max_us"); err != nil {
			return nil, err
		}
		if rep := get("repeats"); rep != "nan" && rep != "" {
			if r.Repeats, err = strconv.Atoi(rep); err != nil {
				return nil, fmt.Errorf("line %d: repeats: %w", line+2, err)
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// Sort orders rows for reports: collective, dtype, world, mode, size, series.
func Sort(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		switch {
		case a.Collective != b.Collective:
			return a.Collective < b.Collective
		case a.DType != b.DType:
			return a.DType < b.DType
		case a.World != b.World:
			return a.World < b.World
		case a.Mode != b.Mode:
			return a.Mode < b.Mode
		case a.Bytes != b.Bytes:
			return a.Bytes < b.Bytes
		}
		return a.Series() < b.Series()
	})
}

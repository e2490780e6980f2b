package gputools

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/irisgen/irisgen/internal/bench"
	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/nccl"
	"github.com/irisgen/irisgen/internal/tuning"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

const (
	benchSummary = "time the collectives beside NCCL and torch symmetric memory; CSV, Markdown, plots"
	benchUsage   = "bench [-package PATH] [-n N] [-sizes LIST] [-dtypes LIST] [-modes LIST] [-collectives LIST] [-variants LIST] [-repeats R] [-barrier MODE] [-baselines=false] [-compare BASE.csv] [-out DIR] | bench -overlap [-n N] [-sizes LIST] [-modes LIST] [-collectives LIST] [-variants LIST] [-repeats R] [-baselines=false] [-out DIR] | bench -tails [-n N] [-launches L] [-sizes LIST] [-collectives LIST] [-variants LIST] [-out DIR] | bench -report CSV[,CSV...] [-compare BASE.csv] [-out DIR]"
	benchHelp    = `
Bench times every variant of the generated packages the program links
(irisgen-gpu: irisgen's catalogue; -package picks one) on N GPUs of this
machine (an in-process world), eagerly (back-to-back launches) and under
graph replay (a graph of many launches), with GPU events after a warm-up.
Every cell is timed in -repeats batches, each starting after a barrier of
the ranks and taking its slowest rank's time; the median is reported, the
range kept. Everything it launches comes from the package's table: sizes
follow nccl-tests, derived from the tensor shapes (the size is the largest
tensor: all_gather and gather the output, reduce_scatter and scatter the
input, all_to_all the per-rank total, the others the buffer; with several
size parameters the last takes the size and the others are 1), as do
algbw and busbw; launch parameters are the package's samples (root 0;
rank 0 sending to rank 1; a ring shift of +1), tensors start zeroed, and
every launch uses barrier mode device where the variant has it.

Then it runs the baselines in the same run, for the collectives that have
one: NCCL through its own C API (libnccl.so.2, or librccl, loaded like the
GPU platform; one thread and communicator per GPU as nccl-tests; plain
buffers and buffers registered as symmetric windows, in and out of place,
and for all_gather, all_to_all, gather and scatter symmetric windows of a
communicator made with NCCL_CTA_POLICY_ZERO, which NCCL 2.28.3 and later
runs on copy engines ("cta0"); the reports show the best as "nccl best",
the CSV keeps each; send_recv
is NCCL's ncclSend and ncclRecv, shift nccl-tests' sendrecv), then NCCL
through torch.distributed (torch_nccl) and PyTorch symmetric memory
(python3 with torch; the script is built into irisgen), same sizes,
modes, timing and CSV schema. A collective NCCL has no call for (one of
your own) is timed alone.

-compare BASE.csv is the regression gate: it pairs every cell with the same
cell of an earlier run and exits 1 when any is slower than the base beyond
the two runs' measured spreads (half the range of each one's repeats) plus
-tolerance. With -report it compares CSV files without a GPU.

Scenarios time collectives as programs use them together, where the
package has them (-collectives names a scenario, or one of its
collectives):

MoE (moe): moe_dispatch and moe_combine at t = 128, 512, 4096 tokens of
7168 bf16 elements, k = 1 and 8, beside torch's all_to_all_single path
(counts, host sync for the splits, rows), which cannot be captured, and
DeepEP's intranode kernels where python3 can import deep_ep (its own API,
each cell at its fastest SM count and chunk size; dispatch with top-k
and without a host sync, the cached dispatch DeepEP tunes with, combine;
the configuration in each row's note). Each
MoE row's note gives the bytes the protocol must move over the busiest
rank's links (a token once per destination rank) and the time's share of
-link-gbps.

Fused all_reduce + residual add + RMSNorm (all_reduce_rmsnorm): every
variant of all_reduce_rmsnorm at 1, 2, 4, ..., 2048 tokens of 7168 bf16
elements (-sizes and -dtypes do not apply), beside the unfused path in the
same run: each all_reduce variant (but atomic and spinlock), then
residual_rmsnorm (the residual add and the norm in one kernel), the
fastest reported as irisgen_unfused with the all_reduce in its note; and
torch's (NCCL's all_reduce through torch.distributed, the residual add,
torch's rms_norm). results.md ends with the speed-up of fusing per size.

The tables show each cell as the minimum, median and maximum of its repeats and
mark "(!)" a cell whose slowest repeat took more than 3x its fastest.

A variant that may run in place with its input as the rank's own block
of its output (aliasing: own_block: all_gather copy_push) is timed both
ways and the faster kept, its note saying which, as NCCL's cells are the
best of in and out of place.

-variants keeps only the variants named, in every mode and scenario (the
baselines still run), so that an A/B of one variant, or of a run-time
switch such as IRISGEN_PEER_WRITES or IRISGEN_COPY_STREAMS, spends no GPU
time on the others.

-barrier MODE times every launch in barrier mode MODE (device, host or
none) instead of device where the variant has it: with the default run
beside it (bench -report both CSVs, or -compare), what a variant's
barriers cost; with IRISGEN_COPY_STREAMS=1 beside that, what a
copy-engine launch's streams cost. A variant without the mode is left
untimed, its row saying which modes it has (gather's and send_recv's
copy_push have no mode none); host cannot be captured, so its graph
cells say so. It reaches the fused all_reduce + RMSNorm scenario's
launches too, not MoE's (refused with moe). The rows carry the mode (CSV
column barrier) and are a series of their own ("irisgen copy_push
(barrier none)"), left out of irisgen's best, the tables against NCCL
and the tuning tables: a launch with no barrier is not a collective the
caller can run without ordering the ranks itself.

-overlap is the overlap scenario: every variant of the selected collectives
(not the barrier, not a scenario's), and NCCL (its own API, out of place,
plain buffers and, for the collectives it runs on copy engines, "cta0";
no torch), beside a compute-bound kernel that fills every SM
(a grid of 1024 blocks of FMA chains, calibrated to about 50 us a launch)
on a second stream of the same GPUs, at 1, 4, 16, 64 and 256 MiB of bf16
unless -sizes and -dtypes say otherwise. Per cell it times the collective
alone, the compute kernel alone, then both at once, the compute batch
sized to span the collective's (from a first run side by side), every
run after a barrier of the ranks; graph mode captures each stream's
batch. results.md shows the compute kernel's slowdown (its time a launch
beside the collective / alone) and the collective's time alone and
beside it; the plots OUT/<collective>_<dtype>_w<N>_<mode>_overlap.svg
show both against size. The compute kernel is built with the catalogue
(make kernels, make gpu-kernels).

-tails is the stall scenario: -launches (10,000) back-to-back eager
launches of every variant (all_reduce_rmsnorm at 32 to 1024 tokens too;
not the barrier, not MoE), each timed alone between two GPU events (its
slowest rank's), at 512 KiB, 1, 2 and 4 MiB of bf16 unless -sizes and
-dtypes say otherwise. It writes
OUT/tails.csv and OUT/tails.md (min, median, p99, p99.9, max) and exits 1
when a cell's 99.9th percentile launch took more than 20x its fastest and
more than 300 us beyond it.

It writes OUT/results.csv, OUT/results.md (one table per collective, dtype,
world size and mode) and OUT/<collective>_<dtype>_w<N>_<mode>.svg (time and
bus bandwidth against size, log axes); on NVIDIA GPUs also OUT/clocks.csv
(nvidia-smi every 50 ms: SM clock, power, clock-event reasons), whose range
ends the report. -report re-renders the Markdown and
the plots from CSV files (e.g. runs on different machines) without a GPU.
-tune DIR also writes the auto variants' tables (DIR/<collective>.yaml, e.g.
specs/tuning) from irisgen's fastest variant per world and size (or one
with looser launch rules, in place or off-heap tensors, within the spread
of its repeats): it
refreshes the tables DIR holds, and adds one (a new auto variant) only for
a collective named in -collectives.
NVLink multicast stays off (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1).

Examples:
  irisgen bench -n 2 -out bench-out
  go run ./cmd/stencil-gpu bench -n 2 -collectives halo_exchange   # a repository's own package (see gputools)
  irisgen bench -n 2 -collectives all_reduce -dtypes bf16 -sizes 8KiB,1MiB,64MiB
  irisgen bench -n 2 -collectives all_reduce_rmsnorm -out bench-rmsnorm
  irisgen bench -n 4 -tails -collectives all_reduce,all_reduce_rmsnorm -out tails   # stalls in the tail
  irisgen bench -n 1 -baselines=false -collectives barrier,all_reduce -sizes 8KiB   # fixed cost, no peers
  irisgen bench -n 2 -collectives all_reduce -torch=false -compare docs/perf/h200x2/results.csv
  IRISGEN_PEER_WRITES=0 irisgen bench -n 2 -variants copy_push -baselines=false -compare base/results.csv   # one variant, A/B of a switch
  irisgen bench -report new/results.csv -compare old/results.csv -out cmp   # A/B of two runs
  irisgen bench -n 4 -variants copy_push -barrier none -baselines=false -out none   # the copies alone; -report with a default run: the barriers' share
  irisgen bench -report h200x2/results.csv,h200x4/results.csv -out docs/perf -tune specs/tuning`
)

const defaultSizes = "8KiB,32KiB,128KiB,512KiB,1MiB,4MiB,16MiB,64MiB,256MiB"

func (p Program) runBench(env *cli.Env, args []string) error {
	c := env.Program.Find("bench")
	fs := env.Flags(c)
	pkg := fs.String("package", "", packageFlag)
	n := fs.Int("n", 0, "GPUs (world size); 0: every GPU of the machine")
	sizes := fs.String("sizes", defaultSizes, "comma-separated sizes (bytes, or with KiB, MiB, GiB)")
	dtypes := fs.String("dtypes", "bf16,f32", "comma-separated dtypes")
	modes := fs.String("modes", "eager,graph", "eager, graph or both")
	colls := fs.String("collectives", "", "comma-separated collectives and scenarios (moe, all_reduce_rmsnorm) of the package (default: all)")
	variants := fs.String("variants", "", "comma-separated variants to time, e.g. copy_push or push,ring (default: every variant of what -collectives selects)")
	baselines := fs.Bool("baselines", true, "also run the baselines: NCCL through its own API, and (-torch) through torch")
	torch := fs.Bool("torch", true, "with -baselines, also NCCL through torch.distributed and torch symmetric memory (python3 with torch)")
	ncclLib := fs.String("nccl", "", "path of libnccl.so.2 (or librccl); default: $IRISGEN_NCCL, the loader's path, then the nvidia-nccl package of -python")
	python := fs.String("python", "python3", "the Python with torch for the baselines")
	warmup := fs.Int("warmup", 5, "untimed calls before each measurement")
	repeats := fs.Int("repeats", bench.DefaultRepeats, "timed batches per cell: the median is reported, the range kept")
	compare := fs.String("compare", "", "an earlier results.csv: print every cell's ratio to it and exit 1 when one is slower beyond the measured spread")
	tolerance := fs.Float64("tolerance", 0, "with -compare: a further allowance, as a fraction of the base time (e.g. 0.02)")
	heap := fs.Int64("heap", 6<<30, "symmetric heap bytes per rank")
	link := fs.Float64("link-gbps", bench.DefaultLinkGBps, "link rate (GB/s, one way) the MoE rows report their share of")
	out := fs.String("out", "bench-out", "output directory")
	report := fs.String("report", "", "render OUT/results.md and the plots from these CSV files instead of measuring")
	tune := fs.String("tune", "", "also refresh the auto variants' tables in this directory (e.g. specs/tuning), from irisgen's fastest variant per size; a collective named in -collectives gets one if it has none")
	tuneDType := fs.String("tune-dtype", "bf16", "dtype the tables are chosen by")
	tuneMode := fs.String("tune-mode", "graph", "mode the tables are chosen by (eager or graph)")
	tails := fs.Bool("tails", false, "the stall scenario instead: -launches back-to-back launches of every variant, each timed alone; min, median, p99, p99.9, max")
	launches := fs.Int("launches", bench.DefaultTailLaunches, "with -tails: launches per cell (slow-by-design variants a tenth)")
	barrier := fs.String("barrier", "", "time every launch in this barrier mode (device, host or none) instead of device where the variant has it: what the barriers cost (a variant without the mode is left untimed, its row says why); the rows are their own series, out of irisgen's best and the tuning tables")
	overlap := fs.Bool("overlap", false, "the overlap scenario instead: each collective (and NCCL) beside a compute kernel that fills every SM on another stream; times alone and beside, and the compute kernel's slowdown")
	if err := env.Parse(c, fs, args); err != nil {
		return err
	}
	given := cli.Set(fs)
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	if *report != "" && *variants != "" {
		return cli.UsageErr("-variants chooses what to measure; -report measures nothing (it renders the CSVs' rows as they are)")
	}
	var forced *irismodel.Barrier
	if given["barrier"] {
		b, err := irismodel.ParseBarrier(*barrier)
		if err != nil {
			return cli.UsageErr("-barrier: %v", err)
		}
		switch {
		case *report != "":
			return cli.UsageErr("-barrier chooses how to measure; -report measures nothing (its CSVs' rows say the mode they were timed in)")
		case *tails, *overlap:
			return cli.UsageErr("-barrier times the plain bench's cells; -tails and -overlap launch in their own modes (device where the variant has it)")
		}
		forced = &b
	}
	if *report != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			return err
		}
		var rows []bench.Row // read all before writing: OUT/results.csv may be one of them
		for _, f := range cli.SplitList(*report) {
			rs, err := readRows(f)
			if err != nil {
				return cli.Fail(err)
			}
			rows = append(rows, rs...)
		}
		if err := writeReport(env, rows, *out, ""); err != nil {
			return err
		}
		if err := writeTuning(env, rows, *tune, *tuneDType, *tuneMode, cli.SplitList(*colls)); err != nil {
			return err
		}
		return compareWith(env, rows, *compare, *tolerance, *out)
	}
	entries, pkgs, err := entries(*pkg)
	if err != nil {
		return err
	}
	if err := checkNames(cli.SplitList(*colls), bench.Names(entries), pkgs); err != nil {
		return err
	}
	if entries, err = keepVariants(entries, cli.SplitList(*variants), cli.SplitList(*colls)); err != nil {
		return err
	}
	if *repeats < 1 {
		return cli.UsageErr("-repeats %d: want at least 1", *repeats)
	}
	if *tails && *overlap {
		return cli.UsageErr("-tails and -overlap are two scenarios: run one at a time")
	}
	sz, err := parseSizes(*sizes)
	if err != nil {
		return cli.UsageErr("-sizes: %v", err)
	}
	ms := cli.SplitList(*modes)
	for _, m := range ms {
		if m != "eager" && m != "graph" {
			return cli.UsageErr("-modes: %q is not eager or graph", m)
		}
	}
	// One GPU without baselines measures each kernel's fixed cost (launch,
	// entry and exit, no peer to wait for): the floor under the timings.
	least := 2
	if !*baselines {
		least = 1
	}
	world, err := p.worldSize(*n, least, false)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	device := p.deviceName(world)
	date := time.Now().UTC().Format("2006-01-02")
	opts := p.options(irisrt.Options{HeapBytes: *heap, Timeout: 20 * time.Second})
	// The scenarios default to bf16 and their own sizes.
	dts := "bf16"
	if given["dtypes"] {
		dts = *dtypes
	}
	if *overlap {
		if !given["sizes"] {
			sz = bench.OverlapSizes
		}
		cfg := bench.Config{World: world, Entries: entries, Sizes: sz, DTypes: cli.SplitList(dts), Modes: ms, Collectives: cli.SplitList(*colls),
			Warmup: *warmup, Repeats: *repeats, HeapBytes: *heap, Log: env.Stdout}
		return p.runOverlap(env, cfg, opts, *baselines, *ncclLib, *python, device, date, *out)
	}
	if *tails {
		if !given["sizes"] {
			sz = bench.TailSizes
		}
		if *launches < 1 {
			return cli.UsageErr("-launches %d: want at least 1", *launches)
		}
		clocks := p.startClocks(env, *out)
		defer clocks.Stop() // on every way out: the sampler must not outlive the run
		return runTails(env, bench.TailConfig{Entries: entries, Sizes: sz, DTypes: cli.SplitList(dts), Collectives: cli.SplitList(*colls),
			Launches: *launches, Warmup: *warmup, Log: env.Stdout}, world, opts, device, date, *out, clocks)
	}
	cfg := bench.Config{World: world, Entries: entries, Sizes: sz, DTypes: cli.SplitList(*dtypes), Modes: ms, Collectives: cli.SplitList(*colls),
		Warmup: *warmup, Repeats: *repeats, HeapBytes: *heap, LinkGBps: *link, Barrier: forced, Log: env.Stdout}
	fmt.Fprintf(env.Stdout, "irisgen bench: %d GPUs (%s), %s; %s\n", world, device, date, pkgs)
	w, err := irisrt.NewLocalWorld(world, opts)
	if err != nil {
		return cli.Fail(err)
	}
	clocks := p.startClocks(env, *out)
	defer clocks.Stop() // on every way out: the sampler must not outlive the run
	rows, err := bench.RunOn(w, cfg, device, date)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cli.Fail(fmt.Errorf("irisgen run: %w", err))
	}
	if *baselines && p.Platform != nil {
		fmt.Fprintf(env.Stderr, "irisgen bench: no baselines on the %s platform\n", p.Platform.Name())
	} else if *baselines {
		rows = append(rows, runNCCL(env, *ncclLib, *python, cfg, device, date)...)
		if *torch {
			base, err := runBaselines(env, *python, cfg, *out)
			if err != nil {
				fmt.Fprintf(env.Stderr, "irisgen bench: torch baselines failed (%v); the report has no torch rows\n", err)
			}
			for i := range base {
				base[i].Device = device // same machine, same run: one label for the tables
			}
			rows = append(rows, base...)
		}
	}
	if err := writeReport(env, rows, *out, stopClocks(env, clocks)); err != nil {
		return err
	}
	if err := writeTuning(env, rows, *tune, *tuneDType, *tuneMode, cli.SplitList(*colls)); err != nil {
		return err
	}
	return compareWith(env, rows, *compare, *tolerance, *out)
}

// keepVariants keeps the entries of the variants named (all of them when
// none is); a name no entry of the selected collectives (colls; empty: all)
// has is a usage error that lists theirs.
func keepVariants(entries []irisimpl.Entry, variants, colls []string) ([]irisimpl.Entry, error) {
	if len(variants) == 0 {
		return entries, nil
	}
	var have []string
	for _, e := range entries {
		if (len(colls) == 0 || slices.Contains(colls, e.Collective)) && !slices.Contains(have, e.Variant) {
			have = append(have, e.Variant)
		}
	}
	for _, v := range variants {
		if !slices.Contains(have, v) {
			return nil, cli.UsageErr("-variants: %q is not a variant of the collectives selected (they have %s)", v, strings.Join(have, ", "))
		}
	}
	return slices.DeleteFunc(slices.Clone(entries), func(e irisimpl.Entry) bool { return !slices.Contains(variants, e.Variant) }), nil
}

// runTails runs the stall scenario in a world of n GPUs and writes
// OUT/tails.csv and OUT/tails.md (with the clock log's summary); exit 1
// when a cell stalled.
func runTails(env *cli.Env, cfg bench.TailConfig, n int, opts irisrt.Options, device, date, out string, clocks *bench.ClockLog) error {
	fmt.Fprintf(env.Stdout, "irisgen bench -tails: %d GPUs (%s), %s\n", n, device, date)
	w, err := irisrt.NewLocalWorld(n, opts)
	if err != nil {
		return cli.Fail(err)
	}
	tails, runErr := bench.RunTails(w, cfg, device, date)
	clockMD := stopClocks(env, clocks)
	if err := w.Close(); err != nil && runErr == nil {
		runErr = err
	}
	var b strings.Builder
	if err := bench.WriteTailsCSV(&b, tails); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "tails.csv"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	md := bench.TailsMarkdown(tails) + clockMD
	if err := os.WriteFile(filepath.Join(out, "tails.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Fprint(env.Stdout, md)
	if runErr != nil {
		return cli.Fail(fmt.Errorf("irisgen bench -tails: %w", runErr))
	}
	for _, t := range tails {
		if t.Stalled() {
			return cli.Fail(fmt.Errorf("a cell stalled (see %s)", filepath.Join(out, "tails.md")))
		}
	}
	return nil
}

// runNCCL measures NCCL through its own API (bench.RunNCCL); a failure is
// reported and leaves the rows it has.
func runNCCL(env *cli.Env, lib, python string, cfg bench.Config, device, date string) []bench.Row {
	return withNCCL(env, lib, python, func() ([]bench.Row, error) { return bench.RunNCCL(cfg, device, date) })
}

// withNCCL loads NCCL (lib, else $IRISGEN_NCCL, else python's
// nvidia-nccl package, else the loader's path) and runs measure, its rows'
// notes naming the version; a failure is reported and leaves the rows it
// has.
func withNCCL(env *cli.Env, lib, python string, measure func() ([]bench.Row, error)) []bench.Row {
	if lib == "" && os.Getenv(nccl.EnvLibrary) == "" {
		lib = pythonNCCL(python)
	}
	path, version, err := bench.NCCLVersion(lib)
	if err != nil {
		fmt.Fprintf(env.Stderr, "irisgen bench: no NCCL baseline: %v\n", err)
		return nil
	}
	fmt.Fprintf(env.Stdout, "NCCL %s (%s) through its own API\n", version, path)
	rows, err := measure()
	if err != nil {
		fmt.Fprintf(env.Stderr, "irisgen bench: NCCL baseline failed (%v); the report has its rows up to there\n", err)
	}
	for i := range rows {
		rows[i].Note = strings.TrimSpace("NCCL " + version + ", " + rows[i].Note)
	}
	return rows
}

// runOverlap runs the overlap scenario in a world of cfg.World GPUs: the
// compute kernel's calibration, irisgen's variants beside it, then NCCL's
// (in the same world, which holds the compute kernel's plans); it writes
// the report.
func (p Program) runOverlap(env *cli.Env, cfg bench.Config, opts irisrt.Options, baselines bool, lib, python, device, date, out string) error {
	fmt.Fprintf(env.Stdout, "irisgen bench -overlap: %d GPUs (%s), %s\n", cfg.World, device, date)
	w, err := irisrt.NewLocalWorld(cfg.World, opts)
	if err != nil {
		return cli.Fail(err)
	}
	clocks := p.startClocks(env, out)
	defer clocks.Stop() // on every way out: the sampler must not outlive the run
	comp, err := bench.CalibrateCompute(w, cfg)
	var rows []bench.Row
	if err == nil {
		fmt.Fprintf(env.Stdout, "compute kernel: %d FMA rounds a launch, %.1f us alone\n", comp.Iters, comp.LaunchUS)
		rows, err = bench.RunOverlap(w, cfg, comp, device, date)
	}
	switch {
	case err != nil:
	case baselines && p.Platform != nil:
		fmt.Fprintf(env.Stderr, "irisgen bench: no baselines on the %s platform\n", p.Platform.Name())
	case baselines:
		rows = append(rows, withNCCL(env, lib, python, func() ([]bench.Row, error) { return bench.RunOverlapNCCL(w, cfg, comp, device, date) })...)
	}
	clockMD := stopClocks(env, clocks)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return cli.Fail(fmt.Errorf("irisgen bench -overlap: %w", err))
	}
	return writeReport(env, rows, out, clockMD)
}

// startClocks starts the clock log of a run on real GPUs into
// OUT/clocks.csv (bench.StartClockLog); one that cannot start is reported
// and left out.
func (p Program) startClocks(env *cli.Env, out string) *bench.ClockLog {
	if p.Platform != nil {
		return nil
	}
	l, err := bench.StartClockLog(filepath.Join(out, "clocks.csv"))
	if err != nil {
		fmt.Fprintf(env.Stderr, "irisgen bench: no clock log: %v\n", err)
	}
	return l
}

// stopClocks ends the clock log and returns its summary for the end of the
// report ("" without one).
func stopClocks(env *cli.Env, l *bench.ClockLog) string {
	sum, err := l.Stop()
	if err != nil {
		fmt.Fprintf(env.Stderr, "irisgen bench: the clock log: %v\n", err)
	}
	return sum.Markdown()
}

// pythonNCCL is the libnccl.so.2 of python's nvidia-nccl package (the NCCL
// torch ships with), or "" when there is none.
func pythonNCCL(python string) string {
	out, err := exec.Command(python, "-c", "import os, nvidia.nccl as m; print(os.path.join(list(m.__path__)[0], 'lib', 'libnccl.so.2'))").Output()
	if err != nil {
		return ""
	}
	p := strings.TrimSpace(string(out))
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// compareWith prints rows against the base CSV (nothing when base is empty),
// writes OUT/compare.md, and fails (exit 1) when a cell is slower beyond the
// measured spread.
func compareWith(env *cli.Env, rows []bench.Row, base string, tolerance float64, out string) error {
	if base == "" {
		return nil
	}
	b, err := readRows(base)
	if err != nil {
		return cli.Fail(err)
	}
	ds := bench.Compare(b, rows, tolerance)
	md := bench.FormatCompare(ds)
	fmt.Fprint(env.Stdout, md)
	p := filepath.Join(out, "compare.md")
	if err := os.WriteFile(p, []byte(md), 0o644); err != nil {
		return err
	}
	if len(ds) == 0 {
		return cli.Fail(fmt.Errorf("-compare %s: no cell of this run is in the base", base))
	}
	for _, d := range ds {
		if d.Regressed {
			return cli.Fail(fmt.Errorf("slower than %s beyond the measured spread (see %s)", base, p))
		}
	}
	return nil
}

// writeTuning writes dir/<collective>.yaml for every collective with two or
// more irisgen variants in rows whose table exists in dir already or that
// named lists (-collectives): a table makes an auto variant, so a run over
// the whole package refreshes the tables there are and adds none (nothing
// when dir is empty).
func writeTuning(env *cli.Env, rows []bench.Row, dir, dtype, mode string, named []string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var colls []string                       // irisgen's collectives in rows, in order of first appearance
	variants := map[string]map[string]bool{} // and the variants of each
	for _, r := range rows {
		if r.Impl != "irisgen" || r.Forced() {
			continue
		}
		if variants[r.Collective] == nil {
			variants[r.Collective] = map[string]bool{}
			colls = append(colls, r.Collective)
		}
		variants[r.Collective][r.Variant] = true
	}
	for _, c := range colls {
		// One variant (a scenario's rows, such as MoE's) leaves auto nothing to choose.
		if len(variants[c]) < 2 {
			continue
		}
		p := filepath.Join(dir, c+".yaml")
		if _, err := os.Stat(p); err != nil && !slices.Contains(named, c) {
			fmt.Fprintf(env.Stdout, "no auto table for %s: %s does not exist (a table adds an auto variant: name %s in -collectives to write one)\n", c, p, c)
			continue
		}
		a, err := bench.Tune(rows, c, dtype, mode, looserRules(c))
		if err != nil {
			fmt.Fprintf(env.Stdout, "no auto table for %s: %v\n", c, err)
			continue
		}
		if err := os.WriteFile(p, tuning.Format(c, *a), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "wrote %s (%d rules); run `irisgen generate` to use it\n", p, len(a.Rules))
	}
	return nil
}

// looserRules reports whether variant a of collective c has looser launch
// rules than variant b, from the entries of the first linked package that
// has both: a allows in place where b does not, or, equal there, requires
// fewer of its tensors on the heap (TensorInfo.Heap). Variants the program
// does not link are never looser. What -tune chooses within the spread of
// the fastest (bench.Tune).
func looserRules(c string) func(a, b string) bool {
	return func(a, b string) bool {
		for _, t := range tables() {
			ea, okA := t.Lookup(c, a)
			eb, okB := t.Lookup(c, b)
			if !okA || !okB {
				continue
			}
			if ia, ib := ea.Descriptor().InPlace, eb.Descriptor().InPlace; ia != ib {
				return ia
			}
			return heapTensors(ea) < heapTensors(eb)
		}
		return false
	}
}

// heapTensors counts the tensors e requires on the symmetric heap.
func heapTensors(e irisimpl.Entry) int {
	n := 0
	for _, t := range e.Tensors {
		if t.Heap {
			n++
		}
	}
	return n
}

func runBaselines(env *cli.Env, python string, cfg bench.Config, out string) ([]bench.Row, error) {
	script := filepath.Join(out, "baselines.py")
	if err := os.WriteFile(script, bench.BaselinesScript, 0o644); err != nil {
		return nil, err
	}
	csvPath := filepath.Join(out, "baselines.csv")
	args := bench.BaselineArgs(script, csvPath, cfg)
	if args == nil {
		return nil, nil // only the barrier: no baseline
	}
	cmd := exec.Command(python, args...)
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintf(env.Stdout, "baseline: %s\n", sc.Text())
		}
		close(done)
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", python, script, err)
	}
	rows, err := readRows(csvPath)
	for i := range rows {
		rows[i].SetBandwidth() // one set of formulas: nccl-tests', in Go
	}
	return rows, err
}

func readRows(path string) ([]bench.Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := bench.ReadCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// writeReport writes OUT/results.csv, OUT/results.md (ending with tail,
// the clock log's summary, which it also prints) and the plots.
func writeReport(env *cli.Env, rows []bench.Row, out, tail string) error {
	f, err := os.Create(filepath.Join(out, "results.csv"))
	if err != nil {
		return err
	}
	if err := bench.WriteCSV(f, rows); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	shown := bench.BestNCCL(rows) // NCCL at its best in tables and plots; the CSV keeps both buffer kinds
	md := filepath.Join(out, "results.md")
	// The overlap scenario's pairs from the rows as measured: each names its
	// NCCL buffers, which BestNCCL folds.
	text := bench.OverlapMarkdown(rows) + bench.VersusNCCL(shown) + bench.Markdown(shown) + bench.FusionTable(shown) + tail
	if err := os.WriteFile(md, []byte(text), 0o644); err != nil {
		return err
	}
	fmt.Fprint(env.Stdout, tail)
	files, err := bench.Plot(shown, out)
	if err != nil {
		return cli.Fail(fmt.Errorf("plotting: %w", err))
	}
	more, err := bench.PlotOverlap(rows, out)
	files = append(files, more...)
	if err != nil {
		return cli.Fail(fmt.Errorf("plotting: %w", err))
	}
	fmt.Fprintf(env.Stdout, "wrote %s, %s and %d plots\n", filepath.Join(out, "results.csv"), md, len(files))
	return nil
}

// parseSizes reads "8KiB,1MiB,4096" (irisrt.ParseBytes for each).
func parseSizes(s string) ([]int64, error) {
	var out []int64
	for _, f := range cli.SplitList(s) {
		v, err := irisrt.ParseBytes(f)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive size (e.g. 8KiB, 1MiB, 4096)", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes")
	}
	return out, nil
}

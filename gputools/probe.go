package gputools

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/probe"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

const (
	probeSummary = "prove graph capture on the GPUs: capture, replay with fresh data, compare"
	probeUsage   = "probe [-package PATH] [-n N] [-elems E] [-replays R] [-collectives LIST]"
	probeHelp    = `
Probe checks, on N GPUs of this machine (an in-process world; with
IRISGEN_SHARE_GPUS=1 N may exceed the GPUs, ranks sharing them), the graph
capture claims the generator derived for every variant and barrier mode of
the generated packages the program links (irisgen-gpu: irisgen's
catalogue; -package picks one). For each it starts a capture, checks through the runtime that
the stream really is capturing, and launches. A mode derived as capturable
must be captured; its graph is then replayed R times, each time with fresh
random input written into the same tensors, and every replay's output must
equal an eager launch's on the same input (outputs are poisoned before each,
so a stale or skipped replay cannot pass). moe_dispatch and moe_combine (where
the package has both) are probed as the pair they are used as: one graph of dispatch, the identity
expert (copies of the received rows) and combine (257 tokens of 1031
elements, 2 experts a token),
each replay with new tokens, routing and weights, checked against the CPU
reference (each token times the sum of its weights); -elems does not apply
to them. A mode derived as not capturable
(host) must be refused with a *irisrt.CaptureError that leaves the capture
intact. A collective with launch parameters (broadcast's root, send_recv's
src and dst, shift's offset) is probed with the package's two sample sets
of values, each captured on its own: a graph replays the values it captured, so the
replays of the capture with root 0 must equal eager launches with root 0,
those of the capture with root 1 eager launches with root 1. The exit code
is 1 when any claim does not hold. A step that fails on one rank alone
fails its case on every rank, and the ranks go on together; ranks that no
longer make the same calls stop the probe, which prints the claims
checked so far.

Started by irisgen run (RANK set), each process is one rank of a
multi-process world instead, capturing in global mode; -n does not apply,
and every rank prints the table merged over the ranks.

Examples:
  irisgen probe -n 2
  irisgen run -n 2 -- irisgen probe
  irisgen probe -n 4 -collectives all_reduce -replays 100
  go run ./cmd/stencil-gpu probe -n 2   # a repository's own package (see gputools)`
)

func (p Program) runProbe(env *cli.Env, args []string) error {
	c := env.Program.Find("probe")
	fs := env.Flags(c)
	pkg := fs.String("package", "", packageFlag)
	n := fs.Int("n", 0, "GPUs (world size); 0: every GPU of the machine")
	elems := fs.Int64("elems", 4096+3, "value of the last size parameter, 7 for any other (elements; not a multiple of the vector width, so tails run too)")
	replays := fs.Int("replays", 20, "replays validated per capturable mode")
	colls := fs.String("collectives", "", "comma-separated collectives of the package (default: all)")
	if err := env.Parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	if *elems < 1 || *replays < 1 {
		return cli.UsageErr("-elems and -replays must be at least 1")
	}
	entries, pkgs, err := entries(*pkg)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Collective)
	}
	if err := checkNames(cli.SplitList(*colls), names, pkgs); err != nil {
		return err
	}
	cfg := probe.Config{Entries: entries, N: *elems, Replays: *replays, Collectives: cli.SplitList(*colls)}
	var res []probe.Result
	world := 0
	where := "in-process world, relaxed capture"
	if os.Getenv("RANK") != "" {
		res, world, err = p.probeProcess(cfg)
		where = "multi-process world, global capture"
	} else if world, err = p.worldSize(*n, 1, true); err == nil {
		var w *irisrt.World
		if w, err = irisrt.NewLocalWorld(world, p.options(probe.Options())); err == nil {
			res, err = probe.Run(w, cfg)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil && res == nil {
		return cli.Fail(err)
	}
	fmt.Fprintf(env.Stdout, "irisgen probe: %d GPUs (%s), %d elements per size, %d replays per capturable mode; %s\n\n", world, where, *elems, *replays, pkgs)
	tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "operation\tvariant\tparameters\tmode\tcapturable (derived)\tcaptured\treplays validated\tresult\treason")
	failed := 0
	for _, r := range res {
		result := "ok"
		if r.Failed {
			result, failed = "FAILED", failed+1
		}
		params := r.Params
		if params == "" {
			params = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Collective, r.Variant, params, r.Mode, yesNo(r.Claimed), yesNo(r.Captured), r.Replays, result, r.Reason)
	}
	tw.Flush()
	if err != nil {
		fmt.Fprintf(env.Stderr, "\n%d claims checked, then: %v\n", len(res), err)
		return cli.Silent
	}
	if failed > 0 {
		fmt.Fprintf(env.Stderr, "\n%d of %d claims did not hold\n", failed, len(res))
		return cli.Silent
	}
	fmt.Fprintf(env.Stdout, "\nall %d claims hold\n", len(res))
	return nil
}

// probeProcess probes as one rank of the multi-process world the
// environment describes.
func (p Program) probeProcess(cfg probe.Config) ([]probe.Result, int, error) {
	r, err := irisrt.JoinProcessWorld(p.options(probe.Options()))
	if err != nil {
		return nil, 0, err
	}
	res, err := probe.RunRank(r, cfg)
	if cerr := r.Close(); err == nil {
		err = cerr
	}
	return res, r.World(), err
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

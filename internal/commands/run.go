package commands

import (
	"flag"

	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/launch"
)

func init() {
	register(&cli.Command{
		Name:    "run",
		Summary: "start a program once per GPU, like torchrun (multi-process world)",
		Usage:   "run -n N [-port P] [-grace D] -- PROGRAM [ARGS...]",
		Help: `
Run starts N copies of PROGRAM, one per GPU, with RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT set, so each joins the multi-process
world (irisrt.JoinProcessWorld). Their output is prefixed with the rank.
Every rank runs in a process group of its own. When one rank fails, or one
exits with status 0 and the others do not follow within -grace, every rank's
whole process group is ended (SIGTERM, SIGKILL 5s later), the error says what
each rank did, and the exit code is 1. No process a rank started outlives
the run.

Examples:
  irisgen run -n 2 -- ./myprog -size 1048576
  irisgen run -n 4 -port 29600 -- go run ./cmd/bench`,
		Run: runRun,
	})
}

func runRun(env *cli.Env, args []string) error {
	c := program.Find("run")
	fs := env.Flags(c)
	n := fs.Int("n", 0, "number of ranks (processes), one per GPU")
	port := fs.Int("port", 0, "MASTER_PORT of the rendezvous (0: pick a free port)")
	grace := fs.Duration("grace", launch.DefaultExitGrace, "how long the other ranks may run on after one rank exits with status 0")
	if err := env.Parse(c, fs, args); err != nil {
		return err
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "n" })
	if !given {
		return cli.UsageErr("-n is required: the number of ranks (processes, one per GPU), e.g. irisgen run -n 2 -- PROGRAM [ARGS...]")
	}
	if *n < 1 {
		return cli.UsageErr("-n %d: want the number of ranks, at least 1", *n)
	}
	if fs.NArg() == 0 {
		return cli.UsageErr("no program to run: irisgen run -n N -- PROGRAM [ARGS...]")
	}
	if *grace <= 0 {
		return cli.UsageErr("-grace %v: want a positive duration such as 60s", *grace)
	}
	if err := launch.Run(*n, fs.Args(), env.Stdout, env.Stderr, launch.Options{MasterPort: *port, ExitGrace: *grace}); err != nil {
		return cli.Fail(err)
	}
	return nil
}

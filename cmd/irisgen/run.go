package main

import (
	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/launch"
)

func init() {
	register(&cli.Command{
		Name:    "run",
		Summary: "start a program once per GPU, like torchrun (multi-process world)",
		Usage:   "run -n N [-port P] -- PROGRAM [ARGS...]",
		Help: `
Run starts N copies of PROGRAM, one per GPU, with RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR and MASTER_PORT set, so each joins the multi-process
world (irisrt.JoinProcessWorld). Their output is prefixed with the rank. When
one rank fails the others are stopped, and the exit code is 1.

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
	if err := env.Parse(c, fs, args); err != nil {
		return err
	}
	if *n < 1 {
		return cli.UsageErr("-n %d: want the number of ranks, at least 1", *n)
	}
	if fs.NArg() == 0 {
		return cli.UsageErr("no program to run: irisgen run -n N -- PROGRAM [ARGS...]")
	}
	if err := launch.Run(*n, *port, fs.Args(), env.Stdout, env.Stderr); err != nil {
		return cli.Fail(err)
	}
	return nil
}

package commands

import (
	"fmt"
	"os"
	"slices"

	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/gpurun"
)

// bench and probe run on GPUs, in a program that links the generated
// package they time (gputools): irisgen-gpu for the catalogue, or one
// built for the repository's own package (internal/gpurun). The generator
// links neither the GPU platform nor a generated package, so a broken
// generated package never breaks the command that regenerates it.
func init() {
	for _, c := range []struct{ name, summary string }{
		{"bench", "time the collectives on this machine's GPUs beside NCCL (in irisgen-gpu, or a program built for your package)"},
		{"probe", "prove graph capture of every variant and mode on the GPUs (likewise)"},
	} {
		name := c.name
		var cmd *cli.Command
		cmd = &cli.Command{
			Name: name, Summary: c.summary, Usage: name + " [flags]   (" + name + " -h shows them)",
			Help: fmt.Sprintf(`
%[1]s runs on GPUs, in a program that links the generated package it runs,
with the same arguments ("irisgen %[1]s -h" shows its flags):

In irisgen's repository, or where no irisgen.yaml generates a package of
your own, that is %[2]s, irisgen's catalogue: irisgen looks for it beside
its own executable, then on PATH. Build it with "make gpu-build"
(build/%[2]s, beside build/irisgen) or
"go install github.com/irisgen/irisgen/cmd/%[2]s".

In a repository whose irisgen.yaml generates a package of its own, irisgen
builds that program with "go build" for the package (a main of five lines
given to the go command as an overlay: nothing is written into the
repository) and runs it. It is the same as a main of your own that imports
your package and calls gputools.Main (see "go doc
github.com/irisgen/irisgen/gputools"), which you build once for repeated or
multi-process runs ("irisgen run -n 2 -- ./yours probe").`, name, gpurun.CatalogueProgram),
			Run: func(env *cli.Env, args []string) error {
				wd, err := os.Getwd()
				if err != nil {
					return cli.Fail(err)
				}
				code, err := gpurun.Run(wd, name, args, env.Stdout, env.Stderr)
				if err != nil {
					if slices.ContainsFunc(args, cli.IsHelpFlag) {
						env.Usage(cmd) // what to build, since its flags cannot be shown
						fmt.Fprintln(env.Stdout)
					}
					return cli.Fail(fmt.Errorf("it runs on GPUs in a program of its own: %w", err))
				}
				if code != 0 {
					return &cli.ExitError{Code: code} // it printed its own errors
				}
				return nil
			},
		}
		register(cmd)
	}
}

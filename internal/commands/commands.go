// Package commands is irisgen's command line, as sqlc's internal/cmd is:
// the commands (generate, check, validate, explain, kernels, run, and bench
// and probe, which run a GPU program), their flags and help, and what they
// print. The work is done by internal/config (irisgen.yaml and the flags
// over it), internal/driver (the pipeline), internal/explain,
// internal/toolchain and internal/launch; cmd/irisgen only calls Main.
//
// It links no GPU code and not the generated package: `irisgen bench` and
// `irisgen probe` run in a program that links the package they time
// (irisgen-gpu for the catalogue, or one built for a repository's own
// package; internal/gpurun).
package commands

import (
	"io"

	"github.com/irisgen/irisgen/internal/cli"
)

var program = &cli.Program{
	Name:  "irisgen",
	Intro: "irisgen turns YAML specs of multi-GPU collectives into HIP kernels and typed Go launch wrappers.",
	Order: []string{"generate", "check", "validate", "explain", "kernels", "run", "bench", "probe"},
	More: `
generate, check, validate, explain and kernels read irisgen.yaml, found in the
working directory or above it up to the module root (-config FILE names
another); flags override it.`,
}

// register adds a command; the files of this package call it from init.
func register(c *cli.Command) { program.Commands = append(program.Commands, c) }

// Main runs irisgen with args (without the program name) and returns the
// exit code: 0 success, 1 a user error (bad spec, stale output, failed
// compile), 2 a wrong invocation.
func Main(args []string, stdout, stderr io.Writer) int {
	return program.Main(args, stdout, stderr)
}

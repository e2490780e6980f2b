// Command irisgen-gpu holds irisgen's commands that run on GPUs: bench (time
// the catalogue beside NCCL and torch symmetric memory) and probe (prove
// graph capture of every variant and mode). They link the generated package
// and the GPU platform, so they live apart from the generator: `irisgen`
// stays a lean code generator and runs this program, found beside itself
// or on PATH, for `irisgen bench` and `irisgen probe`. Build it with
// `make gpu-build` (build/irisgen-gpu) or
// `go install github.com/irisgen/irisgen/cmd/irisgen-gpu`.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/irisgen/irisgen/internal/cli"
)

var program = &cli.Program{
	Name:  "irisgen-gpu",
	Intro: "irisgen-gpu runs irisgen's GPU commands (also reached as `irisgen bench` and `irisgen probe`).",
}

func main() {
	os.Exit(program.Main(os.Args[1:], os.Stdout, os.Stderr))
}

// The rest adapts internal/cli to the names this package's command files
// use, so that they read as they did in cmd/irisgen.

// command is one subcommand as the files of this package declare it.
type command struct {
	name, summary, usage, help string
	run                        func(env *cmdEnv, args []string) error
}

// cmdEnv is what a command runs with.
type cmdEnv struct {
	stdout, stderr io.Writer
	cli            *cli.Env
}

// byName maps a program command back to this package's command.
var byName = map[string]*command{}

func register(c *command) {
	byName[c.name] = c
	program.Commands = append(program.Commands, &cli.Command{
		Name: c.name, Summary: c.summary, Usage: c.usage, Help: c.help,
		Run: func(env *cli.Env, args []string) error {
			return c.run(&cmdEnv{stdout: env.Stdout, stderr: env.Stderr, cli: env}, args)
		},
	})
}

func find(name string) *command { return byName[name] }

func (env *cmdEnv) flags(c *command) *flag.FlagSet { return env.cli.Flags(program.Find(c.name)) }

func (env *cmdEnv) parse(c *command, fs *flag.FlagSet, args []string) error {
	return env.cli.Parse(program.Find(c.name), fs, args)
}

// exitError carries an exit code; a usage problem is 2, anything else 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e *exitError) ExitCode() int { return e.code }

func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// silentErr exits 1 without printing more: the command already printed what
// went wrong.
var silentErr = cli.Silent

func splitList(s string) []string { return cli.SplitList(s) }

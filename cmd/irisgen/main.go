// Command irisgen generates HIP kernels and typed Go launch wrappers for
// multi-GPU collectives from YAML specs, checks that checked-in output is
// current, explains a collective's rules, compiles the kernels and starts
// multi-process runs.
//
// Run `irisgen help` for the commands and `irisgen <command> -h` for each
// command's flags and examples.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	usage   string // synopsis after "irisgen "
	help    string // description and examples
	run     func(c *cmdEnv, args []string) error
}

// cmdEnv is what a command runs with; tests give it buffers.
type cmdEnv struct {
	stdout, stderr io.Writer
	// lookPath finds compilers; tests replace it.
	lookPath func(string) (string, error)
}

var commands []*command

func register(c *command) { commands = append(commands, c) }

// exitError carries an exit code; a usage problem is 2, anything else 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// usageErr reports a wrong invocation (exit 2).
func usageErr(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// silentErr exits 1 without printing more: the command already printed what
// went wrong (errors listed, a diff).
var silentErr = &exitError{code: 1}

// Main runs irisgen with args (without the program name) and returns the exit
// code: 0 success, 1 a user error (bad spec, stale output, failed compile),
// 2 a wrong invocation.
func Main(args []string, stdout, stderr io.Writer) int {
	env := &cmdEnv{stdout: stdout, stderr: stderr, lookPath: lookPath}
	return env.main(args)
}

func (env *cmdEnv) main(args []string) int {
	if len(args) == 0 {
		env.usage(env.stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if c := find(args[1]); c != nil {
				env.commandUsage(env.stdout, c)
				return 0
			}
		}
		env.usage(env.stdout)
		return 0
	}
	c := find(name)
	if c == nil {
		fmt.Fprintf(env.stderr, "irisgen: unknown command %q\n\n", name)
		env.usage(env.stderr)
		return 2
	}
	err := c.run(env, args[1:])
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(env.stderr, "irisgen %s: %v\n", c.name, ee.err)
		}
		if ee.code == 2 {
			fmt.Fprintf(env.stderr, "run `irisgen %s -h` for usage\n", c.name)
		}
		return ee.code
	}
	fmt.Fprintln(env.stderr, err)
	return 1
}

func find(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (env *cmdEnv) usage(w io.Writer) {
	fmt.Fprint(w, `irisgen turns YAML specs of multi-GPU collectives into HIP kernels and typed Go launch wrappers.

Usage:
  irisgen <command> [flags] [args]

Commands:
`)
	cs := append([]*command(nil), commands...)
	sort.Slice(cs, func(i, j int) bool { return order(cs[i].name) < order(cs[j].name) })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run "irisgen <command> -h" for a command's flags and examples.
`)
}

// order lists commands in the order a user meets them.
func order(name string) int {
	for i, n := range []string{"generate", "check", "validate", "explain", "kernels", "run"} {
		if n == name {
			return i
		}
	}
	return 100
}

func (env *cmdEnv) commandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: irisgen %s\n\n%s\n", c.usage, strings.TrimSpace(c.help))
}

// flags makes the FlagSet of c: -h/--help prints the command's usage with
// its flags and examples to stdout; bad flags print it to stderr (exit 2).
func (env *cmdEnv) flags(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet("irisgen "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args, handling help and flag errors uniformly.
func (env *cmdEnv) parse(c *command, fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		env.commandUsage(env.stdout, c)
		fmt.Fprintln(env.stdout, "\nFlags:")
		fs.SetOutput(env.stdout)
		fs.PrintDefaults()
		return flag.ErrHelp
	}
	if err != nil {
		return usageErr("%v", err)
	}
	return nil
}

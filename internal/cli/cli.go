// Package cli is the subcommand framework of irisgen's commands (`irisgen`
// and `irisgen-gpu`): a list of commands with a synopsis, help text and
// examples each, flag parsing where -h prints all of that, and one mapping
// from errors to exit codes: 0 success, 1 a user error (bad spec, stale
// output, failed compile), 2 a wrong invocation.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string // one line for the command list
	Usage   string // synopsis after the program name
	Help    string // description and examples
	Run     func(env *Env, args []string) error
}

// Program is a command-line program made of subcommands.
type Program struct {
	Name  string // as the user types it: "irisgen"
	Intro string // first line of the usage text
	// Commands, in any order.
	Commands []*Command
	// Order lists command names in the order the usage shows them (the
	// order a user meets them); commands not in it come last.
	Order []string
	// More is printed after the command list.
	More string
}

// Env is what a command runs with; tests give it buffers.
type Env struct {
	Stdout, Stderr io.Writer
	// Program is the program the command belongs to.
	Program *Program
}

// Find returns the command called name, or nil.
func (p *Program) Find(name string) *Command {
	for _, c := range p.Commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Main runs p with args (without the program name) and returns the exit code.
func (p *Program) Main(args []string, stdout, stderr io.Writer) int {
	env := &Env{Stdout: stdout, Stderr: stderr, Program: p}
	if len(args) == 0 {
		p.usage(stderr)
		return 2
	}
	name := args[0]
	if name == "help" || IsHelpFlag(name) {
		if len(args) > 1 {
			if c := p.Find(args[1]); c != nil {
				p.commandUsage(stdout, c)
				return 0
			}
		}
		p.usage(stdout)
		return 0
	}
	c := p.Find(name)
	if c == nil {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", p.Name, name)
		p.usage(stderr)
		return 2
	}
	return p.exit(c, c.Run(env, args[1:]), stderr)
}

// exit prints err the way its kind asks and returns the exit code.
func (p *Program) exit(c *Command, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	code := 1
	var ec interface{ ExitCode() int }
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if err.Error() == "" {
		return code // the command already printed what went wrong
	}
	fmt.Fprintf(stderr, "%s %s: %v\n", p.Name, c.Name, err)
	if code == 2 {
		fmt.Fprintf(stderr, "run `%s %s -h` for usage\n", p.Name, c.Name)
	}
	return code
}

func (p *Program) usage(w io.Writer) {
	fmt.Fprintf(w, "%s\n\nUsage:\n  %s <command> [flags] [args]\n\nCommands:\n", p.Intro, p.Name)
	cs := append([]*Command(nil), p.Commands...)
	rank := func(name string) int {
		for i, n := range p.Order {
			if n == name {
				return i
			}
		}
		return len(p.Order)
	}
	sort.SliceStable(cs, func(i, j int) bool { return rank(cs[i].Name) < rank(cs[j].Name) })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-9s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\nRun \"%s <command> -h\" for a command's flags and examples.\n", p.Name)
	if p.More != "" {
		fmt.Fprintf(w, "%s\n", strings.TrimSpace(p.More))
	}
}

func (p *Program) commandUsage(w io.Writer, c *Command) {
	fmt.Fprintf(w, "Usage: %s %s\n\n%s\n", p.Name, c.Usage, strings.TrimSpace(c.Help))
}

// IsHelpFlag reports whether a is an argument that asks for help: -h,
// -help or --help.
func IsHelpFlag(a string) bool {
	return a == "-h" || a == "-help" || a == "--help"
}

// Usage prints c's usage line, description and examples to stdout: for a
// command whose flags another program holds, when that program cannot be
// run to show them.
func (env *Env) Usage(c *Command) {
	env.Program.commandUsage(env.Stdout, c)
}

// Flags makes the FlagSet of c; Parse handles its help and errors.
func (env *Env) Flags(c *Command) *flag.FlagSet {
	fs := flag.NewFlagSet(env.Program.Name+" "+c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Parse parses args: -h/--help prints the command's usage with its flags and
// examples to stdout (and returns flag.ErrHelp, exit 0); a bad flag is a
// usage error (exit 2).
func (env *Env) Parse(c *Command, fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		env.Program.commandUsage(env.Stdout, c)
		fmt.Fprintln(env.Stdout, "\nFlags:")
		fs.SetOutput(env.Stdout)
		fs.PrintDefaults()
		return flag.ErrHelp
	}
	if err != nil {
		return UsageErr("%v", err)
	}
	return nil
}

// Set reports which flags of fs the user gave, so that a flag overrides a
// config value only when it was set.
func Set(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// ExitError is an error with its exit code.
type ExitError struct {
	Code int
	Err  error // nil: already reported, print nothing more
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

// ExitCode is the process exit code for e.
func (e *ExitError) ExitCode() int { return e.Code }

func (e *ExitError) Unwrap() error { return e.Err }

// UsageErr reports a wrong invocation (exit 2).
func UsageErr(format string, args ...any) error {
	return &ExitError{Code: 2, Err: fmt.Errorf(format, args...)}
}

// Fail reports a user error (exit 1).
func Fail(err error) error { return &ExitError{Code: 1, Err: err} }

// Silent exits 1 without printing more: the command already printed what
// went wrong (errors listed, a diff).
var Silent error = &ExitError{Code: 1}

// SplitList splits a comma-separated flag value, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Plural is "s" unless n is 1.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

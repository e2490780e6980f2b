package commands

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/explain"
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

func init() {
	register(&cli.Command{
		Name:    "validate",
		Summary: "check specs (parse, compile, render) and print every error",
		Usage:   "validate [-config FILE] [-specs DIR] [-templates DIR] [-error-format text|json] [FILE.yaml...]",
		Help: `
Validate parses and compiles the given spec files (default: every spec of the
config, or the built-in catalogue) and renders their kernels and wrappers in
memory, so template/spec access mismatches are reported too. Every problem is
printed as file:line:col: error: message; the exit code is 1 on any error.
Nothing is written.

With -error-format json, each problem is instead one JSON object a line on
stderr, for editors and CI: its code (the kind of problem, stable: syntax,
schema, value, name, undefined, rule, limit, template, config, tuning, io,
internal), file, line, column, end_line and end_column (just past the end;
the start again when the end is not known), severity, message and notes
(each with file, range and message).

Examples:
  irisgen validate
  irisgen validate specs/all_gather.yaml
  irisgen validate -error-format json
  irisgen validate -templates my/templates specs/my_collective.yaml`,
		Run: runValidate,
	})
	register(&cli.Command{
		Name:    "explain",
		Summary: "show a collective's derived rules: placement, aliasing, barriers, capture, kernels",
		Usage:   "explain [-config FILE] [-specs DIR] [-templates DIR] [-world N] NAME",
		Help: `
Explain prints the launch parameters of collective NAME with their ranges,
and for every variant a table of its tensors (direction, shape, the rank
that alone uses it, access, the placement rule the Go wrapper enforces, the
aliasing rule), the barrier modes (default first), whether each mode can be
captured in a GPU graph and why not, the launch shape and the kernels;
for a copy-engine variant, its copies on -world ranks (default 2).
NAME is a collective of the config's specs or catalogue, or any collective
of irisgen's catalogue (with the catalogue: line that would generate it
into the repository's package); -specs "" means the whole catalogue.

Examples:
  irisgen explain all_gather
  irisgen explain broadcast
  irisgen explain -world 4 all_to_all
  irisgen explain -specs specs my_collective`,
		Run: runExplain,
	})
}

func runValidate(env *cli.Env, args []string) error {
	c := program.Find("validate")
	fs := env.Flags(c)
	src := addSourceFlags(fs, true, false)
	if err := env.Parse(c, fs, args); err != nil {
		return err
	}
	_, p, err := src.project(env)
	if err != nil {
		return err
	}
	var cs []*ir.Collective
	if fs.NArg() == 0 {
		if cs, err = p.Compile(); err != nil {
			return src.report(env, err)
		}
	} else {
		var errs diag.List
		for _, file := range fs.Args() {
			b, err := config.ReadFile(file)
			if err != nil {
				return cli.Fail(err)
			}
			c, err := ir.Compile(filepath.ToSlash(file), b, p.Templates)
			var l diag.List
			switch {
			case errors.As(err, &l):
				errs = append(errs, l...)
			case err != nil:
				return cli.Fail(fmt.Errorf("%s: %w", file, err))
			default:
				cs = append(cs, c)
			}
		}
		if len(errs) > 0 {
			errs.Sort()
			return src.report(env, errs)
		}
	}
	if _, err := p.Emit(cs); err != nil {
		return src.report(env, err)
	}
	for _, c := range cs {
		fmt.Fprintf(env.Stdout, "%s: ok (%s: %d variant%s, %d kernel%s)\n", c.SpecFile, c.Name,
			len(c.Variants), cli.Plural(len(c.Variants)), kernelCount(c), cli.Plural(kernelCount(c)))
	}
	return nil
}

func kernelCount(c *ir.Collective) int {
	n := 0
	for _, v := range c.Variants {
		n += len(v.Kernels)
	}
	return n
}

func runExplain(env *cli.Env, args []string) error {
	c := program.Find("explain")
	fs := env.Flags(c)
	src := addSourceFlags(fs, true, false)
	world := fs.Int("world", 2, fmt.Sprintf("the world size of the copy-engine variants' schedules (1 to %d)", irismodel.MaxWorld))
	if err := env.Parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.UsageErr("want one collective name, got %d arguments", fs.NArg())
	}
	if *world < 1 || *world > irismodel.MaxWorld {
		return cli.UsageErr("-world %d: want 1 to %d ranks", *world, irismodel.MaxWorld)
	}
	_, p, err := src.project(env)
	if err != nil {
		return err
	}
	col, note, err := explain.Find(p, fs.Arg(0))
	var l diag.List
	switch {
	case errors.As(err, &l):
		return src.report(env, err)
	case err != nil:
		return cli.Fail(err)
	}
	explain.Write(env.Stdout, col, *world)
	if note != "" {
		fmt.Fprintf(env.Stdout, "\n%s\n", note)
	}
	return nil
}

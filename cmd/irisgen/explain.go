package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/driver"
	"github.com/irisgen/irisgen/internal/emit/goemit"
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

func init() {
	register(&cli.Command{
		Name:    "validate",
		Summary: "check specs (parse, compile, render) and print every error",
		Usage:   "validate [-config FILE] [-specs DIR] [-templates DIR] [FILE.yaml...]",
		Help: `
Validate parses and compiles the given spec files (default: every spec of the
config, or the built-in catalogue) and renders their kernels and wrappers in
memory, so template/spec access mismatches are reported too. Every problem is
printed as file:line:col: error: message; the exit code is 1 on any error.
Nothing is written.

Examples:
  irisgen validate
  irisgen validate specs/all_gather.yaml
  irisgen validate -templates my/templates specs/my_collective.yaml`,
		Run: runValidate,
	})
	register(&cli.Command{
		Name:    "explain",
		Summary: "show a collective's derived rules: placement, aliasing, barriers, capture, kernels",
		Usage:   "explain [-config FILE] [-specs DIR] [-templates DIR] NAME",
		Help: `
Explain prints the launch parameters of collective NAME with their ranges,
and for every variant a table of its tensors (direction, shape, the rank
that alone uses it, access, the placement rule the Go wrapper enforces, the
aliasing rule), the barrier modes (default first), whether each mode can be
captured in a GPU graph and why not, the launch shape and the kernels.
NAME is a collective of the config's specs or catalogue, or any collective
of irisgen's catalogue (with the catalogue: line that would generate it
into the repository's package); -specs "" means the whole catalogue.

Examples:
  irisgen explain all_gather
  irisgen explain broadcast
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
			return reportErr(env, err)
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
			return reportErr(env, errs)
		}
	}
	if _, err := p.Emit(cs); err != nil {
		return reportErr(env, err)
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
	if err := env.Parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.UsageErr("want one collective name, got %d arguments", fs.NArg())
	}
	_, p, err := src.project(env)
	if err != nil {
		return err
	}
	cs, err := p.Compile()
	if err != nil {
		return reportErr(env, err)
	}
	name := fs.Arg(0)
	var names []string
	for _, col := range cs {
		if col.Name == name || goemit.Exported(col.Name) == name {
			explain(env.Stdout, col)
			return nil
		}
		names = append(names, col.Name)
	}
	sort.Strings(names)
	// A collective of irisgen's catalogue that this repository does not
	// generate: explained all the same, with how to generate it here.
	for _, n := range config.CatalogueNames() {
		if n != name && goemit.Exported(n) != name {
			continue
		}
		cat, err := driver.CompileCatalogue([]string{n})
		if err != nil {
			return cli.Fail(err)
		}
		explain(env.Stdout, cat[0])
		if p.Specs != nil || len(p.Catalogue) > 0 { // a repository's own package, not the whole catalogue
			fmt.Fprintf(env.Stdout, "\n%s is in irisgen's catalogue, not in this repository's package (%s); to generate it there, list it in %s: catalogue: [%s]\n",
				n, strings.Join(names, ", "), config.FileName, strings.Join(append(slices.Clone(p.Catalogue), n), ", "))
		}
		return nil
	}
	known := "the specs define " + strings.Join(names, ", ")
	if !slices.Equal(names, config.CatalogueNames()) {
		known += "; irisgen's catalogue has " + strings.Join(config.CatalogueNames(), ", ")
	}
	return cli.Fail(fmt.Errorf("no collective %q; %s", name, known))
}

// explain writes the derived rules of c, one table per variant.
func explain(w io.Writer, c *ir.Collective) {
	fmt.Fprintf(w, "%s (%s): %s\n", c.Name, c.SpecFile, strings.Join(strings.Fields(c.Summary), " "))
	dts := make([]string, len(c.DTypes))
	for i, d := range c.DTypes {
		dts[i] = d.String()
	}
	ops := make([]string, len(c.Ops))
	for i, o := range c.Ops {
		ops[i] = string(o)
	}
	fmt.Fprintf(w, "  dtypes: %s   ops: %s   sizes: %s   spec hash: %s\n",
		orDash(strings.Join(dts, ", ")), orDash(strings.Join(ops, ", ")), orDash(strings.Join(c.Symbols, ", ")), c.SpecHash)
	if len(c.Params) > 0 {
		ps := make([]string, len(c.Params))
		for i, p := range c.Params {
			ps[i] = fmt.Sprintf("%s %s (%s)", p.Name, p.Kind, p.Range(0))
		}
		fmt.Fprintf(w, "  params (per launch, checked before it): %s\n", strings.Join(ps, ", "))
	}
	for _, v := range c.Variants {
		fmt.Fprintf(w, "\nvariant %s (template %s, Go: New%s%sPlan)\n", v.Name, v.Template, goemit.Exported(c.Name), goemit.Exported(v.Name))
		if len(c.Tensors) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  tensor\tdir\tshape\taccess\tplacement\taliasing")
			for i, t := range c.Tensors {
				u := v.Uses[i]
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Dir, shape(c, t), u.Access, placement(t, u), aliasing(c, v, t))
			}
			tw.Flush()
		} else {
			fmt.Fprintln(w, "  no tensors")
		}
		modes := make([]string, len(v.Barriers))
		for i, m := range v.Barriers {
			modes[i] = m.String()
			if i == 0 {
				modes[i] += " (default)"
			}
		}
		fmt.Fprintf(w, "  barriers: %s\n", strings.Join(modes, ", "))
		fmt.Fprintln(w, "  capturable:")
		for _, cp := range v.Capture {
			if cp.Capturable {
				fmt.Fprintf(w, "    %s: yes\n", cp.Mode)
			} else {
				fmt.Fprintf(w, "    %s: no, %s\n", cp.Mode, cp.Reason)
			}
		}
		fmt.Fprintf(w, "  launch: %d threads per block, at most %d blocks, %d-byte vectors (blocks = clamp(ceil(bytes / (threads*vector)), 1, max))\n",
			v.Launch.Threads, v.Launch.MaxBlocks, v.Launch.VectorBytes)
		names := make([]string, len(v.Kernels))
		for i, k := range v.Kernels {
			names[i] = k.Name
		}
		fmt.Fprintf(w, "  kernels: %s\n", strings.Join(names, ", "))
	}
	if a := c.Auto; a != nil {
		fmt.Fprintf(w, "\nvariant %s (Go: %sAuto, %sChoose): from %s, measured: %s\n", irismodel.AutoVariant, goemit.Exported(c.Name), goemit.Exported(c.Name), a.File, a.Measured)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  world\tlargest tensor\tvariant")
		for _, r := range a.Rules {
			world, size := "any", "any size"
			if r.World > 0 {
				world = fmt.Sprint(r.World)
			}
			if r.MaxBytes > 0 {
				size = fmt.Sprintf("<= %d bytes", r.MaxBytes)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", world, size, r.Variant)
		}
		tw.Flush()
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shape(c *ir.Collective, t *ir.Tensor) string {
	s := c.ShapeString(t)
	switch {
	case len(t.Index) > 0:
		s += " " + irismodel.JoinDTypes(t.Index, "|")
	case t.DType != 0:
		s += " " + t.DType.String()
	}
	if t.Optional {
		s += " optional"
	}
	if t.Owner != "" {
		s += " on rank " + t.Owner + " only"
	}
	return s
}

func placement(t *ir.Tensor, u ir.Use) string {
	if t.Dir == irismodel.Workspace && u.Access == 0 {
		return "unused: not allocated"
	}
	if t.Dir == irismodel.Workspace {
		return "plan workspace (heap)"
	}
	p := "any"
	switch u.Placement {
	case ir.PlaceImport:
		p = "import: heap, or staged onto it"
	case ir.PlaceHeap:
		p = "heap: required"
	}
	switch {
	case u.Exchanged():
		p += " (on rank " + t.Owner + "; its address is sent to the peers)"
	case t.Owner != "":
		p += " (on rank " + t.Owner + ")"
	}
	return p
}

func aliasing(c *ir.Collective, v *ir.Variant, t *ir.Tensor) string {
	if t.Dir == irismodel.Workspace {
		return "-"
	}
	var others []string
	for _, p := range v.AliasPairs() {
		switch t {
		case p[0]:
			others = append(others, p[1].Name)
		case p[1]:
			others = append(others, p[0].Name)
		}
	}
	if len(others) == 0 {
		return "-"
	}
	if v.Aliasing == ir.AliasAllow {
		return "same as or disjoint from " + strings.Join(others, ", ")
	}
	return "no overlap with " + strings.Join(others, ", ")
}

// Package explain says what irisgen derived for a collective, as `irisgen
// explain` prints it: the parameters with their ranges, and per variant
// each tensor's placement and aliasing rule, the barrier modes and capture,
// the launch shape and the kernels, all read from the IR (the placement's
// words are the rule table's, as the generated docs use them).
package explain

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/driver"
	"github.com/irisgen/irisgen/internal/emit/goemit"
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Find returns the collective called name (its spec name, or its Go name)
// of p: one its specs or its catalogue: line give, else one of irisgen's
// catalogue, explained all the same, with note saying how to generate it
// into p's package.
func Find(p *driver.Project, name string) (c *ir.Collective, note string, err error) {
	cs, err := p.Compile()
	if err != nil {
		return nil, "", err
	}
	var names []string
	for _, col := range cs {
		if col.Name == name || goemit.Exported(col.Name) == name {
			return col, "", nil
		}
		names = append(names, col.Name)
	}
	sort.Strings(names)
	for _, n := range config.CatalogueNames() {
		if n != name && goemit.Exported(n) != name {
			continue
		}
		cat, err := driver.CompileCatalogue([]string{n})
		if err != nil {
			return nil, "", err
		}
		if p.Specs != nil || len(p.Catalogue) > 0 { // a repository's own package, not the whole catalogue
			note = fmt.Sprintf("%s is in irisgen's catalogue, not in this repository's package (%s); to generate it there, list it in %s: catalogue: [%s]",
				n, strings.Join(names, ", "), config.FileName, strings.Join(append(slices.Clone(p.Catalogue), n), ", "))
		}
		return cat[0], note, nil
	}
	known := "the specs define " + strings.Join(names, ", ")
	if !slices.Equal(names, config.CatalogueNames()) {
		known += "; irisgen's catalogue has " + strings.Join(config.CatalogueNames(), ", ")
	}
	return nil, "", fmt.Errorf("no collective %q; %s", name, known)
}

// Write writes the derived rules of c, one table per variant: per tensor
// its direction, shape, access, placement (ir.Use.PlacementDoc) and
// aliasing; the barrier modes and capture; the launch shape; the kernels;
// the auto table; a copy-engine variant's copies on world ranks.
func Write(w io.Writer, c *ir.Collective, world int) {
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
		engine := "template " + v.Template
		if v.Engine == irismodel.EngineCopy {
			engine = "copy engines, no kernel"
		}
		fmt.Fprintf(w, "\nvariant %s (%s, Go: New%s%sPlan)\n", v.Name, engine, goemit.Exported(c.Name), goemit.Exported(v.Name))
		if len(c.Tensors) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "  tensor\tdir\tshape\taccess\tplacement\taliasing")
			for i, t := range c.Tensors {
				u := v.Uses[i]
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Dir, shape(c, t), u.Access, u.PlacementDoc(), aliasing(c, v, t))
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
		if v.Engine == irismodel.EngineCopy {
			copySchedule(w, c, v, world)
			continue
		}
		fmt.Fprintf(w, "  launch: %d threads per block, at most %d blocks, %d-byte vectors (blocks = clamp(ceil(bytes / (threads*vector)), 1, max))\n",
			v.Launch.Threads, v.Launch.MaxBlocks, v.Launch.VectorBytes)
		if v.Launch.MinBlocks > 1 {
			fmt.Fprintf(w, "  min_blocks %d: where that gives fewer blocks, threads per block = the smallest multiple of %d >= ceil(vectors / %d), from %d to %d\n",
				v.Launch.MinBlocks, irismodel.ThreadStep, v.Launch.MinBlocks, irismodel.ThreadStep, v.Launch.Threads)
		}
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

func aliasing(c *ir.Collective, v *ir.Variant, t *ir.Tensor) string {
	if t.Dir == irismodel.Workspace {
		return "-"
	}
	var others, blocks []string
	for _, p := range v.AliasPairs() {
		o := p[0]
		if t == p[0] {
			o = p[1]
		} else if t != p[1] {
			continue
		}
		switch {
		case v.OwnBlock(t, o):
			blocks = append(blocks, "the rank's own block of "+o.Name)
		case v.OwnBlock(o, t):
			blocks = append(blocks, o.Name+" as the rank's own block")
		default:
			others = append(others, o.Name)
		}
	}
	if len(others) == 0 && len(blocks) == 0 {
		return "-"
	}
	var parts []string
	if len(blocks) > 0 {
		parts = append(parts, strings.Join(blocks, ", ")+" or disjoint")
	}
	if len(others) > 0 && v.Aliasing == ir.AliasAllow {
		parts = append(parts, "same as or disjoint from "+strings.Join(others, ", "))
	} else if len(others) > 0 {
		parts = append(parts, "no overlap with "+strings.Join(others, ", "))
	}
	return strings.Join(parts, "; ")
}

// copySchedule prints a copy-engine variant's copies on world ranks, the
// rank parameters 0, 1, 0, ... (mod world) and the int parameters 1: each
// line a block from a rank's tensor into a rank's, and the rank that
// issues it (the source's).
func copySchedule(w io.Writer, c *ir.Collective, v *ir.Variant, world int) {
	params := make([]int64, len(c.Params))
	var with []string
	ranks := 0
	for i, p := range c.Params {
		switch p.Kind {
		case irismodel.ParamInt:
			params[i] = 1
		case irismodel.ParamRank:
			params[i] = int64(ranks % 2 % world)
			ranks++
		}
		with = append(with, fmt.Sprintf("%s = %d", p.Name, params[i]))
	}
	ranksWord := "ranks"
	if world == 1 {
		ranksWord = "rank"
	}
	title := fmt.Sprintf("  copies on %d %s", world, ranksWord)
	if len(with) > 0 {
		title += " with " + strings.Join(with, ", ")
	}
	fmt.Fprintln(w, title+" (the source's rank issues each, in this order):")
	for _, line := range strings.Split(strings.TrimSuffix(v.Schedule(c, world, params), "\n"), "\n") {
		fmt.Fprintf(w, "    %s\n", line)
	}
}

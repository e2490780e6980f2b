package goemit

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/dave/jennifer/jen"

	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// placeholder keeps the kernels/ directory that kernels.go embeds, so the
// package compiles before any code object is built.
const placeholder = "kernels/README.txt"

func placeholderText() []byte {
	return []byte("// " + header("specs") + `

` + "`irisgen kernels`" + ` compiles this package's kernels into this directory:
<collective>.fatbin for CUDA, <collective>.hsaco for HIP. kernels.go embeds
them in every program that imports the package, which then finds its code
objects with no IRISGEN_KERNELS (rebuild the program after building them).
This file keeps the directory, so the package compiles before any kernel
is built. Keep the code objects out of version control.
`)
}

// kernelsFile embeds kernels/.
func kernelsFile(o options) *jen.File {
	f := jen.NewFile(o.Package)
	f.HeaderComment(header("specs"))
	writeDoc(f, fmt.Sprintf("kernelFiles holds the code objects `%s` builds into kernels/ (%s says how), so every program "+
		"that imports this package carries them; irisrt.Options.Kernels and $IRISGEN_KERNELS come first.", o.KernelsCommand, placeholder))
	f.Comment("")
	f.Comment("//go:embed kernels")
	f.Var().Id("kernelFiles").Qual("embed", "FS")
	return f
}

// multi is a braced list with one item a line; items carry their own
// trailing commas, so a comment may follow one.
var multi = jen.Options{Open: "{", Close: "}", Multi: true}

// field is `name: value`.
func field(name string, value jen.Code) *jen.Statement { return jen.Id(name).Op(":").Add(value) }

func rt(name string) *jen.Statement { return jen.Qual(runtimePkg, name) }

func md(name string) *jen.Statement { return jen.Qual(modelPkg, name) }

func im(name string) *jen.Statement { return jen.Qual(implPkg, name) }

// tableFile is catalogue.go: the version marker, the descriptor table the
// runtime interprets, its registration, and the catalogue read from it.
func tableFile(gens []*gen, o options) *jen.File {
	f := jen.NewFile(o.Package)
	f.HeaderComment(header("specs"))
	f.HeaderComment(fmt.Sprintf("versions: irisgen %s, runtime API %d", emit.Version, API))
	f.ImportName(implPkg, "irisimpl")
	f.ImportName(modelPkg, "irismodel")

	writeDoc(f, "irisimplAPI is the runtime API level this package was generated for. When a line below fails to compile "+
		"with \"constant -1 overflows irisimpl.GeneratedCodeTooOldRegenerate\", the package is older than the irisgen module "+
		"it is built with: regenerate it (`go generate ./...`). With \"... overflows irisimpl.RuntimeTooOldUpdateIrisgen\" "+
		"it is newer: update github.com/irisgen/irisgen in go.mod, or regenerate it with the irisgen go.mod requires.")
	f.Const().Id("irisimplAPI").Op("=").Lit(API)
	f.Line()
	f.Const().Defs(
		jen.Id("_").Op("=").Add(im("GeneratedCodeTooOldRegenerate")).Call(jen.Id("irisimplAPI").Op("-").Add(im("MinAPI"))),
		jen.Id("_").Op("=").Add(im("RuntimeTooOldUpdateIrisgen")).Call(im("API").Op("-").Id("irisimplAPI")),
	)
	f.Line()

	writeDoc(f, "The catalogue's types are the runtime's, so a tool works with the catalogue of any generated package.")
	f.Type().Defs(
		jen.Id("AnyPlan").Op("=").Add(im("AnyPlan")),
		jen.Id("Entry").Op("=").Add(im("Entry")),
		jen.Id("TensorInfo").Op("=").Add(im("TensorInfo")),
	)
	f.Line()
	writeDoc(f, "Catalogue lists every variant of the package, in collective and spec order, with a generic constructor, "+
		"for tools that pick a variant at run time.")
	f.Var().Id("Catalogue").Op("=").Id("table").Dot("Entries").Call()
	f.Line()
	writeDoc(f, "Lookup returns the Entry of collective/variant.")
	f.Func().Id("Lookup").Params(jen.Id("collective"), jen.Id("variant").String()).Params(jen.Id("Entry"), jen.Bool()).Block(
		jen.Return(jen.Id("table").Dot("Lookup").Call(jen.Id("collective"), jen.Id("variant"))),
	)
	f.Line()
	f.Func().Id("init").Params().Block(im("Register").Call(jen.Op("&").Id("table")))
	f.Line()

	modes := &modeSets{}
	var colls []jen.Code
	for i, g := range gens {
		if i > 0 {
			colls = append(colls, jen.Op("}, {"))
		}
		colls = append(colls, g.tableEntry(modes)...)
	}
	writeDoc(f, "table describes every collective and variant of the package to the runtime, which interprets it "+
		"(irisimpl.Table): the plan types above and the catalogue hand it their arguments.")
	f.Var().Id("table").Op("=").Add(im("Table")).Custom(multi,
		field("ImportPath", jen.Lit(o.ImportPath)).Op(","),
		field("KernelsCommand", jen.Lit(o.KernelsCommand)).Op(","),
		field("Embedded", jen.Id("kernelFiles")).Op(","),
		field("Collectives", jen.Index().Add(im("Collective")).Custom(jen.Options{Open: "{{", Close: "}}", Multi: true}, colls...)).Op(","),
	)
	f.Line()
	if len(modes.names) > 0 {
		writeDoc(f, "Barrier modes of the variants (the default first), and those they can be captured in.")
		var defs []jen.Code
		for i, name := range modes.names {
			var ms []jen.Code
			for _, m := range modes.sets[i] {
				ms = append(ms, md(barrierConst(m)))
			}
			defs = append(defs, jen.Id(name).Op("=").Index().Add(md("Barrier")).Values(ms...))
		}
		f.Var().Defs(defs...)
	}
	return f
}

// modeSets names the distinct lists of barrier modes the table uses.
type modeSets struct {
	names []string
	sets  [][]irismodel.Barrier
}

func (m *modeSets) name(set []irismodel.Barrier) string {
	for i, s := range m.sets {
		if slices.Equal(s, set) {
			return m.names[i]
		}
	}
	name := "modes"
	for _, b := range set {
		name += Exported(b.String())
	}
	m.names, m.sets = append(m.names, name), append(m.sets, set)
	return name
}

// tableEntry is the lines of the collective's irisimpl.Collective literal.
func (g *gen) tableEntry(modes *modeSets) []jen.Code {
	c := g.c
	lines := []jen.Code{
		field("Name", jen.Lit(c.Name)).Op(",").Id("SpecHash").Op(":").Id(g.coll + "SpecHash").Op(","),
	}
	if g.hasDType() {
		var ds []jen.Code
		for _, d := range c.DTypes {
			ds = append(ds, md(dtypeConst(d)))
		}
		lines = append(lines, field("DTypes", jen.Index().Add(md("DType")).Values(ds...)).Op(","))
	}
	if g.hasOp() {
		var os []jen.Code
		for _, o := range c.Ops {
			os = append(os, jen.Lit(string(o)))
		}
		lines = append(lines, field("Ops", jen.Index().String().Values(os...)).Op(","))
	}
	if len(c.Symbols) > 0 {
		inferred, _ := g.infer()
		var ss []jen.Code
		for _, s := range c.Symbols {
			from := -1
			if in, ok := inferred[s]; ok {
				from = slices.Index(c.Tensors, in.tensor)
			}
			ss = append(ss, jen.Values(field("Name", jen.Lit(s)), field("From", jen.Lit(from))))
		}
		lines = append(lines, field("Sizes", jen.Index().Add(im("SizeParam")).Values(ss...)).Op(","))
	}
	if len(c.Params) > 0 {
		var ps []jen.Code
		for _, p := range c.Params {
			ps = append(ps, paramEntry(p).Op(",").Comment(p.Range(0)))
		}
		lines = append(lines, field("Params", jen.Index().Add(md("ParamDesc")).Custom(multi, ps...)).Op(","))
	}
	if len(c.Tensors) > 0 {
		var ts []jen.Code
		for _, t := range c.Tensors {
			ts = append(ts, g.tensorEntry(t).Op(",").Comment(c.ShapeString(t)))
		}
		lines = append(lines, field("Tensors", jen.Index().Add(md("TensorDesc")).Custom(multi, ts...)).Op(","))
	}
	var vs []jen.Code
	for _, v := range c.Variants {
		vs = append(vs, g.variantEntry(v, modes).Op(","))
	}
	lines = append(lines, field("Variants", jen.Index().Add(im("Variant")).Custom(multi, vs...)).Op(","))
	if c.Auto != nil {
		var rs []jen.Code
		for _, r := range c.Auto.Rules {
			var fs []jen.Code
			if r.World > 0 {
				fs = append(fs, field("World", jen.Lit(r.World)))
			}
			if r.MaxBytes > 0 {
				fs = append(fs, field("MaxBytes", jen.Op(strconv.FormatInt(r.MaxBytes, 10))))
			}
			rs = append(rs, jen.Values(append(fs, field("Variant", jen.Lit(r.Variant)))...).Op(","))
		}
		lines = append(lines, field("Auto", jen.Index().Add(md("AutoRule")).Custom(multi, rs...)).Op(","))
	}
	return lines
}

// tensorEntry is the irismodel.TensorDesc literal of t.
func (g *gen) tensorEntry(t *ir.Tensor) *jen.Statement {
	dir := map[irismodel.Dir]string{irismodel.In: "In", irismodel.Out: "Out", irismodel.InOut: "InOut", irismodel.Workspace: "Workspace"}[t.Dir]
	var dims []jen.Code
	for _, d := range t.Shape {
		switch {
		case d == irismodel.DimWorld:
			dims = append(dims, md("DimWorld"))
		case d == irismodel.DimBlocks:
			dims = append(dims, md("DimBlocks"))
		case d.Size() >= 0:
			dims = append(dims, md("DimSize").Call(jen.Lit(d.Size())))
		default:
			dims = append(dims, jen.Lit(int(d)))
		}
	}
	fs := []jen.Code{field("Name", jen.Lit(t.Name)), field("Dir", md(dir)), field("Shape", md("Shape").Values(dims...))}
	if t.DType != 0 {
		fs = append(fs, field("DType", md(dtypeConst(t.DType))))
	}
	if len(t.Index) > 0 {
		var ds []jen.Code
		for _, d := range t.Index {
			ds = append(ds, md(dtypeConst(d)))
		}
		fs = append(fs, field("Index", jen.Index().Add(md("DType")).Values(ds...)))
	}
	if t.Optional {
		fs = append(fs, field("Optional", jen.True()))
	}
	if t.Owner != "" {
		fs = append(fs, field("Owner", jen.Lit(t.Owner)))
	}
	return jen.Values(fs...)
}

// paramEntry is the irismodel.ParamDesc literal of p.
func paramEntry(p *ir.Param) *jen.Statement {
	kind := "Param" + Exported(p.Kind.String())
	fs := []jen.Code{field("Name", jen.Lit(p.Name)), field("Kind", md(kind))}
	if p.Kind == irismodel.ParamInt {
		lo, hi := jen.Qual("math", "MinInt64"), jen.Qual("math", "MaxInt64")
		if p.Min != math.MinInt64 {
			lo = jen.Op(strconv.FormatInt(p.Min, 10))
		}
		if p.Max != math.MaxInt64 {
			hi = jen.Op(strconv.FormatInt(p.Max, 10))
		}
		fs = append(fs, field("Min", lo), field("Max", hi))
	}
	return jen.Values(fs...)
}

// useConst is the table's use of a tensor: its derived placement, or
// Unused for a workspace the variant does not touch (not allocated).
func useConst(t *ir.Tensor, u ir.Use) string {
	switch {
	case t.Dir == irismodel.Workspace && u.Access == 0:
		return "Unused"
	case u.Placement == ir.PlaceImport:
		return "UseImport"
	case u.Placement == ir.PlaceHeap:
		return "UseHeap"
	}
	return "UseLocal"
}

// variantEntry is the irisimpl.Variant literal of v, on two lines when it
// has tensors.
func (g *gen) variantEntry(v *ir.Variant, modes *modeSets) *jen.Statement {
	var uses []jen.Code
	for i, t := range g.c.Tensors {
		uses = append(uses, im(useConst(t, v.Uses[i])))
	}
	var capt []irismodel.Barrier
	for _, cp := range v.Capture {
		if cp.Capturable {
			capt = append(capt, cp.Mode)
		}
	}
	fs := []jen.Code{field("Name", jen.Lit(v.Name))}
	if len(uses) > 0 {
		fs = append(fs, field("Uses", jen.Index().Add(im("Use")).Values(uses...)))
	}
	if inPlace(v) {
		fs = append(fs, field("InPlace", jen.True()))
	}
	if ownBlock(v) {
		fs = append(fs, field("OwnBlock", jen.True()))
	}
	barriers := field("Barriers", jen.Id(modes.name(v.Barriers)))
	if len(uses) > 0 {
		barriers = jen.Line().Add(barriers) // the uses fill the first line
	}
	fs = append(fs, barriers)
	if len(capt) > 0 {
		fs = append(fs, field("Capturable", jen.Id(modes.name(capt))))
	}
	fs = append(fs, field("Threads", jen.Lit(v.Launch.Threads)), field("MaxBlocks", jen.Lit(v.Launch.MaxBlocks)))
	if v.Launch.MinBlocks > 1 { // 1 (no effect) is the zero value's meaning: code of specs without it stays as it was
		fs = append(fs, field("MinBlocks", jen.Lit(v.Launch.MinBlocks)))
	}
	fs = append(fs, field("VectorBytes", jen.Lit(v.Launch.VectorBytes)))
	if v.Engine == irismodel.EngineCopy {
		var cs []jen.Code
		for _, st := range v.Copies {
			cs = append(cs, copyEntry(st.CopyStmt).Op(","))
		}
		fs = append(fs, jen.Line().Add(field("Engine", md("EngineCopy"))),
			field("Copies", jen.Index().Add(md("CopyStmt")).Custom(multi, cs...)))
	}
	return jen.Values(fs...)
}

// copyEntry is the irismodel.CopyStmt literal of st.
func copyEntry(st irismodel.CopyStmt) *jen.Statement {
	rank := func(e irismodel.RankExpr) *jen.Statement {
		if e == irismodel.NoRank {
			return md("NoRank")
		}
		fs := []jen.Code{field("Var", jen.Lit(e.Var)), field("Param", jen.Lit(e.Param)), field("Shift", jen.Lit(e.Shift))}
		if e.Neg {
			fs = append(fs, field("Neg", jen.True()))
		}
		return md("RankExpr").Values(fs...)
	}
	end := func(e irismodel.CopyEnd) *jen.Statement {
		return md("CopyEnd").Values(field("Tensor", jen.Lit(e.Tensor)), field("Block", rank(e.Block)), field("Rank", rank(e.Rank)))
	}
	fs := []jen.Code{field("Vars", jen.Lit(st.Vars)), field("From", end(st.From)), field("To", end(st.To))}
	return jen.Values(fs...)
}

// ownBlock reports whether some alias pair of v may be a rank's own block
// of the other (the table's Variant.OwnBlock, which the runtime applies to
// exactly those pairs).
func ownBlock(v *ir.Variant) bool {
	for _, pr := range v.AliasPairs() {
		if v.OwnBlock(pr[0], pr[1]) || v.OwnBlock(pr[1], pr[0]) {
			return true
		}
	}
	return false
}

// inPlace reports whether some alias pair of v may be the very same tensor
// (the table's Variant.InPlace, which the runtime applies to exactly those
// pairs).
func inPlace(v *ir.Variant) bool {
	for _, pr := range v.AliasPairs() {
		if v.InPlace(pr[0], pr[1]) {
			return true
		}
	}
	return false
}

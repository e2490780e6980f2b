package goemit

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// file generates <collective>.go: the typed surface of the collective. The
// rules are the table's (catalogue.go); this file only names them for the
// compiler and the reader.
func (g *gen) file(pkg string) *jen.File {
	c := g.c
	f := jen.NewFile(pkg)
	f.HeaderComment(header(c.SpecFile))
	f.ImportName(runtimePkg, "irisrt")
	f.ImportName(modelPkg, "irismodel")
	f.ImportName(implPkg, "irisimpl")
	f.ImportName(gpuPkg, "gpu")

	writeDoc(f, fmt.Sprintf("%sSpecHash is the hash of %s and the templates it uses; the runtime refuses a code object of %s "+
		"made from other ones (*irisrt.KernelError).", g.coll, c.SpecFile, c.Name))
	f.Const().Id(g.coll + "SpecHash").Op("=").Lit(c.SpecHash)
	f.Line()
	writeDoc(f, fmt.Sprintf("%s is %s in the package's descriptor table.", g.desc(), c.Name))
	f.Var().Id(g.desc()).Op("=").Op("&").Id("table").Dot("Collectives").Index(jen.Lit(g.index))
	f.Line()

	g.variantType(f)
	if len(c.Ops) > 0 {
		g.opType(f)
	}
	g.convenience(f)
	for i, v := range c.Variants {
		g.variant(f, v, i)
	}
	return f
}

func (g *gen) hasDType() bool { return len(g.c.DTypes) > 0 }
func (g *gen) hasOp() bool    { return len(g.c.Ops) > 0 }

func (g *gen) variantType(f *jen.File) {
	c := g.c
	typ := g.coll + "Variant"
	writeDoc(f, fmt.Sprintf("%s selects a variant of %s for %s.", typ, c.Name, g.coll))
	f.Type().Id(typ).String()
	f.Line()
	var defs []jen.Code
	for _, v := range c.Variants {
		defs = append(defs, jen.Id(g.coll+Exported(v.Name)).Id(typ).Op("=").Lit(v.Name))
	}
	doc := fmt.Sprintf("The variants of %s; each has a plan type <Variant>Plan with its rules.", c.Name)
	if c.Auto != nil {
		defs = append(defs, jen.Id(g.coll+"Auto").Id(typ).Op("=").Lit(irismodel.AutoVariant))
		doc += fmt.Sprintf(" %sAuto picks one by world size and message size (%sChoose).", g.coll, g.coll)
	}
	writeDoc(f, doc)
	f.Const().Defs(defs...)
	f.Line()
	if c.Auto != nil {
		g.choose(f)
	}
}

// choose is <Coll>Choose: the table's auto rules, listed in its doc.
func (g *gen) choose(f *jen.File) {
	a := g.c.Auto
	var b strings.Builder
	fmt.Fprintf(&b, "%sChoose is the variant %sAuto runs on world ranks when the launch's largest tensor has the given bytes, "+
		"from %s (measured: %s). The first matching rule wins:\n\n", g.coll, g.coll, a.File, a.Measured)
	for _, r := range a.Rules {
		var conds []string
		if r.World > 0 {
			conds = append(conds, fmt.Sprintf("world == %d", r.World))
		}
		if r.MaxBytes > 0 {
			conds = append(conds, fmt.Sprintf("bytes <= %d", r.MaxBytes))
		}
		if len(conds) == 0 {
			fmt.Fprintf(&b, "  - otherwise: %s\n", r.Variant)
			break
		}
		fmt.Fprintf(&b, "  - %s: %s\n", strings.Join(conds, " and "), r.Variant)
	}
	typ := g.coll + "Variant"
	writeDoc(f, b.String())
	f.Func().Id(g.coll+"Choose").Params(jen.Id("world").Int(), jen.Id("bytes").Int64()).Id(typ).Block(
		jen.Return(jen.Id(typ).Call(jen.Id(g.desc()).Dot("Choose").Call(jen.Id("world"), jen.Id("bytes")))),
	)
	f.Line()
}

func (g *gen) opType(f *jen.File) {
	c := g.c
	typ := g.coll + "Op"
	writeDoc(f, fmt.Sprintf("%s is a reduction operator of %s.", typ, c.Name))
	f.Type().Id(typ).String()
	f.Line()
	var defs []jen.Code
	for _, op := range c.Ops {
		defs = append(defs, jen.Id(g.opConst(op)).Id(typ).Op("=").Lit(string(op)))
	}
	writeDoc(f, fmt.Sprintf("The reduction operators of %s.", c.Name))
	f.Const().Defs(defs...)
	f.Line()
}

// dirWord describes a tensor's direction for docs.
func dirWord(d irismodel.Dir) string {
	switch d {
	case irismodel.In:
		return "in"
	case irismodel.Out:
		return "out"
	case irismodel.InOut:
		return "inout"
	}
	return string(d)
}

func accessDoc(a ir.Access) string { return strings.ReplaceAll(a.String(), ",", " + ") }

// andList joins "a", "b" and "c" as "a, b and c".
func andList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// variantDoc documents the rules of a variant on its plan type; what every
// plan does is the package doc's.
func (g *gen) variantDoc(v *ir.Variant, plan string) string {
	c := g.c
	var b strings.Builder
	fmt.Fprintf(&b, "%s is variant %s of %s (%s).\n\n", plan, v.Name, c.Name, c.SpecFile)
	if len(c.UserTensors()) > 0 {
		b.WriteString("Tensors, in the order Launch takes them:\n\n")
	}
	var ws []string
	for i, t := range c.Tensors {
		u := v.Uses[i]
		if t.Dir == irismodel.Workspace {
			if u.Access != 0 {
				ws = append(ws, fmt.Sprintf("%s %s (%s)", t.Name, c.ShapeString(t), accessDoc(u.Access)))
			}
			continue
		}
		var dt string
		switch {
		case len(t.Index) > 0:
			dt = ", " + irismodel.JoinDTypes(t.Index, " or ")
		case t.DType != 0:
			dt = ", " + t.DType.String()
		}
		if t.Optional {
			dt += ", optional"
		}
		if t.Owner != "" {
			dt += ", on rank " + t.Owner + " only"
		}
		fmt.Fprintf(&b, "  - %s (%s %s%s): %s; %s.\n", t.Name, dirWord(t.Dir), c.ShapeString(t), dt, accessDoc(u.Access), u.PlacementDoc())
	}
	if len(c.Params) > 0 {
		b.WriteString("\nParameters, after the tensors (checked before anything is enqueued: *irisrt.ParamError):\n\n")
		for _, p := range c.Params {
			what := p.Range(0)
			switch p.Kind {
			case irismodel.ParamRank:
				what = "a rank, " + what
			case irismodel.ParamF32:
				what = "not range-checked"
			}
			fmt.Fprintf(&b, "  - %s (%s): %s.\n", local(p.Name), paramGoType(p), what)
		}
	}
	if len(ws) > 0 {
		fmt.Fprintf(&b, "\nWorkspace, on the heap and zeroed by the plan: %s.\n", strings.Join(ws, ", "))
	}
	b.WriteString("\n")
	switch {
	case len(v.AliasPairs()) == 0:
	case inPlace(v):
		b.WriteString("An input may be the very same tensor as an output (in place), but not overlap it in part. ")
	case ownBlock(v):
		b.WriteString("An input may be this rank's own block of an output (in place: output[rank]), else not overlap it at all. ")
	default:
		b.WriteString("Inputs and outputs may not overlap. ")
	}
	b.WriteString("Barrier modes: ")
	var capt []string
	for i, m := range v.Barriers {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.String())
		if i == 0 {
			b.WriteString(" (default)")
		}
		if cp, _ := v.CaptureOf(m); cp.Capturable {
			capt = append(capt, m.String())
		}
	}
	if len(capt) == 0 {
		capt = []string{"none of them"}
	}
	fmt.Fprintf(&b, "; capturable in a graph: %s.", strings.Join(capt, ", "))
	if v.Engine == irismodel.EngineCopy {
		b.WriteString(" No kernel: the copy engines move the blocks, enqueued on the launch stream (" + copyText(g.c, v) + ").")
		return b.String()
	}
	blocks := "up to " + plural(v.Launch.MaxBlocks, "block", "blocks")
	if v.Launch.MaxBlocks == 1 {
		blocks = "1 block"
	}
	fmt.Fprintf(&b, " Grid: %s of %s, sized by %d-byte vectors.", blocks, plural(v.Launch.Threads, "thread", "threads"), v.Launch.VectorBytes)
	if v.Launch.MinBlocks > 1 && v.Launch.Threads > irismodel.ThreadStep {
		fmt.Fprintf(&b, " Where that gives fewer than %d blocks, the blocks have fewer threads (a multiple of %d) and there are up to %d of them.", v.Launch.MinBlocks, irismodel.ThreadStep, v.Launch.MinBlocks)
	}
	return b.String()
}

// constructorParams are r, dt and op where the collective has them, and the
// sizes.
func (g *gen) constructorParams() []jen.Code {
	params := []jen.Code{jen.Id("r").Op("*").Qual(runtimePkg, "Rank")}
	if g.hasDType() {
		params = append(params, jen.Id("dt").Qual(modelPkg, "DType"))
	}
	if g.hasOp() {
		params = append(params, jen.Id("op").Id(g.coll+"Op"))
	}
	for _, s := range g.c.Symbols {
		params = append(params, jen.Id(local(s)).Int64())
	}
	return params
}

// tensorParams are the user tensors, as one parameter list.
func (g *gen) tensorParams() []jen.Code {
	ts := g.c.UserTensors()
	if len(ts) == 0 {
		return nil
	}
	ids := make([]jen.Code, len(ts))
	for i, t := range ts {
		ids[i] = jen.Id(local(t.Name))
	}
	return []jen.Code{jen.List(ids...).Qual(runtimePkg, "Tensor")}
}

// tensorSlice is the user tensors as the []irisrt.Tensor the runtime takes
// (nil without any); the literal stays on the caller's stack.
func (g *gen) tensorSlice() jen.Code {
	ts := g.c.UserTensors()
	if len(ts) == 0 {
		return jen.Nil()
	}
	ids := make([]jen.Code, len(ts))
	for i, t := range ts {
		ids[i] = jen.Id(local(t.Name))
	}
	return jen.Index().Qual(runtimePkg, "Tensor").Values(ids...)
}

// dtArg and opArg are the dtype and op the runtime gets from a
// constructor or convenience call.
func (g *gen) dtArg() jen.Code {
	if g.hasDType() {
		return jen.Id("dt")
	}
	return jen.Lit(0)
}

func (g *gen) opArg() jen.Code {
	if g.hasOp() {
		return jen.String().Call(jen.Id("op"))
	}
	return jen.Lit("")
}

func (g *gen) variant(f *jen.File, v *ir.Variant, index int) {
	c := g.c
	vn := g.coll + Exported(v.Name)
	plan := vn + "Plan"
	label := c.Name + "/" + v.Name

	writeDoc(f, g.variantDoc(v, plan))
	// struct{ irisimpl.VariantPlan }, on one line as gofmt keeps it.
	f.Type().Id(plan).Id("struct").Values(jen.Qual(implPkg, "VariantPlan"))
	f.Line()

	var doc strings.Builder
	fmt.Fprintf(&doc, "New%s makes a plan of %s", plan, label)
	var what []string
	if g.hasDType() {
		what = append(what, "dt ("+irismodel.JoinDTypes(c.DTypes, ", ")+")")
	}
	if g.hasOp() {
		ops := make([]string, len(c.Ops))
		for i, o := range c.Ops {
			ops[i] = string(o)
		}
		what = append(what, "op ("+strings.Join(ops, ", ")+")")
	}
	switch len(c.Symbols) {
	case 0:
	case 1:
		what = append(what, "size "+c.Symbols[0])
	default:
		what = append(what, "sizes "+strings.Join(c.Symbols, ", "))
	}
	if len(what) > 0 {
		doc.WriteString(" for " + andList(what))
	}
	doc.WriteString(".")
	writeDoc(f, doc.String())
	args := []jen.Code{jen.Id("r"), jen.Op("&").Id(g.desc()).Dot("Variants").Index(jen.Lit(index)), g.dtArg(), g.opArg()}
	for _, s := range c.Symbols {
		args = append(args, jen.Id(local(s)))
	}
	f.Func().Id("New"+plan).Params(g.constructorParams()...).Params(jen.Op("*").Id(plan), jen.Error()).Block(
		jen.Return(jen.Qual(implPkg, "NewPlanOf").Types(jen.Id(plan)).Call(args...)),
	)
	f.Line()

	checked := "the tensors"
	if len(c.Params) > 0 {
		checked = "the parameters and the tensors"
	}
	launch := fmt.Sprintf("Launch checks %s by the rules above and launches %s on s in barrier mode mode.", checked, label)
	if len(c.UserTensors()) == 0 && len(c.Params) == 0 {
		launch = fmt.Sprintf("Launch launches %s on s in barrier mode mode.", label)
	}
	writeDoc(f, launch)
	params := append(append(append([]jen.Code{jen.Id("s").Qual(gpuPkg, "Stream")}, g.tensorParams()...), g.paramParams()...), jen.Id("mode").Qual(modelPkg, "Barrier"))
	call := jen.Id("p").Dot("LaunchTensors").Call(jen.Id("s"), g.tensorSlice(), jen.Id("mode"))
	if len(c.Params) > 0 {
		call = jen.Id("p").Dot("LaunchParams").Call(jen.Id("s"), g.tensorSlice(), g.paramSlice(), jen.Id("mode"))
	}
	f.Func().Params(jen.Id("p").Op("*").Id(plan)).Id("Launch").Params(params...).Error().Block(jen.Return(call))
	f.Line()
}

// paramGoType is the Go type of a parameter in the typed signatures.
func paramGoType(p *ir.Param) string {
	switch p.Kind {
	case irismodel.ParamRank:
		return "int"
	case irismodel.ParamF32:
		return "float32"
	}
	return "int64"
}

// paramParams are the launch parameters, typed, as parameters of Launch
// and of the convenience call.
func (g *gen) paramParams() []jen.Code {
	var out []jen.Code
	ps := g.c.Params
	for i := 0; i < len(ps); {
		// Consecutive parameters of one type share it, as gofmt'd code would.
		j := i + 1
		for j < len(ps) && paramGoType(ps[j]) == paramGoType(ps[i]) {
			j++
		}
		var ids []jen.Code
		for _, p := range ps[i:j] {
			ids = append(ids, jen.Id(local(p.Name)))
		}
		out = append(out, jen.List(ids...).Id(paramGoType(ps[i])))
		i = j
	}
	return out
}

// paramSlice is the parameters as the []irismodel.Param the runtime takes;
// the literal stays on the caller's stack.
func (g *gen) paramSlice() jen.Code {
	var vs []jen.Code
	for _, p := range g.c.Params {
		switch p.Kind {
		case irismodel.ParamF32:
			vs = append(vs, md("F32Param").Call(jen.Id(local(p.Name))))
		case irismodel.ParamRank:
			vs = append(vs, md("IntParam").Call(jen.Int64().Call(jen.Id(local(p.Name)))))
		default:
			vs = append(vs, md("IntParam").Call(jen.Id(local(p.Name))))
		}
	}
	return jen.Index().Add(md("Param")).Values(vs...)
}

// inference says which user tensor the convenience call reads a size from:
// sym = tensor.Len / (product of its other dims).
type inference struct {
	sym    string
	tensor *ir.Tensor
}

// infer finds, for every size it can, a user tensor whose shape determines
// it once world and the sizes inferred before are known (the runtime reads
// them in as many rounds, Collective.Run). Sizes it cannot infer (used only
// by workspace, or never alone, or only by tensors one rank passes or a
// launch may leave out: every rank must read the same sizes) stay
// parameters of the convenience call.
func (g *gen) infer() (inferred map[string]inference, order []string) {
	inferred = map[string]inference{}
	known := map[string]bool{irismodel.WorldSymbol: true}
	for progress := true; progress; {
		progress = false
		for _, s := range g.c.Symbols {
			if known[s] {
				continue
			}
		tensors:
			for _, t := range g.c.UserTensors() {
				if t.Owner != "" || t.Optional {
					continue // the other ranks (or a launch) may pass the zero tensor
				}
				count := 0
				for _, d := range t.Shape {
					switch name := d.Name(g.c.Symbols); {
					case d > 0: // a constant
					case name == s:
						count++
					case known[name]:
					default:
						continue tensors
					}
				}
				if count == 1 {
					inferred[s] = inference{s, t}
					order = append(order, s)
					known[s] = true
					progress = true
					break
				}
			}
		}
	}
	return inferred, order
}

func (g *gen) convenience(f *jen.File) {
	c := g.c
	inferred, order := g.infer()
	params := []jen.Code{
		jen.Id("r").Op("*").Qual(runtimePkg, "Rank"),
		jen.Id("s").Qual(gpuPkg, "Stream"),
		jen.Id("variant").Id(g.coll + "Variant"),
	}
	if g.hasDType() {
		params = append(params, jen.Id("dt").Qual(modelPkg, "DType"))
	}
	if g.hasOp() {
		params = append(params, jen.Id("op").Id(g.coll+"Op"))
	}
	var given []jen.Code
	for _, s := range c.Symbols {
		if _, ok := inferred[s]; !ok {
			params = append(params, jen.Id(local(s)).Int64())
			given = append(given, jen.Id(local(s)))
		}
	}
	params = append(append(append(params, g.tensorParams()...), g.paramParams()...), jen.Id("mode").Qual(modelPkg, "Barrier"))

	var doc strings.Builder
	fmt.Fprintf(&doc, "%s runs a variant of %s through the rank's plan cache (see the package doc)", g.coll, c.Name)
	if len(order) > 0 {
		parts := make([]string, len(order))
		for i, s := range order {
			in := inferred[s]
			parts[i] = fmt.Sprintf("%s from %s %s", s, in.tensor.Name, c.ShapeString(in.tensor))
		}
		fmt.Fprintf(&doc, ", with the sizes read from the tensors (%s)", strings.Join(parts, ", "))
	}
	doc.WriteString(".")
	if s := oneLine(c.Summary); s != "" {
		fmt.Fprintf(&doc, " %s", s)
	}
	writeDoc(f, doc.String())
	givenArg := jen.Nil()
	if len(given) > 0 {
		givenArg = jen.Index().Int64().Values(given...)
	}
	args := []jen.Code{jen.Id("r"), jen.Id("s"), jen.String().Call(jen.Id("variant")), g.dtArg(), g.opArg(), givenArg, g.tensorSlice()}
	run := "Run"
	if len(c.Params) > 0 {
		run, args = "RunParams", append(args, g.paramSlice())
	}
	f.Func().Id(g.coll).Params(params...).Error().Block(
		jen.Return(jen.Id(g.desc()).Dot(run).Call(append(args, jen.Id("mode"))...)),
	)
	f.Line()
}

// copyText is a copy-engine variant's schedule as its spec writes it.
func copyText(c *ir.Collective, v *ir.Variant) string {
	tensors := make([]string, len(c.Tensors))
	for i, t := range c.Tensors {
		tensors[i] = t.Name
	}
	params := make([]string, len(c.Params))
	for i, p := range c.Params {
		params[i] = p.Name
	}
	var parts []string
	for _, st := range v.Copies {
		s := ""
		if len(st.Vars) > 0 {
			s = "for each " + strings.Join(st.Vars, ", ") + ": "
		}
		parts = append(parts, s+st.From.Spell(tensors, st.Vars, params)+" -> "+st.To.Spell(tensors, st.Vars, params))
	}
	return strings.Join(parts, "; ")
}

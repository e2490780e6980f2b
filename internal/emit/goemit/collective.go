package goemit

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/irisgen/irisgen/internal/ir"
)

// file generates <collective>.go.
func (g *gen) file(pkg string) *jen.File {
	c := g.c
	f := jen.NewFile(pkg)
	f.HeaderComment(header(c.SpecFile))
	f.ImportName(runtimePkg, "irisrt")
	f.ImportName(gpuPkg, "gpu")

	writeDoc(f, fmt.Sprintf("%sSpecHash is the hash of %s and the templates it uses. The HIP module of %s carries the same hash; "+
		"the runtime refuses to launch a kernel whose hash differs, so a stale wrapper/kernel pair fails at load time.",
		g.coll, c.SpecFile, c.Name))
	f.Const().Id(g.coll + "SpecHash").Op("=").Lit(c.SpecHash)
	f.Line()

	g.variantType(f)
	if len(c.Ops) > 0 {
		g.opType(f)
	}
	for _, v := range c.Variants {
		g.variant(f, v)
	}
	g.convenience(f)
	return f
}

// userTensors are the tensors the caller passes, in spec order.
func (g *gen) userTensors() []*ir.Tensor { return g.c.UserTensors() }

func (g *gen) hasDType() bool { return len(g.c.DTypes) > 0 }
func (g *gen) hasOp() bool    { return len(g.c.Ops) > 0 }

func (g *gen) variantType(f *jen.File) {
	c := g.c
	typ := g.coll + "Variant"
	writeDoc(f, fmt.Sprintf("%s selects an algorithm of %s for %s.", typ, c.Name, g.coll))
	f.Type().Id(typ).String()
	f.Line()
	var defs []jen.Code
	for _, v := range c.Variants {
		name := g.coll + Exported(v.Name)
		defs = append(defs,
			jen.Comment(fmt.Sprintf("%s is variant %s; see %sPlan for its rules.", name, v.Name, name)),
			jen.Id(name).Id(typ).Op("=").Lit(v.Name))
	}
	if c.Auto != nil {
		defs = append(defs,
			jen.Comment(fmt.Sprintf("%sAuto picks a variant by world size and message size (%sChoose).", g.coll, g.coll)),
			jen.Id(g.coll+"Auto").Id(typ).Op("=").Lit(ir.AutoVariant))
	}
	f.Const().Defs(defs...)
	f.Line()
	if c.Auto != nil {
		g.choose(f)
	}
}

// choose is <Coll>Choose, the auto variant's table as code.
func (g *gen) choose(f *jen.File) {
	a := g.c.Auto
	typ := g.coll + "Variant"
	var b strings.Builder
	fmt.Fprintf(&b, "%sChoose is the variant %sAuto runs on world ranks when the launch's largest tensor has the given bytes, "+
		"from %s (measured: %s). The first matching rule wins:\n\n", g.coll, g.coll, a.File, a.Measured)
	var body []jen.Code
	for _, r := range a.Rules {
		var conds []string
		var cond *jen.Statement
		and := func(c *jen.Statement) {
			if cond == nil {
				cond = c
			} else {
				cond = cond.Op("&&").Add(c)
			}
		}
		if r.World > 0 {
			and(jen.Id("world").Op("==").Lit(r.World))
			conds = append(conds, fmt.Sprintf("world == %d", r.World))
		}
		if r.MaxBytes > 0 {
			and(jen.Id("bytes").Op("<=").Lit(r.MaxBytes))
			conds = append(conds, fmt.Sprintf("bytes <= %d", r.MaxBytes))
		}
		ret := jen.Return(jen.Id(g.coll + Exported(r.Variant)))
		if cond == nil {
			fmt.Fprintf(&b, "  - otherwise: %s\n", r.Variant)
			body = append(body, ret)
			break
		}
		fmt.Fprintf(&b, "  - %s: %s\n", strings.Join(conds, " and "), r.Variant)
		body = append(body, jen.If(cond).Block(ret))
	}
	writeDoc(f, b.String())
	f.Func().Id(g.coll+"Choose").Params(jen.Id("world").Int(), jen.Id("bytes").Int64()).Id(typ).Block(body...)
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
		defs = append(defs,
			jen.Comment(fmt.Sprintf("%s reduces with %s.", g.opConst(op), op)),
			jen.Id(g.opConst(op)).Id(typ).Op("=").Lit(string(op)))
	}
	f.Const().Defs(defs...)
	f.Line()
}

// numel is the element count of t as Go code: the product of its dims, with
// sym giving the expression of each symbol.
func numel(t *ir.Tensor, sym func(string) jen.Code) *jen.Statement {
	if len(t.Shape) == 0 {
		return jen.Lit(1)
	}
	var s *jen.Statement
	for i, d := range t.Shape {
		var x jen.Code
		if d.Symbol != "" {
			x = sym(d.Symbol)
		} else {
			x = jen.Lit(int(d.Const))
		}
		if i == 0 {
			s = jen.Add(x)
		} else {
			s = s.Op("*").Add(x)
		}
	}
	return s
}

// esize is the element size of t as Go code.
func esize(t *ir.Tensor) *jen.Statement {
	if t.DType != "" {
		return jen.Qual(runtimePkg, runtimeDType(t.DType)).Dot("Size").Call()
	}
	return jen.Id("dt").Dot("Size").Call()
}

// wantDType is the dtype CheckTensor expects for t, read from the plan.
func wantDType(t *ir.Tensor) *jen.Statement {
	if t.DType != "" {
		return jen.Qual(runtimePkg, runtimeDType(t.DType))
	}
	return jen.Id("p").Dot("dt")
}

func lenField(t *ir.Tensor) string { return "len" + Exported(t.Name) }
func symField(s string) string     { return "sym" + Exported(s) }

// dirWord describes a tensor's direction for docs.
func dirWord(d ir.Dir) string {
	switch d {
	case ir.In:
		return "in"
	case ir.Out:
		return "out"
	case ir.InOut:
		return "inout"
	}
	return string(d)
}

func accessDoc(a ir.Access) string { return strings.ReplaceAll(a.String(), ",", " + ") }

func placementDoc(p ir.Placement) string {
	switch p {
	case ir.PlaceImport:
		return "read by peers: on the symmetric heap, or else Launch copies it on s into plan-owned heap staging before the kernel (no host sync, capturable)"
	case ir.PlaceHeap:
		return "written by peers: must be on the symmetric heap (irisrt.Heap.Alloc); otherwise Launch returns a *irisrt.PlacementError and launches nothing"
	}
	return "only touched locally: any device memory"
}

func (g *gen) variant(f *jen.File, v *ir.Variant) {
	c := g.c
	vn := g.coll + Exported(v.Name)
	plan := vn + "Plan"
	nameConst := lowerFirst(vn) + "Name"
	label := c.Name + "/" + v.Name

	writeDoc(f, fmt.Sprintf("%s names %s in errors.", nameConst, label))
	f.Const().Id(nameConst).Op("=").Lit(label)
	f.Line()

	// The plan type and its documentation: the rules of the variant.
	writeDoc(f, g.variantDoc(v, plan))
	fields := []jen.Code{
		jen.Id("plan").Op("*").Qual(runtimePkg, "Plan"),
	}
	if g.hasDType() {
		fields = append(fields, jen.Id("dt").Qual(runtimePkg, "DType"))
	}
	if g.hasOp() {
		fields = append(fields, jen.Id("op").Id(g.coll+"Op"))
	}
	for _, s := range c.Symbols {
		fields = append(fields, jen.Id(symField(s)).Int64().Comment("size parameter "+s))
	}
	for _, t := range g.userTensors() {
		fields = append(fields, jen.Id(lenField(t)).Int64().Comment("elements of "+t.Name+" "+t.ShapeString()))
	}
	f.Type().Id(plan).Struct(fields...)
	f.Line()

	g.constructor(f, v, vn, plan, nameConst)
	g.launch(f, v, plan, nameConst)
	g.launchTensors(f, plan, nameConst)

	writeDoc(f, "Plan returns the runtime plan: its grid, buffers and barrier modes.")
	f.Func().Params(jen.Id("p").Op("*").Id(plan)).Id("Plan").Params().Op("*").Qual(runtimePkg, "Plan").Block(
		jen.Return(jen.Id("p").Dot("plan")),
	)
	f.Line()
	writeDoc(f, "Close frees the plan's heap buffers; like creating a plan it is collective: every rank must close its plan.")
	f.Func().Params(jen.Id("p").Op("*").Id(plan)).Id("Close").Params().Error().Block(
		jen.Return(jen.Id("p").Dot("plan").Dot("Close").Call()),
	)
	f.Line()
}

// launchTensors is Launch with the user tensors as a slice: the AnyPlan
// method through which the Catalogue's tools launch any variant.
func (g *gen) launchTensors(f *jen.File, plan, nameConst string) {
	ts := g.userTensors()
	args := []jen.Code{jen.Id("s")}
	for i := range ts {
		args = append(args, jen.Id("ts").Index(jen.Lit(i)))
	}
	args = append(args, jen.Id("mode"))
	writeDoc(f, "LaunchTensors is Launch with the tensors in spec order (AnyPlan).")
	f.Func().Params(jen.Id("p").Op("*").Id(plan)).Id("LaunchTensors").Params(
		jen.Id("s").Qual(gpuPkg, "Stream"), jen.Id("ts").Index().Qual(runtimePkg, "Tensor"), jen.Id("mode").Qual(runtimePkg, "Barrier"),
	).Error().Block(
		jen.If(jen.Len(jen.Id("ts")).Op("!=").Lit(len(ts))).Block(
			jen.Return(jen.Qual("fmt", "Errorf").Call(jen.Lit("%s: %d tensors, want "+fmt.Sprint(len(ts))+" ("+tensorNames(ts)+")"), jen.Id(nameConst), jen.Len(jen.Id("ts")))),
		),
		jen.Return(jen.Id("p").Dot("Launch").Call(args...)),
	)
	f.Line()
}

func tensorNames(ts []*ir.Tensor) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// variantDoc documents the rules of a variant on its plan type.
func (g *gen) variantDoc(v *ir.Variant, plan string) string {
	c := g.c
	var b strings.Builder
	fmt.Fprintf(&b, "%s is a prepared launch of %s, variant %s (%s).", plan, c.Name, v.Name, c.SpecFile)
	if s := oneLine(c.Summary); s != "" {
		fmt.Fprintf(&b, " %s", s)
	}
	b.WriteString("\n\n")
	if len(g.userTensors()) > 0 {
		b.WriteString("Tensors, in the order Launch takes them:\n\n")
	}
	for i, t := range c.Tensors {
		if t.Dir == ir.Workspace {
			continue
		}
		u := v.Uses[i]
		dt := "the plan's dtype"
		switch {
		case len(t.IndexDTypes) > 0:
			dt = ir.DTypeList(t.IndexDTypes, " or ")
		case t.DType != "":
			dt = string(t.DType)
		}
		if t.Optional {
			dt += ", optional"
		}
		fmt.Fprintf(&b, "  - %s (%s, shape %s, %s): %s; %s.\n", t.Name, dirWord(t.Dir), t.ShapeString(), dt, accessDoc(u.Access), placementDoc(u.Placement))
	}
	var ws []string
	for i, t := range c.Tensors {
		if t.Dir == ir.Workspace {
			ws = append(ws, fmt.Sprintf("%s %s (%s)", t.Name, t.ShapeString(), accessDoc(v.Uses[i].Access)))
		}
	}
	if len(ws) > 0 {
		fmt.Fprintf(&b, "\nWorkspace, allocated on the heap and zeroed by the plan: %s.\n", strings.Join(ws, ", "))
	}
	if len(g.userTensors()) > 0 {
		b.WriteString("\n")
		switch {
		case len(v.AliasPairs()) == 0:
		case v.Aliasing == ir.AliasAllow:
			b.WriteString("Aliasing: in place allowed; an input may be the very same tensor as an output, but a partial overlap is a *irisrt.AliasError.\n")
		default:
			b.WriteString("Aliasing: forbidden; Launch returns a *irisrt.AliasError when an input overlaps an output.\n")
		}
	}
	b.WriteString("\nBarrier modes: ")
	for i, m := range v.Barriers {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(m))
		if i == 0 {
			b.WriteString(" (default)")
		}
	}
	b.WriteString(".\nGraph capture:\n\n")
	for _, cp := range v.Capture {
		if cp.Capturable {
			fmt.Fprintf(&b, "  - %s: capturable.\n", cp.Mode)
		} else {
			fmt.Fprintf(&b, "  - %s: not capturable: %s.\n", cp.Mode, strings.TrimSuffix(cp.Reason, "."))
		}
	}
	fmt.Fprintf(&b, "\nLaunch shape: %d threads per block, at most %d blocks, %d-byte vectors.", v.Launch.Threads, v.Launch.MaxBlocks, v.Launch.VectorBytes)
	return b.String()
}

// usesWorld reports whether a plan of v needs the world size: a user tensor
// or a workspace v allocates has it in its shape.
func (g *gen) usesWorld(v *ir.Variant) bool {
	for i, t := range g.c.Tensors {
		if t.Dir == ir.Workspace && v.Uses[i].Access == 0 {
			continue
		}
		for _, d := range t.Shape {
			if d.Symbol == ir.SymWorld {
				return true
			}
		}
	}
	return false
}

// symExpr maps shape symbols to constructor locals.
func symExpr(s string) jen.Code {
	switch s {
	case ir.SymWorld:
		return jen.Id("world")
	case ir.SymBlocks:
		return jen.Int64().Call(jen.Id("blocks"))
	}
	return jen.Id(local(s))
}

func (g *gen) constructorParams() []jen.Code {
	params := []jen.Code{jen.Id("r").Op("*").Qual(runtimePkg, "Rank")}
	if g.hasDType() {
		params = append(params, jen.Id("dt").Qual(runtimePkg, "DType"))
	}
	if g.hasOp() {
		params = append(params, jen.Id("op").Id(g.coll+"Op"))
	}
	for _, s := range g.c.Symbols {
		params = append(params, jen.Id(local(s)).Int64())
	}
	return params
}

func (g *gen) constructor(f *jen.File, v *ir.Variant, vn, plan, nameConst string) {
	c := g.c
	ctor := "New" + plan
	var doc strings.Builder
	fmt.Fprintf(&doc, "%s makes a plan for %s: it allocates the plan's heap buffers (barrier flags", ctor, c.Name+"/"+v.Name)
	if len(g.workspace(v)) > 0 {
		doc.WriteString(", workspace")
	}
	if len(g.imports(v)) > 0 {
		doc.WriteString(", staging for imported inputs")
	}
	doc.WriteString(") and zeroes them. It is collective: every rank calls it with the same arguments, in the same order as its other heap allocations. ")
	doc.WriteString("Make plans before capturing a stream: creating one allocates and synchronises with the peers.")
	if g.hasDType() {
		ds := make([]string, len(c.DTypes))
		for i, d := range c.DTypes {
			ds[i] = string(d)
		}
		fmt.Fprintf(&doc, "\n\ndt must be one of %s", strings.Join(ds, ", "))
		if g.hasOp() {
			ops := make([]string, len(c.Ops))
			for i, o := range c.Ops {
				ops[i] = string(o)
			}
			fmt.Fprintf(&doc, " and op one of %s", strings.Join(ops, ", "))
		}
		doc.WriteString(" (otherwise *UnsupportedError).")
	}
	if len(c.Symbols) > 0 {
		fmt.Fprintf(&doc, " The size parameters (%s) must be positive.", strings.Join(c.Symbols, ", "))
	}
	writeDoc(f, doc.String())

	var body []jen.Code
	body = append(body, g.kernelSelect(v, nameConst)...)
	for _, s := range c.Symbols {
		id := local(s)
		body = append(body, jen.If(jen.Id(id).Op("<=").Lit(0)).Block(
			jen.Return(jen.Nil(), jen.Qual("fmt", "Errorf").Call(
				jen.Lit("%s: size parameter "+s+" = %d, want > 0"), jen.Id(nameConst), jen.Id(id))),
		))
	}
	if g.usesWorld(v) {
		body = append(body, jen.Id("world").Op(":=").Int64().Call(jen.Id("r").Dot("World").Call()))
	}
	lit := jen.Dict{}
	if g.hasDType() {
		lit[jen.Id("dt")] = jen.Id("dt")
	}
	if g.hasOp() {
		lit[jen.Id("op")] = jen.Id("op")
	}
	for _, s := range c.Symbols {
		lit[jen.Id(symField(s))] = jen.Id(local(s))
	}
	for _, t := range g.userTensors() {
		lit[jen.Id(lenField(t))] = numel(t, symExpr)
	}
	body = append(body, jen.Id("p").Op(":=").Op("&").Id(plan).Values(lit))

	// The grid follows the largest user tensor, so block b pairs with block
	// b on every peer (all ranks compute the same sizes).
	var sizes []jen.Code
	seen := map[string]bool{}
	for _, t := range g.userTensors() {
		e := jen.Id("p").Dot(lenField(t)).Op("*").Add(esize(t))
		if k := fmt.Sprintf("%#v", e); !seen[k] {
			seen[k] = true
			sizes = append(sizes, e)
		}
	}
	var bytesExpr jen.Code
	switch len(sizes) {
	case 0:
		bytesExpr = jen.Lit(0)
	case 1:
		bytesExpr = sizes[0]
	default:
		bytesExpr = jen.Id("max").Call(sizes...)
	}
	body = append(body, jen.Id("blocks").Op(":=").Qual(runtimePkg, "Blocks").Call(
		bytesExpr, jen.Lit(v.Launch.Threads), jen.Lit(v.Launch.VectorBytes), jen.Lit(v.Launch.MaxBlocks)))

	spec := jen.Dict{
		jen.Id("Op"):       jen.Lit(c.Name),
		jen.Id("Variant"):  jen.Lit(v.Name),
		jen.Id("Module"):   jen.Lit(c.Name),
		jen.Id("SpecHash"): jen.Id(g.coll + "SpecHash"),
		jen.Id("Kernel"):   jen.Id("kernel"),
		jen.Id("Threads"):  jen.Lit(v.Launch.Threads),
		jen.Id("Blocks"):   jen.Id("blocks"),
	}
	var modes, capt []jen.Code
	for _, m := range v.Barriers {
		modes = append(modes, jen.Qual(runtimePkg, barrierConst(m)))
	}
	for _, cp := range v.Capture {
		if cp.Capturable {
			capt = append(capt, jen.Qual(runtimePkg, barrierConst(cp.Mode)))
		}
	}
	spec[jen.Id("Barriers")] = jen.Index().Qual(runtimePkg, "Barrier").Values(modes...)
	if len(capt) > 0 {
		spec[jen.Id("Capturable")] = jen.Index().Qual(runtimePkg, "Barrier").Values(capt...)
	}
	if ws := g.workspace(v); len(ws) > 0 {
		var bufs []jen.Code
		for _, t := range ws {
			bufs = append(bufs, jen.Values(jen.Dict{
				jen.Id("Name"):  jen.Lit(t.Name),
				jen.Id("Bytes"): numel(t, g.planSym).Op("*").Add(esize(t)),
			}))
		}
		spec[jen.Id("Workspace")] = jen.Index().Qual(runtimePkg, "Buffer").Values(bufs...)
	}
	if im := g.imports(v); len(im) > 0 {
		var bufs []jen.Code
		for _, t := range im {
			bufs = append(bufs, jen.Values(jen.Dict{
				jen.Id("Name"):  jen.Lit(t.Name),
				jen.Id("Bytes"): jen.Id("p").Dot(lenField(t)).Op("*").Add(esize(t)),
			}))
		}
		spec[jen.Id("Staging")] = jen.Index().Qual(runtimePkg, "Buffer").Values(bufs...)
	}
	body = append(body,
		jen.List(jen.Id("plan"), jen.Err()).Op(":=").Qual(runtimePkg, "NewPlan").Call(jen.Id("r"), jen.Qual(runtimePkg, "PlanSpec").Values(spec)),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Id("p").Dot("plan").Op("=").Id("plan"),
		jen.Return(jen.Id("p"), jen.Nil()),
	)
	f.Func().Id(ctor).Params(g.constructorParams()...).Params(jen.Op("*").Id(plan), jen.Error()).Block(body...)
	f.Line()
}

// planSym maps shape symbols of workspace tensors inside the constructor,
// after p is filled in.
func (g *gen) planSym(s string) jen.Code {
	switch s {
	case ir.SymWorld:
		return jen.Id("world")
	case ir.SymBlocks:
		return jen.Int64().Call(jen.Id("blocks"))
	}
	return jen.Id("p").Dot(symField(s))
}

// workspace are the workspace tensors v touches; the plan allocates only
// these (a workspace another variant uses is passed as a null pointer).
func (g *gen) workspace(v *ir.Variant) []*ir.Tensor {
	var ts []*ir.Tensor
	for i, t := range g.c.Tensors {
		if t.Dir == ir.Workspace && v.Uses[i].Access != 0 {
			ts = append(ts, t)
		}
	}
	return ts
}

// imports are the user tensors of v with placement import.
func (g *gen) imports(v *ir.Variant) []*ir.Tensor {
	var ts []*ir.Tensor
	for i, t := range g.c.Tensors {
		if t.Dir != ir.Workspace && v.Uses[i].Placement == ir.PlaceImport {
			ts = append(ts, t)
		}
	}
	return ts
}

// kernelSelect declares `kernel` from dt (and op), returning an
// *UnsupportedError that lists the allowed values otherwise.
func (g *gen) kernelSelect(v *ir.Variant, nameConst string) []jen.Code {
	c := g.c
	decl := jen.Var().Id("kernel").String()
	if !g.hasDType() {
		// Nothing to choose: the variant has one kernel.
		return []jen.Code{jen.Id("kernel").Op(":=").Lit(v.Kernels[0].Name)}
	}
	allowedDT := make([]jen.Code, len(c.DTypes))
	for i, d := range c.DTypes {
		allowedDT[i] = jen.Lit(string(d))
	}
	unsupported := func(what string, got jen.Code, allowed []jen.Code) jen.Code {
		return jen.Return(jen.Nil(), jen.Op("&").Id("UnsupportedError").Values(jen.Dict{
			jen.Id("Op"):      jen.Id(nameConst),
			jen.Id("What"):    jen.Lit(what),
			jen.Id("Got"):     got,
			jen.Id("Allowed"): jen.Index().String().Values(allowed...),
		}))
	}
	var dtCases []jen.Code
	for _, d := range c.DTypes {
		var stmt jen.Code
		if !g.hasOp() {
			stmt = jen.Id("kernel").Op("=").Lit(kernelFor(v, d, ir.OpNone))
		} else {
			var opCases []jen.Code
			allowedOp := make([]jen.Code, len(c.Ops))
			for i, o := range c.Ops {
				allowedOp[i] = jen.Lit(string(o))
				opCases = append(opCases, jen.Case(jen.Id(g.opConst(o))).Block(
					jen.Id("kernel").Op("=").Lit(kernelFor(v, d, o))))
			}
			opCases = append(opCases, jen.Default().Block(
				unsupported("op", jen.String().Call(jen.Id("op")), allowedOp)))
			stmt = jen.Switch(jen.Id("op")).Block(opCases...)
		}
		dtCases = append(dtCases, jen.Case(jen.Qual(runtimePkg, runtimeDType(d))).Block(stmt))
	}
	dtCases = append(dtCases, jen.Default().Block(
		unsupported("dtype", jen.Id("dt").Dot("String").Call(), allowedDT)))
	return []jen.Code{decl, jen.Switch(jen.Id("dt")).Block(dtCases...)}
}

// kernelFor finds the IR's kernel of v for (dt, op); the IR names kernels,
// the Go side never re-derives a name.
func kernelFor(v *ir.Variant, dt ir.DType, op ir.Op) string {
	k, _ := v.Kernel(dt, op) // validate made sure it exists
	return k.Name
}

func (g *gen) launchParams() []jen.Code {
	params := []jen.Code{jen.Id("s").Qual(gpuPkg, "Stream")}
	ts := g.userTensors()
	if len(ts) > 0 {
		ids := make([]jen.Code, len(ts))
		for i, t := range ts {
			ids[i] = jen.Id(local(t.Name))
		}
		params = append(params, jen.List(ids...).Qual(runtimePkg, "Tensor"))
	}
	return append(params, jen.Id("mode").Qual(runtimePkg, "Barrier"))
}

func (g *gen) launch(f *jen.File, v *ir.Variant, plan, nameConst string) {
	c := g.c
	ret := func(call jen.Code) jen.Code {
		return jen.If(jen.Err().Op(":=").Add(call), jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err()))
	}
	var body []jen.Code
	var doc strings.Builder
	fmt.Fprintf(&doc, "Launch enqueues %s/%s on s with barrier mode mode (%s when in doubt). ", c.Name, v.Name, v.Barriers[0])
	if len(g.userTensors()) > 0 {
		doc.WriteString("Before anything is enqueued it checks, in order:\n\n")
		doc.WriteString("  - dtype and length of every tensor (*irisrt.DTypeError, *irisrt.ShapeError);\n")
	}
	var optional []string
	for _, t := range g.userTensors() {
		var check jen.Code
		if len(t.IndexDTypes) > 0 {
			want := make([]jen.Code, len(t.IndexDTypes))
			for i, d := range t.IndexDTypes {
				want[i] = jen.Qual(runtimePkg, runtimeDType(d))
			}
			check = ret(jen.Qual(runtimePkg, "CheckTensorOneOf").Call(
				jen.Id(nameConst), jen.Lit(t.Name), jen.Id(local(t.Name)), jen.Index().Qual(runtimePkg, "DType").Values(want...), jen.Id("p").Dot(lenField(t))))
		} else {
			check = ret(jen.Qual(runtimePkg, "CheckTensor").Call(
				jen.Id(nameConst), jen.Lit(t.Name), jen.Id(local(t.Name)), wantDType(t), jen.Id("p").Dot(lenField(t))))
		}
		if t.Optional {
			// Left out (the zero Tensor): the kernel gets a nil pointer.
			optional = append(optional, t.Name)
			check = jen.If(jen.Id(local(t.Name)).Dot("Ptr").Op("!=").Lit(0)).Block(check)
		}
		body = append(body, check)
	}
	if len(optional) > 0 {
		fmt.Fprintf(&doc, "  - (%s optional: the zero irisrt.Tensor leaves it out, and is not checked);\n", strings.Join(optional, ", "))
	}
	var heap []string
	for i, t := range c.Tensors {
		if t.Dir != ir.Workspace && v.Uses[i].Placement == ir.PlaceHeap {
			heap = append(heap, t.Name)
			body = append(body, ret(jen.Qual(runtimePkg, "CheckHeap").Call(
				jen.Id(nameConst), jen.Lit(t.Name), jen.Id("p").Dot("plan").Dot("Rank").Call(), jen.Id(local(t.Name)))))
		}
	}
	if len(heap) > 0 {
		fmt.Fprintf(&doc, "  - %s on the symmetric heap, because peers write it (*irisrt.PlacementError);\n", strings.Join(heap, ", "))
	}
	{
		// The IR decides which pairs may not overlap; the wrapper only checks them.
		var pairs []string
		check, rule := "CheckNoAlias", "no overlap of %s"
		if v.Aliasing == ir.AliasAllow {
			check, rule = "CheckInPlace", "%s the same tensor or disjoint"
		}
		for _, pr := range v.AliasPairs() {
			a, b := pr[0], pr[1]
			pairs = append(pairs, a.Name+"/"+b.Name)
			body = append(body, ret(jen.Qual(runtimePkg, check).Call(
				jen.Id(nameConst), jen.Lit(a.Name), jen.Id(local(a.Name)), jen.Lit(b.Name), jen.Id(local(b.Name)))))
		}
		if len(pairs) > 0 {
			fmt.Fprintf(&doc, "  - "+rule+" (*irisrt.AliasError).\n", strings.Join(pairs, ", "))
		}
	}
	imports := g.imports(v)
	if len(imports) > 0 {
		names := make([]string, len(imports))
		for i, t := range imports {
			names[i] = t.Name
		}
		fmt.Fprintf(&doc, "\nThen %s, read by peers, is copied on s into the plan's heap staging when it is not on the heap "+
			"(refused in mode none, where nothing would order the copy before the peers' reads: *irisrt.PlacementError).", strings.Join(names, ", "))
	}
	doc.WriteString("\n\nThe launch itself never allocates or copies between host and device; host mode synchronises the stream " +
		"and meets the peers on the CPU, so it cannot run while s is capturing (*irisrt.CaptureError). ")
	doc.WriteString("A mode the variant does not support is an error.")

	args := jen.Id("p").Dot("plan").Dot("Args").Call()
	for i, t := range c.Tensors {
		switch {
		case t.Dir == ir.Workspace && v.Uses[i].Access == 0:
			args = args.Dot("Ptr").Call(jen.Lit(0))
		case t.Dir == ir.Workspace:
			args = args.Dot("Ptr").Call(jen.Id("p").Dot("plan").Dot("Buffer").Call(jen.Lit(t.Name)))
		case v.Uses[i].Placement == ir.PlaceImport:
			// Launch copies it onto the heap after its checks when it is not there.
			args = args.Dot("Staged").Call(jen.Lit(t.Name), jen.Id(local(t.Name)))
		default:
			args = args.Dot("Ptr").Call(jen.Id(local(t.Name)).Dot("Ptr"))
		}
	}
	for _, s := range c.Symbols {
		args = args.Dot("I64").Call(jen.Id("p").Dot(symField(s)))
	}
	for _, t := range c.Tensors {
		if len(t.IndexDTypes) > 0 { // the kernel's index_ptr width, after the symbols
			args = args.Dot("I64").Call(jen.Id(local(t.Name)).Dot("DType").Dot("Size").Call())
		}
	}
	body = append(body, jen.Return(jen.Id("p").Dot("plan").Dot("Launch").Call(jen.Id("s"), jen.Id("mode"), args)))

	writeDoc(f, doc.String())
	f.Func().Params(jen.Id("p").Op("*").Id(plan)).Id("Launch").Params(g.launchParams()...).Error().Block(body...)
	f.Line()
}

// inference says how the convenience function finds a symbol from the
// tensors it is given: sym = tensor.Len / (product of the other dims).
type inference struct {
	sym    string
	tensor *ir.Tensor
	others []ir.Dim
}

// infer finds, for every symbol it can, a user tensor whose shape determines
// it once world and the symbols inferred before are known. Symbols it cannot
// infer (used only by workspace, or never alone) stay parameters.
func (g *gen) infer() (inferred []inference, params []string) {
	known := map[string]bool{ir.SymWorld: true}
	for progress := true; progress; {
		progress = false
		for _, s := range g.c.Symbols {
			if known[s] {
				continue
			}
		tensors:
			for _, t := range g.userTensors() {
				count := 0
				var others []ir.Dim
				for _, d := range t.Shape {
					switch {
					case d.Symbol == s:
						count++
					case d.Symbol == "" || known[d.Symbol]:
						others = append(others, d)
					default:
						continue tensors
					}
				}
				if count == 1 {
					inferred = append(inferred, inference{s, t, others})
					known[s] = true
					progress = true
					break
				}
			}
		}
	}
	for _, s := range g.c.Symbols {
		if !known[s] {
			params = append(params, s)
		}
	}
	return inferred, params
}

func inferUsesWorld(inferred []inference) bool {
	for _, in := range inferred {
		for _, d := range in.others {
			if d.Symbol == ir.SymWorld {
				return true
			}
		}
	}
	return false
}

func (g *gen) convenience(f *jen.File) {
	c := g.c
	inferred, symParams := g.infer()
	params := []jen.Code{
		jen.Id("r").Op("*").Qual(runtimePkg, "Rank"),
		jen.Id("s").Qual(gpuPkg, "Stream"),
		jen.Id("variant").Id(g.coll + "Variant"),
	}
	var args []jen.Code // constructor arguments after r
	if g.hasDType() {
		params = append(params, jen.Id("dt").Qual(runtimePkg, "DType"))
		args = append(args, jen.Id("dt"))
	}
	if g.hasOp() {
		params = append(params, jen.Id("op").Id(g.coll+"Op"))
		args = append(args, jen.Id("op"))
	}
	for _, s := range symParams {
		params = append(params, jen.Id(local(s)).Int64())
	}
	for _, s := range c.Symbols {
		args = append(args, jen.Id(local(s)))
	}
	launchParams := g.launchParams()
	params = append(params, launchParams[1:]...)

	var doc strings.Builder
	fmt.Fprintf(&doc, "%s runs %s", g.coll, c.Name)
	if s := oneLine(c.Summary); s != "" {
		fmt.Fprintf(&doc, " (%s)", strings.TrimSuffix(s, "."))
	}
	doc.WriteString(" with the given variant through the rank's plan cache: the first call with a variant, dtype and sizes makes the plan " +
		"(collective: every rank must make the same calls in the same order), later calls reuse it. ")
	if len(inferred) > 0 {
		var parts []string
		for _, in := range inferred {
			parts = append(parts, fmt.Sprintf("%s from %s %s", in.sym, in.tensor.Name, in.tensor.ShapeString()))
		}
		fmt.Fprintf(&doc, "Sizes are taken from the tensors (%s). ", strings.Join(parts, ", "))
	}
	doc.WriteString("It refuses to make a plan while s is capturing (*irisrt.CaptureError): make plans with New<Collective><Variant>Plan before capture. " +
		"Launch documents the checks of each variant.")
	writeDoc(f, doc.String())

	var body []jen.Code
	if inferUsesWorld(inferred) {
		body = append(body, jen.Id("world").Op(":=").Int64().Call(jen.Id("r").Dot("World").Call()))
	}
	for _, in := range inferred {
		t := jen.Id(local(in.tensor.Name)).Dot("Len")
		id := local(in.sym)
		if len(in.others) == 0 {
			body = append(body, jen.Id(id).Op(":=").Add(t))
			continue
		}
		div := numel(&ir.Tensor{Shape: in.others}, symExpr)
		guard := false
		for _, d := range in.others {
			if d.Symbol != "" && d.Symbol != ir.SymWorld {
				guard = true // an inferred symbol may be 0: never divide by it
			}
		}
		if !guard {
			body = append(body, jen.Id(id).Op(":=").Add(t).Op("/").Parens(div))
			continue
		}
		body = append(body,
			jen.Var().Id(id).Int64(),
			jen.If(jen.Id("d").Op(":=").Add(div), jen.Id("d").Op(">").Lit(0)).Block(
				jen.Id(id).Op("=").Add(t).Op("/").Id("d")))
	}
	// The cache is shared by every collective of the rank, so the key names
	// the collective and variant besides the plan's arguments.
	keyFmt := ""
	var keyArgs []jen.Code
	if g.hasDType() {
		keyFmt += " dt=%s"
		keyArgs = append(keyArgs, jen.Id("dt"))
	}
	if g.hasOp() {
		keyFmt += " op=%s"
		keyArgs = append(keyArgs, jen.Id("op"))
	}
	for _, s := range c.Symbols {
		keyFmt += " " + s + "=%d"
		keyArgs = append(keyArgs, jen.Id(local(s)))
	}

	launchArgs := []jen.Code{jen.Id("s")}
	for _, t := range g.userTensors() {
		launchArgs = append(launchArgs, jen.Id(local(t.Name)))
	}
	launchArgs = append(launchArgs, jen.Id("mode"))

	var cases []jen.Code
	for _, v := range c.Variants {
		vn := g.coll + Exported(v.Name)
		ctorArgs := append([]jen.Code{jen.Id("r")}, args...)
		var key jen.Code = jen.Lit(c.Name + "/" + v.Name)
		if keyFmt != "" {
			key = jen.Qual("fmt", "Sprintf").Call(append([]jen.Code{jen.Lit(c.Name + "/" + v.Name + keyFmt)}, keyArgs...)...)
		}
		cases = append(cases, jen.Case(jen.Id(vn)).Block(
			jen.List(jen.Id("v"), jen.Err()).Op(":=").Id("r").Dot("PlanCache").Call().Dot("GetOrCreate").Call(
				key, jen.Id("s"),
				jen.Func().Params().Params(jen.Any(), jen.Error()).Block(
					jen.Return(jen.Id("New"+vn+"Plan").Call(ctorArgs...)))),
			jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
			jen.Return(jen.Id("v").Assert(jen.Op("*").Id(vn+"Plan")).Dot("Launch").Call(launchArgs...)),
		))
	}
	names := make([]string, len(c.Variants))
	for i, v := range c.Variants {
		names[i] = v.Name
	}
	if c.Auto != nil {
		var sizes []jen.Code
		for _, t := range g.userTensors() {
			sizes = append(sizes, jen.Id(local(t.Name)).Dot("Bytes").Call())
		}
		bytes := jen.Lit(0)
		if len(sizes) == 1 {
			bytes = sizes[0].(*jen.Statement)
		} else if len(sizes) > 1 {
			bytes = jen.Id("max").Call(sizes...)
		}
		body = append(body, jen.If(jen.Id("variant").Op("==").Id(g.coll+"Auto")).Block(
			jen.Id("variant").Op("=").Id(g.coll+"Choose").Call(jen.Id("r").Dot("World").Call(), bytes)))
	}
	body = append(body,
		jen.Switch(jen.Id("variant")).Block(cases...),
		jen.Return(jen.Qual("fmt", "Errorf").Call(
			jen.Lit(c.Name+": unknown variant %q (variants: "+strings.Join(names, ", ")+")"), jen.String().Call(jen.Id("variant")))),
	)
	f.Func().Id(g.coll).Params(params...).Error().Block(body...)
}

package goemit

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/irisgen/irisgen/internal/ir"
)

// catalogueFile lists every variant of the package with a generic
// constructor, so tools (irisgen bench, probe) and programs that pick a
// variant at run time need no code per collective.
func catalogueFile(cs []*ir.Collective, o options) *jen.File {
	f := jen.NewFile(o.Package)
	f.HeaderComment(header("specs"))
	f.ImportName(runtimePkg, "irisrt")
	f.ImportName(gpuPkg, "gpu")

	writeDoc(f, "AnyPlan is what every plan of the package offers, whatever its collective.")
	f.Type().Id("AnyPlan").Interface(
		jen.Comment("LaunchTensors launches with the user tensors in spec order."),
		jen.Id("LaunchTensors").Params(jen.Id("s").Qual(gpuPkg, "Stream"), jen.Id("ts").Index().Qual(runtimePkg, "Tensor"),
			jen.Id("mode").Qual(runtimePkg, "Barrier")).Error(),
		jen.Comment("Plan returns the runtime plan."),
		jen.Id("Plan").Params().Op("*").Qual(runtimePkg, "Plan"),
		jen.Comment("Close frees the plan's buffers (collective)."),
		jen.Id("Close").Params().Error(),
	)
	f.Line()
	writeDoc(f, "TensorInfo describes a user tensor of an Entry.")
	f.Type().Id("TensorInfo").Struct(
		jen.Id("Name").String(),
		jen.Id("Dir").String().Comment(`"in", "out" or "inout"`),
		jen.Id("Shape").String().Comment(`as in the spec, e.g. "[world, n]"`),
		jen.Comment("DType is the tensor's fixed element type; 0 (unset): the plan's data type."),
		jen.Id("DType").Qual(runtimePkg, "DType"),
		jen.Comment("IndexDTypes, when set, are the index types a launch may pass (DType first)."),
		jen.Id("IndexDTypes").Index().Qual(runtimePkg, "DType"),
		jen.Comment("Optional: a launch may pass the zero Tensor to leave it out."),
		jen.Id("Optional").Bool(),
		jen.Comment("Remote reports whether peers touch it (placement import or heap)."),
		jen.Id("Remote").Bool(),
		jen.Comment("Heap reports whether it must be on the heap (peers write it)."),
		jen.Id("Heap").Bool(),
		jen.Comment("Numel is its element count for a world size and the sizes in spec order."),
		jen.Id("Numel").Func().Params(jen.Id("world").Int(), jen.Id("sizes").Index().Int64()).Int64(),
	)
	f.Line()
	writeDoc(f, "Entry is one variant of the package.")
	f.Type().Id("Entry").Struct(
		jen.Id("Collective").String(),
		jen.Id("Variant").String(),
		jen.Id("DTypes").Index().Qual(runtimePkg, "DType").Comment("empty: no data type"),
		jen.Id("Ops").Index().String().Comment("empty: does not reduce"),
		jen.Id("Sizes").Index().String().Comment("size parameters, in order"),
		jen.Id("Tensors").Index().Id("TensorInfo").Comment("user tensors, in launch order"),
		jen.Comment("Barriers are the modes a launch may ask for (default first); Capturable those that may be captured."),
		jen.Id("Barriers").Index().Qual(runtimePkg, "Barrier"),
		jen.Id("Capturable").Index().Qual(runtimePkg, "Barrier"),
		jen.Comment("New makes a plan (collective): dt is ignored without DTypes, op without Ops."),
		jen.Id("New").Func().Params(jen.Id("r").Op("*").Qual(runtimePkg, "Rank"), jen.Id("dt").Qual(runtimePkg, "DType"),
			jen.Id("op").String(), jen.Id("sizes").Index().Int64()).Params(jen.Id("AnyPlan"), jen.Error()),
	)
	f.Line()

	var entries []jen.Code
	for _, c := range cs {
		g := &gen{c: c, coll: Exported(c.Name)}
		for _, v := range c.Variants {
			entries = append(entries, g.entry(v))
		}
	}
	writeDoc(f, "Catalogue lists every variant of the package, in collective and spec order.")
	f.Var().Id("Catalogue").Op("=").Index().Id("Entry").Values(entries...)
	f.Line()
	writeDoc(f, "Lookup returns the Entry of collective/variant.")
	f.Func().Id("Lookup").Params(jen.Id("collective"), jen.Id("variant").String()).Params(jen.Id("Entry"), jen.Bool()).Block(
		jen.For(jen.List(jen.Id("_"), jen.Id("e")).Op(":=").Range().Id("Catalogue")).Block(
			jen.If(jen.Id("e").Dot("Collective").Op("==").Id("collective").Op("&&").Id("e").Dot("Variant").Op("==").Id("variant")).Block(
				jen.Return(jen.Id("e"), jen.True()),
			),
		),
		jen.Return(jen.Id("Entry").Values(), jen.False()),
	)
	f.Line()
	writeDoc(f, "ElemType is the tensor's element type in a plan of data type dt: its fixed DType, else dt.")
	f.Func().Params(jen.Id("t").Id("TensorInfo")).Id("ElemType").Params(jen.Id("dt").Qual(runtimePkg, "DType")).Qual(runtimePkg, "DType").Block(
		jen.If(jen.Id("t").Dot("DType").Op("!=").Lit(0)).Block(jen.Return(jen.Id("t").Dot("DType"))),
		jen.Return(jen.Id("dt")),
	)
	f.Line()
	writeDoc(f, "Alloc allocates every tensor of e on r's heap for data type dt and the sizes, in spec order, "+
		"each in its element type; free frees them. Collective, like every heap allocation.")
	rt := func(name string) *jen.Statement { return jen.Qual(runtimePkg, name) }
	f.Func().Params(jen.Id("e").Id("Entry")).Id("Alloc").Params(jen.Id("r").Op("*").Add(rt("Rank")), jen.Id("dt").Add(rt("DType")), jen.Id("sizes").Index().Int64()).
		Params(jen.Id("ts").Index().Add(rt("Tensor")), jen.Id("free").Func().Params(), jen.Err().Error()).Block(
		jen.Id("free").Op("=").Func().Params().Block(
			jen.For(jen.List(jen.Id("_"), jen.Id("t")).Op(":=").Range().Id("ts")).Block(jen.Id("r").Dot("Heap").Call().Dot("Free").Call(jen.Id("t"))),
		),
		jen.For(jen.List(jen.Id("_"), jen.Id("ti")).Op(":=").Range().Id("e").Dot("Tensors")).Block(
			jen.List(jen.Id("t"), jen.Err()).Op(":=").Id("r").Dot("Heap").Call().Dot("Alloc").Call(
				jen.Id("ti").Dot("ElemType").Call(jen.Id("dt")), jen.Id("ti").Dot("Numel").Call(jen.Id("r").Dot("World").Call(), jen.Id("sizes"))),
			jen.If(jen.Err().Op("!=").Nil()).Block(
				jen.Id("free").Call(),
				jen.Return(jen.Nil(), jen.Func().Params().Block(), jen.Qual("fmt", "Errorf").Call(jen.Lit("allocating %s: %w"), jen.Id("ti").Dot("Name"), jen.Err())),
			),
			jen.Id("ts").Op("=").Append(jen.Id("ts"), jen.Id("t")),
		),
		jen.Return(jen.Id("ts"), jen.Id("free"), jen.Nil()),
	)
	return f
}

// entry is the Catalogue literal of v.
func (g *gen) entry(v *ir.Variant) jen.Code {
	c := g.c
	sizeIdx := map[string]int{}
	for i, s := range c.Symbols {
		sizeIdx[s] = i
	}
	sym := func(s string) jen.Code {
		if s == ir.SymWorld {
			return jen.Int64().Call(jen.Id("world"))
		}
		return jen.Id("sizes").Index(jen.Lit(sizeIdx[s]))
	}
	var tensors []jen.Code
	for _, t := range g.userTensors() {
		u := v.Use(t.Name)
		d := jen.Dict{
			jen.Id("Name"):   jen.Lit(t.Name),
			jen.Id("Dir"):    jen.Lit(string(t.Dir)),
			jen.Id("Shape"):  jen.Lit(t.ShapeString()),
			jen.Id("Remote"): jen.Lit(u.Placement != ir.PlaceAny),
			jen.Id("Heap"):   jen.Lit(u.Placement == ir.PlaceHeap),
			jen.Id("Numel"): jen.Func().Params(jen.Id("world").Int(), jen.Id("sizes").Index().Int64()).Int64().Block(
				jen.Return(numel(t, sym)),
			),
		}
		if t.DType != "" {
			d[jen.Id("DType")] = jen.Qual(runtimePkg, runtimeDType(t.DType))
		}
		if len(t.IndexDTypes) > 0 {
			var ds []jen.Code
			for _, x := range t.IndexDTypes {
				ds = append(ds, jen.Qual(runtimePkg, runtimeDType(x)))
			}
			d[jen.Id("IndexDTypes")] = jen.Index().Qual(runtimePkg, "DType").Values(ds...)
		}
		if t.Optional {
			d[jen.Id("Optional")] = jen.True()
		}
		tensors = append(tensors, jen.Values(d))
	}
	var dts, ops, sizes, modes, capt []jen.Code
	for _, d := range c.DTypes {
		dts = append(dts, jen.Qual(runtimePkg, runtimeDType(d)))
	}
	for _, o := range c.Ops {
		ops = append(ops, jen.Lit(string(o)))
	}
	for _, s := range c.Symbols {
		sizes = append(sizes, jen.Lit(s))
	}
	for _, m := range v.Barriers {
		modes = append(modes, jen.Qual(runtimePkg, barrierConst(m)))
	}
	for _, cp := range v.Capture {
		if cp.Capturable {
			capt = append(capt, jen.Qual(runtimePkg, barrierConst(cp.Mode)))
		}
	}
	// The constructor call: NewXPlan(r[, dt][, XOp(op)], sizes[0], ...).
	args := []jen.Code{jen.Id("r")}
	if g.hasDType() {
		args = append(args, jen.Id("dt"))
	}
	if g.hasOp() {
		args = append(args, jen.Id(g.coll+"Op").Call(jen.Id("op")))
	}
	for i := range c.Symbols {
		args = append(args, jen.Id("sizes").Index(jen.Lit(i)))
	}
	plan := g.coll + Exported(v.Name) + "Plan"
	body := []jen.Code{
		jen.If(jen.Len(jen.Id("sizes")).Op("!=").Lit(len(c.Symbols))).Block(
			jen.Return(jen.Nil(), jen.Qual("fmt", "Errorf").Call(jen.Lit(fmt.Sprintf("%s/%s: %%d sizes, want %d (%s)", c.Name, v.Name, len(c.Symbols), joinSyms(c.Symbols))), jen.Len(jen.Id("sizes")))),
		),
		jen.List(jen.Id("p"), jen.Err()).Op(":=").Id("New" + plan).Call(args...),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Err())),
		jen.Return(jen.Id("p"), jen.Nil()),
	}
	e := jen.Dict{
		jen.Id("Collective"): jen.Lit(c.Name),
		jen.Id("Variant"):    jen.Lit(v.Name),
		jen.Id("Barriers"):   jen.Index().Qual(runtimePkg, "Barrier").Values(modes...),
		jen.Id("New"): jen.Func().Params(jen.Id("r").Op("*").Qual(runtimePkg, "Rank"), jen.Id("dt").Qual(runtimePkg, "DType"),
			jen.Id("op").String(), jen.Id("sizes").Index().Int64()).Params(jen.Id("AnyPlan"), jen.Error()).Block(body...),
	}
	if len(dts) > 0 {
		e[jen.Id("DTypes")] = jen.Index().Qual(runtimePkg, "DType").Values(dts...)
	}
	if len(ops) > 0 {
		e[jen.Id("Ops")] = jen.Index().String().Values(ops...)
	}
	if len(sizes) > 0 {
		e[jen.Id("Sizes")] = jen.Index().String().Values(sizes...)
	}
	if len(tensors) > 0 {
		e[jen.Id("Tensors")] = jen.Index().Id("TensorInfo").Values(tensors...)
	}
	if len(capt) > 0 {
		e[jen.Id("Capturable")] = jen.Index().Qual(runtimePkg, "Barrier").Values(capt...)
	}
	return jen.Values(e)
}

func joinSyms(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	out := s[0]
	for _, x := range s[1:] {
		out += ", " + x
	}
	return out
}

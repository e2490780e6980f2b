// Package goemit turns the IR into typed Go launch wrappers with jennifer:
// one file per collective with a plan type per variant whose Launch does
// exactly the checks the spec's access declarations imply, and a doc.go with
// the package documentation and the go:generate line.
//
// Like every emitter it returns file name -> bytes and never touches the
// disk; output is gofmt'd and deterministic.
package goemit

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/ir"
)

// Import paths of the packages the generated code calls.
const (
	runtimePkg = "github.com/irisgen/irisgen/runtime/irisrt"
	gpuPkg     = "github.com/irisgen/irisgen/runtime/gpu"
)

// options are the settings of one package's generation.
type options struct {
	Package      string
	GenerateArgs []string
}

// Emit generates the Go package req.Package ("collectives" when empty) for
// req.Collectives: "<pkg>/<collective>.go" per collective and the package's
// fixed files. Names that would collide in the package are reported as
// positioned errors (a diag.List).
func Emit(req *emit.Request) (emit.Files, error) {
	o := options{Package: req.Package, GenerateArgs: req.GenerateArgs}
	if o.Package == "" {
		o.Package = "collectives"
	}
	cs := req.Collectives
	sorted := append([]*ir.Collective(nil), cs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var errs diag.List
	owners := map[string]ir.Pos{} // exported name -> where it comes from
	claim := func(name string, pos ir.Pos) {
		if file, ok := packageNames[name]; ok {
			errs.Add(pos, fmt.Sprintf("generated Go name %s collides with the package's own %s in %s; rename the collective or variant", name, name, file))
			return
		}
		if prev, ok := owners[name]; ok {
			errs.Add(pos, fmt.Sprintf("generated Go name %s collides with the one generated for %s; rename the collective, variant or op", name, prev))
			return
		}
		owners[name] = pos
	}
	out := emit.Files{}
	for _, c := range sorted {
		if fixedFiles[c.Name] {
			errs.Add(c.Pos, fmt.Sprintf("collective name %q would overwrite the generated package's %s.go; rename the collective", c.Name, c.Name))
			continue
		}
		g := &gen{c: c, coll: Exported(c.Name)}
		for _, n := range g.exportedNames() {
			claim(n.name, n.pos)
		}
		if err := g.validate(); err != nil {
			errs = append(errs, err...)
			continue
		}
		src, err := render(g.file(o.Package))
		if err != nil {
			return nil, fmt.Errorf("goemit: %s: %w", c.Name, err)
		}
		out[path.Join(o.Package, c.Name+".go")] = src
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	src, err := render(docFile(sorted, o))
	if err != nil {
		return nil, fmt.Errorf("goemit: doc.go: %w", err)
	}
	out[path.Join(o.Package, "doc.go")] = src
	src, err = render(errorsFile(o))
	if err != nil {
		return nil, fmt.Errorf("goemit: errors.go: %w", err)
	}
	out[path.Join(o.Package, "errors.go")] = src
	src, err = render(catalogueFile(sorted, o))
	if err != nil {
		return nil, fmt.Errorf("goemit: catalogue.go: %w", err)
	}
	out[path.Join(o.Package, "catalogue.go")] = src
	return out, nil
}

// fixedFiles are the generated files every package has besides one file per
// collective.
var fixedFiles = map[string]bool{"doc": true, "errors": true, "catalogue": true}

// packageNames are the names the fixed files declare, which no collective's
// names may take.
var packageNames = map[string]string{
	"AnyPlan": "catalogue.go", "TensorInfo": "catalogue.go", "Entry": "catalogue.go", "Catalogue": "catalogue.go",
	"Lookup": "catalogue.go", "UnsupportedError": "errors.go",
}

// errorsFile declares the error a plan constructor returns for a dtype or op
// its spec does not list. It lives in the generated package, not in runtime,
// because the allowed values are the spec's.
func errorsFile(o options) *jen.File {
	f := jen.NewFile(o.Package)
	f.HeaderComment(header("specs"))
	writeDoc(f, "UnsupportedError is returned by a plan constructor asked for a dtype or op its collective's spec does not list; nothing was allocated.")
	f.Type().Id("UnsupportedError").Struct(
		jen.Id("Op").String().Comment("collective/variant"),
		jen.Id("What").String().Comment(`"dtype" or "op"`),
		jen.Id("Got").String(),
		jen.Id("Allowed").Index().String().Comment("the spec's list"),
	)
	f.Line()
	f.Line()
	writeDoc(f, "Error names the offending value and the spec's list.")
	f.Func().Params(jen.Id("e").Op("*").Id("UnsupportedError")).Id("Error").Params().String().Block(
		jen.Return(jen.Qual("fmt", "Sprintf").Call(
			jen.Lit("%s: %s %s is not supported; the spec allows %s"),
			jen.Id("e").Dot("Op"), jen.Id("e").Dot("What"), jen.Id("e").Dot("Got"),
			jen.Qual("strings", "Join").Call(jen.Id("e").Dot("Allowed"), jen.Lit(", ")))),
	)
	return f
}

func render(f *jen.File) ([]byte, error) {
	var b bytes.Buffer
	if err := f.Render(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// gen generates the file of one collective.
type gen struct {
	c    *ir.Collective
	coll string // exported name of the collective
}

type owned struct {
	name string
	pos  ir.Pos
}

// exportedNames lists every package-level name the collective's file
// declares, with the spec position responsible for it.
func (g *gen) exportedNames() []owned {
	c := g.c
	names := []owned{
		{g.coll, c.Pos},
		{g.coll + "SpecHash", c.Pos},
		{g.coll + "Variant", c.Pos},
		{lowerFirst(g.coll) + "Names", c.Pos},
	}
	if len(c.Ops) > 0 {
		names = append(names, owned{g.coll + "Op", c.Pos})
		for _, op := range c.Ops {
			names = append(names, owned{g.opConst(op), c.Pos})
		}
	}
	if c.Auto != nil {
		names = append(names, owned{g.coll + "Auto", c.Pos}, owned{g.coll + "Choose", c.Pos})
	}
	for _, v := range c.Variants {
		vn := g.coll + Exported(v.Name)
		names = append(names,
			owned{vn, v.Pos},
			owned{vn + "Plan", v.Pos},
			owned{"New" + vn + "Plan", v.Pos},
			owned{lowerFirst(vn) + "Name", v.Pos},
		)
	}
	return names
}

// validate reports what the IR allows but the Go wrappers cannot express.
func (g *gen) validate() diag.List {
	var errs diag.List
	c := g.c
	for _, t := range c.Tensors {
		if t.Dir == ir.Workspace {
			continue
		}
		for _, d := range t.Shape {
			if d.Symbol == ir.SymBlocks {
				errs.Add(t.Pos, fmt.Sprintf("tensor %s: only workspace shapes may use %q (the grid is derived from the user tensors' sizes)", t.Name, ir.SymBlocks))
			}
		}
		if t.DType == "" && len(c.DTypes) == 0 {
			errs.Add(t.Pos, fmt.Sprintf("tensor %s has the kernel's data type but the collective lists no dtypes", t.Name))
		}
	}
	for _, t := range c.Tensors {
		if t.DType != "" && runtimeDType(t.DType) == "" {
			errs.Add(t.Pos, fmt.Sprintf("tensor %s: dtype %q has no runtime type", t.Name, t.DType))
		}
	}
	for _, dt := range c.DTypes {
		if runtimeDType(dt) == "" {
			errs.Add(c.Pos, fmt.Sprintf("dtype %q has no runtime type", dt))
		}
	}
	for _, v := range c.Variants {
		if len(v.Uses) != len(c.Tensors) {
			errs.Add(v.Pos, fmt.Sprintf("variant %s: %d tensor uses for %d tensors", v.Name, len(v.Uses), len(c.Tensors)))
		}
		// One kernel per dtype x op, named by the IR; a hole would leave
		// the generated switch without a name.
		dts, ops := c.DTypes, c.Ops
		if len(dts) == 0 {
			dts = []ir.DType{""}
		}
		if len(ops) == 0 {
			ops = []ir.Op{ir.OpNone}
		}
		for _, d := range dts {
			for _, o := range ops {
				if _, ok := v.Kernel(d, o); !ok {
					errs.Add(v.Pos, fmt.Sprintf("variant %s has no kernel for dtype %q op %q", v.Name, d, o))
				}
			}
		}
		if len(v.Barriers) == 0 {
			errs.Add(v.Pos, fmt.Sprintf("variant %s supports no barrier mode", v.Name))
		}
		for _, m := range v.Barriers {
			if barrierConst(m) == "" {
				errs.Add(v.Pos, fmt.Sprintf("variant %s: unknown barrier mode %q", v.Name, m))
			}
		}
	}
	return errs
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func runtimeDType(d ir.DType) string {
	switch d {
	case ir.F32:
		return "F32"
	case ir.F16:
		return "F16"
	case ir.BF16:
		return "BF16"
	case ir.I32:
		return "I32"
	case ir.I64:
		return "I64"
	case ir.U64:
		return "U64"
	}
	return ""
}

func barrierConst(m ir.BarrierMode) string {
	switch m {
	case ir.BarrierDevice:
		return "BarrierDevice"
	case ir.BarrierHost:
		return "BarrierHost"
	case ir.BarrierNone:
		return "BarrierNone"
	}
	return ""
}

func (g *gen) opConst(op ir.Op) string { return g.coll + "Op" + Exported(string(op)) }

func header(spec string) string {
	return "Code generated by irisgen from " + spec + ". DO NOT EDIT."
}

// docFile is the package documentation and the go:generate line.
func docFile(cs []*ir.Collective, o options) *jen.File {
	f := jen.NewFile(o.Package)
	f.HeaderComment(header("specs"))
	var b strings.Builder
	fmt.Fprintf(&b, "Package %s holds the typed launch wrappers irisgen generated from the collective specs.\n\n", o.Package)
	b.WriteString("Every collective has a plan type per variant: New<Collective><Variant>Plan allocates what a launch needs " +
		"(workspace, barrier flags, staging for imports) before any capture, and Launch checks the tensors against the " +
		"rules derived from the spec's access declarations (dtype, length, symmetric-heap placement, aliasing), copies " +
		"remote-read inputs that are off the heap into plan-owned staging, and launches the kernel with the chosen barrier mode. " +
		"The <Collective> function does the same through a per-rank plan cache.\n\n")
	b.WriteString("Collectives:\n\n")
	for _, c := range cs {
		vs := make([]string, len(c.Variants))
		for i, v := range c.Variants {
			vs[i] = v.Name
		}
		fmt.Fprintf(&b, "  - %s (%s; variants %s): %s\n", Exported(c.Name), c.SpecFile, strings.Join(vs, ", "), oneLine(c.Summary))
	}
	b.WriteString("\nDo not edit these files: change the specs and run `go generate` (or `irisgen generate`); `irisgen check` fails when they are stale.")
	for _, l := range docLines(b.String()) {
		f.PackageComment(strings.TrimPrefix(strings.TrimPrefix(l, "//"), " "))
	}
	args := "generate"
	if len(o.GenerateArgs) > 0 {
		args += " " + strings.Join(o.GenerateArgs, " ")
	}
	f.Comment("//go:generate go run github.com/irisgen/irisgen/cmd/irisgen " + args)
	return f
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// docLines turns a doc text into `//` comment lines wrapped at about 100
// columns; list items ("  - ") wrap with their indentation, so gofmt and
// go doc keep the layout.
func docLines(text string) []string {
	const width = 100
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			out = append(out, "//")
			continue
		}
		indent := ""
		if strings.HasPrefix(line, "  - ") {
			indent = "    "
		}
		cur := ""
		for _, w := range strings.Fields(line) {
			switch {
			case cur == "":
				if strings.HasPrefix(line, "  - ") {
					cur = "  " + w
				} else {
					cur = w
				}
			case len(cur)+1+len(w) > width:
				out = append(out, "// "+cur)
				cur = indent + w
			default:
				cur += " " + w
			}
		}
		out = append(out, "// "+cur)
	}
	return out
}

// writeDoc writes text as the doc comment of the next declaration of f.
func writeDoc(f *jen.File, text string) {
	for _, l := range docLines(text) {
		f.Comment(l)
	}
}

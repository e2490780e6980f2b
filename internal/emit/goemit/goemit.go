// Package goemit turns the IR into a generated Go package with jennifer:
// one descriptor table of every collective and variant (catalogue.go) that
// runtime/irisimpl interprets for the checks, the kernel names,
// the plan's shape and the catalogue; per collective a file with the typed
// surface a user reads and calls (a plan type, constructor and Launch per
// variant, documented with the variant's rules, and the convenience call);
// the package documentation (doc.go); and kernels.go, which embeds the code
// objects `irisgen kernels` builds into kernels/.
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
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Import paths of the packages the generated code calls.
const (
	runtimePkg = "github.com/irisgen/irisgen/runtime/irisrt"
	modelPkg   = "github.com/irisgen/irisgen/runtime/irismodel"
	implPkg    = "github.com/irisgen/irisgen/runtime/irisimpl"
	gpuPkg     = "github.com/irisgen/irisgen/runtime/gpu"
)

// API is the runtime API level (irisimpl.API) the generated code is written
// against; the generated package refuses to compile against a runtime that
// does not support it.
const API = 4

// Defaults of the request's package settings.
const (
	defaultPackage        = "collectives"
	defaultKernelsCommand = "irisgen kernels"
)

// options are the settings of one package's generation.
type options struct {
	Package        string
	ImportPath     string
	KernelsCommand string
}

// Emit generates the Go package req.Package ("collectives" when empty) for
// req.Collectives: "<pkg>/<collective>.go" per collective and the package's
// fixed files (fixedFiles). req.ImportPath keys the package's kernels in the
// runtime (the package name when empty: fill it wherever two generated
// packages may share a program); req.KernelsCommand is what the runtime's
// errors tell the user to run ("irisgen kernels" when empty). Names that
// would collide in the package are reported as positioned errors (a
// diag.List).
func Emit(req *emit.Request) (emit.Files, error) {
	o := options{Package: req.Package, ImportPath: req.ImportPath, KernelsCommand: req.KernelsCommand}
	if o.Package == "" {
		o.Package = defaultPackage
	}
	if o.ImportPath == "" {
		o.ImportPath = o.Package
	}
	if o.KernelsCommand == "" {
		o.KernelsCommand = defaultKernelsCommand
	}
	sorted := append([]*ir.Collective(nil), req.Collectives...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	var errs diag.List
	owners := map[string]ir.Pos{} // package-level name -> where it comes from
	claim := func(name string, pos ir.Pos) {
		if file, ok := packageNames[name]; ok {
			errs.Add(diag.Name, pos, fmt.Sprintf("generated Go name %s collides with the package's own %s in %s; rename the collective or variant", name, name, file))
			return
		}
		if prev, ok := owners[name]; ok {
			errs.Add(diag.Name, pos, fmt.Sprintf("generated Go name %s collides with the one generated for %s; rename the collective, variant or op", name, prev))
			return
		}
		owners[name] = pos
	}
	out := emit.Files{}
	var gens []*gen
	for i, c := range sorted {
		if fixedFiles[c.Name+".go"] {
			errs.Add(diag.Name, c.Pos, fmt.Sprintf("collective name %q would overwrite the generated package's %s.go; rename the collective", c.Name, c.Name))
			continue
		}
		g := &gen{c: c, coll: Exported(c.Name), index: i}
		for _, n := range g.packageNames() {
			claim(n.name, n.pos)
		}
		if err := g.validate(); err != nil {
			errs = append(errs, err...)
			continue
		}
		gens = append(gens, g)
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	for _, g := range gens {
		src, err := render(g.file(o.Package))
		if err != nil {
			return nil, fmt.Errorf("goemit: %s: %w", g.c.Name, err)
		}
		out[path.Join(o.Package, g.c.Name+".go")] = src
	}
	for name, f := range map[string]*jen.File{
		"doc.go":       docFile(sorted, o),
		"catalogue.go": tableFile(gens, o),
		"kernels.go":   kernelsFile(o),
	} {
		src, err := render(f)
		if err != nil {
			return nil, fmt.Errorf("goemit: %s: %w", name, err)
		}
		out[path.Join(o.Package, name)] = src
	}
	out[path.Join(o.Package, placeholder)] = placeholderText()
	return out, nil
}

// fixedFiles are the files every generated package has besides one file
// per collective.
var fixedFiles = map[string]bool{"doc.go": true, "catalogue.go": true, "kernels.go": true}

// packageNames are the exported names the fixed files declare, which no
// collective's names may take. The fixed files' unexported names (table,
// kernelFiles, irisimplAPI, modes...) never end in "Desc", as the collectives'
// do.
var packageNames = map[string]string{
	"AnyPlan": "catalogue.go", "TensorInfo": "catalogue.go", "Entry": "catalogue.go", "Catalogue": "catalogue.go",
	"Lookup": "catalogue.go",
}

func render(f *jen.File) ([]byte, error) {
	var b bytes.Buffer
	if err := f.Render(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// gen generates the file of one collective and its part of the table.
type gen struct {
	c     *ir.Collective
	coll  string // exported name of the collective
	index int    // position in the table's Collectives
}

type owned struct {
	name string
	pos  ir.Pos
}

// packageNames lists every package-level name the collective's file
// declares, with the spec position responsible for it.
func (g *gen) packageNames() []owned {
	c := g.c
	names := []owned{
		{g.coll, c.Pos},
		{g.coll + "SpecHash", c.Pos},
		{g.coll + "Variant", c.Pos},
		{g.desc(), c.Pos},
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
		names = append(names, owned{vn, v.Pos}, owned{vn + "Plan", v.Pos}, owned{"New" + vn + "Plan", v.Pos})
	}
	return names
}

// desc is the unexported variable that points at the collective's entry
// of the table.
func (g *gen) desc() string { return lowerFirst(g.coll) + "Desc" }

// validate reports what the IR allows but the generated package cannot
// express.
func (g *gen) validate() diag.List {
	var errs diag.List
	c := g.c
	for _, t := range c.Tensors {
		if t.Dir == irismodel.Workspace {
			continue
		}
		for _, d := range t.Shape {
			if d == irismodel.DimBlocks {
				errs.Add(diag.Internal, t.Pos, fmt.Sprintf("tensor %s: only workspace shapes may use %q (the grid is derived from the user tensors' sizes)", t.Name, irismodel.BlocksSymbol))
			}
		}
		if t.DType == 0 && len(c.DTypes) == 0 {
			errs.Add(diag.Internal, t.Pos, fmt.Sprintf("tensor %s has the kernel's data type but the collective lists no dtypes", t.Name))
		}
	}
	for _, t := range c.Tensors {
		if t.DType != 0 && dtypeConst(t.DType) == "" {
			errs.Add(diag.Internal, t.Pos, fmt.Sprintf("tensor %s: dtype %q has no runtime type", t.Name, t.DType))
		}
	}
	for _, dt := range c.DTypes {
		if dtypeConst(dt) == "" {
			errs.Add(diag.Internal, c.Pos, fmt.Sprintf("dtype %q has no runtime type", dt))
		}
	}
	errs = append(errs, g.localNames()...)
	if len(c.Symbols) > 64 {
		errs.Add(diag.Limit, c.Pos, fmt.Sprintf("%d size parameters; the runtime supports at most 64", len(c.Symbols)))
	}
	for _, v := range c.Variants {
		if len(v.Uses) != len(c.Tensors) {
			errs.Add(diag.Internal, v.Pos, fmt.Sprintf("variant %s: %d tensor uses for %d tensors", v.Name, len(v.Uses), len(c.Tensors)))
		}
		// The runtime names the kernel of every dtype x op
		// (irisimpl.Variant.Kernel); the IR must have compiled each.
		dts, ops := c.DTypes, c.Ops
		if len(dts) == 0 {
			dts = []irismodel.DType{0}
		}
		if len(ops) == 0 {
			ops = []ir.Op{ir.OpNone}
		}
		for _, d := range dts {
			for _, o := range ops {
				if _, ok := v.Kernel(d, o); !ok && v.Engine != irismodel.EngineCopy {
					errs.Add(diag.Internal, v.Pos, fmt.Sprintf("variant %s has no kernel for dtype %q op %q", v.Name, d, o))
				}
			}
		}
		if len(v.Barriers) == 0 {
			errs.Add(diag.Internal, v.Pos, fmt.Sprintf("variant %s supports no barrier mode", v.Name))
		}
		for _, m := range v.Barriers {
			if barrierConst(m) == "" {
				errs.Add(diag.Internal, v.Pos, fmt.Sprintf("variant %s: unknown barrier mode %q", v.Name, m))
			}
		}
	}
	return errs
}

// localNames refuses sizes, user tensors and parameters whose Go names
// (local) coincide: the constructor, Launch and the convenience call take
// them in one parameter list, where Go refuses two of a name ("x1
// redeclared in this block"). Each clash is reported at the later of the
// two, with a free name to rename it to.
func (g *gen) localNames() diag.List {
	c := g.c
	type named struct {
		kind, name string
		pos        ir.Pos
	}
	var all []named
	for i, s := range c.Symbols {
		pos := c.Pos
		if i < len(c.SymbolPos) {
			pos = c.SymbolPos[i]
		}
		all = append(all, named{"size", s, pos})
	}
	for _, t := range c.UserTensors() {
		all = append(all, named{"tensor", t.Name, t.Pos})
	}
	for _, p := range c.Params {
		all = append(all, named{"parameter", p.Name, p.Pos})
	}
	names, ids := map[string]bool{}, map[string]bool{}
	for _, n := range all {
		names[n.name] = true
		ids[local(n.name)] = true
	}
	var errs diag.List
	taken := map[string]named{}
	for _, n := range all {
		id := local(n.name)
		prev, clash := taken[id]
		if !clash {
			taken[id] = n
			continue
		}
		errs.Add(diag.Name, n.pos, fmt.Sprintf("%s %q and %s %q (at %d:%d) are both %s in the generated Go code, where they are parameters of the same function (Go refuses the file: %s redeclared); rename the %s, e.g. to %q",
			n.kind, n.name, prev.kind, prev.name, prev.pos.Line, prev.pos.Col, id, id, n.kind, freeName(n.name, names, ids)))
	}
	return errs
}

// freeName is a name like name (name2, name3, ...) that neither a spec
// name nor a Go name of the collective takes.
func freeName(name string, names, ids map[string]bool) string {
	for k := 2; ; k++ {
		suffix := fmt.Sprint(k)
		base := name
		if len(base)+len(suffix) > ir.MaxNameLen {
			base = base[:ir.MaxNameLen-len(suffix)]
		}
		if cand := base + suffix; !names[cand] && !ids[local(cand)] {
			return cand
		}
	}
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// dtypeConst is irismodel's constant of d ("F32", "BF16", ...), or "" for
// no valid dtype.
func dtypeConst(d irismodel.DType) string {
	if !d.Valid() {
		return ""
	}
	return strings.ToUpper(d.String())
}

// barrierConst is irismodel's constant of m ("BarrierDevice", ...), or ""
// for no valid mode.
func barrierConst(m irismodel.Barrier) string {
	if !m.Valid() {
		return ""
	}
	return "Barrier" + Exported(m.String())
}

func (g *gen) opConst(op ir.Op) string { return g.coll + "Op" + Exported(string(op)) }

func header(spec string) string {
	return "Code generated by irisgen from " + spec + ". DO NOT EDIT."
}

// docFile is the package documentation: what every plan of the package
// does, said once, and the list of collectives.
func docFile(cs []*ir.Collective, o options) *jen.File {
	f := jen.NewFile(o.Package)
	f.HeaderComment(header("specs"))
	var b strings.Builder
	fmt.Fprintf(&b, "Package %s holds the typed launch wrappers irisgen generated from the collective specs.\n\n", o.Package)
	b.WriteString("Each variant of a collective is a plan type: New<Collective><Variant>Plan makes it, Launch runs it, Close frees it; " +
		"its documentation gives the variant's rules, which the generator derived from the spec's access declarations. " +
		"The descriptor table in catalogue.go holds the same facts for the runtime (package irisimpl interprets it), which enforces them. " +
		"What every plan does:\n\n")
	for _, item := range []string{
		"Making and closing a plan is collective: every rank makes the same plans with the same arguments, in the same order " +
			"as its other heap allocations. Make plans before capturing a stream: making one loads the kernel, allocates and " +
			"zeroes the plan's heap buffers (barrier flags, workspace, staging) and waits for the other ranks.",
		"A constructor refuses a dtype or op the spec does not list (*irisrt.UnsupportedError) and negative sizes; " +
			"the sizes fix every tensor's length. A size of 0 is valid: when it leaves every tensor empty, launches check " +
			"their arguments and enqueue nothing (no kernel, no barrier; nothing is captured), as NCCL does for a count of 0.",
		"Launch checks, before anything is enqueued and in this order: every launch parameter's range (*irisrt.ParamError); " +
			"the dtype and length of every tensor " +
			"(*irisrt.DTypeError, *irisrt.ShapeError; an optional tensor may be the zero irisrt.Tensor, and a tensor only one " +
			"rank uses is checked on that rank only: the others pass the zero irisrt.Tensor); that every tensor " +
			"peers write is on the symmetric heap (*irisrt.PlacementError: allocate it with Rank.Heap().Alloc, since copying " +
			"it there would lose the peers' writes); the variant's aliasing rule (*irisrt.AliasError); the barrier mode " +
			"(*irisrt.BarrierModeError). Then it copies every tensor peers only read that is not on the heap into the plan's " +
			"staging, on the stream (refused in mode none, where nothing would order the copy before the peers' reads), and " +
			"launches the kernel.",
		"A launch never allocates, never copies between host and device and never waits on the host, so it can be captured " +
			"in a graph, except in barrier mode host (stream synchronise and CPU rendezvous before and after the kernel), which " +
			"is refused while the stream captures (*irisrt.CaptureError). A captured launch replays the parameters it was " +
			"captured with: capture again for other values.",
		"<Collective>(r, s, variant, ...) does the same through the rank's plan cache: the first call with a variant, dtype, " +
			"op and sizes makes the plan (collectively), later calls reuse it; it refuses to make a plan while s captures.",
		"Catalogue lists every variant with a generic constructor, for tools that pick variants at run time.",
		"The code objects come from irisrt.Options.Kernels, else $IRISGEN_KERNELS, else the ones `" + o.KernelsCommand +
			"` builds into kernels/, which kernels.go embeds in every program that imports the package.",
	} {
		b.WriteString("  - " + item + "\n")
	}
	b.WriteString("\nCollectives:\n\n")
	for _, c := range cs {
		vs := make([]string, len(c.Variants))
		for i, v := range c.Variants {
			vs[i] = v.Name
		}
		fmt.Fprintf(&b, "  - %s (%s; variants %s): %s\n", Exported(c.Name), c.SpecFile, strings.Join(vs, ", "), oneLine(c.Summary))
	}
	b.WriteString("\nDo not edit these files: change the specs and regenerate; `irisgen check` fails when they are stale.")
	for _, l := range docLines(b.String()) {
		f.PackageComment(strings.TrimPrefix(strings.TrimPrefix(l, "//"), " "))
	}
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

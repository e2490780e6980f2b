package ir

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math"
	"math/bits"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/spec"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// ABIVersion is hashed into every SpecHash: bump it when the kernel ABI
// (docs/internals.md) changes, so that every module and wrapper built before
// the change is refused at load time.
const ABIVersion = "irisgen-abi-1"

// TemplateExt is the file extension of templates in the templates fs.
const TemplateExt = ".hip.tmpl"

// HostCaptureReason is why a launch with the host barrier cannot be captured.
const HostCaptureReason = "the host barrier synchronises the stream and waits on the CPU"

var (
	allDTypes   = []irismodel.DType{irismodel.F32, irismodel.F16, irismodel.BF16, irismodel.I32, irismodel.I64, irismodel.U64}
	allOps      = []Op{OpSum, OpMax, OpMin}
	allDirs     = []irismodel.Dir{irismodel.In, irismodel.Out, irismodel.InOut, irismodel.Workspace}
	allBarriers = []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone}
	// accessNone is the spelling of "this variant does not touch the tensor".
	accessNone = "none"
)

// Launch limits (irismodel's: threads a multiple of the AMD wavefront up to
// the hardware block limit) and defaults; vector accesses of 4, 8 or 16
// bytes.
const (
	minThreads, maxThreads, threadStep = irismodel.ThreadStep, irismodel.MaxThreads, irismodel.ThreadStep
	minBlocks, maxBlocksLimit          = 1, irismodel.MaxBlocks
	defaultThreads                     = 512
	defaultMaxBlocks                   = 16
	defaultVectorBytes                 = 16
)

// Compile parses, resolves and validates one spec. specPath is the path
// used in positions and in Collective.SpecFile; templates holds the files
// <template>.hip.tmpl at its root. On any problem it returns a nil
// Collective and a non-empty diag.List (sorted) holding every problem found.
func Compile(specPath string, src []byte, templates fs.FS) (*Collective, error) {
	f, errs := spec.Parse(specPath, src)
	b := &builder{file: specPath, errs: errs, templates: templates, src: src}
	c := b.collective(f)
	if len(b.errs) == 0 {
		c.SpecHash = b.hash(c, src)
	}
	if len(b.errs) > 0 {
		return nil, b.errs.Cap()
	}
	return c, nil
}

// CompileAll compiles every *.yaml file at the root of specs, in name order;
// root is the directory the files are reported under (SpecFile is
// root/<file>). It returns the collectives in file order, or a nil slice and
// a diag.List with the problems of all files, including collective names
// used by more than one file.
func CompileAll(specs fs.FS, templates fs.FS, root string) ([]*Collective, error) {
	names, err := fs.Glob(specs, "*.yaml")
	if err != nil {
		return nil, err // only for a malformed pattern; ours is constant
	}
	sort.Strings(names)
	var errs diag.List
	var out []*Collective
	byName := map[string]*Collective{}
	for _, name := range names {
		file := path.Join(root, name)
		src, err := fs.ReadFile(specs, name)
		if err != nil {
			errs.Add(diag.IO, Pos{File: file, Line: 1, Col: 1}, "cannot read the spec: "+err.Error())
			continue
		}
		c, err := Compile(file, src, templates)
		if err != nil {
			errs = append(errs, err.(diag.List)...)
			continue
		}
		if prev, dup := byName[c.Name]; dup {
			errs.Add(diag.Name, c.Pos, fmt.Sprintf("collective %q is already defined in %s (at %s); collective names must be unique across spec files", c.Name, prev.SpecFile, prev.Pos))
			continue
		}
		byName[c.Name] = c
		out = append(out, c)
	}
	if len(errs) == 0 {
		if err := attachTuning(specs, root, out); err != nil {
			l, ok := err.(diag.List)
			if !ok {
				return nil, err
			}
			errs = append(errs, l...)
		}
	}
	if len(errs) > 0 {
		return nil, errs.Cap()
	}
	return out, nil
}

type builder struct {
	file      string
	errs      diag.List
	templates fs.FS
	// available lists template names in the templates fs, for suggestions.
	available []string
	listed    bool
	// refusedOwned: tensors whose ranks key was refused already.
	refusedOwned map[*Tensor]bool
	// src is the spec's text, for positions inside a scalar (within).
	src []byte
}

// quoted reports whether the scalar at p starts with a quote.
func (b *builder) quoted(p Pos) bool {
	line := 1
	for i := 0; i < len(b.src); i++ {
		if line == p.Line {
			col := 1
			for j := i; j < len(b.src) && b.src[j] != '\n'; {
				r, size := utf8.DecodeRune(b.src[j:])
				if col == p.Col {
					return r == '"' || r == '\''
				}
				col++
				j += size
			}
			return false
		}
		if b.src[i] == '\n' {
			line++
		}
	}
	return false
}

func (b *builder) errorf(code diag.Code, at Pos, format string, args ...any) {
	b.errs.Add(code, at, fmt.Sprintf(format, args...))
}

func (b *builder) collective(f *spec.File) *Collective {
	c := &Collective{SpecFile: b.file, Pos: f.Pos}
	if !f.Read {
		return c // the document itself is unreadable (reported); nothing to check
	}
	switch {
	case !f.Name.Set:
		b.errorf(diag.Schema, f.Pos, "the spec has no name; add `name: <collective>` (a lower-case identifier such as all_gather)")
	case f.Name.OK():
		c.Name = f.Name.Value
		c.Pos = f.Name.Pos
		if b.identifier(f.Name, "collective name", false) {
			if why := goFileProblem(c.Name); why != "" {
				b.errorf(diag.Name, f.Name.Pos, "collective name %q cannot name the generated Go file: %s; pick another name", c.Name, why)
			}
		}
	}
	if !b.withinLimits(f) {
		return c // a spec this large is refused as a whole: the rest would be noise
	}
	switch {
	case !f.Summary.Set:
		b.errorf(diag.Schema, f.Pos, "the spec has no summary; add `summary: <one sentence>` (it becomes the doc comment of the generated wrappers)")
	case f.Summary.OK() && strings.TrimSpace(f.Summary.Value) == "":
		b.errorf(diag.Value, f.Summary.Pos, "summary is empty; write one sentence saying what the collective does")
	case f.Summary.OK():
		c.Summary = b.summary(f.Summary)
	}

	sizes := b.sizes(f, c)
	b.params(f, c, sizes)
	tensorsOK := b.tensors(f, c, sizes)

	data := ""
	for _, t := range c.Tensors {
		if t.DType == 0 {
			data = t.Name
			break
		}
	}
	b.dtypes(f, c, data, tensorsOK)
	b.ops(f, c)

	switch {
	case !f.Variants.Set:
		b.errorf(diag.Schema, f.Pos, "the spec has no variants; add `variants:` with at least one variant (template, access, ...)")
	case f.Variants.OK() && len(f.Variants.List) == 0:
		b.errorf(diag.Value, f.Variants.Pos, "variants is empty; define at least one variant")
	}
	for _, sv := range f.Variants.List {
		if v := b.variant(c, sv); v != nil {
			c.Variants = append(c.Variants, v)
		}
	}
	b.overflow(c)
	if len(b.errs) == 0 {
		b.hipSymbols(c)
	}
	return c
}

// summary checks a summary's length: it is repeated in the generated docs.
func (b *builder) summary(s spec.Str) string {
	text := strings.TrimSpace(s.Value)
	if len(text) > MaxSummary {
		b.errorf(diag.Limit, s.Pos, "summary is %d bytes; keep it to a sentence or a short paragraph, at most %d bytes (it is repeated in the generated docs)", len(text), MaxSummary)
	}
	return text
}

// withinLimits refuses a spec with more tensors, sizes, variants or access
// entries than the limits allow (names.go), at the first one too many.
func (b *builder) withinLimits(f *spec.File) bool {
	ok := true
	over := func(n, limit int, at func(i int) Pos, what, why string) {
		if n > limit {
			b.errorf(diag.Limit, at(limit), "the spec has %d %s; a collective may have at most %d (%s)", n, what, limit, why)
			ok = false
		}
	}
	over(len(f.Tensors.List), MaxTensors, func(i int) Pos { return f.Tensors.List[i].Name.Pos }, "tensors", "each is a kernel argument")
	over(len(f.Sizes.Items), MaxSizes, func(i int) Pos { return f.Sizes.Items[i].Pos }, "sizes", "each is a kernel argument")
	over(len(f.Params.List), MaxParams, func(i int) Pos { return f.Params.List[i].Name.Pos }, "params", "each is a kernel argument and a parameter of Launch")
	over(len(f.Variants.List), MaxVariants, func(i int) Pos { return f.Variants.List[i].Name.Pos }, "variants", "each is a kernel per dtype and op")
	for _, v := range f.Variants.List {
		if !ok {
			break // too many tensors make too many entries: said once
		}
		over(len(v.Access.List), MaxTensors, func(i int) Pos { return v.Access.List[i].Tensor.Pos }, fmt.Sprintf("access entries in variant %q", v.Name.Value), "one per tensor")
	}
	for _, t := range f.Tensors.List {
		if n := len(t.Shape.Dims); n > MaxDims {
			b.errorf(diag.Limit, t.Shape.Dims[MaxDims].Pos, "shape of tensor %q has %d dimensions; at most %d are allowed (the element count is their product: merge some)", t.Name.Value, n, MaxDims)
			ok = false
		}
	}
	return ok
}

// overflow refuses tensors whose size in bytes overflows int64 for every
// launch: the product of their constant dimensions times their largest
// element size, with every size symbol at its least value (1; world and
// blocks are at least 1, sizes must be positive). Launches that overflow
// only for some sizes are refused by the runtime.
func (b *builder) overflow(c *Collective) {
	for _, t := range c.Tensors {
		elems, wrapped := uint64(1), false
		for _, d := range t.Shape {
			if d > 0 {
				hi, lo := bits.Mul64(elems, uint64(d))
				wrapped = wrapped || hi != 0
				elems = lo
			}
		}
		size := uint64(0)
		switch {
		case len(t.Index) > 0:
			for _, d := range t.Index {
				size = max(size, uint64(d.Size()))
			}
		case t.DType != 0:
			size = uint64(t.DType.Size())
		default:
			for _, d := range c.DTypes {
				size = max(size, uint64(d.Size()))
			}
		}
		if size == 0 || (!wrapped && elems <= math.MaxInt64/size) {
			continue
		}
		count := fmt.Sprint(elems)
		if wrapped {
			count = "more than 2^64"
		}
		b.errorf(diag.Limit, t.Pos, "tensor %q has more than 2^63-1 bytes for every launch: its constant dimensions multiply to %s elements of up to %d bytes; shrink them", t.Name, count, size)
	}
}

// identifier checks a user-chosen name; keyword reports Go/C keywords too
// (names that become parameters or struct fields).
func (b *builder) identifier(s spec.Str, what string, keyword bool) bool {
	if len(s.Value) > MaxNameLen {
		b.errorf(diag.Limit, s.Pos, "%s %q is %d bytes long; names are at most %d (they become file names and symbols)", what, s.Value[:MaxNameLen]+"...", len(s.Value), MaxNameLen)
		return false
	}
	if !spec.IsIdentifier(s.Value) {
		b.errorf(diag.Name, s.Pos, "%s %q is not an identifier: use lower-case letters, digits and _, starting with a letter (e.g. %q)", what, s.Value, toIdentifier(s.Value))
		return false
	}
	if keyword && spec.IsReserved(s.Value) {
		b.errorf(diag.Name, s.Pos, "%s %q is a Go or C keyword and would not compile in the generated code; pick another name", what, s.Value)
		return false
	}
	return true
}

// toIdentifier proposes a valid spelling of a bad name for the error message.
func toIdentifier(s string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			sb.WriteRune(r)
		case r == '-' || r == ' ' || r == '.':
			sb.WriteByte('_')
		}
	}
	out := strings.Trim(sb.String(), "_")
	if out == "" || out[0] < 'a' || out[0] > 'z' {
		out = "x" + out
	}
	if len(out) > 40 {
		out = out[:40]
	}
	return out
}

func (b *builder) sizes(f *spec.File, c *Collective) map[string]bool {
	sizes := map[string]bool{}
	first := map[string]Pos{}
	for _, s := range f.Sizes.Items {
		if s.Value == irismodel.WorldSymbol || s.Value == irismodel.BlocksSymbol {
			b.errorf(diag.Name, s.Pos, "size %q is built in; remove it from sizes", s.Value)
			continue
		}
		if !b.identifier(s, "size", true) {
			sizes[s.Value] = true // declared all the same: no "undefined" errors on top
			continue
		}
		if at, dup := first[s.Value]; dup {
			b.errorf(diag.Schema, s.Pos, "size %q is declared twice (first at %s); remove one", s.Value, lineCol(at))
			continue
		}
		first[s.Value] = s.Pos
		sizes[s.Value] = true
		c.Symbols = append(c.Symbols, s.Value)
		c.SymbolPos = append(c.SymbolPos, s.Pos)
	}
	return sizes
}

// tensors resolves the tensors; it reports whether every tensor was
// well-formed, so that rules over all tensors (missing dtypes) do not fire
// on a broken file.
func (b *builder) tensors(f *spec.File, c *Collective, sizes map[string]bool) bool {
	ok := !f.Tensors.Bad && !f.Sizes.Bad
	symbols := append([]string{irismodel.WorldSymbol, irismodel.BlocksSymbol}, c.Symbols...)
	for _, st := range f.Tensors.List {
		t := &Tensor{TensorDesc: irismodel.TensorDesc{Name: st.Name.Value}, Pos: st.Name.Pos}
		c.Tensors = append(c.Tensors, t)
		if st.Bad || st.Shape.Bad || st.Dir.Bad || st.DType.Bad {
			ok = false
		}
		if !b.identifier(st.Name, "tensor name", true) {
			ok = false
		} else if t.Name == irismodel.WorldSymbol || t.Name == irismodel.BlocksSymbol || sizes[t.Name] {
			b.errorf(diag.Name, st.Name.Pos, "tensor %q has the name of a size symbol; rename the tensor", t.Name)
		} else if c.Param(t.Name) != nil {
			b.errorf(diag.Name, st.Name.Pos, "tensor %q has the name of a parameter; rename the tensor or the parameter", t.Name)
		}
		if st.Bad {
			continue
		}
		where := fmt.Sprintf("tensor %q", t.Name)
		switch {
		case !st.Dir.Set:
			b.errorf(diag.Schema, st.Name.Pos, "%s has no dir; add dir: in, out, inout or workspace", where)
			ok = false
		case st.Dir.OK():
			if d, found := lookup(allDirs, st.Dir.Value); found {
				t.Dir = d
			} else {
				b.errorf(diag.Value, st.Dir.Pos, "unknown dir %q of %s%s", st.Dir.Value, where, hint(st.Dir.Value, names(allDirs), oneOf(names(allDirs))))
				ok = false
			}
		}
		if st.DTypes.Set {
			ok = b.indexDTypes(st, t, where) && ok
		}
		if st.Optional.OK() && st.Optional.Value {
			if t.Dir != irismodel.In {
				b.errorf(diag.Rule, st.Optional.Pos, "%s is optional but dir: %s; only dir: in tensors may be left out of a launch", where, t.Dir)
				ok = false
			}
			t.Optional = true
		}
		if st.Ranks.OK() {
			ok = b.ranks(c, st, t, where) && ok
		}
		if st.DType.OK() {
			if d, found := lookup(allDTypes, st.DType.Value); found {
				t.DType = d
			} else {
				b.errorf(diag.Value, st.DType.Pos, "unknown dtype %q of %s%s", st.DType.Value, where, hint(st.DType.Value, names(allDTypes), oneOf(names(allDTypes))))
				ok = false
			}
		}
		switch {
		case !st.Shape.Set:
			b.errorf(diag.Schema, st.Name.Pos, "%s has no shape; add one, e.g. shape: [n]", where)
		case !st.Shape.Bad && len(st.Shape.Dims) == 0:
			b.errorf(diag.Value, st.Shape.Pos, "shape of %s is empty; give at least one dimension, e.g. [n]", where)
		}
		for _, d := range st.Shape.Dims {
			if d.Symbol == "" {
				if d.Const <= 0 {
					b.errorf(diag.Value, d.Pos, "dimension %d of %s must be positive", d.Const, where)
					continue
				}
				t.Shape = append(t.Shape, irismodel.Dim(d.Const))
				continue
			}
			dim, known := irismodel.ParseDim(d.Symbol, c.Symbols)
			switch {
			case d.Symbol == irismodel.BlocksSymbol && t.Dir != irismodel.Workspace:
				b.errorf(diag.Rule, d.Pos, "%s uses blocks in its shape, but only workspace shapes may: the plan picks blocks, the caller does not know it", where)
			case known:
				t.Shape = append(t.Shape, dim)
			case sizes[d.Symbol]:
				// a size whose bad name was reported: no error on top
			default:
				b.errorf(diag.Undefined, d.Pos, "%s", undefinedDim(f, c, st, d.Symbol, where, symbols))
			}
		}
	}
	return ok
}

// undefinedDim is the message for a dimension sym of tensor st that names
// no size: what sym is instead (a parameter, a tensor, an expression, a
// name no size may take) and the spec text that fixes it, in backquotes,
// which a user can paste as it is: the whole sizes list or shape.
func undefinedDim(f *spec.File, c *Collective, st *spec.Tensor, sym, where string, symbols []string) string {
	msg := fmt.Sprintf("undefined size symbol %q in the shape of %s", sym, where)
	taken := map[string]bool{irismodel.WorldSymbol: true, irismodel.BlocksSymbol: true}
	var sizes []string
	for _, s := range f.Sizes.Items {
		sizes = append(sizes, s.Value)
		taken[s.Value] = true
	}
	for _, t := range f.Tensors.List {
		taken[t.Name.Value] = true
	}
	for _, p := range f.Params.List {
		taken[p.Name.Value] = true
	}
	declare := func(names ...string) string {
		return "`sizes: [" + strings.Join(append(append([]string(nil), sizes...), names...), ", ") + "]`"
	}
	// free is a size name for sym: base, or base_n, base_n2, ...
	free := func(base string) string {
		if !taken[base] && spec.IsIdentifier(base) && !spec.IsReserved(base) && len(base) <= MaxNameLen {
			return base
		}
		base = toIdentifier(base)
		for strings.Contains(base, "__") {
			base = strings.ReplaceAll(base, "__", "_")
		}
		if len(base) > MaxNameLen-8 {
			base = base[:MaxNameLen-8]
		}
		if !taken[base] && !spec.IsReserved(base) {
			return base
		}
		for k := 1; ; k++ {
			cand := base + "_n"
			if k > 1 {
				cand += fmt.Sprint(k)
			}
			if !taken[cand] && !spec.IsReserved(cand) {
				return cand
			}
		}
	}
	shape := func(dims []string) string {
		var all []string
		for _, d := range st.Shape.Dims {
			switch {
			case d.Symbol == sym:
				all = append(all, dims...)
			case d.Symbol != "":
				all = append(all, d.Symbol)
			default:
				all = append(all, fmt.Sprint(d.Const))
			}
		}
		return "`shape: [" + strings.Join(all, ", ") + "]`"
	}
	switch {
	case c.Param(sym) != nil:
		return fmt.Sprintf("%s: %q is a launch parameter, and a shape is fixed when the plan is made, before any launch; to make it a size, remove it from params, declare it in sizes (%s) and read it in templates with {{size %q}}", msg, sym, declare(sym), sym)
	case isTensor(f, sym):
		n := free(sym + "_n")
		return fmt.Sprintf("%s: %q is a tensor, not a size; declare a size for the length (%s) and write it here (%s)", msg, sym, declare(n), shape([]string{n}))
	case strings.Contains(sym, "*"):
		// world * n: a product is written as dimensions.
		var dims, missing []string
		for _, part := range strings.Split(sym, "*") {
			part = strings.TrimSpace(part)
			var v int64
			if _, err := fmt.Sscan(part, &v); err == nil && fmt.Sprint(v) == part && v > 0 {
				dims = append(dims, part)
				continue
			}
			name := part
			if !contains(symbols, part) {
				name = free(part)
				missing = append(missing, name)
				taken[name] = true
			}
			dims = append(dims, name)
		}
		fix := fmt.Sprintf("write the product as dimensions, %s", shape(dims))
		if len(missing) > 0 {
			fix += fmt.Sprintf(", and declare %s in sizes (%s)", strings.Join(missing, ", "), declare(missing...))
		}
		return fmt.Sprintf("%s: a dimension is one size symbol or a positive integer; %s", msg, fix)
	}
	if s := spec.Closest(sym, symbols); s != "" {
		return fmt.Sprintf("%s (did you mean %q?)", msg, s)
	}
	if lower := strings.ToLower(sym); lower != sym && contains(symbols, lower) {
		return fmt.Sprintf("%s (did you mean %q? names are lower case)", msg, lower)
	}
	if n := free(sym); n != sym {
		why := "a dimension is one size symbol or a positive integer, not an expression"
		switch {
		case spec.IsReserved(sym):
			why = fmt.Sprintf("%q is a Go or C keyword, which no size may be called", sym)
		case len(sym) > MaxNameLen:
			why = fmt.Sprintf("sizes are at most %d bytes long", MaxNameLen)
		}
		return fmt.Sprintf("%s: %s; declare a size for it (%s) and write it here (%s)", msg, why, declare(n), shape([]string{n}))
	}
	return fmt.Sprintf("%s: declare it in sizes (%s)", msg, declare(sym))
}

func isTensor(f *spec.File, name string) bool {
	for _, t := range f.Tensors.List {
		if t.Name.Value == name {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// params resolves the launch parameters: identifiers, unique, distinct
// from the sizes, of a known type, with a range only for int.
func (b *builder) params(f *spec.File, c *Collective, sizes map[string]bool) {
	types := irismodel.ParamKinds()
	first := map[string]Pos{}
	for _, sp := range f.Params.List {
		if !b.identifier(sp.Name, "parameter name", true) {
			continue
		}
		name := sp.Name.Value
		switch {
		case name == irismodel.WorldSymbol || name == irismodel.BlocksSymbol || sizes[name]:
			b.errorf(diag.Name, sp.Name.Pos, "parameter %q has the name of a size symbol; rename the parameter", name)
			continue
		case first[name] != Pos{}:
			continue // reported by the parser
		}
		first[name] = sp.Name.Pos
		p := &Param{ParamDesc: irismodel.Unbounded(name, 0), Pos: sp.Name.Pos}
		where := fmt.Sprintf("parameter %q", name)
		switch {
		case sp.Bad:
			continue
		case !sp.Type.Set:
			b.errorf(diag.Schema, sp.Name.Pos, "%s has no type; give one of: %s (e.g. %s: rank)", where, strings.Join(names(types), ", "), name)
			continue
		case !sp.Type.OK():
			continue
		}
		t, found := lookup(types, sp.Type.Value)
		if !found {
			b.errorf(diag.Value, sp.Type.Pos, "unknown type %q of %s%s", sp.Type.Value, where, hint(sp.Type.Value, names(types), oneOf(names(types))))
			continue
		}
		p.Kind = t
		for _, bound := range []struct {
			n   spec.Int
			key string
			to  *int64
		}{{sp.Min, "min", &p.Min}, {sp.Max, "max", &p.Max}} {
			if !bound.n.OK() {
				continue
			}
			if t != irismodel.ParamInt {
				why := "a rank is always checked against the world: 0 <= p < world"
				if t == irismodel.ParamF32 {
					why = "f32 parameters are not range-checked"
				}
				b.errorf(diag.Rule, bound.n.KeyPos, "%s of %s: only int parameters take a range (%s); remove it", bound.key, where, why)
				continue
			}
			*bound.to = bound.n.Value
		}
		if p.Min > p.Max {
			b.errorf(diag.Value, sp.Max.Pos, "%s has min %d above max %d; no value would pass", where, p.Min, p.Max)
		}
		c.Params = append(c.Params, p)
	}
}

// ranks resolves a tensor's ranks key: the name of a rank parameter, on a
// tensor the caller passes that is not optional (the owned table's refusals
// are worded here).
func (b *builder) ranks(c *Collective, st *spec.Tensor, t *Tensor, where string) bool {
	r := st.Ranks
	p := c.Param(r.Value)
	var rankParams []string
	for _, q := range c.Params {
		if q.Kind == irismodel.ParamRank {
			rankParams = append(rankParams, q.Name)
		}
	}
	switch {
	case p == nil && len(rankParams) == 0:
		b.errorf(diag.Undefined, r.Pos, "ranks of %s names %q, but the spec has no rank parameter; declare it, e.g. params: {%s: rank}", where, r.Value, r.Value)
		return false
	case p == nil:
		b.errorf(diag.Undefined, r.Pos, "ranks of %s names %q, which is not a rank parameter%s", where, r.Value, hint(r.Value, rankParams, "rank parameters: "+strings.Join(rankParams, ", ")))
		return false
	case p.Kind != irismodel.ParamRank:
		b.errorf(diag.Rule, r.Pos, "ranks of %s names %s parameter %q; it must name a rank parameter (type rank), whose rank alone uses the tensor", where, p.Kind, r.Value)
		return false
	}
	t.Owner, t.OwnerPos = p.Name, r.Pos
	return true
}

func (b *builder) dtypes(f *spec.File, c *Collective, dataTensor string, tensorsOK bool) {
	l := f.DTypes
	switch {
	case !l.Set:
		if dataTensor != "" && tensorsOK {
			b.errorf(diag.Rule, f.Pos, "the spec has no dtypes, but tensor %q takes the kernel's element type; add e.g. dtypes: [f32, f16, bf16]", dataTensor)
		}
		return
	case l.Bad:
	case len(l.Items) == 0:
		b.errorf(diag.Value, l.Pos, "dtypes is empty; list the element types to generate kernels for, e.g. [f32, f16, bf16]")
		return
	case dataTensor == "" && tensorsOK:
		b.errorf(diag.Rule, l.KeyPos, "dtypes is given but no tensor takes the kernel's element type (each has a fixed dtype, or there are none), so the kernels would all be the same; remove dtypes")
		return
	}
	c.DTypes = listOf(b, l.Items, "dtype", allDTypes)
}

// listOf reads a list of names of all's values (dtypes, ops): an unknown
// name or one listed twice is an error at it.
func listOf[T fmt.Stringer](b *builder, items []spec.Str, what string, all []T) []T {
	var out []T
	seen := map[string]Pos{}
	for _, it := range items {
		x, found := lookup(all, it.Value)
		switch {
		case !found:
			b.errorf(diag.Value, it.Pos, "unknown %s %q%s", what, it.Value, hint(it.Value, names(all), oneOf(names(all))))
		case seen[it.Value] != Pos{}:
			b.errorf(diag.Value, it.Pos, "%s %q is listed twice (first at %s); remove one", what, it.Value, lineCol(seen[it.Value]))
		default:
			seen[it.Value] = it.Pos
			out = append(out, x)
		}
	}
	return out
}

func (b *builder) ops(f *spec.File, c *Collective) {
	l := f.Ops
	switch {
	case !l.Set:
		return
	case l.Bad:
	case len(l.Items) == 0:
		b.errorf(diag.Value, l.Pos, "ops is empty; omit ops for a collective that does not reduce, or list operators, e.g. [sum]")
		return
	case !f.DTypes.Set:
		b.errorf(diag.Rule, l.KeyPos, "ops is given but the collective has no data tensors to reduce; remove ops")
		return
	}
	c.Ops = listOf(b, l.Items, "op", allOps)
}

func (b *builder) variant(c *Collective, sv *spec.Variant) *Variant {
	v := &Variant{Name: sv.Name.Value, Pos: sv.Name.Pos, AccessPos: sv.Name.Pos, Aliasing: AliasForbid}
	if sv.Access.Set {
		v.AccessPos = sv.Access.KeyPos
	}
	b.identifier(sv.Name, "variant name", false)
	if sv.Bad {
		return v
	}
	where := fmt.Sprintf("variant %q", v.Name)

	b.engine(c, sv, v, where)
	switch t := sv.Template; {
	case v.Engine == irismodel.EngineCopy:
	case !t.Set:
		b.errorf(diag.Schema, sv.Name.Pos, "%s has no template; add template: <name> for the file templates/<name>%s", where, TemplateExt)
	case t.OK() && b.identifier(t, "template name", false):
		v.Template, v.TemplatePos = t.Value, t.Pos
		b.templateExists(t, where)
	}

	if sv.Summary.OK() {
		v.Summary = b.summary(sv.Summary)
	}
	b.uses(c, sv, v, where)
	b.copySchedule(c, sv, v, where)

	if a := sv.Aliasing; a.OK() {
		switch Aliasing(a.Value) {
		case AliasForbid, AliasAllow, AliasOwnBlock:
			v.Aliasing = Aliasing(a.Value)
		default:
			b.errorf(diag.Value, a.Pos, "unknown aliasing %q of %s%s", a.Value, where, hint(a.Value, aliasings, oneOf(aliasings)))
		}
		switch v.Aliasing {
		case AliasAllow:
			b.aliasingSafe(v, a, where)
		case AliasOwnBlock:
			b.ownBlockSafe(c, v, a, where)
		}
	}

	b.barriers(sv, v, where)
	b.copyBarriers(sv, v, where)
	if v.Engine != irismodel.EngineCopy {
		b.launch(sv, v, where)
	}

	for _, m := range v.Barriers {
		cp := Capture{Mode: m, Capturable: m != irismodel.BarrierHost}
		if !cp.Capturable {
			cp.Reason = HostCaptureReason
		}
		v.Capture = append(v.Capture, cp)
	}
	if v.Engine != irismodel.EngineCopy {
		v.Kernels = kernels(c, v)
	}
	return v
}

func (b *builder) templateExists(t spec.Str, where string) {
	file := t.Value + TemplateExt
	if b.templates != nil {
		if st, err := fs.Stat(b.templates, file); err == nil && !st.IsDir() {
			return
		}
	}
	if !b.listed {
		b.listed = true
		if b.templates != nil {
			files, _ := fs.Glob(b.templates, "*"+TemplateExt)
			for _, f := range files {
				b.available = append(b.available, strings.TrimSuffix(f, TemplateExt))
			}
		}
	}
	fix := "add the file or name an existing template"
	if s := spec.Closest(t.Value, b.available); s != "" {
		fix = fmt.Sprintf("did you mean %q?", s)
	}
	b.errorf(diag.Undefined, t.Pos, "template %q of %s not found: there is no templates/%s (%s)", t.Value, where, file, fix)
}

// uses resolves the access mapping into one Use per tensor, in tensor order.
//
// On errors the list may be partial; Compile then returns no Collective.
func (b *builder) uses(c *Collective, sv *spec.Variant, v *Variant, where string) {
	am := sv.Access
	if !am.Set && len(c.Tensors) == 0 {
		return // nothing to describe: a collective without tensors (barrier)
	}
	if !am.Set {
		b.errorf(diag.Schema, sv.Name.Pos, "%s has no access; add access: with one entry per tensor, e.g. {%s}", where, accessExample(c))
		return
	}
	if am.Bad {
		return
	}
	tensorNames := make([]string, len(c.Tensors))
	for i, t := range c.Tensors {
		tensorNames[i] = t.Name
	}
	entries := map[string]*spec.Access{}
	// guessed: tensors that an undefined name probably misspells; their
	// missing entry is the same mistake, so it is not reported again.
	guessed := map[string]bool{}
	for _, a := range am.List {
		if tensorByName(c, a.Tensor.Value) == nil {
			list := "the collective has no tensors"
			if len(tensorNames) > 0 {
				list = "tensors are: " + strings.Join(tensorNames, ", ")
			}
			guessed[spec.Closest(a.Tensor.Value, tensorNames)] = true
			b.errorf(diag.Undefined, a.Tensor.Pos, "access of %s names undefined tensor %q%s", where, a.Tensor.Value, hint(a.Tensor.Value, tensorNames, list))
			continue
		}
		entries[a.Tensor.Value] = a
	}
	for _, t := range c.Tensors {
		a := entries[t.Name]
		if a == nil && guessed[t.Name] {
			continue
		}
		if a == nil {
			b.errorf(diag.Schema, am.KeyPos, "access of %s has no entry for tensor %q; add %s: <kind> (one of: %s; none if the variant does not touch it)", where, t.Name, t.Name, strings.Join(accessKinds()[:len(AccessNames)], ", "))
			continue
		}
		acc, ok := b.kinds(a, where)
		rule := Classify(RoleOf(t), acc)
		if !ok || rule == nil { // rule nil: the tensor's dir is bad (reported)
			continue
		}
		u := Use{Tensor: t, Access: acc, Placement: rule.Placement, Rule: rule, Pos: a.Tensor.Pos}
		if t.Owner != "" {
			u.Owned = ClassifyOwned(RoleOf(t), acc)
		}
		v.Uses = append(v.Uses, u)
		if u.Owned != nil && rule.Refused == NotRefused {
			b.ownedRefusal(t, u.Owned)
		}
		switch rule.Refused {
		case RefuseInWritten:
			b.errorf(diag.Rule, a.Kinds.Pos, "tensor %q is dir: in, but %s writes it (%s); make it dir: inout or drop the write", t.Name, where, acc&writes)
		case RefuseOutUnwritten:
			b.errorf(diag.Rule, a.Kinds.Pos, "tensor %q is dir: %s, but %s never writes it; give it a write kind (local_write, remote_write or remote_atomic)", t.Name, t.Dir, where)
		case RefuseOptionalRemote:
			b.errorf(diag.Rule, a.Kinds.Pos, "tensor %q is optional, but %s lets peers touch it (%s); a tensor left out has nothing to put on the heap: make it required or access it locally", t.Name, where, acc&remote)
		}
	}
}

// ownedRefusal words a refusal of the owned table, at the tensor's ranks
// key. Said once per tensor (every variant finds the same row: it depends
// on the role only).
func (b *builder) ownedRefusal(t *Tensor, o *OwnedRule) {
	if o.Refused == OwnedOK || b.refusedOwned[t] {
		return
	}
	if b.refusedOwned == nil {
		b.refusedOwned = map[*Tensor]bool{}
	}
	b.refusedOwned[t] = true
	switch o.Refused {
	case OwnedWorkspace:
		b.errorf(diag.Rule, t.OwnerPos, "tensor %q is a workspace, which the plan allocates on every rank; remove ranks: %s", t.Name, t.Owner)
	case OwnedOptional:
		b.errorf(diag.Rule, t.OwnerPos, "tensor %q is optional and ranks: %s; optional already lets every rank leave it out: keep one of the two", t.Name, t.Owner)
	}
}

func accessExample(c *Collective) string {
	if len(c.Tensors) == 0 {
		return ""
	}
	var parts []string
	for _, t := range c.Tensors {
		parts = append(parts, t.Name+": local_read")
	}
	return strings.Join(parts, ", ")
}

// kinds turns an access entry into an Access set.
func (b *builder) kinds(a *spec.Access, where string) (Access, bool) {
	if a.Kinds.Bad {
		return 0, false
	}
	what := fmt.Sprintf("tensor %q in %s", a.Tensor.Value, where)
	if len(a.Kinds.Items) == 0 {
		b.errorf(diag.Value, a.Kinds.Pos, "access of %s is empty; give at least one kind, or none if the variant does not touch it", what)
		return 0, false
	}
	known := accessKinds()
	var acc Access
	ok, none := true, false
	seen := map[string]Pos{}
	for _, k := range a.Kinds.Items {
		if at, dup := seen[k.Value]; dup {
			b.errorf(diag.Value, k.Pos, "access kind %q of %s is listed twice (first at %s); remove one", k.Value, what, lineCol(at))
			ok = false
			continue
		}
		seen[k.Value] = k.Pos
		if k.Value == accessNone {
			none = true
			continue
		}
		found := false
		for _, n := range AccessNames {
			if n.Name == k.Value {
				acc |= n.Access
				found = true
			}
		}
		if !found {
			b.errorf(diag.Value, k.Pos, "unknown access kind %q of %s%s", k.Value, what, hint(k.Value, known, oneOf(known)))
			ok = false
		}
	}
	if none && len(a.Kinds.Items) > 1 {
		b.errorf(diag.Rule, a.Kinds.Pos, "access of %s combines none with other kinds; use none alone", what)
		ok = false
	}
	return acc, ok
}

// indexDTypes reads a dtype list: two or more distinct index types (i32,
// i64) of a dir: in tensor, the first being the default.
func (b *builder) indexDTypes(st *spec.Tensor, t *Tensor, where string) bool {
	l := st.DTypes
	if l.Bad {
		return false
	}
	ok := true
	seen := map[irismodel.DType]bool{}
	for _, it := range l.Items {
		d, found := lookup(allDTypes, it.Value)
		switch {
		case !found:
			b.errorf(diag.Value, it.Pos, "unknown dtype %q of %s%s", it.Value, where, hint(it.Value, names(allDTypes), oneOf(names(allDTypes))))
			ok = false
		case d != irismodel.I32 && d != irismodel.I64:
			b.errorf(diag.Value, it.Pos, "a dtype list of %s may hold only index types (i32, i64), not %s; give one dtype instead", where, d)
			ok = false
		case seen[d]:
			b.errorf(diag.Value, it.Pos, "dtype %s of %s is listed twice; remove one", d, where)
			ok = false
		default:
			seen[d] = true
			t.Index = append(t.Index, d)
		}
	}
	switch {
	case !ok:
	case len(l.Items) == 0:
		b.errorf(diag.Value, l.Pos, "the dtype list of %s is empty; give one dtype (e.g. dtype: i32), or a list of index types such as [i64, i32]", where)
		ok = false
	case len(t.Index) < 2:
		b.errorf(diag.Value, l.Pos, "the dtype list of %s has one entry; write dtype: %s", where, t.Index[0])
		ok = false
	case t.Dir != irismodel.In:
		b.errorf(diag.Rule, l.Pos, "%s has a dtype list but dir: %s; only dir: in tensors may come in several index types", where, t.Dir)
		ok = false
	default:
		t.DType = t.Index[0]
	}
	return ok
}

// aliasingSafe refuses aliasing: allow when an in-place pair holds a
// tensor whose rule forbids in place (peers touch it): in place, peers would
// read memory this rank is overwriting, or overwrite memory it has yet to
// read. The error is at the aliasing value, with a note at the access entry.
func (b *builder) aliasingSafe(v *Variant, a spec.Str, where string) {
	for _, pr := range v.AliasPairs() {
		if !v.InPlace(pr[0], pr[1]) {
			continue
		}
		for i, x := range pr {
			u := v.Use(x.Name)
			if u == nil || u.Rule.InPlace || u.Rule.Refused != NotRefused {
				continue // refused rows are reported already
			}
			other := pr[1-i].Name
			verb, harm := "read", "read memory this rank is overwriting"
			switch {
			case u.Access&RemoteRead != 0 && u.Access&(RemoteWrite|RemoteAtomic) != 0:
				verb, harm = "read and write", "read memory this rank is overwriting and overwrite memory it has yet to read"
			case u.Access&(RemoteWrite|RemoteAtomic) != 0:
				verb, harm = "write", "overwrite memory this rank has yet to read"
			}
			b.errs = append(b.errs, &diag.Error{Code: diag.Rule, Pos: a.Pos,
				Msg:   fmt.Sprintf("aliasing: allow is unsafe in %s: peers %s %q, so it may not be the same memory as %q (peers would %s); use aliasing: forbid", where, verb, x.Name, other, harm),
				Notes: []diag.Note{{Pos: u.Pos, Msg: fmt.Sprintf("%q is %s here (rule table row %d)", x.Name, u.Access, u.Rule.Row)}}})
			return
		}
	}
}

func (b *builder) barriers(sv *spec.Variant, v *Variant, where string) {
	l := sv.Barriers
	if !l.Set {
		v.Barriers = append([]irismodel.Barrier(nil), allBarriers...)
		return
	}
	if !l.Bad && len(l.Items) == 0 {
		b.errorf(diag.Value, l.Pos, "barriers of %s is empty; list the supported modes, default first, e.g. [device, host, none]", where)
		return
	}
	seen := map[string]Pos{}
	for _, it := range l.Items {
		m, found := lookup(allBarriers, it.Value)
		switch {
		case !found:
			b.errorf(diag.Value, it.Pos, "unknown barrier mode %q of %s%s", it.Value, where, hint(it.Value, names(allBarriers), oneOf(names(allBarriers))))
		case seen[it.Value] != Pos{}:
			b.errorf(diag.Value, it.Pos, "barrier mode %q of %s is listed twice (first at %s); remove one", it.Value, where, lineCol(seen[it.Value]))
		default:
			seen[it.Value] = it.Pos
			v.Barriers = append(v.Barriers, m)
		}
	}
}

func (b *builder) launch(sv *spec.Variant, v *Variant, where string) {
	l := sv.Launch
	v.Launch = Launch{Threads: defaultThreads, MaxBlocks: defaultMaxBlocks, MinBlocks: minBlocks, VectorBytes: defaultVectorBytes}
	if l.Bad {
		return
	}
	if n := l.Threads; n.OK() {
		if n.Value < minThreads || n.Value > maxThreads || n.Value%threadStep != 0 {
			b.errorf(diag.Value, n.Pos, "threads of %s is %d; it must be a multiple of %d from %d to %d", where, n.Value, threadStep, minThreads, maxThreads)
		} else {
			v.Launch.Threads = int(n.Value)
		}
	}
	maxOK := !l.MaxBlocks.Set // the default, or a valid value below
	if n := l.MaxBlocks; n.OK() {
		if n.Value < minBlocks || n.Value > maxBlocksLimit {
			b.errorf(diag.Value, n.Pos, "max_blocks of %s is %d; it must be from %d to %d", where, n.Value, minBlocks, maxBlocksLimit)
		} else {
			v.Launch.MaxBlocks, maxOK = int(n.Value), true
		}
	}
	if n := l.MinBlocks; n.OK() {
		// Checked against max_blocks where that is valid (else its own
		// error comes first, and only the hard limit is checked here).
		limit, upTo, fix := int64(maxBlocksLimit), fmt.Sprintf("max_blocks (at most %d)", maxBlocksLimit), "lower min_blocks"
		if maxOK {
			limit, upTo, fix = int64(v.Launch.MaxBlocks), fmt.Sprintf("its max_blocks, %d", v.Launch.MaxBlocks), "lower min_blocks or raise max_blocks"
			if !l.MaxBlocks.Set {
				upTo, fix = upTo+" (the default)", "lower min_blocks or set a larger max_blocks"
			}
		}
		switch {
		case n.Value < minBlocks:
			b.errorf(diag.Value, n.Pos, "min_blocks of %s is %d; it must be from %d to %s; remove it for the default, 1 (the grid the size gives)", where, n.Value, minBlocks, upTo)
		case n.Value > limit:
			b.errorf(diag.Value, n.Pos, "min_blocks of %s is %d; it must be from %d to %s: %s", where, n.Value, minBlocks, upTo, fix)
		default:
			v.Launch.MinBlocks = int(n.Value)
		}
	}
	if n := l.VectorBytes; n.OK() {
		if n.Value != 4 && n.Value != 8 && n.Value != 16 {
			b.errorf(diag.Value, n.Pos, "vector_bytes of %s is %d; it must be 4, 8 or 16", where, n.Value)
		} else {
			v.Launch.VectorBytes = int(n.Value)
		}
	}
}

// kernels lists a variant's entry points: one per dtype and op, sorted by
// name and de-duplicated. A collective without dtypes (no data tensors) has
// one kernel per op with an empty dtype; one without ops uses OpNone.
func kernels(c *Collective, v *Variant) []Kernel {
	dts := c.DTypes
	if len(dts) == 0 {
		dts = []irismodel.DType{0}
	}
	ops := c.Ops
	if len(ops) == 0 {
		ops = []Op{OpNone}
	}
	seen := map[string]bool{}
	var ks []Kernel
	for _, dt := range dts {
		for _, op := range ops {
			k := Kernel{Name: irismodel.KernelName(c.Name, v.Name, dt, string(op)), DType: dt, Op: op}
			if !seen[k.Name] {
				seen[k.Name] = true
				ks = append(ks, k)
			}
		}
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].Name < ks[j].Name })
	return ks
}

// hash is the SpecHash: the first 16 hex digits of a SHA-256 over the ABI
// version, the spec bytes and, sorted by name, each template the spec uses
// (file name, then content). Every field is length-prefixed so that no two
// different inputs give the same byte stream.
func (b *builder) hash(c *Collective, src []byte) string {
	h := sha256.New()
	field := func(p []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	field([]byte(ABIVersion))
	field(src)
	var used []string
	for _, v := range c.Variants {
		if v.Engine != irismodel.EngineCopy {
			used = append(used, v.Template+TemplateExt)
		}
	}
	sort.Strings(used)
	for i, name := range used {
		if i > 0 && used[i-1] == name {
			continue
		}
		body, err := fs.ReadFile(b.templates, name)
		if err != nil {
			b.errorf(diag.IO, c.Pos, "cannot read template %s: %v", name, err)
			continue
		}
		field([]byte(name))
		field(body)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func tensorByName(c *Collective, name string) *Tensor {
	for _, t := range c.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// hint is the parenthesised end of an "unknown X" message: a close match
// when there is one, else the list of valid values.
func hint(word string, candidates []string, valid string) string {
	if s := spec.Closest(word, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return " (" + valid + ")"
}

func lookup[T fmt.Stringer](all []T, s string) (T, bool) {
	for _, x := range all {
		if x.String() == s {
			return x, true
		}
	}
	var zero T
	return zero, false
}

func names[T fmt.Stringer](all []T) []string {
	out := make([]string, len(all))
	for i, x := range all {
		out[i] = x.String()
	}
	return out
}

// accessKinds lists the access kind spellings, none included.
func accessKinds() []string {
	var out []string
	for _, n := range AccessNames {
		out = append(out, n.Name)
	}
	return append(out, accessNone)
}

// oneOf lists valid values for an error message.
func oneOf(valid []string) string { return "expected one of: " + strings.Join(valid, ", ") }

func lineCol(p Pos) string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

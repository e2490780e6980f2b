package hipemit

import (
	"fmt"
	"strings"
	"text/template"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/internal/spec"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// recorder collects what one kernel body really does: the access kinds the
// helper calls whose expansions reach the kernel granted per tensor, where
// in the template each kind was first granted, and whether it meets its
// peers.
type recorder struct {
	acc     map[string]ir.Access
	first   map[string]map[ir.Access]int // tensor -> kind -> template offset
	barrier bool
	params  map[string]bool // parameters read
}

// record turns the uses of a render into a recorder.
func record(r rendered, calls []helperCall) *recorder {
	rec := &recorder{acc: map[string]ir.Access{}, first: map[string]map[ir.Access]int{}, params: map[string]bool{}}
	for _, u := range r.uses {
		c := calls[u.call]
		rec.barrier = rec.barrier || c.meets
		if c.param != "" {
			rec.params[c.param] = true
		}
		if c.tensor == "" {
			continue
		}
		rec.acc[c.tensor] |= c.access
		if rec.first[c.tensor] == nil {
			rec.first[c.tensor] = map[ir.Access]int{}
		}
		for _, n := range ir.AccessNames {
			if _, seen := rec.first[c.tensor][n.Access]; !seen && c.access&n.Access != 0 {
				rec.first[c.tensor][n.Access] = u.at
			}
		}
	}
	return rec
}

// helpers are the template functions of one render; each call's expansion
// is kept in calls and the template gets a placeholder (render.go).
type helpers struct {
	c     *ir.Collective
	kc    *kernelCtx // nil while rendering the prelude
	calls []helperCall
}

// helperOf names the helper that grants an access kind, for messages.
var helperOf = map[ir.Access]string{
	ir.LocalRead:    "read (or update)",
	ir.LocalWrite:   "write (or update)",
	ir.RemoteRead:   "peer_read (or peer_update)",
	ir.RemoteWrite:  "peer_write (or peer_update)",
	ir.RemoteAtomic: "peer_atomic",
}

func (h *helpers) funcs() template.FuncMap {
	local := func(name string, acc ir.Access, constant bool) func(string) (string, error) {
		return func(tensor string) (string, error) {
			t, err := h.tensor(name, tensor)
			if err != nil {
				return "", err
			}
			if len(t.Index) > 0 {
				return "", fmt.Errorf("%s %q: the tensor may come as %s, so it has no one pointer type; read it with {{read_index %q}}", name, tensor, irismodel.JoinDTypes(t.Index, " or "), tensor)
			}
			return h.placeholder(helperCall{
				expansion: fmt.Sprintf("((%s*)%s.%s)", h.ptrType(t, constant), ArgsName, TensorField(t)),
				tensor:    tensor, access: acc, readOnly: constant, call: fmt.Sprintf("%s %q", name, tensor),
			}), nil
		}
	}
	peer := func(name string, acc ir.Access, constant bool) func(string, string) (string, error) {
		return func(tensor, rank string) (string, error) {
			t, err := h.tensor(name, tensor)
			if err != nil {
				return "", err
			}
			if len(t.Index) > 0 {
				return "", fmt.Errorf("%s %q: the tensor may come as %s, so it has no one pointer type, and peers cannot be given one; give it one dtype (dtype: %s), or read it on its own rank with {{read_index %q}}", name, tensor, irismodel.JoinDTypes(t.Index, " or "), t.Index[0], tensor)
			}
			if err := h.peerArg(name, tensor, rank); err != nil {
				return "", err
			}
			if strings.TrimSpace(rank) == "" {
				return "", fmt.Errorf("%s %q: the peer (second argument) is an empty C expression; pass the peer's rank, e.g. {{%s %q \"p\"}}", name, tensor, name, tensor)
			}
			if t.Owner != "" {
				return h.ownerPtr(name, t, rank, acc, constant)
			}
			return h.placeholder(helperCall{
				expansion: fmt.Sprintf("irisgen::detail::peer_ptr(ctx, (%s*)%s.%s, (%s))", h.ptrType(t, constant), ArgsName, TensorField(t), rank),
				tensor:    tensor, access: acc, readOnly: constant, arg: rank, call: fmt.Sprintf("%s %q %q", name, tensor, h.readable(rank)),
			}), nil
		}
	}
	return template.FuncMap{
		"read":            local("read", ir.LocalRead, true),
		"write":           local("write", ir.LocalWrite, false),
		"update":          local("update", ir.LocalRead|ir.LocalWrite, false),
		"peer_read":       peer("peer_read", ir.RemoteRead, true),
		"peer_write":      peer("peer_write", ir.RemoteWrite, false),
		"peer_update":     peer("peer_update", ir.RemoteRead|ir.RemoteWrite, false),
		"peer_atomic":     peer("peer_atomic", ir.RemoteAtomic, false),
		"read_index":      h.readIndex,
		"type":            h.elemType,
		"size":            h.size,
		"param":           h.param,
		"numel":           h.numel,
		"barrier":         h.barrier,
		"sync":            h.sync,
		"grid_sync":       func() (string, error) { return h.gridSync(true) },
		"grid_sync_local": func() (string, error) { return h.gridSync(false) },
	}
}

// tensor resolves a helper's tensor argument; only a kernel body may take
// tensor pointers.
func (h *helpers) tensor(helper, name string) (*ir.Tensor, error) {
	if h.kc == nil {
		return nil, fmt.Errorf("%s %q: tensor helpers work only in the kernel body, not in the %s; take pointers in the body and pass them to the prelude's functions", helper, name, PreludeName)
	}
	return h.lookup(helper, name)
}

// lookup resolves a helper's tensor argument.
func (h *helpers) lookup(helper, name string) (*ir.Tensor, error) {
	if err := h.nameArg(helper, "tensor", name); err != nil {
		return nil, err
	}
	if t := h.c.Tensor(name); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%s %q: %s has no tensor %q (tensors: %s)", helper, name, h.c.Name, name, tensorList(h.c))
}

func tensorList(c *ir.Collective) string {
	if len(c.Tensors) == 0 {
		return "none"
	}
	names := make([]string, len(c.Tensors))
	for i, t := range c.Tensors {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// ptrType is the pointee type a helper returns: the tensor's element type in
// this kernel, const for read-only helpers.
func (h *helpers) ptrType(t *ir.Tensor, constant bool) string {
	ct := CType(t.ElemType(h.kc.k.DType))
	if constant {
		return "const " + ct
	}
	return ct
}

func (h *helpers) elemType(name string) (string, error) {
	if h.kc == nil {
		return "", fmt.Errorf("type %q: only in the kernel body (the prelude is shared by all dtypes; make it a C++ template)", name)
	}
	t, err := h.lookup("type", name)
	if err != nil {
		return "", err
	}
	if len(t.Index) > 0 {
		return "", fmt.Errorf("type %q: the tensor may come as %s, so it has no one C type; read its elements as int64_t through {{read_index %q}}", name, irismodel.JoinDTypes(t.Index, " or "), name)
	}
	return CType(t.ElemType(h.kc.k.DType)), nil
}

// readIndex reads a tensor of several index types (dtype: [i64, i32]): an
// irisgen::index_ptr whose [] gives int64 whatever the launch passed.
func (h *helpers) readIndex(name string) (string, error) {
	t, err := h.tensor("read_index", name)
	if err != nil {
		return "", err
	}
	if len(t.Index) == 0 {
		return "", fmt.Errorf("read_index %q: the tensor has one dtype (%s); use {{read %q}}", name, t.ElemType(h.kc.k.DType), name)
	}
	return h.placeholder(helperCall{
		expansion: fmt.Sprintf("irisgen::index_ptr{%s.%s, %s.%s}", ArgsName, TensorField(t), ArgsName, WidthField(t)),
		tensor:    name, access: ir.LocalRead, readOnly: true, call: fmt.Sprintf("read_index %q", name),
	}), nil
}

// nameArg refuses a name argument (of a tensor, size or parameter) that
// is another helper's result: that is C code for the kernel, never a name
// (the nested pipeline of {{read (param "k")}}).
func (h *helpers) nameArg(helper, what, arg string) error {
	if ns := placeholders(arg, len(h.calls)); len(ns) > 0 {
		example := helper + ` "x"`
		if strings.HasPrefix(helper, "peer_") {
			example += ` "p"`
		}
		return fmt.Errorf("%s: the %s must be a name in quotes, e.g. {{%s}}; {{%s}} gives C code for the kernel, not a name", helper, what, example, h.calls[ns[0]].call)
	}
	return nil
}

// peerArg checks a peer helper's rank argument: a C expression, in which
// another helper's result may stand only when it is an integer (a size, a
// rank or int parameter, numel), e.g. {{peer_read "x" (param "root")}}.
func (h *helpers) peerArg(helper, tensor, rank string) error {
	for _, n := range placeholders(rank, len(h.calls)) {
		if c := h.calls[n]; !c.integer {
			what := "is no integer"
			switch {
			case c.tensor != "":
				what = "gives a pointer"
			case c.param != "":
				what = "gives a float"
			case c.returns:
				what = "is a statement"
			}
			return fmt.Errorf("%s %q: the peer must be a rank, an integer C expression; {{%s}} %s (a size, numel or a rank or int parameter may stand in it, e.g. {{%s %q (param \"root\")}})", helper, tensor, c.call, what, helper, tensor)
		}
	}
	return nil
}

// isParam reports whether arg is exactly the result of {{param name}}.
func (h *helpers) isParam(arg, name string) bool {
	arg = strings.TrimSpace(arg)
	n, w, ok := placeholderAt(arg+" ", 0, len(h.calls))
	return ok && w == len(arg) && h.calls[n].param == name && h.calls[n].tensor == ""
}

// readable is a helper's argument for messages: the helper calls in it as
// the template wrote them.
func (h *helpers) readable(arg string) string {
	var b strings.Builder
	for i := 0; i < len(arg); i++ {
		if n, w, ok := placeholderAt(arg, i, len(h.calls)); ok {
			b.WriteString("{{" + h.calls[n].call + "}}")
			i += w - 1
			continue
		}
		b.WriteByte(arg[i])
	}
	return b.String()
}

// ownerPtr is a peer helper's pointer to a tensor only one rank passes
// (ranks: p): that rank's, read from the slot the kernel's start filled
// (exchangePrologue). The peer must be the parameter itself, so that the
// generator knows whose tensor it is.
func (h *helpers) ownerPtr(name string, t *ir.Tensor, rank string, acc ir.Access, constant bool) (string, error) {
	if strings.TrimSpace(rank) != t.Owner && !h.isParam(rank, t.Owner) {
		return "", fmt.Errorf("%s %q: %s is passed on rank %s only (ranks: %s), so its only peer pointer is that rank's; write {{%s %q %q}}", name, t.Name, t.Name, t.Owner, t.Owner, name, t.Name, t.Owner)
	}
	return h.placeholder(helperCall{
		expansion: fmt.Sprintf("((%s*)(uintptr_t)(ctx.base[(int)%s.p_%s] + irisgen::load_relaxed((const uint64_t*)%s.%s + blockIdx.x)))",
			h.ptrType(t, constant), ArgsName, t.Owner, ArgsName, SlotField(t)),
		tensor: t.Name, access: acc, readOnly: constant, arg: rank, param: t.Owner, call: fmt.Sprintf("%s %q %q", name, t.Name, t.Owner),
	}), nil
}

// param is a launch parameter's value as a C expression: int for a rank,
// int64_t for an int, float for an f32.
func (h *helpers) param(name string) (string, error) {
	if err := h.nameArg("param", "parameter", name); err != nil {
		return "", err
	}
	if h.kc == nil {
		return "", fmt.Errorf("param %q: only in the kernel body; pass parameters to the prelude's functions", name)
	}
	p := h.c.Param(name)
	if p == nil {
		known := make([]string, len(h.c.Params))
		for i, q := range h.c.Params {
			known[i] = q.Name
		}
		list := "the collective has none; declare it under params:"
		if len(known) > 0 {
			list = "params: " + strings.Join(known, ", ")
		}
		return "", fmt.Errorf("param %q: no such parameter%s", name, hint(name, known, list))
	}
	e := fmt.Sprintf("%s.%s", ArgsName, ParamField(p))
	switch p.Kind {
	case irismodel.ParamRank:
		e = "((int)" + e + ")"
	case irismodel.ParamF32:
		e = "((float)" + e + ")"
	default:
		e = "(" + e + ")"
	}
	return h.placeholder(helperCall{expansion: e, param: name, call: fmt.Sprintf("param %q", name), integer: p.Kind != irismodel.ParamF32}), nil
}

// hint is the parenthesised end of an "unknown" message: a close match, or
// the list.
func hint(word string, candidates []string, list string) string {
	if s := spec.Closest(word, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return " (" + list + ")"
}

// size is a symbol's value as an int64 C expression.
func (h *helpers) size(sym string) (string, error) {
	if err := h.nameArg("size", "size", sym); err != nil {
		return "", err
	}
	e, err := h.sizeExpr(sym)
	if err != nil {
		return "", err
	}
	return h.placeholder(helperCall{expansion: e, call: fmt.Sprintf("size %q", sym), integer: true}), nil
}

// sizeExpr is the C expression of a size symbol.
func (h *helpers) sizeExpr(sym string) (string, error) {
	if h.kc == nil {
		return "", fmt.Errorf("size %q: only in the kernel body; pass sizes to the prelude's functions", sym)
	}
	switch sym {
	case irismodel.WorldSymbol:
		return "((int64_t)ctx.world)", nil
	case irismodel.BlocksSymbol:
		return "((int64_t)gridDim.x)", nil
	}
	for _, s := range h.c.Symbols {
		if s == sym {
			return fmt.Sprintf("%s.%s", ArgsName, SymbolField(s)), nil
		}
	}
	known := append([]string{irismodel.WorldSymbol, irismodel.BlocksSymbol}, h.c.Symbols...)
	return "", fmt.Errorf("size %q: no such size (sizes: %s)", sym, strings.Join(known, ", "))
}

// numel is a tensor's element count as an int64 C expression.
func (h *helpers) numel(name string) (string, error) {
	t, err := h.lookup("numel", name)
	if err != nil {
		return "", err
	}
	parts := make([]string, 0, len(t.Shape))
	for _, d := range t.Shape {
		if d > 0 {
			parts = append(parts, fmt.Sprintf("(int64_t)%d", int64(d)))
			continue
		}
		s, err := h.sizeExpr(d.Name(h.c.Symbols))
		if err != nil {
			return "", fmt.Errorf("numel %q: %w", name, err)
		}
		parts = append(parts, s)
	}
	e := "((int64_t)1)"
	if len(parts) > 0 {
		e = "(" + strings.Join(parts, " * ") + ")"
	}
	return h.placeholder(helperCall{expansion: e, call: fmt.Sprintf("numel %q", name), integer: true}), nil
}

// barrier meets the peers at a call's boundary: the same block of every
// rank (docs/internals.md), in barrier mode device only. On a timeout the
// body returns; the error record tells the host.
func (h *helpers) barrier() (string, error) { return h.meet("barrier") }

// sync meets the peers between a kernel's own steps, in every barrier mode.
func (h *helpers) sync() (string, error) { return h.meet("sync") }

// gridSync waits for every block of the grid, and with cross for every
// block of every peer's grid (irisgen::grid_sync), in every barrier mode.
func (h *helpers) gridSync(cross bool) (string, error) {
	name := "grid_sync"
	if !cross {
		name = "grid_sync_local"
	}
	if h.kc == nil {
		return "", fmt.Errorf("%s: only in the kernel body (it returns from it on a timeout)", name)
	}
	return h.placeholder(helperCall{expansion: fmt.Sprintf("if (!irisgen::grid_sync(ctx, %v)) return;", cross), meets: cross, returns: true, call: name}), nil
}

func (h *helpers) meet(name string) (string, error) {
	if h.kc == nil {
		return "", fmt.Errorf("%s: only in the kernel body (it returns from it on a timeout)", name)
	}
	return h.placeholder(helperCall{expansion: fmt.Sprintf("if (!irisgen::%s(ctx)) return;", name), meets: true, returns: true, call: name}), nil
}

// crossCheck compares what a kernel body did with what the spec declares.
// An access the spec does not declare is an error where the template first
// makes it, with a note at the access entry; a declared access the template
// never makes is an error at the access entry.
func (e *emitter) crossCheck(v *ir.Variant, t *source, kc *kernelCtx, rec *recorder) diag.List {
	var errs diag.List
	for _, u := range v.Uses {
		name := u.Tensor.Name
		got := rec.acc[name]
		for _, n := range ir.AccessNames {
			switch {
			case got&n.Access != 0 && u.Access&n.Access == 0:
				errs = append(errs, &diag.Error{Code: diag.Template, Pos: t.pos(rec.first[name][n.Access]),
					Msg:   fmt.Sprintf("the template makes %s access to tensor %q, which variant %q does not declare (declared: %s); add it to the variant's access, or change the template", n.Name, name, v.Name, u.Access),
					Notes: []diag.Note{{Pos: u.Pos, Msg: fmt.Sprintf("%q is declared %s here", name, u.Access)}}})
			case u.Access&n.Access != 0 && got&n.Access == 0:
				errs = append(errs, &diag.Error{Code: diag.Template, Pos: u.Pos,
					Msg:   fmt.Sprintf("variant %q declares %s access to tensor %q, but template %s never makes it (no %s call); drop it from the access, or make the template do it", v.Name, n.Name, name, t.file, helperOf[n.Access]),
					Notes: []diag.Note{{Pos: t.pos(0), Msg: fmt.Sprintf("the template renders %s without it", kc)}}})
			}
		}
	}
	for _, p := range e.c.Params {
		if !rec.params[p.Name] {
			errs = append(errs, &diag.Error{Code: diag.Template, Pos: p.Pos,
				Msg:   fmt.Sprintf("parameter %q is never read by template %s (variant %q): every variant's kernel must use every parameter; read it with {{param %q}}, or remove it", p.Name, t.file, v.Name, p.Name),
				Notes: []diag.Note{{Pos: t.pos(0), Msg: fmt.Sprintf("the template renders %s without it", kc)}}})
		}
	}
	if v.Supports(irismodel.BarrierDevice) && !rec.barrier && !exchanges(v) {
		errs = append(errs, &diag.Error{Code: diag.Template, Pos: v.TemplatePos,
			Msg:   fmt.Sprintf("variant %q supports barrier mode device, but template %s never calls barrier or sync: a device-mode launch would not be ordered against the peers; call {{barrier}} where the ranks must meet, or drop device from barriers", v.Name, t.file),
			Notes: []diag.Note{{Pos: t.pos(0), Msg: fmt.Sprintf("the template renders %s without a barrier", kc)}}})
	}
	return errs
}

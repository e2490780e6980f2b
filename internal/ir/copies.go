package ir

import (
	"fmt"
	"slices"
	"strings"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/spec"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// A copy-engine variant (engine: copy) has no template: its copies list
// says which block of which rank's tensor goes into which block of which
// rank's tensor, and the access entries say which end issues each copy.
// The rules below are the whole of what such a variant may say; each
// refusal names the fix.

// engine resolves a variant's engine and its copies.
func (b *builder) engine(c *Collective, sv *spec.Variant, v *Variant, where string) {
	e := sv.Engine
	if e.OK() {
		found := false
		for _, en := range irismodel.Engines() {
			if en.String() == e.Value {
				v.Engine, found = en, true
			}
		}
		if !found {
			all := []string{irismodel.EngineSM.String(), irismodel.EngineCopy.String()}
			b.errorf(diag.Value, e.Pos, "unknown engine %q of %s%s", e.Value, where, hint(e.Value, all, oneOf(all)))
			return
		}
	}
	if v.Engine != irismodel.EngineCopy {
		if sv.Copies.Set {
			b.errorf(diag.Rule, sv.Copies.KeyPos, "copies of %s: only a copy-engine variant has a copy schedule; add engine: copy (and drop template), or remove copies", where)
		}
		return
	}
	if sv.Template.Set {
		b.errorf(diag.Rule, sv.Template.KeyPos, "%s has engine: copy, so no kernel and no template: its copies are its schedule; remove template", where)
	}
	if sv.Launch.Set {
		b.errorf(diag.Rule, sv.Launch.KeyPos, "%s has engine: copy, which launches no kernel: threads, blocks and vectors mean nothing to it; remove launch", where)
	}
	v.Launch = Launch{Threads: defaultThreads, MaxBlocks: 1, MinBlocks: 1, VectorBytes: defaultVectorBytes}
}

// copySchedule resolves a copy-engine variant's copies, once its access
// entries are resolved, and checks the schedule against them.
func (b *builder) copySchedule(c *Collective, sv *spec.Variant, v *Variant, where string) {
	if v.Engine != irismodel.EngineCopy {
		return
	}
	e, before := sv.Engine, len(b.errs)
	if len(c.Ops) > 0 {
		b.errorf(diag.Rule, e.Pos, "%s has engine: copy, but %s reduces (ops: %s): a copy engine moves bytes and cannot add them; use a kernel (remove engine)", where, c.Name, opList(c.Ops))
		return
	}
	if !sv.Copies.Set {
		b.errorf(diag.Schema, e.Pos, "%s has engine: copy but no copies; add copies: with the blocks it moves, e.g. [{each: [r, p], from: input@r, to: \"output[r]@p\"}]", where)
		return
	}
	if sv.Copies.Bad {
		return
	}
	if len(sv.Copies.List) == 0 {
		b.errorf(diag.Value, sv.Copies.Pos, "copies of %s is empty; add the blocks it moves, e.g. {each: [r, p], from: input@r, to: \"output[r]@p\"}", where)
		return
	}
	for i, sc := range sv.Copies.List {
		if st := b.copyStmt(c, v, sc, fmt.Sprintf("copy %d of %s", i+1, where)); st != nil {
			v.Copies = append(v.Copies, st)
		}
	}
	if len(v.Copies) != len(sv.Copies.List) || len(b.errs) > before {
		return // the checks below need every statement
	}
	b.copyAccess(c, v, where)
	b.copyParams(c, v, where)
	if len(b.errs) == before {
		b.copyCoverage(c, v, where)
	}
}

func opList(ops []Op) string {
	s := make([]string, len(ops))
	for i, o := range ops {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}

// copyStmt resolves one item of copies.
func (b *builder) copyStmt(c *Collective, v *Variant, sc *spec.Copy, what string) *CopyStmt {
	if sc.Bad {
		return nil
	}
	st := &CopyStmt{Pos: sc.Pos, FromPos: sc.From.Pos, ToPos: sc.To.Pos}
	ok := true
	if sc.Each.Bad {
		ok = false
	}
	for _, it := range sc.Each.Items {
		switch {
		case !b.identifier(it, "rank variable", true):
			ok = false
		case slices.Contains(st.Vars, it.Value):
			b.errorf(diag.Name, it.Pos, "rank variable %q of %s is listed twice; list each once", it.Value, what)
			ok = false
		case c.Param(it.Value) != nil || tensorByName(c, it.Value) != nil || slices.Contains(c.Symbols, it.Value) || it.Value == irismodel.WorldSymbol:
			b.errorf(diag.Name, it.Pos, "rank variable %q of %s has the name of a parameter, tensor or size; pick another name, e.g. r or p", it.Value, what)
			ok = false
		default:
			st.Vars = append(st.Vars, it.Value)
		}
	}
	if len(st.Vars) > irismodel.MaxCopyVars {
		b.errorf(diag.Limit, sc.Each.Pos, "%s ranges over %d rank variables; at most %d (every rank to every rank) are allowed: split it into statements", what, len(st.Vars), irismodel.MaxCopyVars)
		ok = false
	}
	st.CopyStmt.Vars = len(st.Vars)
	for _, end := range []struct {
		key, example string
		s            spec.Str
		to           *irismodel.CopyEnd
	}{{"from", "input@r", sc.From, &st.From}, {"to", "output[r]@p", sc.To, &st.To}} {
		switch {
		case !end.s.Set:
			b.errorf(diag.Schema, sc.Pos, "%s has no %s; add %s: <tensor>[<block>]@<rank>, e.g. %s: %s", what, end.key, end.key, end.key, end.example)
			ok = false
		case !end.s.OK():
			ok = false
		default:
			e, good := b.copyEnd(c, st.Vars, end.s, end.key+" of "+what)
			*end.to, ok = e, ok && good
		}
	}
	if !ok {
		return nil
	}
	// Every variable must place something, or the statement repeats the
	// same copy for each of its values.
	for i, name := range st.Vars {
		used := false
		for _, e := range []irismodel.RankExpr{st.From.Block, st.From.Rank, st.To.Block, st.To.Rank} {
			used = used || e.Var == i
		}
		if !used {
			b.errorf(diag.Rule, sc.Each.Items[i].Pos, "rank variable %q of %s places nothing: the copy would repeat for each of its values; use it in from or to, or remove it from each", name, what)
			ok = false
		}
	}
	if !ok {
		return nil
	}
	b.copyShapes(c, st, what)
	return st
}

// worldBlocks reports whether t is made of one block a rank (its first
// dimension is world). A tensor whose shape failed to parse has none.
func worldBlocks(t *Tensor) bool { return len(t.Shape) > 0 && t.Shape[0] == irismodel.DimWorld }

// copyEnd parses tensor[block]@rank.
func (b *builder) copyEnd(c *Collective, vars []string, s spec.Str, what string) (irismodel.CopyEnd, bool) {
	e := irismodel.CopyEnd{Block: irismodel.NoRank}
	text := s.Value
	at := func(off int) Pos { return b.within(s, off) }
	usage := "write <tensor>@<rank> or <tensor>[<block>]@<rank>, e.g. input@r or output[r]@p"
	atSign := strings.IndexByte(text, '@')
	if atSign < 0 {
		b.errorf(diag.Value, at(0), "%s is %q, which names no rank; %s", what, text, usage)
		return e, false
	}
	tensor, block, blockOff := text[:atSign], "", 0
	if i := strings.IndexByte(tensor, '['); i >= 0 {
		if !strings.HasSuffix(tensor, "]") {
			b.errorf(diag.Value, at(i), "%s: the block index of %q is not closed by ]; %s", what, text, usage)
			return e, false
		}
		tensor, block, blockOff = tensor[:i], tensor[i+1:len(tensor)-1], i+1
	}
	tensor = strings.TrimSpace(tensor)
	t := tensorByName(c, tensor)
	if t == nil {
		var names []string
		for _, x := range c.Tensors {
			names = append(names, x.Name)
		}
		b.errorf(diag.Undefined, at(0), "%s names undefined tensor %q%s", what, tensor, hint(tensor, names, "tensors are: "+strings.Join(names, ", ")))
		return e, false
	}
	e.Tensor = slices.Index(c.Tensors, t)
	ok := true
	if blockOff > 0 {
		if !worldBlocks(t) {
			first := "missing"
			if len(t.Shape) > 0 {
				first = t.Shape[0].Name(c.Symbols)
			}
			b.errorf(diag.Rule, at(blockOff), "%s indexes tensor %q, whose first dimension is %s, not world: a block index picks one rank's block of a [world, ...] tensor; copy the whole tensor (%s@...)", what, t.Name, first, t.Name)
			ok = false
		} else if r, good := b.rankExpr(c, vars, s, blockOff, block, "the block index of "+what); good {
			e.Block = r
		} else {
			ok = false
		}
	}
	if r, good := b.rankExpr(c, vars, s, atSign+1, text[atSign+1:], "the rank of "+what); good {
		e.Rank = r
	} else {
		ok = false
	}
	return e, ok
}

// rankExpr parses a rank: a rank variable or a rank parameter, optionally
// plus or minus an int parameter.
func (b *builder) rankExpr(c *Collective, vars []string, s spec.Str, off int, text, what string) (irismodel.RankExpr, bool) {
	r := irismodel.NoRank
	base, shift, neg := text, "", false
	if i := strings.IndexAny(text, "+-"); i >= 0 {
		base, shift, neg = text[:i], text[i+1:], text[i] == '-'
	}
	base, shift = strings.TrimSpace(base), strings.TrimSpace(shift)
	var known []string
	known = append(known, vars...)
	for _, p := range c.Params {
		if p.Kind == irismodel.ParamRank {
			known = append(known, p.Name)
		}
	}
	switch p := c.Param(base); {
	case slices.Contains(vars, base):
		r.Var = slices.Index(vars, base)
	case p != nil && p.Kind == irismodel.ParamRank:
		r.Param = slices.Index(c.Params, p)
	case p != nil:
		b.errorf(diag.Rule, b.within(s, off), "%s is %s parameter %q, not a rank: name a rank variable of each or a rank parameter (%s), and add an int parameter to it (r+%s)", what, p.Kind, base, strings.Join(known, ", "), base)
		return r, false
	default:
		fix := fmt.Sprintf("; declare it in each (each: [%s]) or as a rank parameter", base)
		if len(known) > 0 {
			fix = hint(base, known, "ranks are the variables of each and the rank parameters: "+strings.Join(known, ", "))
		}
		b.errorf(diag.Undefined, b.within(s, off), "%s names %q, which is no rank variable or rank parameter%s", what, base, fix)
		return r, false
	}
	if shift == "" && strings.ContainsAny(text, "+-") {
		b.errorf(diag.Value, b.within(s, off), "%s is %q, which adds nothing; write <rank>+<int parameter>, e.g. r+offset", what, text)
		return r, false
	}
	if shift != "" {
		p := c.Param(shift)
		if p == nil || p.Kind != irismodel.ParamInt {
			b.errorf(diag.Rule, b.within(s, off+strings.IndexAny(text, "+-")+1), "%s adds %q, which is not an int parameter: a rank moves by an int parameter, taken mod world (e.g. params: {offset: int}, then r+offset)", what, shift)
			return r, false
		}
		r.Shift, r.Neg = slices.Index(c.Params, p), neg
	}
	return r, true
}

// within is the position of byte off of a scalar s (past its opening
// quote when it is quoted).
func (b *builder) within(s spec.Str, off int) Pos {
	p := s.Pos
	if b.quoted(p) {
		off++
	}
	p.Col += off
	p.EndLine, p.EndCol = 0, 0
	return p
}

// copyShapes checks that the two ends of a statement are blocks of the
// same shape and element type.
func (b *builder) copyShapes(c *Collective, st *CopyStmt, what string) {
	block := func(e irismodel.CopyEnd) irismodel.Shape {
		sh := c.Tensors[e.Tensor].Shape
		if !e.Block.Whole() {
			sh = sh[1:]
		}
		return sh
	}
	from, to := c.Tensors[st.From.Tensor], c.Tensors[st.To.Tensor]
	fs, ts := block(st.From), block(st.To)
	switch {
	case !slices.Equal(fs, ts):
		b.errorf(diag.Rule, st.ToPos, "%s copies a block of shape %s of %q into a block of shape %s of %q: a copy moves one contiguous block into one of the same shape; index the [world, ...] side with [rank] or fix the shapes", what,
			shapeText(fs, c.Symbols), from.Name, shapeText(ts, c.Symbols), to.Name)
	case from.DType != to.DType || len(from.Index) > 0 || len(to.Index) > 0:
		b.errorf(diag.Rule, st.ToPos, "%s copies %q into %q, whose element types differ (or vary per launch): a copy moves bytes, so both take the same dtype; give them the same dtype", what, from.Name, to.Name)
	}
}

func shapeText(s irismodel.Shape, sizes []string) string {
	if len(s) == 0 {
		return "[]"
	}
	return s.String(sizes)
}

// copyAccess checks the access entries against the schedule: the rank that
// holds a copy's source issues it, so the source is read locally and the
// destination written through the heap. Copies issued by the rank at the
// destination (reading a peer through the heap) deadlocked when launched
// back to back by 4 ranks (all_gather copy_pull on 4 H100s; 2 ranks and
// single launches passed): the driver appears to run a peer copy on the
// GPU that holds its source, where the copies several ranks issue to read
// it queue in an order no barrier controls. A tensor only one rank passes
// is written through its owner's staging buffer (StagesAlways).
func (b *builder) copyAccess(c *Collective, v *Variant, where string) {
	// The one home of the staging rule (Use.Staged, StagesAlways).
	for i, u := range v.Uses {
		v.Uses[i].Staged = u.Tensor.Owner != "" && u.Access == RemoteWrite
	}
	use := func(ti int) *Use {
		for i := range v.Uses {
			if v.Uses[i].Tensor == c.Tensors[ti] {
				return &v.Uses[i]
			}
		}
		return nil
	}
	touched := map[int]bool{}
	for i, st := range v.Copies {
		what := fmt.Sprintf("copy %d of %s", i+1, where)
		fu, tu := use(st.From.Tensor), use(st.To.Tensor)
		if fu == nil || tu == nil {
			return // an access entry is missing (reported)
		}
		touched[st.From.Tensor], touched[st.To.Tensor] = true, true
		switch {
		case fu.Access == LocalRead && tu.Access == RemoteWrite:
		case fu.Access == RemoteRead:
			b.errs.AddNoted(diag.Rule, fu.Pos, fmt.Sprintf("%s reads %q through the heap (remote_read), so the rank at its destination would issue it; such copies deadlocked when launched back to back by 4 ranks on H100s (the driver appears to run a peer copy on the GPU that holds its source, where the copies several ranks issue to read it queue in an order no barrier controls): let the source issue it, %s local_read and %s remote_write",
				what, fu.Tensor.Name, fu.Tensor.Name, tu.Tensor.Name), diag.Note{Pos: st.Pos, Msg: "the copy is here"})
			continue
		case !fu.Tensor.Dir.Writes() && tu.Tensor.Dir.Writes() || fu.Tensor.Dir == irismodel.InOut:
			b.errs.AddNoted(diag.Rule, st.Pos, fmt.Sprintf("%s reads %q (%s) and writes %q (%s): the rank that holds the source issues a copy, reading it locally and writing the destination through the heap; declare from local_read and to remote_write",
				what, fu.Tensor.Name, fu.Access, tu.Tensor.Name, tu.Access), diag.Note{Pos: fu.Pos, Msg: "the access entries are here"})
			continue
		default:
			b.errorf(diag.Rule, st.ToPos, "%s copies %q (dir: %s) into %q (dir: %s): a copy goes from a tensor the launch reads into one it writes", what, fu.Tensor.Name, fu.Tensor.Dir, tu.Tensor.Name, tu.Tensor.Dir)
			continue
		}
		// A tensor only one rank passes is there on that rank alone.
		for _, e := range []struct {
			end irismodel.CopyEnd
			pos Pos
		}{{st.From, st.FromPos}, {st.To, st.ToPos}} {
			t := c.Tensors[e.end.Tensor]
			if t.Owner == "" {
				continue
			}
			owner := slices.Index(c.Params, c.Param(t.Owner))
			if e.end.Rank.Param != owner || e.end.Rank.Shift >= 0 {
				b.errorf(diag.Rule, e.pos, "%s places %q on another rank than %s's, but only rank %s passes it (ranks: %s); write %s@%s", what, t.Name, t.Owner, t.Owner, t.Owner, t.Name, t.Owner)
			}
		}
	}
	for _, u := range v.Uses {
		ti := slices.Index(c.Tensors, u.Tensor)
		switch {
		case u.Access == 0 && touched[ti]:
			b.errorf(diag.Rule, u.Pos, "%s copies %q, but its access entry says none; give it the kind its copies need (local_read or remote_read for a source, local_write or remote_write for a destination)", where, u.Tensor.Name)
		case u.Access != 0 && !touched[ti]:
			b.errorf(diag.Rule, u.Pos, "%s declares %s access to %q, but none of its copies touches it; set it to none or add a copy", where, u.Access, u.Tensor.Name)
		case u.Access != 0 && !slices.Contains([]Access{LocalRead, RemoteRead, LocalWrite, RemoteWrite}, u.Access):
			b.errorf(diag.Rule, u.Pos, "%s declares %s access to %q; a copy engine reads or writes whole blocks, each copy locally at one end and through the heap at the other: give it one kind of local_read, remote_read, local_write, remote_write", where, u.Access, u.Tensor.Name)
		}
	}
}

// copyParams: like a kernel reads every parameter, the schedule uses
// every parameter.
func (b *builder) copyParams(c *Collective, v *Variant, where string) {
	for pi, p := range c.Params {
		used := false
		for _, st := range v.Copies {
			for _, e := range []irismodel.RankExpr{st.From.Block, st.From.Rank, st.To.Block, st.To.Rank} {
				used = used || e.Param == pi || e.Shift == pi
			}
		}
		if !used {
			b.errs.AddNoted(diag.Rule, p.Pos, fmt.Sprintf("parameter %q is never used by the copies of %s: a launch would pass it for nothing; place a rank with it (tensor@%s) or remove it", p.Name, where, p.Name),
				diag.Note{Pos: v.Copies[0].Pos, Msg: "the copies are here"})
		}
	}
}

// copyCoverage expands the schedule on every world size and every value of
// the parameters and checks that each rank's written tensors get each of
// their blocks exactly once (a tensor only one rank passes: on that rank).
func (b *builder) copyCoverage(c *Collective, v *Variant, where string) {
	stmts := v.Stmts()
	names := make([]string, len(c.Tensors))
	for i, t := range c.Tensors {
		names[i] = t.Name
	}
	var written []int
	for _, u := range v.Uses {
		if u.Access.Writes() {
			written = append(written, slices.Index(c.Tensors, u.Tensor))
		}
	}
	eachWorld(c, func(world int, params []int64) bool {
		return b.coverOnce(c, v, stmts, world, params, names, written, where)
	})
}

// eachWorld calls fn with every world size up to irismodel.MaxWorld and
// every value of the collective's parameters (ranks of that world), until
// fn returns false (one example of an error is enough).
func eachWorld(c *Collective, fn func(world int, params []int64) bool) {
	for world := 1; world <= irismodel.MaxWorld; world++ {
		params := make([]int64, len(c.Params))
		var walk func(i int) bool
		walk = func(i int) bool {
			if i < len(params) {
				for x := range world {
					params[i] = int64(x)
					if !walk(i + 1) {
						return false
					}
				}
				return true
			}
			return fn(world, params)
		}
		if !walk(0) {
			return
		}
	}
}

// ownBlockSafe checks aliasing: own_block. Only a copy-engine variant may
// take it (its copies say block by block what a launch writes; a kernel's
// accesses do not), it must apply to a pair (a dir: in tensor that is one
// block of a written one: irismodel.TensorDesc.OwnBlock), and on every
// world and parameter value the only copy that writes a rank's own block
// of the written tensor must be the whole in tensor of that rank (the copy
// the launch drops in place, where source and destination are one). Any
// other would overwrite, in place, the input a launch has yet to read.
func (b *builder) ownBlockSafe(c *Collective, v *Variant, a spec.Str, where string) {
	if v.Engine != irismodel.EngineCopy {
		b.errorf(diag.Rule, a.Pos, "aliasing: own_block in %s needs engine: copy: irisgen proves it safe from the copies, and a kernel's accesses are not known block by block; use aliasing: forbid, or allow for the very same tensor", where)
		return
	}
	var pairs [][2]int // the in tensor, the written tensor it may be a block of
	for _, pr := range v.AliasPairs() {
		for _, o := range [][2]*Tensor{{pr[0], pr[1]}, {pr[1], pr[0]}} {
			if v.OwnBlock(o[0], o[1]) {
				pairs = append(pairs, [2]int{slices.Index(c.Tensors, o[0]), slices.Index(c.Tensors, o[1])})
			}
		}
	}
	if len(pairs) == 0 {
		b.errorf(diag.Rule, a.Pos, "aliasing: own_block in %s allows nothing: no dir: in tensor is one block of a written tensor (shape [world] followed by the in tensor's, the same dtype); use aliasing: forbid", where)
		return
	}
	if len(v.Copies) == 0 {
		return // the copies' errors are reported already
	}
	stmts := v.Stmts()
	eachWorld(c, func(world int, params []int64) bool {
		for si := range stmts {
			for _, bc := range irismodel.ExpandCopies(nil, stmts[si:si+1], world, -1, params) {
				for _, pr := range pairs {
					own := bc.To == pr[1] && (bc.ToBlock < 0 || bc.ToBlock == bc.ToRank)
					identity := bc.From == pr[0] && bc.FromBlock < 0 && bc.FromRank == bc.ToRank && bc.ToBlock == bc.ToRank
					if own && !identity {
						b.errorf(diag.Rule, v.Copies[si].Pos, "copy %d of %s writes %s on rank %d on %d ranks%s, which under aliasing: own_block may be %q itself there: a launch in place would overwrite its input before reading it; use aliasing: forbid",
							si+1, where, blockName(c, pr[1], bc.ToRank), bc.ToRank, world, paramText(c, params), c.Tensors[pr[0]].Name)
						return false
					}
				}
			}
		}
		return true
	})
}

// coverOnce checks one world and parameter set; false after an error.
func (b *builder) coverOnce(c *Collective, v *Variant, stmts []irismodel.CopyStmt, world int, params []int64, names []string, written []int, where string) bool {
	type key struct{ tensor, rank, block int }
	count := map[key]int{}
	by := map[key]int{} // the statement that wrote it first
	for si := range stmts {
		for _, bc := range irismodel.ExpandCopies(nil, stmts[si:si+1], world, -1, params) {
			blocks := []int{bc.ToBlock}
			if bc.ToBlock < 0 && worldBlocks(c.Tensors[bc.To]) {
				blocks = nil
				for k := range world {
					blocks = append(blocks, k)
				}
			}
			for _, blk := range blocks {
				k := key{bc.To, bc.ToRank, blk}
				count[k]++
				if count[k] == 1 {
					by[k] = si
				} else {
					b.errorf(diag.Rule, v.Copies[si].Pos, "copy %d of %s writes %s on rank %d again (copy %d wrote it first) on %d ranks%s: every block of a written tensor is written once; fix the ranks or the block index",
						si+1, where, blockName(c, bc.To, blk), bc.ToRank, by[k]+1, world, paramText(c, params))
					return false
				}
			}
		}
	}
	for _, ti := range written {
		t := c.Tensors[ti]
		nblocks := 1
		if worldBlocks(t) {
			nblocks = world
		}
		for r := range world {
			if t.Owner != "" && int(params[slices.Index(c.Params, c.Param(t.Owner))]) != r {
				continue
			}
			for blk := range nblocks {
				idx := blk
				if nblocks == 1 {
					idx = -1
				}
				if count[key{ti, r, idx}] == 0 && count[key{ti, r, blk}] == 0 {
					u := v.Uses[slices.IndexFunc(v.Uses, func(u Use) bool { return u.Tensor == t })]
					b.errorf(diag.Rule, u.Pos, "the copies of %s never write %s on rank %d on %d ranks%s, so the launch would leave it as it was; add the copy that fills it",
						where, blockName(c, ti, idx), r, world, paramText(c, params))
					return false
				}
			}
		}
	}
	return true
}

func blockName(c *Collective, ti, blk int) string {
	if blk < 0 {
		return fmt.Sprintf("%q", c.Tensors[ti].Name)
	}
	return fmt.Sprintf("block %d of %q", blk, c.Tensors[ti].Name)
}

func paramText(c *Collective, params []int64) string {
	if len(params) == 0 {
		return ""
	}
	var parts []string
	for i, p := range c.Params {
		parts = append(parts, fmt.Sprintf("%s = %d", p.Name, params[i]))
	}
	return " with " + strings.Join(parts, ", ")
}

// StagesAlways reports whether a launch of v always goes through a staging
// buffer: a copy-engine variant whose peers write a tensor only one rank
// passes reach it at that rank's staging buffer (the one address of it
// every rank knows when it enqueues its copies), and the owner copies the
// buffer into the tensor after the launch's last barrier; so mode none,
// where nothing would order that copy after the peers' writes, is not
// among its modes.
func (v *Variant) StagesAlways() bool {
	if v.Engine != irismodel.EngineCopy {
		return false
	}
	return slices.ContainsFunc(v.Uses, func(u Use) bool { return u.Staged })
}

// copyBarriers drops mode none from a variant that always stages
// (StagesAlways) where the spec leaves its modes to the default, and
// refuses it where the spec lists it.
func (b *builder) copyBarriers(sv *spec.Variant, v *Variant, where string) {
	if !v.StagesAlways() {
		return
	}
	if sv.Barriers.Set {
		for _, it := range sv.Barriers.Items {
			if it.Value == irismodel.BarrierNone.String() {
				b.errorf(diag.Rule, it.Pos, "%s writes a tensor only one rank passes through its copy engines, so the peers write that rank's staging buffer and it copies the buffer into the tensor at every launch, and in mode none nothing would order that copy after the peers' writes; remove none", where)
			}
		}
		return
	}
	v.Barriers = slices.DeleteFunc(v.Barriers, func(m irismodel.Barrier) bool { return m == irismodel.BarrierNone })
}

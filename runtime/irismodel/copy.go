package irismodel

import (
	"fmt"
	"strings"
)

// Engine is what moves a variant's data: the GPU's cores running a kernel
// (the default) or its copy engines, driven from the launch stream.
type Engine uint8

// The engines.
const (
	// EngineSM: a kernel, rendered from the variant's template.
	EngineSM Engine = iota
	// EngineCopy: no kernel; the launch enqueues the variant's copy
	// schedule (CopyStmt) as peer copies between heap addresses on the
	// launch stream, its barriers as stream memory operations on plan
	// flags (docs/internals.md, "Copy-engine launches").
	EngineCopy
)

var engineNames = [...]string{"sm", "copy"}

// Engines lists every engine, in the order of the constants.
func Engines() []Engine { return []Engine{EngineSM, EngineCopy} }

// String returns the spec spelling: "sm" or "copy".
func (e Engine) String() string {
	if int(e) < len(engineNames) {
		return engineNames[e]
	}
	return fmt.Sprintf("engine(%d)", uint8(e))
}

// MaxCopyVars is how many rank variables (spec key each) one copy
// statement may range over: enough for every rank to every rank.
const MaxCopyVars = 2

// RankExpr is a rank in a copy statement: a rank variable of the
// statement or a rank parameter of the launch, plus or minus an int
// parameter, taken mod world. Var and Param are -1 where unused; exactly
// one of them is set, except in a CopyEnd's Block of a whole tensor,
// where both are (NoRank).
type RankExpr struct {
	Var   int  // index of the statement's rank variable, or -1
	Param int  // index of a rank parameter among the collective's parameters, or -1
	Shift int  // index of an int parameter added (Neg: subtracted), or -1
	Neg   bool // the shift is subtracted
}

// NoRank is the Block of a copy end that names the whole tensor.
var NoRank = RankExpr{Var: -1, Param: -1, Shift: -1}

// Whole reports whether e names nothing (a whole tensor's block).
func (e RankExpr) Whole() bool { return e.Var < 0 && e.Param < 0 }

// Eval is e's rank on world ranks, with the statement's variables vars and
// the launch's parameter values params (rank and int parameters as
// int64): in [0, world). Only for an e that is not Whole.
func (e RankExpr) Eval(world int, vars []int, params []int64) int {
	var v int64
	if e.Var >= 0 {
		v = int64(vars[e.Var])
	} else {
		v = params[e.Param]
	}
	w := int64(world)
	v %= w
	if e.Shift >= 0 {
		s := params[e.Shift] % w // any int64: reduced first, so the sum cannot overflow
		if e.Neg {
			s = -s
		}
		v += s
	}
	return int(((v % w) + w) % w)
}

// Spell is e as a spec writes it, with the statement's variable names and
// the collective's parameter names.
func (e RankExpr) Spell(vars, params []string) string {
	var s string
	switch {
	case e.Var >= 0:
		s = vars[e.Var]
	case e.Param >= 0:
		s = params[e.Param]
	default:
		return ""
	}
	if e.Shift >= 0 {
		op := "+"
		if e.Neg {
			op = "-"
		}
		s += op + params[e.Shift]
	}
	return s
}

// CopyEnd is one side of a copy statement: block Block of the leading
// (world) dimension of tensor Tensor on rank Rank, or the whole tensor
// where Block is NoRank.
type CopyEnd struct {
	Tensor int // index in the collective's tensors
	Block  RankExpr
	Rank   RankExpr
}

// Spell is c as a spec writes it: tensor[block]@rank.
func (c CopyEnd) Spell(tensors, vars, params []string) string {
	s := tensors[c.Tensor]
	if !c.Block.Whole() {
		s += "[" + c.Block.Spell(vars, params) + "]"
	}
	return s + "@" + c.Rank.Spell(vars, params)
}

// CopyStmt is one statement of a copy-engine variant's schedule (spec key
// copies): for every value of its Vars rank variables (each 0..world-1),
// the block From goes into the block To. The source's rank issues the
// copy on its launch stream (it writes the destination through the heap):
// copies issued to read a peer's memory deadlocked when 4 ranks launched
// them back to back on H100s (the driver appears to run a peer copy on the
// GPU that holds its source, where the readers' copies queue in an order
// no barrier controls).
type CopyStmt struct {
	Vars     int
	From, To CopyEnd
}

// BlockCopy is one copy of an expanded schedule: block FromBlock of tensor
// From on rank FromRank into block ToBlock of tensor To on rank ToRank (a
// block of -1: the whole tensor), issued by rank FromRank (CopyStmt).
type BlockCopy struct {
	From, FromRank, FromBlock int
	To, ToRank, ToBlock       int
}

// Spell is c as "input[1]@0 -> output[0]@1 (by 0)".
func (c BlockCopy) Spell(tensors []string) string {
	end := func(t, r, b int) string {
		s := tensors[t]
		if b >= 0 {
			s += fmt.Sprintf("[%d]", b)
		}
		return s + fmt.Sprintf("@%d", r)
	}
	return fmt.Sprintf("%s -> %s (by %d)", end(c.From, c.FromRank, c.FromBlock), end(c.To, c.ToRank, c.ToBlock), c.FromRank)
}

// MaxIssued is the most copies ExpandCopies gives one issuing rank of a
// world of world ranks, whatever the parameters: world^Vars a statement,
// world^(Vars-1) where the source's rank is a rank variable (with any
// shift, one value of it per issuer).
func MaxIssued(stmts []CopyStmt, world int) int {
	n := 0
	for _, st := range stmts {
		k := 1
		for range st.Vars {
			k *= world
		}
		if st.From.Rank.Var >= 0 {
			k /= world
		}
		n += k
	}
	return n
}

// ExpandCopies appends to out the copies of the schedule stmts that rank
// issuer issues on world ranks with the launch's parameter values (issuer
// -1: every rank's), in issue order: statement by statement, and within a
// statement by the distance from the issuer to the destination's rank
// ((to - issuer) mod world), 1 first and the copy within the issuer last,
// so that at any moment the ranks copy to different peers.
// It allocates only where out must grow.
func ExpandCopies(out []BlockCopy, stmts []CopyStmt, world, issuer int, params []int64) []BlockCopy {
	var vars [MaxCopyVars]int
	for _, st := range stmts {
		start := len(out)
		n := 1
		for range st.Vars {
			n *= world
		}
		for k := range n {
			for i, x := 0, k; i < st.Vars; i++ {
				vars[i], x = x%world, x/world
			}
			c := BlockCopy{From: st.From.Tensor, To: st.To.Tensor, FromBlock: -1, ToBlock: -1}
			c.FromRank = st.From.Rank.Eval(world, vars[:], params)
			c.ToRank = st.To.Rank.Eval(world, vars[:], params)
			if !st.From.Block.Whole() {
				c.FromBlock = st.From.Block.Eval(world, vars[:], params)
			}
			if !st.To.Block.Whole() {
				c.ToBlock = st.To.Block.Eval(world, vars[:], params)
			}
			if issuer >= 0 && c.FromRank != issuer {
				continue
			}
			out = append(out, c)
		}
		// Insertion sort by distance (stable; at most world^2 entries, and
		// it allocates nothing).
		dist := func(c BlockCopy) int {
			d := ((c.ToRank-c.FromRank)%world + world) % world
			if d == 0 {
				d = world
			}
			return c.FromRank*(world+1) + d // every issuer's copies together when issuer is -1
		}
		for i := start + 1; i < len(out); i++ {
			for j := i; j > start && dist(out[j]) < dist(out[j-1]); j-- {
				out[j], out[j-1] = out[j-1], out[j]
			}
		}
	}
	return out
}

// SpellCopies is the schedule of every rank, one copy a line, as
// ExpandCopies orders it: what `irisgen explain` prints and the tests
// compare.
func SpellCopies(stmts []CopyStmt, world int, params []int64, tensors []string) string {
	var b strings.Builder
	for r := range world {
		for _, c := range ExpandCopies(nil, stmts, world, r, params) {
			b.WriteString(c.Spell(tensors))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

package hipemit

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/irisgen/irisgen/internal/ir"
)

// The scope checks read the template's own rendered text (render.go) as
// C++, as the bypass checks do, and refuse a helper where it does not do
// what the generator records for it:
//   - in a comment, a string or character literal, a preprocessor
//     directive or conditional group (#if ... #endif), or an unevaluated
//     operand (sizeof, decltype, ...): it would count as the template
//     using a parameter, making an access or meeting its peers while the
//     kernel does nothing of the kind (or only on some platform);
//   - barrier, sync, grid_sync or grid_sync_local inside a lambda: the
//     return it makes on a timeout leaves the lambda, not the kernel body,
//     and a lambda runs any number of times (a row helper's fin runs once
//     per piece), so the blocks would not meet their peers in step;
//   - read, write, update or read_index of a tensor only one rank passes
//     (ranks: p) where the kernel is not known to run on that rank: its
//     pointer is null on every other one. The generator sees the guard in
//     the text: the helper must stand in the statement an if whose
//     condition implies ctx.rank == {{param "p"}} controls (also through
//     &&, ||, ! and a const copy of the parameter), in its else when the
//     condition implies ctx.rank != it, or after such an if that returns.

// scopeChecker holds the tokens of one render's own text and what the
// checks derive from them.
type scopeChecker struct {
	c      *ir.Collective
	calls  []helperCall
	text   []byte
	toks   []token
	match  []int // the matching bracket of ( ) [ ] { }, -1 for others
	encl   []int // the closing brace of the innermost block around each token (len(toks) at the top)
	semi   []int // the ; that ends the statement at each token's level (or the level's closing bracket)
	out    []violation
	lambda map[int]bool // { tokens that open a lambda's body
	alias  []alias
}

// alias is a const copy of a parameter: const int root = {{param "root"}};
type alias struct {
	name, param string
	from, to    int // token range where it is in scope
}

// scope returns the refused helper uses of a render, with offsets in the
// template.
func scope(c *ir.Collective, r rendered, calls []helperCall) []violation {
	text, idx := spliced(r.own)
	toks, spans := lexQuiet(text)
	k := &scopeChecker{c: c, calls: calls, text: text, toks: toks, lambda: map[int]bool{}}
	k.brackets()
	k.hidden(r, idx, spans)
	k.lambdas()
	k.guards()
	for i := range k.out {
		k.out[i].off = r.at[idx[k.out[i].off]]
		if k.out[i].noteOff >= 0 {
			k.out[i].noteOff = r.at[idx[k.out[i].noteOff]]
		}
	}
	return k.out
}

func (k *scopeChecker) tok(i int) token {
	if i < 0 || i >= len(k.toks) {
		return token{}
	}
	return k.toks[i]
}

func (k *scopeChecker) refuse(at int, tensor, format string, args ...any) {
	k.out = append(k.out, violation{off: at, msg: fmt.Sprintf(format, args...), tensor: tensor, noteOff: -1})
}

// brackets pairs the brackets and finds, for every token, its block's end
// and its statement's end.
func (k *scopeChecker) brackets() {
	n := len(k.toks)
	k.match, k.encl, k.semi = make([]int, n), make([]int, n), make([]int, n)
	var open []int
	for i, t := range k.toks {
		k.match[i] = -1
		if t.kind != 'p' {
			continue
		}
		switch t.text {
		case "(", "[", "{":
			open = append(open, i)
		case ")", "]", "}":
			want := map[string]string{")": "(", "]": "[", "}": "{"}[t.text]
			// Pair with the innermost open bracket of its kind, dropping
			// unclosed ones inside it.
			for j := len(open) - 1; j >= 0; j-- {
				if k.toks[open[j]].text == want {
					k.match[open[j]], k.match[i] = i, open[j]
					open = open[:j]
					break
				}
			}
		}
	}
	// Backwards: the end of every token's block and statement.
	blocks, levels := []int{n}, []int{n}
	for i := n - 1; i >= 0; i-- {
		t := k.toks[i]
		switch {
		case t.kind == 'p' && (t.text == ")" || t.text == "]" || t.text == "}") && k.match[i] >= 0:
			k.encl[i], k.semi[i] = blocks[len(blocks)-1], levels[len(levels)-1]
			levels = append(levels, i)
			if t.text == "}" {
				blocks = append(blocks, i)
			}
		case t.kind == 'p' && (t.text == "(" || t.text == "[" || t.text == "{") && k.match[i] >= 0:
			if len(levels) > 1 {
				levels = levels[:len(levels)-1]
			}
			if t.text == "{" && len(blocks) > 1 {
				blocks = blocks[:len(blocks)-1]
			}
			k.encl[i], k.semi[i] = blocks[len(blocks)-1], levels[len(levels)-1]
		default:
			if t.kind == 'p' && t.text == ";" {
				levels[len(levels)-1] = i
			}
			k.encl[i], k.semi[i] = blocks[len(blocks)-1], levels[len(levels)-1]
		}
	}
}

// helperAt returns the helper call of token i ($h<n>), or -1.
func (k *scopeChecker) helperAt(i int) int {
	t := k.tok(i)
	if t.kind != 'i' || !strings.HasPrefix(t.text, "$h") {
		return -1
	}
	n := 0
	for _, c := range t.text[2:] {
		if c < '0' || c > '9' || n > len(k.calls) {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	if n >= len(k.calls) {
		return -1
	}
	return n
}

// helperEnd returns the token after the helper call at token i, which
// the own text writes $h<n>(<argument>).
func (k *scopeChecker) helperEnd(i int) int {
	if k.tok(i+1).text == "(" && k.match[i+1] > i {
		return k.match[i+1] + 1
	}
	return i + 1
}

// unevaluated are the operators whose operand the kernel never evaluates.
var unevaluated = map[string]bool{"sizeof": true, "alignof": true, "_Alignof": true, "__alignof__": true, "__alignof": true,
	"decltype": true, "typeid": true, "noexcept": true, "typeof": true, "__typeof__": true, "__typeof": true}

// hidden refuses helpers used where the kernel does not run them.
func (k *scopeChecker) hidden(r rendered, idx []int, spans []quiet) {
	type region struct {
		start, end int // in the spliced text
		what       string
	}
	var regions []region
	for _, s := range spans {
		if s.open {
			continue // refused below, once, rather than at every helper after it
		}
		what := "a comment"
		if s.kind == 's' {
			what = "a string or character literal"
		}
		regions = append(regions, region{s.start, s.end, what})
	}
	// Preprocessor directives (to the end of their line) and conditional
	// groups (from #if to its #endif).
	var groups []int
	for i, t := range k.toks {
		if t.text != "#" || t.kind != 'p' || strings.TrimSpace(string(k.text[lineStart(k.text, t.off):t.off])) != "" {
			continue
		}
		end := len(k.text)
		if nl := strings.IndexByte(string(k.text[t.off:]), '\n'); nl >= 0 {
			end = t.off + nl
		}
		regions = append(regions, region{t.off, end, "a preprocessor directive"})
		switch d := k.tok(i + 1).text; {
		case d == "if" || d == "ifdef" || d == "ifndef":
			groups = append(groups, t.off)
		case d == "endif" && len(groups) > 0:
			regions = append(regions, region{groups[len(groups)-1], end, "a preprocessor conditional (#if ... #endif)"})
			groups = groups[:len(groups)-1]
		}
	}
	for _, g := range groups {
		regions = append(regions, region{g, len(k.text), "a preprocessor conditional (#if ... #endif)"})
	}
	// A literal its line ends before it is closed does not compile, and
	// what follows it could be read as code or as literal: refused (in a
	// directive or conditional group the compiler may let it pass; no
	// literal starts in a comment or another literal, so the regions so far
	// that can hold one are those).
	for _, s := range spans {
		if s.open && !slices.ContainsFunc(regions, func(g region) bool { return s.start >= g.start && s.start < g.end }) {
			k.refuse(s.start, "", "an unterminated string or character literal: the kernel would not compile, and the generator cannot tell the code after it from the literal; close it (a template comment {{/* ... */}} holds text that is not rendered)")
		}
	}
	// Unevaluated operands: sizeof(...), decltype(...), sizeof x.
	for i, t := range k.toks {
		if t.kind != 'i' || !unevaluated[t.text] {
			continue
		}
		j := i + 1
		if k.tok(j).text == "(" {
			end := len(k.text) // no ) closes it: everything after is its operand
			if k.match[j] > j {
				end = k.toks[k.match[j]].off + 1
			}
			regions = append(regions, region{k.toks[j].off, end, "the unevaluated operand of " + t.text})
			continue
		}
		for j < len(k.toks) && k.toks[j].kind == 'p' && strings.Contains("*&-+!~", k.toks[j].text) {
			j++
		}
		if j < len(k.toks) {
			regions = append(regions, region{k.toks[j].off, k.toks[j].off + len(k.toks[j].text), "the unevaluated operand of " + t.text})
		}
	}
	if len(regions) == 0 {
		return
	}
	for _, u := range r.uses {
		if u.own < 0 || u.nested {
			continue
		}
		at := sort.SearchInts(idx, u.own) // the spliced index of its "$h"
		if at >= len(idx) {
			continue
		}
		for _, g := range regions {
			if at >= g.start && at < g.end {
				c := k.calls[u.call]
				k.refuse(at, c.tensor, "{{%s}} stands in %s, where the kernel does not (or not always) run it, yet it would count as the template using it; move it out (a template comment {{/* ... */}} holds text that is not rendered)", c.call, g.what)
				break
			}
		}
	}
}

func lineStart(text []byte, off int) int {
	for off > 0 && text[off-1] != '\n' {
		off--
	}
	return off
}

// lambdas finds the lambdas' bodies and refuses the helpers that return
// from the kernel body inside one.
func (k *scopeChecker) lambdas() {
	for i, t := range k.toks {
		if t.text != "[" || t.kind != 'p' || k.match[i] < 0 || k.tok(i+1).text == "[" || k.tok(i-1).text == "[" {
			continue
		}
		p := k.tok(i - 1)
		if p.kind == 'n' || p.kind == 's' || p.text == ")" || p.text == "]" || p.kind == 'i' && !exprKeywords[p.text] {
			continue // a subscript
		}
		// The body is the first { at this level after the introducer:
		// [captures] (params) specifiers -> type { ... }.
		for j := k.match[i] + 1; j < len(k.toks); j++ {
			tj := k.toks[j]
			if tj.kind == 'p' && tj.text == "(" && k.match[j] > j {
				j = k.match[j]
				continue
			}
			if tj.kind == 'p' && tj.text == "{" {
				k.lambda[j] = true
				break
			}
			if tj.kind == 'p' && (tj.text == ";" || tj.text == "}" || tj.text == ")" || tj.text == "," || tj.text == "]") {
				break
			}
		}
	}
	var open []int // { tokens of the lambdas around the current token
	for i, t := range k.toks {
		switch {
		case t.kind == 'p' && t.text == "{" && k.lambda[i]:
			open = append(open, i)
		case t.kind == 'p' && t.text == "}" && len(open) > 0 && k.match[i] == open[len(open)-1]:
			open = open[:len(open)-1]
		}
		if len(open) == 0 {
			continue
		}
		if n := k.helperAt(i); n >= 0 && k.calls[n].returns {
			k.out = append(k.out, violation{off: t.off, noteOff: k.toks[open[len(open)-1]].off,
				noteMsg: "the lambda's body starts here",
				msg:     fmt.Sprintf("{{%s}} inside a lambda: on a timeout it returns from the lambda, not from the kernel body, and a lambda runs any number of times (a row helper's fin once per piece, done once per row), so the blocks would not meet their peers in step; call it in the kernel body, outside every lambda", k.calls[n].call)})
		}
	}
}

// guards refuses the local helpers of a tensor only one rank passes that
// are not under a guard of that rank.
func (k *scopeChecker) guards() {
	owners := map[string]bool{}
	for _, t := range k.c.Tensors {
		if t.Owner != "" {
			owners[t.Owner] = true
		}
	}
	if len(owners) == 0 {
		return
	}
	k.aliases()
	n := len(k.toks)
	guarded := map[string][]int32{} // per parameter: a difference array over the tokens
	mark := func(ps set, from, to int) {
		for p := range ps {
			if !owners[p] || from >= to {
				continue
			}
			if guarded[p] == nil {
				guarded[p] = make([]int32, n+1)
			}
			guarded[p][from]++
			guarded[p][min(to, n)]--
		}
	}
	for i, t := range k.toks {
		if t.kind != 'i' || t.text != "if" || k.tok(i+1).text != "(" || k.match[i+1] < 0 {
			continue
		}
		m := k.match[i+1]
		imp, neg := k.cond(i+2, m, 0)
		thenEnd := k.stmtEnd(m+1, 0)
		mark(imp, m+1, thenEnd)
		end := thenEnd
		elseExits := false
		if k.tok(thenEnd).text == "else" {
			end = k.stmtEnd(thenEnd+1, 0)
			mark(neg, thenEnd+1, end)
			elseExits = k.exits(thenEnd+1, end)
		}
		// if (ctx.rank != root) return; guards the rest of the block.
		if k.exits(m+1, thenEnd) {
			mark(neg, end, k.encl[i])
		}
		if elseExits {
			mark(imp, end, k.encl[i])
		}
	}
	sums := map[string][]int32{}
	for p, d := range guarded {
		s := make([]int32, n)
		var acc int32
		for i := 0; i < n; i++ {
			acc += d[i]
			s[i] = acc
		}
		sums[p] = s
	}
	for i := range k.toks {
		c := k.helperAt(i)
		if c < 0 {
			continue
		}
		call := k.calls[c]
		t := k.c.Tensor(call.tensor)
		if t == nil || t.Owner == "" || call.access&(ir.LocalRead|ir.LocalWrite) == 0 || call.access.Remote() {
			continue
		}
		if s := sums[t.Owner]; s != nil && s[i] > 0 {
			continue
		}
		pos := t.OwnerPos
		k.out = append(k.out, violation{off: k.toks[i].off, tensor: t.Name, noteOff: -1, notePos: &pos,
			noteMsg: fmt.Sprintf("%s is passed on rank %s only here", t.Name, t.Owner)})
		k.out[len(k.out)-1].msg = fmt.Sprintf("{{%s}}: %s is passed on rank %s only (ranks: %s), so its pointer is null on every other rank; take it where the kernel runs on that rank alone, e.g. if (ctx.rank == {{param %q}}) { ... {{%s}} ... }, or after if (ctx.rank != {{param %q}}) return;",
			call.call, t.Name, t.Owner, t.Owner, t.Owner, call.call, t.Owner)
	}
}

// set is a set of parameter names.
type set map[string]bool

func union(a, b set) set {
	out := set{}
	for p := range a {
		out[p] = true
	}
	for p := range b {
		out[p] = true
	}
	return out
}

func intersect(a, b set) set {
	out := set{}
	for p := range a {
		if b[p] {
			out[p] = true
		}
	}
	return out
}

// maxDepth bounds the recursion of cond and stmtEnd on hostile text.
const maxDepth = 200

// cond analyses the condition in tokens [a, b): imp holds the parameters p
// for which it being true implies ctx.rank == p, neg those for which it
// being false does.
func (k *scopeChecker) cond(a, b, depth int) (imp, neg set) {
	if depth > maxDepth {
		return nil, nil
	}
	for b-a >= 2 && k.toks[a].text == "(" && k.match[a] == b-1 {
		a, b = a+1, b-1
	}
	if a >= b {
		return nil, nil
	}
	if k.toks[a].text == "!" && k.toks[a].kind == 'p' && k.tok(a+1).text == "(" && k.match[a+1] == b-1 {
		imp, neg = k.cond(a+1, b, depth+1)
		return neg, imp
	}
	for _, op := range []string{"||", "&&"} {
		parts := k.split(a, b, op)
		if len(parts) < 2 {
			continue
		}
		for i, pr := range parts {
			pi, pn := k.cond(pr[0], pr[1], depth+1)
			switch {
			case i == 0:
				imp, neg = pi, pn
			case op == "||":
				imp, neg = intersect(imp, pi), union(neg, pn)
			default:
				imp, neg = union(imp, pi), intersect(neg, pn)
			}
		}
		return imp, neg
	}
	cmp := -1
	for j := a; j < b; j++ {
		t := k.toks[j]
		if t.kind == 'p' && (t.text == "(" || t.text == "[" || t.text == "{") && k.match[j] > j {
			j = k.match[j]
			continue
		}
		if t.kind == 'p' && (t.text == "==" || t.text == "!=") {
			if cmp >= 0 {
				return nil, nil
			}
			cmp = j
		}
		if t.kind == 'p' && (t.text == "?" || t.text == "=" || t.text == ",") {
			return nil, nil
		}
	}
	if cmp < 0 {
		return nil, nil
	}
	p := ""
	switch {
	case k.isRank(a, cmp):
		p = k.paramAt(cmp+1, b)
	case k.isRank(cmp+1, b):
		p = k.paramAt(a, cmp)
	}
	if p == "" {
		return nil, nil
	}
	if k.toks[cmp].text == "==" {
		return set{p: true}, nil
	}
	return nil, set{p: true}
}

// split cuts [a, b) at the operator op outside brackets.
func (k *scopeChecker) split(a, b int, op string) [][2]int {
	var parts [][2]int
	from := a
	for j := a; j < b; j++ {
		t := k.toks[j]
		if t.kind == 'p' && (t.text == "(" || t.text == "[" || t.text == "{") && k.match[j] > j {
			j = k.match[j]
			continue
		}
		if t.kind == 'p' && t.text == op {
			parts = append(parts, [2]int{from, j})
			from = j + 1
		}
	}
	return append(parts, [2]int{from, b})
}

func (k *scopeChecker) strip(a, b int) (int, int) {
	for b-a >= 2 && k.toks[a].text == "(" && k.match[a] == b-1 {
		a, b = a+1, b-1
	}
	return a, b
}

// isRank reports whether [a, b) is ctx.rank.
func (k *scopeChecker) isRank(a, b int) bool {
	a, b = k.strip(a, b)
	return b-a == 3 && k.toks[a].text == "ctx" && k.toks[a+1].text == "." && k.toks[a+2].text == "rank"
}

// paramAt returns the parameter [a, b) is: {{param "p"}}, or a const copy
// of it in scope; "" for anything else.
func (k *scopeChecker) paramAt(a, b int) string {
	a, b = k.strip(a, b)
	if n := k.helperAt(a); n >= 0 && k.helperEnd(a) == b {
		if c := k.calls[n]; c.param != "" && c.tensor == "" {
			return c.param
		}
		return ""
	}
	if b-a != 1 {
		return ""
	}
	t := k.toks[a]
	p := ""
	for _, al := range k.alias {
		if al.name == t.text && a >= al.from && a < al.to {
			p = al.param // the innermost (latest) one wins
		}
	}
	return p
}

// aliases finds the const copies of parameters: const int root =
// {{param "root"}}; (or one of several declarators).
func (k *scopeChecker) aliases() {
	for j, t := range k.toks {
		if t.kind != 'p' || t.text != "=" || k.tok(j-1).kind != 'i' {
			continue
		}
		n := k.helperAt(j + 1)
		if n < 0 || k.calls[n].param == "" || k.calls[n].tensor != "" {
			continue
		}
		if next := k.tok(k.helperEnd(j + 1)).text; next != ";" && next != "," {
			continue
		}
		// The declaration starts with const (or constexpr).
		s := j - 1
		for s > 0 && j-s < 64 {
			if p := k.toks[s-1]; p.kind == 'p' && (p.text == ";" || p.text == "{" || p.text == "}") {
				break
			}
			s--
		}
		if first := k.toks[s].text; first != "const" && first != "constexpr" {
			continue
		}
		k.alias = append(k.alias, alias{name: k.toks[j-1].text, param: k.calls[n].param, from: j, to: k.encl[j]})
	}
}

// stmtEnd returns the token after the statement that starts at a.
func (k *scopeChecker) stmtEnd(a, depth int) int {
	n := len(k.toks)
	if a >= n {
		return n
	}
	t := k.toks[a]
	if depth < maxDepth {
		switch {
		case t.kind == 'p' && t.text == "{":
			if k.match[a] > a {
				return k.match[a] + 1
			}
			return n
		case t.kind == 'i' && (t.text == "if" || t.text == "for" || t.text == "while" || t.text == "switch") && k.tok(a+1).text == "(" && k.match[a+1] > a:
			e := k.stmtEnd(k.match[a+1]+1, depth+1)
			if t.text == "if" && k.tok(e).text == "else" {
				e = k.stmtEnd(e+1, depth+1)
			}
			return e
		case t.kind == 'i' && t.text == "do":
			e := k.stmtEnd(a+1, depth+1)
			if k.tok(e).text == "while" && k.tok(e+1).text == "(" && k.match[e+1] > e {
				e = k.match[e+1] + 1
				if k.tok(e).text == ";" {
					e++
				}
			}
			return e
		}
	}
	e := k.semi[a]
	if e < n && k.toks[e].text == ";" {
		return e + 1
	}
	return e
}

// exits reports whether the statement [a, b) is a return (or a block
// holding only one).
func (k *scopeChecker) exits(a, b int) bool {
	if k.tok(a).text == "{" && k.match[a] == b-1 {
		a, b = a+1, b-1
	}
	return a < b && k.toks[a].kind == 'i' && k.toks[a].text == "return" && k.stmtEnd(a, 0) == b
}

package hipemit

import (
	"fmt"
	"strings"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/ir"
)

// The bypass checks: the template's own rendered text (render.go) may not
// reach tensors, peers or sizes around the recording helpers, or the
// accesses the wrappers check would no longer be the kernel's. They refuse
// what reaches
//   - the kernel's argument struct (irisgen_a, its type, its fields, the
//     address of ctx, which is its first member);
//   - the header's address translation (irisgen::detail, peer_ptr, the heap
//     bases ctx.base);
//   - a writable pointer made from a read-only one: const_cast,
//     reinterpret_cast, C-style casts to a non-const pointer or reference
//     type, pointer type aliases that would allow such a cast, unions,
//     copies of pointer bits (memcpy, bit_cast), and casts of a read
//     helper's pointer to anything but a const pointer;
//   - token pasting (##), which could assemble any of these names.
//
// The checks are lexical, on the text after the template engine ran (so a
// name assembled through template functions is seen) and after the C
// preprocessor's line splicing, with comments and literals skipped. They
// stop every way a template can name these things; C++ can still hide a
// cast behind a template parameter of the template's own prelude, which
// only review catches.

// violation is one refused construct: an offset in the template's own
// text, the message, and the tensor it reaches when known.
type violation struct {
	off    int
	msg    string
	tensor string
	// A note of its own instead of the one at the spec's access entry: at
	// notePos in the spec, else at noteOff in the template (-1: none).
	noteOff int
	notePos *diag.Pos
	noteMsg string
}

type token struct {
	kind byte // 'i' identifier, 'n' number, 's' string or char literal, 'p' punctuation
	text string
	off  int // index in the text the lexer was given
}

// spliced is the template's own text after the preprocessor's line
// splicing (backslash-newline removed), each byte with its index in the
// text before.
func spliced(own []byte) (text []byte, idx []int) {
	for i := 0; i < len(own); i++ {
		if own[i] == '\\' {
			j := i + 1
			if j < len(own) && own[j] == '\r' {
				j++
			}
			if j < len(own) && own[j] == '\n' {
				i = j
				continue
			}
		}
		text = append(text, own[i])
		idx = append(idx, i)
	}
	return text, idx
}

// lex splits C++ text into tokens, skipping comments and the contents of
// string and character literals.
func lex(src []byte) []token {
	toks, _ := lexQuiet(src)
	return toks
}

// quiet is a span of C++ text [start, end) that is no code: a comment
// (kind 'c') or a string or character literal ('s'); open marks a
// literal that its line ends before it is closed.
type quiet struct {
	start, end int
	kind       byte
	open       bool
}

// lexQuiet is lex that also returns the comments and literals.
func lexQuiet(src []byte) (toks []token, spans []quiet) {
	s := string(src)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(s[i:], "//"):
			start := i
			for i < len(s) && s[i] != '\n' {
				i++
			}
			spans = append(spans, quiet{start: start, end: i, kind: 'c'})
		case strings.HasPrefix(s[i:], "/*"):
			start := i
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				i = len(s)
			} else {
				i += end + 4
			}
			spans = append(spans, quiet{start: start, end: i, kind: 'c'})
		case c == '"' || c == '\'':
			start := i
			var closed bool
			i, closed = skipQuoted(s, i)
			toks = append(toks, token{'s', s[start:i], start})
			spans = append(spans, quiet{start, i, 's', !closed})
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdentPart(s[i]) {
				i++
			}
			word := s[start:i]
			// Raw string literals: R"delim( ... )delim", with an encoding prefix.
			if i < len(s) && s[i] == '"' && strings.HasSuffix(word, "R") && len(word) <= 3 {
				var closed bool
				i, closed = skipRaw(s, i)
				toks = append(toks, token{'s', s[start:i], start})
				spans = append(spans, quiet{start, i, 's', !closed})
				continue
			}
			toks = append(toks, token{'i', word, start})
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			start := i
			for i < len(s) && (isIdentPart(s[i]) || s[i] == '.' || s[i] == '\'' ||
				(s[i] == '+' || s[i] == '-') && strings.ContainsRune("eEpP", rune(s[i-1]))) {
				i++
			}
			toks = append(toks, token{'n', s[start:i], start})
		default:
			n := 1
			for _, p := range puncts {
				if strings.HasPrefix(s[i:], p) {
					n = len(p)
					break
				}
			}
			toks = append(toks, token{'p', s[i : i+n], i})
			i += n
		}
	}
	return toks, spans
}

// puncts are the multi-character punctuators the checks tell apart, longest
// first (%:%: is the digraph of ##).
var puncts = []string{"%:%:", "->*", "::", "->", "##", "&&", "||", "++", "--", "<=", ">=", "==", "!="}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// skipQuoted returns the end of the string or character literal at i, and
// whether its quote closes it (not the end of its line or of s).
func skipQuoted(s string, i int) (int, bool) {
	q := s[i]
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case q:
			return i + 1, true
		case '\n':
			return i + 1, false
		}
	}
	return len(s), false
}

// skipRaw returns the end of the raw string literal whose quote is at i,
// and whether its delimiter closes it (not the end of s).
func skipRaw(s string, i int) (int, bool) {
	open := strings.IndexByte(s[i:], '(')
	if open < 0 {
		return len(s), false
	}
	delim := ")" + s[i+1:i+open] + `"`
	end := strings.Index(s[i+open:], delim)
	if end < 0 {
		return len(s), false
	}
	return i + open + end + len(delim), true
}

// checker holds what the checks of one render need.
type checker struct {
	c     *ir.Collective
	calls []helperCall
	toks  []token
	out   []violation
}

// bypasses returns the refused constructs of a render's own text, with
// offsets in the template.
func bypasses(c *ir.Collective, r rendered, calls []helperCall) []violation {
	text, idx := spliced(r.own)
	k := &checker{c: c, calls: calls, toks: lex(text)}
	k.scan()
	for i := range k.out {
		k.out[i].off = r.at[idx[k.out[i].off]]
	}
	return k.out
}

const helperHint = "reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size"

// hint is helperHint, naming the param helper where the collective has
// parameters.
func (k *checker) hint() string {
	if len(k.c.Params) > 0 {
		return strings.Replace(helperHint, " and sizes through size", ", sizes through size and parameters through param", 1)
	}
	return helperHint
}

func (k *checker) refuse(t token, tensor, format string, args ...any) {
	k.out = append(k.out, violation{off: t.off, msg: fmt.Sprintf(format, args...), tensor: tensor, noteOff: -1})
}

func (k *checker) tok(i int) token {
	if i < 0 || i >= len(k.toks) {
		return token{}
	}
	return k.toks[i]
}

func (k *checker) scan() {
	fields := map[string]string{} // argument struct member -> tensor ("" for a size)
	for _, t := range k.c.Tensors {
		fields[TensorField(t)] = t.Name
		fields[WidthField(t)] = t.Name
	}
	for _, s := range k.c.Symbols {
		fields[SymbolField(s)] = ""
	}
	for _, p := range k.c.Params {
		fields[ParamField(p)] = ""
	}
	for _, t := range k.c.Tensors {
		if t.Owner != "" {
			fields[SlotField(t)] = t.Name
		}
	}
	for i, t := range k.toks {
		next := k.tok(i + 1)
		switch {
		case t.kind == 'i' && t.text == ArgsName:
			tensor := ""
			if f := k.tok(i + 2); (next.text == "." || next.text == "->") && f.kind == 'i' {
				tensor = fields[f.text]
			}
			k.refuse(t, tensor, "the template names the kernel's argument struct (%s); %s", ArgsName, k.hint())
		case t.kind == 'i' && t.text == ArgsStruct(k.c):
			k.refuse(t, "", "the template names the kernel's argument struct type (%s); %s", t.text, k.hint())
		case t.kind == 'i' && t.text == "irisgen_ctx":
			k.refuse(t, "", "the template names the type irisgen_ctx, which reaches the argument struct around the helpers; read ctx's fields (ctx.rank, ctx.world) and pass ctx to the header's functions")
		case t.kind == 'i' && (t.text == "addressof" || t.text == "__builtin_addressof"):
			k.refuse(t, "", "the template takes an address with %s, which can reach the argument struct around the helpers; %s", t.text, k.hint())
		case t.kind == 'p' && t.text == "&" && k.unary(i) && (next.text == "ctx" || next.text == "(" && k.tok(i+2).text == "ctx"):
			k.refuse(t, "", "the template takes the address of ctx, the first member of the kernel's argument struct; read ctx's fields (ctx.rank, ctx.world) and pass ctx to the header's functions")
		case t.kind == 'p' && t.text == "&" && k.unary(i) && k.helper(next) >= 0:
			k.refuse(t, "", "the template takes the address of a helper's value, which points into the kernel's argument struct; copy the value instead")
		case t.kind == 'i' && t.text == "peer_ptr":
			k.refuse(t, "", "the template translates addresses itself (peer_ptr); take peer pointers with peer_read, peer_write, peer_update or peer_atomic, which record the access")
		case t.kind == 'i' && t.text == "detail" && next.text == "::":
			k.refuse(t, "", "the template names irisgen::detail, the device header's internals (address translation); take peer pointers with peer_read, peer_write, peer_update or peer_atomic")
		case (t.text == "." || t.text == "->") && next.kind == 'i' && next.text == "base":
			k.refuse(next, "", "the template reads the heap bases (ctx.base) and so translates addresses around the helpers; take peer pointers with peer_read, peer_write, peer_update or peer_atomic")
		case (t.text == "." || t.text == "->") && next.kind == 'i' && hasKey(fields, next.text) && k.tok(i-1).text != ArgsName:
			k.refuse(next, fields[next.text], "the template reads the argument struct's member %s; %s", next.text, k.hint())
		case t.kind == 'i' && (t.text == "const_cast" || t.text == "reinterpret_cast"):
			k.refuse(t, "", "the template uses %s, which can turn a pointer from read or peer_read into a writable one; take a writable pointer with write, update, peer_write or peer_update, which record the write", t.text)
		case t.kind == 'i' && bitCopies[t.text]:
			k.refuse(t, "", "the template copies bits with %s, which can turn a read pointer into a writable one; copy data with the header's copy functions, and take writable pointers with write, update, peer_write or peer_update", t.text)
		case t.kind == 'i' && t.text == "union":
			k.refuse(t, "", "the template declares a union, which can reinterpret a read pointer as a writable one; use separate variables")
		case t.kind == 'p' && (t.text == "##" || t.text == "%:%:"):
			k.refuse(t, "", "the template pastes tokens (%s), which can assemble names the generator refuses; write names out", t.text)
		case t.kind == 'i' && (t.text == "typedef" || t.text == "using" && next.text != "namespace"):
			k.alias(i)
		case t.kind == 'p' && t.text == "(":
			k.cast(i)
		}
	}
}

var bitCopies = map[string]bool{"memcpy": true, "__builtin_memcpy": true, "memmove": true, "__builtin_memmove": true, "bit_cast": true, "__builtin_bit_cast": true}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// helper returns the call of a helper token ($h<n>), or -1.
func (k *checker) helper(t token) int {
	if t.kind != 'i' || !strings.HasPrefix(t.text, "$h") {
		return -1
	}
	n := 0
	for _, c := range t.text[2:] {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	if n >= len(k.calls) {
		return -1
	}
	return n
}

// unary reports whether the operator at i is a prefix one: it does not
// follow an operand.
func (k *checker) unary(i int) bool {
	p := k.tok(i - 1)
	switch {
	case p.kind == 'n' || p.kind == 's':
		return false
	case p.kind == 'i':
		return exprKeywords[p.text]
	case p.text == ")" || p.text == "]":
		return false
	}
	return true
}

// exprKeywords may precede an expression (a cast, a unary operator); any
// other identifier before "(" makes a call, sizeof(...) or a declaration.
var exprKeywords = map[string]bool{"return": true, "case": true, "else": true, "do": true, "throw": true, "co_return": true, "co_yield": true}

var cvQualifiers = map[string]bool{"const": true, "volatile": true, "__restrict__": true, "__restrict": true, "restrict": true}

// typeAt parses a type name starting at token i: identifiers, ::, template
// arguments in <...>, then pointer and reference declarators with their
// qualifiers. It returns the token after it, whether the type has a
// pointer or reference declarator, and whether const comes before the
// first of them (the pointee is const); ok is false if it is no type.
func (k *checker) typeAt(i int) (end int, pointer, constPointee, ok bool) {
	names := 0
	for ; i < len(k.toks); i++ {
		t := k.toks[i]
		switch {
		case t.kind == 'i' && k.helper(t) < 0:
			names++
			constPointee = constPointee || t.text == "const"
		case t.text == "::":
		case t.text == "<":
			depth := 0
			for ; i < len(k.toks); i++ {
				switch k.toks[i].text {
				case "<", "(":
					depth++
				case ">", ")":
					depth--
				case ";", "{", "}":
					return i, false, false, false
				}
				if depth == 0 {
					break
				}
			}
			if i == len(k.toks) {
				return i, false, false, false
			}
		default:
			goto declarator
		}
	}
declarator:
	if names == 0 {
		return i, false, false, false
	}
	for ; i < len(k.toks); i++ {
		t := k.toks[i]
		switch {
		case t.text == "*" || t.text == "&" || t.text == "&&":
			pointer = true
		case pointer && t.kind == 'i' && cvQualifiers[t.text]:
		default:
			return i, pointer, constPointee, true
		}
	}
	return i, pointer, constPointee, true
}

// cast checks a parenthesised type followed by an operand at i: a C-style
// cast.
func (k *checker) cast(i int) {
	p := k.tok(i - 1)
	macroBody := p.kind == 'i' && k.tok(i-2).text == "define" // #define NAME (T*)
	if p.kind == 'i' && !exprKeywords[p.text] && !macroBody || p.text == ")" || p.text == "]" || p.text == ">" {
		return // a call, sizeof(...), a declaration's parameters
	}
	end, pointer, constPointee, ok := k.typeAt(i + 1)
	if !ok || k.tok(end).text != ")" {
		return
	}
	operand := k.tok(end + 1)
	if !startsOperand(operand) && !(macroBody && pointer) {
		return
	}
	typ := k.span(i+1, end)
	switch {
	case pointer && !constPointee:
		k.refuse(k.toks[i], "", "the template casts to %s, a non-const pointer or reference type, which can turn a read pointer into a writable one; take writable pointers with write, update, peer_write or peer_update (casts to const pointers are fine)", typ)
	case !pointer:
		if n := k.helper(operand); n >= 0 && k.calls[n].readOnly {
			k.refuse(k.toks[i], k.calls[n].tensor, "the template casts the read pointer of %q to %s, which can turn it into a writable one; cast it to a const pointer if it needs another type", k.calls[n].tensor, typ)
		}
	}
}

// alias checks a typedef or using declaration at i: a non-const pointer or
// reference alias would let a functional cast T(p) drop a read pointer's
// const.
func (k *checker) alias(i int) {
	t := k.toks[i]
	j := i + 1
	if t.text == "using" {
		for j < len(k.toks) && k.toks[j].text != "=" && k.toks[j].text != ";" {
			j++
		}
		if k.tok(j).text != "=" {
			return // using a::b; or a using-directive
		}
		j++
	}
	end, pointer, constPointee, ok := k.typeAt(j)
	if ok && pointer && !constPointee {
		k.refuse(t, "", "the template declares %s, an alias of a non-const pointer or reference type, through which a cast can turn a read pointer into a writable one; declare pointer variables with their type written out", k.span(j, end))
	}
}

// span is the tokens [i, j) joined, for messages.
func (k *checker) span(i, j int) string {
	var parts []string
	for ; i < j && i < len(k.toks); i++ {
		parts = append(parts, k.toks[i].text)
	}
	s := strings.Join(parts, " ")
	for _, p := range []string{" *", " &", " ::", ":: ", " <", "< ", " >"} {
		s = strings.ReplaceAll(s, p, strings.TrimSpace(p))
	}
	return s
}

func startsOperand(t token) bool {
	switch {
	case t.kind == 'i' || t.kind == 'n' || t.kind == 's':
		return true
	}
	switch t.text {
	case "(", "*", "&", "-", "+", "!", "~", "++", "--", "::":
		return true
	}
	return false
}

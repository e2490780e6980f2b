package hipemit

import (
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/irisgen/irisgen/internal/ir"
)

// A template is rendered with its source mapped: every node of its parse
// trees is preceded by a marker holding the node's byte offset in the
// template, and every helper returns a placeholder instead of its C
// expansion. From the raw output, resolve builds
//   - the kernel text, placeholders replaced by the helpers' expansions;
//   - the template's own text, with each byte's offset in the template:
//     what the template wrote (literally, or assembled through template
//     functions) as opposed to what the helpers wrote, for the bypass
//     checks (bypass.go), which so look at the RENDERED text and can say
//     where in the template it came from;
//   - the helpers whose expansions reach the kernel, each with the offset
//     of its action, from which the accesses are recorded: a helper called
//     but not printed grants nothing.
//
// The markers are control characters that C source does not hold; a
// template that prints one itself is refused.
const (
	markText    = '\x01' // \x01 T <offset> \x02: the next bytes are a text node's, from offset on
	markAction  = 'A'    // \x01 A <offset> \x02: the next bytes come from the action at offset
	markEnd     = '\x02'
	markHelper  = '\x03' // \x03 <call> \x04: the expansion of helper call <call>
	markHelpEnd = '\x04'
)

// helperCall is one call of a helper during a render.
type helperCall struct {
	expansion string // C text that goes into the kernel
	tensor    string // tensor it reaches, "" for none
	access    ir.Access
	// arg is the C expression the template passed (a peer's rank), checked
	// as the template's own text.
	arg string
	// readOnly: a pointer through which the kernel may not write.
	readOnly bool
	// meets: the call meets the peers (barrier, sync, grid_sync).
	meets bool
	// param is the launch parameter the expansion reads, "" for none.
	param string
	// call is the helper call as the template wrote it ("param \"root\""),
	// for messages.
	call string
	// integer: the expansion is an integer C expression (a size, a rank or
	// int parameter, numel), which may be a peer's rank.
	integer bool
	// returns: the expansion returns from the enclosing function on a
	// timeout (barrier, sync, grid_sync, grid_sync_local).
	returns bool
}

// placeholder is what a helper returns to the template engine.
func (h *helpers) placeholder(c helperCall) string {
	h.calls = append(h.calls, c)
	return fmt.Sprintf("%c%d%c", markHelper, len(h.calls)-1, markHelpEnd)
}

// instrument puts a position marker before every node of every tree of t.
func instrument(t *template.Template) {
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			markList(tt.Tree.Root)
		}
	}
}

func markList(l *parse.ListNode) {
	if l == nil {
		return
	}
	if len(l.Nodes) == 0 {
		// An empty body still prints a marker per iteration, so that the
		// output limit bounds every loop, even {{range 100000000000}}{{end}}.
		l.Nodes = []parse.Node{&parse.TextNode{NodeType: parse.NodeText, Pos: l.Pos, Text: []byte{markText, markAction, '0', markEnd}}}
		return
	}
	nodes := make([]parse.Node, 0, 2*len(l.Nodes))
	for _, n := range l.Nodes {
		kind := byte(markAction)
		if _, text := n.(*parse.TextNode); text {
			kind = 'T'
		}
		marker := fmt.Sprintf("%c%c%d%c", markText, kind, n.Position(), markEnd)
		nodes = append(nodes, &parse.TextNode{NodeType: parse.NodeText, Pos: n.Position(), Text: []byte(marker)})
		nodes = append(nodes, n)
		switch n := n.(type) {
		case *parse.IfNode:
			markList(n.List)
			markList(n.ElseList)
		case *parse.RangeNode:
			if n.List == nil {
				n.List = &parse.ListNode{NodeType: parse.NodeList, Pos: n.Pos}
			}
			markList(n.List)
			markList(n.ElseList)
		case *parse.WithNode:
			markList(n.List)
			markList(n.ElseList)
		}
	}
	l.Nodes = nodes
}

// rendered is one resolved render.
type rendered struct {
	text string // the kernel text
	// lineAt is the offset in the template of the first byte of each line
	// of text (a helper's expansion counts as its action's offset), for the
	// #line directives that point the compiler at the template.
	lineAt []int
	own    []byte // the template's own text; helper calls appear as $h<call>(<arg>)
	at     []int  // offset in the template of each byte of own
	uses   []use  // helper calls that reach the kernel text, in order
	bad    []int  // offsets of control characters the template printed
	// tooBig: the kernel text grew past maxRender (helper expansions are
	// longer than their placeholders, which the output limit counts).
	tooBig bool
}

// use is one helper call whose expansion is in the kernel text.
type use struct {
	call int
	at   int // offset of its action in the template
	own  int // index in own where its "$h<call>(" starts
	// nested: the call stands in another helper's argument.
	nested bool
}

// placeholderAt returns the helper call whose placeholder starts s[i:] and
// the placeholder's length; ok is false when none does or the call is not
// below limit (a nested placeholder names an earlier call than its
// outer one, so that expanding them always ends).
func placeholderAt(s string, i, limit int) (call, width int, ok bool) {
	if s[i] != markHelper {
		return 0, 0, false
	}
	end := strings.IndexByte(s[i:], markHelpEnd)
	if end <= 1 || end > 12 {
		return 0, 0, false
	}
	n, err := strconv.Atoi(s[i+1 : i+end])
	if err != nil || n < 0 || n >= limit {
		return 0, 0, false
	}
	return n, end + 1, true
}

// placeholders lists the helper calls whose placeholders s holds.
func placeholders(s string, limit int) []int {
	var out []int
	for i := 0; i < len(s); i++ {
		if n, w, ok := placeholderAt(s, i, limit); ok {
			out = append(out, n)
			i += w - 1
		}
	}
	return out
}

func isControl(c byte) bool {
	return c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v'
}

// resolve turns the raw output of an instrumented render into a rendered.
// A helper's argument may hold other helpers' placeholders (a nested
// pipeline, {{peer_read "x" (param "root")}}): they are expanded inside
// its expansion, and used where it is.
func resolve(raw string, calls []helperCall) rendered {
	var r rendered
	var text strings.Builder
	pos, inText := 0, false
	own := func(b byte, at int) {
		r.own = append(r.own, b)
		r.at = append(r.at, at)
	}
	// put writes b, from offset at of the template, into the text.
	lineStart := true
	put := func(b byte, at int) {
		if lineStart {
			r.lineAt = append(r.lineAt, at)
		}
		lineStart = b == '\n'
		text.WriteByte(b)
	}
	// expand writes s, a helper's expansion, into the text, with the calls
	// nested in it (below limit) expanded and used at pos.
	var expand func(s string, limit int)
	expand = func(s string, limit int) {
		for i := 0; i < len(s); i++ {
			if n, w, ok := placeholderAt(s, i, limit); ok {
				r.uses = append(r.uses, use{call: n, at: pos, own: -1, nested: true})
				expand(calls[n].expansion, n)
				i += w - 1
				continue
			}
			if isControl(s[i]) {
				r.bad = append(r.bad, pos)
			}
			put(s[i], pos)
		}
	}
	// ownCall writes call n as the template's own text, "$h<n>(<arg>)",
	// with the calls nested in arg written the same way, and notes where
	// each starts in the first use from from on that has no place yet.
	var ownCall func(n, from int)
	ownCall = func(n, from int) {
		for i := from; i < len(r.uses); i++ {
			if r.uses[i].call == n && r.uses[i].own < 0 {
				r.uses[i].own = len(r.own)
				break
			}
		}
		for _, b := range []byte(fmt.Sprintf("$h%d(", n)) {
			own(b, pos)
		}
		arg := calls[n].arg
		for i := 0; i < len(arg); i++ {
			if m, w, ok := placeholderAt(arg, i, n); ok {
				ownCall(m, from)
				i += w - 1
				continue
			}
			own(arg[i], pos)
		}
		own(')', pos)
	}
	for i := 0; i < len(raw) && !r.tooBig; i++ {
		c := raw[i]
		switch c {
		case markText:
			if end := strings.IndexByte(raw[i:], markEnd); end > 2 {
				if off, err := strconv.Atoi(raw[i+2 : i+end]); err == nil && (raw[i+1] == 'T' || raw[i+1] == markAction) {
					pos, inText = off, raw[i+1] == 'T'
					i += end
					continue
				}
			}
		case markHelper:
			if n, w, ok := placeholderAt(raw, i, len(calls)); ok {
				first := len(r.uses)
				r.uses = append(r.uses, use{call: n, at: pos, own: -1})
				expand(calls[n].expansion, n)
				ownCall(n, first)
				i += w - 1
				r.tooBig = text.Len() > maxRender
				continue
			}
		}
		if isControl(c) {
			r.bad = append(r.bad, pos)
		}
		put(c, pos)
		own(c, pos)
		if inText {
			pos++
		}
	}
	r.text = text.String()
	return r
}

// lineCol turns a byte offset of src into a 1-based line and column (in
// runes, as editors count).
func lineCol(src string, off int) (line, col int) {
	if off > len(src) {
		off = len(src)
	}
	before := src[:off]
	line = 1 + strings.Count(before, "\n")
	col = 1 + len([]rune(before[strings.LastIndexByte(before, '\n')+1:]))
	return line, col
}

package hipemit

import (
	"fmt"
	"regexp"
	"strings"
	"text/template"
	"text/template/parse"
)

// A helper returns C code for the kernel (a placeholder while the template
// renders, render.go). The template may print it, keep it in a variable,
// or pass it to a helper that takes C code (a peer's rank); anything else
// would use the placeholder's text as if it were a value, or change it on
// its way into the kernel, and the kernel would not build or would not do
// what the recorded accesses say. The checks here refuse that: statically,
// a helper's result given to a template builtin that reads a value (eq,
// len, index, ...) or deciding an if, with or range; as the template
// runs, printing and escaping functions whose result does not hold every
// helper result of their arguments as it was.

// maxValue bounds a string the template functions make: text/template's
// own printf, print, println and escapers could otherwise double a string
// in a loop until memory runs out.
const maxValue = 1 << 20

// fmtError is what fmt writes for a verb that does not fit its argument,
// or an argument too many or too few.
var fmtError = regexp.MustCompile(`%!([a-zA-Z]\(|\((EXTRA|NOVERB|BADWIDTH|BADPREC|BADINDEX)|[a-zA-Z]\(MISSING\))`)

// builtins replace text/template's printing and escaping functions with
// ones that refuse results over maxValue, a printf whose verbs do not fit
// its arguments, and results that lost or changed a helper's result.
func (h *helpers) builtins() template.FuncMap {
	check := func(name, s string, args []any) (string, error) {
		if len(s) > maxValue {
			return "", fmt.Errorf("%s makes a string of %d bytes; template values are at most 1 MiB", name, len(s))
		}
		for _, a := range args {
			str, ok := a.(string)
			if !ok {
				continue
			}
			for i := 0; i < len(str); i++ {
				n, w, ok := placeholderAt(str, i, len(h.calls))
				if !ok {
					continue
				}
				if !strings.Contains(s, str[i:i+w]) {
					return "", fmt.Errorf("%s changes the result of {{%s}}, C code that must reach the kernel as it is; print it directly, or with printf's %%s or %%v", name, h.calls[n].call)
				}
				i += w - 1
			}
		}
		return s, nil
	}
	return template.FuncMap{
		"printf": func(f string, a ...any) (string, error) {
			s := fmt.Sprintf(f, a...)
			if m := fmtError.FindString(s); m != "" {
				return "", fmt.Errorf("printf %q: its verbs do not fit its arguments (fmt wrote %s...); use %%s for a helper's result, %%d for a number", f, m)
			}
			return check("printf", s, a)
		},
		"print":    func(a ...any) (string, error) { return check("print", fmt.Sprint(a...), a) },
		"println":  func(a ...any) (string, error) { return check("println", fmt.Sprintln(a...), a) },
		"html":     func(a ...any) (string, error) { return check("html", template.HTMLEscaper(a...), a) },
		"js":       func(a ...any) (string, error) { return check("js", template.JSEscaper(a...), a) },
		"urlquery": func(a ...any) (string, error) { return check("urlquery", template.URLQueryEscaper(a...), a) },
	}
}

// valueBuiltins are the builtins that use their arguments as values: a
// helper's result there is the placeholder's text, not what the kernel
// computes.
var valueBuiltins = map[string]string{
	"eq": "compares", "ne": "compares", "lt": "compares", "le": "compares", "gt": "compares", "ge": "compares",
	"len": "measures", "index": "indexes", "slice": "slices", "not": "tests", "and": "tests", "or": "tests", "call": "calls",
}

// pipelineError is a misuse of a helper's result found in the parse trees.
type pipelineError struct {
	off int
	msg string
}

// checkPipelines finds, in every tree of t, a helper's result given to a
// value builtin (eq (param "root") 0, len (read "x"), a pipe into one) or
// deciding an if, with or range, which the template would decide while it
// renders on the text of C code.
func checkPipelines(t *template.Template, helpers template.FuncMap) []pipelineError {
	k := &pipeChecker{helpers: helpers}
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			k.list(tt.Tree.Root)
		}
	}
	return k.errs
}

type pipeChecker struct {
	helpers template.FuncMap
	errs    []pipelineError
}

func (k *pipeChecker) list(l *parse.ListNode) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		switch n := n.(type) {
		case *parse.ActionNode:
			k.pipe(n.Pipe, "")
		case *parse.TemplateNode:
			k.pipe(n.Pipe, "")
		case *parse.IfNode:
			k.pipe(n.Pipe, "if")
			k.list(n.List)
			k.list(n.ElseList)
		case *parse.WithNode:
			k.pipe(n.Pipe, "with")
			k.list(n.List)
			k.list(n.ElseList)
		case *parse.RangeNode:
			k.pipe(n.Pipe, "range")
			k.list(n.List)
			k.list(n.ElseList)
		}
	}
}

// helperCall returns the helper a pipeline's value comes from, "" when it
// is none of them.
func (k *pipeChecker) helperOf(p *parse.PipeNode) string {
	if p == nil || len(p.Cmds) == 0 {
		return ""
	}
	last := p.Cmds[len(p.Cmds)-1]
	switch a := last.Args[0].(type) {
	case *parse.IdentifierNode:
		// type gives the element type's name itself, a value the template
		// may compare like .T; every other helper gives C code.
		if _, ok := k.helpers[a.Ident]; ok && a.Ident != "type" {
			return a.Ident
		}
	case *parse.PipeNode:
		if len(last.Args) == 1 {
			return k.helperOf(a)
		}
	}
	return ""
}

// pipe checks a pipeline; decides names the action it decides (if, with,
// range), "" for one that prints.
func (k *pipeChecker) pipe(p *parse.PipeNode, decides string) {
	if p == nil {
		return
	}
	for i, c := range p.Cmds {
		name := ""
		if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
			name = id.Ident
		}
		if verb, ok := valueBuiltins[name]; ok {
			for _, a := range c.Args[1:] {
				if sub, ok := a.(*parse.PipeNode); ok {
					if hl := k.helperOf(sub); hl != "" {
						k.refuse(a.Position(), name, verb, hl)
					}
				}
			}
			// {{param "k" | len}}: the previous command's result is the last argument.
			if i > 0 {
				if hl := k.helperOf(&parse.PipeNode{Cmds: p.Cmds[:i]}); hl != "" {
					k.refuse(c.Position(), name, verb, hl)
				}
			}
		}
		for _, a := range c.Args {
			if sub, ok := a.(*parse.PipeNode); ok {
				k.pipe(sub, "")
			}
		}
	}
	if hl := k.helperOf(p); decides != "" && hl != "" {
		k.errs = append(k.errs, pipelineError{off: int(p.Position()), msg: fmt.Sprintf("{{%s}} on the result of %s is decided while the template renders, where that result is C code for the kernel (never empty); test its value in C, e.g. if (...) { ... }", decides, hl)})
	}
}

func (k *pipeChecker) refuse(at parse.Pos, builtin, verb, helper string) {
	k.errs = append(k.errs, pipelineError{off: int(at), msg: fmt.Sprintf("%s %s the result of %s while the template renders, where that result is C code for the kernel, not its value; do it in C (e.g. if (ctx.rank == {{param \"root\"}}) ...)", builtin, verb, helper)})
}

package goemit

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/emit/hipemit"
	"github.com/irisgen/irisgen/internal/ir"
)

// nameSpec is a collective with an extra size, tensor or parameter per
// entry of extra ("size:x_1", "tensor:x1", "param:x1"); the template
// reads every tensor and parameter.
func nameSpec(extra []string) (spec, tmpl string) {
	var sizes, params, tensors, access, uses []string
	for _, e := range extra {
		kind, name, _ := strings.Cut(e, ":")
		switch kind {
		case "size":
			sizes = append(sizes, name)
		case "tensor":
			tensors = append(tensors, fmt.Sprintf("  %s: {dir: in, shape: [n]}\n", name))
			access = append(access, name+": local_read")
			uses = append(uses, fmt.Sprintf("{{read %q}}", name))
		case "param":
			params = append(params, name+": rank")
			uses = append(uses, fmt.Sprintf("{{param %q}}", name))
		}
	}
	// Every extra size is a dimension of output, so that it is used.
	shape := append([]string{"n"}, sizes...)
	spec = "name: lc\nsummary: Names.\ndtypes: [f32]\nsizes: [" + strings.Join(shape, ", ") + "]\n"
	if len(params) > 0 {
		spec += "params: {" + strings.Join(params, ", ") + "}\n"
	}
	spec += "tensors:\n  input: {dir: in, shape: [n]}\n  output: {dir: out, shape: [" + strings.Join(shape, ", ") + "]}\n" + strings.Join(tensors, "") +
		"variants:\n  v:\n    template: t\n    access: {" + strings.Join(append([]string{"input: local_read", "output: local_write"}, access...), ", ") + "}\n    barriers: [none]\n"
	tmpl = "  {{read \"input\"}} {{write \"output\"}} " + strings.Join(uses, " ") + "\n"
	return spec, tmpl
}

// generate compiles spec and runs both emitters, as validate does.
func generate(spec, tmpl string) (emit.Files, error) {
	fs := fstest.MapFS{"t.hip.tmpl": {Data: []byte(tmpl)}}
	c, err := ir.Compile("lc.yaml", []byte(spec), fs)
	if err != nil {
		return nil, err
	}
	return emit.Run(&emit.Request{Collectives: []*ir.Collective{c}, Templates: fs, Package: "collectives"}, hipemit.Emit, Emit)
}

// duplicateParams returns the functions of a Go file with two parameters
// of one name, which the compiler refuses.
func duplicateParams(t *testing.T, src []byte) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "lc.go", src, 0)
	if err != nil {
		t.Fatalf("generated Go does not parse: %v\n%s", err, src)
	}
	var bad []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		seen := map[string]bool{}
		lists := []*ast.FieldList{fd.Recv, fd.Type.Params}
		for _, l := range lists {
			if l == nil {
				continue
			}
			for _, fld := range l.List {
				for _, n := range fld.Names {
					if seen[n.Name] {
						bad = append(bad, fd.Name.Name+": "+n.Name)
					}
					seen[n.Name] = true
				}
			}
		}
	}
	return bad
}

var renameTo = regexp.MustCompile(`rename the (size|tensor|parameter), e\.g\. to "([a-z0-9_]+)"$`)

// TestLocalNameClashes enumerates every pair of kinds (size, tensor,
// parameter) and every way two spec names become one Go name (an
// underscore dropped before a digit, a trailing or doubled underscore, the
// suffix Arg that keeps a reserved name apart, the suffix Arg after Desc):
// each clash is an error at the later name with a free name to rename it
// to, following that advice gives a spec whose generated Go has no
// duplicate parameter, and names that differ in Go are accepted.
func TestLocalNameClashes(t *testing.T) {
	kinds := []string{"size", "tensor", "param"}
	pairs := [][2]string{{"x_1", "x1"}, {"y_", "y"}, {"a__b", "a_b"}, {"r", "r_arg"}, {"z_desc", "z_desc_arg"}}
	for i, ka := range kinds {
		for _, kb := range kinds[i:] {
			for _, pr := range pairs {
				name := fmt.Sprintf("%s %s/%s %s", ka, pr[0], kb, pr[1])
				t.Run(name, func(t *testing.T) {
					extra := []string{ka + ":" + pr[0], kb + ":" + pr[1]}
					spec, tmpl := nameSpec(extra)
					_, err := generate(spec, tmpl)
					var l diag.List
					if !errors.As(err, &l) || len(l) != 1 {
						t.Fatalf("want one positioned error, got %v", err)
					}
					e := l[0]
					if e.Pos.File != "lc.yaml" || !strings.Contains(e.Msg, "redeclared") {
						t.Fatalf("unexpected error %v", e)
					}
					m := renameTo.FindStringSubmatch(e.Msg)
					if m == nil {
						t.Fatalf("no rename advice in %q", e.Msg)
					}
					// The error is at the later name: the second of the
					// pair in the order sizes, tensors, parameters.
					later := pr[1]
					if kindOrder(kb) < kindOrder(ka) {
						later = pr[0]
					}
					line := strings.Split(spec, "\n")[e.Pos.Line-1]
					if !strings.HasPrefix(line[e.Pos.Col-1:], later) {
						t.Fatalf("error at %d:%d (%q), want at %q", e.Pos.Line, e.Pos.Col, line, later)
					}
					// Following the advice: rename it everywhere.
					word := regexp.MustCompile(`\b` + later + `\b`)
					fixed, err := generate(word.ReplaceAllString(spec, m[2]), word.ReplaceAllString(tmpl, m[2]))
					if err != nil {
						t.Fatalf("renamed %s to %s as advised, still: %v", later, m[2], err)
					}
					if bad := duplicateParams(t, fixed["collectives/lc.go"]); len(bad) > 0 {
						t.Fatalf("duplicate parameters after the rename: %v", bad)
					}
				})
			}
			// Names apart in Go are accepted and stay apart.
			spec, tmpl := nameSpec([]string{ka + ":u_1", kb + ":u_2"})
			files, err := generate(spec, tmpl)
			if err != nil {
				t.Fatalf("%s u_1, %s u_2: %v", ka, kb, err)
			}
			if bad := duplicateParams(t, files["collectives/lc.go"]); len(bad) > 0 {
				t.Fatalf("duplicate parameters: %v", bad)
			}
		}
	}
}

func kindOrder(k string) int { return strings.Index("size tensor param", k) }

// TestLocalNameClashUnchecked: without the check the clash is a Go
// compile error, so the test above tests something (the pair's generated
// code, emitted with the check bypassed, redeclares a parameter).
func TestLocalNameClashUnchecked(t *testing.T) {
	spec, tmpl := nameSpec([]string{"param:x_1", "tensor:x1"})
	fs := fstest.MapFS{"t.hip.tmpl": {Data: []byte(tmpl)}}
	c, err := ir.Compile("lc.yaml", []byte(spec), fs)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{c: c, coll: Exported(c.Name)}
	src, err := render(g.file("collectives"))
	if err != nil {
		t.Fatal(err)
	}
	if bad := duplicateParams(t, src); len(bad) == 0 {
		t.Fatal("x_1 and x1 did not clash in the generated Go: the check guards nothing")
	}
}

package ir

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/irisgen/irisgen/internal/diag"
)

// adviceSpec has tensor x of shape DIMS (the case's), a size n, a
// parameter k and a tensor y.
const adviceSpec = `name: ag
summary: s
dtypes: [f32]
sizes: [n, tokens]
params: {k: int}
tensors:
  x: {dir: in, shape: DIMS}
  y: {dir: out, shape: [n, tokens]}
variants:
  v: {template: t_a, access: {x: local_read, y: local_write}}
`

var (
	sizesFix = regexp.MustCompile("`(sizes: \\[[^`]*\\])`")
	shapeFix = regexp.MustCompile("`(shape: \\[[^`]*\\])`")
	meantFix = regexp.MustCompile(`did you mean "([a-z0-9_]+)"\?`)
	shapeKey = regexp.MustCompile(`shape: \[[^\]]*\]`)
)

// applyAdvice does what the message says, as a user pasting its
// backquoted text would: the sizes list, the shape, a name it means, a
// parameter moved to the sizes.
func applyAdvice(t *testing.T, src string, e *diag.Error) string {
	t.Helper()
	lines := strings.Split(src, "\n")
	did := false
	if m := meantFix.FindStringSubmatch(e.Msg); m != nil {
		l := lines[e.Pos.Line-1]
		at := e.Pos.Col - 1
		end := at + strings.IndexAny(l[at:], ",]")
		lines[e.Pos.Line-1] = l[:at] + m[1] + l[end:]
		did = true
	}
	if m := shapeFix.FindStringSubmatch(e.Msg); m != nil {
		lines[e.Pos.Line-1] = shapeKey.ReplaceAllLiteralString(lines[e.Pos.Line-1], m[1])
		did = true
	}
	if m := sizesFix.FindStringSubmatch(e.Msg); m != nil {
		for i, l := range lines {
			if strings.HasPrefix(l, "sizes:") {
				lines[i] = m[1]
			}
		}
		did = true
	}
	if strings.Contains(e.Msg, "remove it from params") {
		for i, l := range lines {
			if strings.HasPrefix(l, "params:") {
				lines[i] = "params: {}"
			}
		}
	}
	if !did {
		t.Fatalf("no advice to follow in %q", e.Msg)
	}
	return strings.Join(lines, "\n")
}

// TestUndefinedDimAdvice enumerates what a dimension that names no size
// can be (an undeclared name, a parameter, a tensor, a product, an
// expression, a keyword, a misspelling, another case, a name too long, the
// same one twice) and checks that doing what its error says gives a spec
// that compiles, in one step.
func TestUndefinedDimAdvice(t *testing.T) {
	for _, tc := range []struct{ dims, want string }{
		{"[m]", "declare it in sizes (`sizes: [n, tokens, m]`)"},
		{"[k]", `"k" is a launch parameter, and a shape is fixed when the plan is made, before any launch; to make it a size, remove it from params, declare it in sizes (` + "`sizes: [n, tokens, k]`" + `) and read it in templates with {{size "k"}}`},
		{"[k, n, k]", "remove it from params"},
		{"[y]", `"y" is a tensor, not a size; declare a size for the length (` + "`sizes: [n, tokens, y_n]`" + `) and write it here (` + "`shape: [y_n]`" + `)`},
		{"[world * n]", "a dimension is one size symbol or a positive integer; write the product as dimensions, `shape: [world, n]`"},
		{"[world*m, 2]", "write the product as dimensions, `shape: [world, m, 2]`, and declare m in sizes (`sizes: [n, tokens, m]`)"},
		{"[2 * n * k]", "`shape: [2, n, k_n]`, and declare k_n in sizes (`sizes: [n, tokens, k_n]`)"},
		{"[n + 1]", "a dimension is one size symbol or a positive integer, not an expression; declare a size for it (`sizes: [n, tokens, n_1]`) and write it here (`shape: [n_1]`)"},
		{"[2n]", "(`sizes: [n, tokens, x2n]`)"},
		{"[int]", `"int" is a Go or C keyword, which no size may be called; declare a size for it (` + "`sizes: [n, tokens, int_n]`" + `)`},
		{"[tokns]", `(did you mean "tokens"?)`},
		{"[N]", `(did you mean "n"? names are lower case)`},
		{"[" + strings.Repeat("a", 70) + "]", "sizes are at most 64 bytes long"},
		{"[world, blocks]", "uses blocks in its shape, but only workspace shapes may"},
	} {
		t.Run(tc.dims, func(t *testing.T) {
			src := strings.Replace(adviceSpec, "DIMS", tc.dims, 1)
			_, err := Compile("spec.yaml", []byte(src), testTemplates())
			var l diag.List
			if !errors.As(err, &l) {
				t.Fatalf("want errors, got %v", err)
			}
			if !strings.Contains(l.Error(), tc.want) {
				t.Fatalf("errors\n%v\nwant %q", l, tc.want)
			}
			if strings.Contains(tc.want, "blocks") {
				return // not a missing size: a rule with its own test
			}
			for _, e := range l {
				src = applyAdvice(t, src, e)
			}
			if _, err := Compile("spec.yaml", []byte(src), testTemplates()); err != nil {
				t.Fatalf("after the advice:\n%s\nstill: %v", src, err)
			}
		})
	}
	// No sizes at all: the list to paste holds the new one only.
	src := "name: ag\nsummary: s\ndtypes: [f32]\nsizes: []\ntensors:\n  x: {dir: in, shape: [m]}\nvariants:\n  v: {template: t_a, access: {x: local_read}, barriers: [none]}\n"
	_, err := Compile("spec.yaml", []byte(src), testTemplates())
	if err == nil || !strings.Contains(err.Error(), "(`sizes: [m]`)") {
		t.Fatalf("got %v", err)
	}
}

package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func at(line, col int) Pos { return Pos{File: "f.yaml", Line: line, Col: col} }

// tok is the position of a token of width characters.
func tok(line, col, width int) Pos {
	return Pos{File: "f.yaml", Line: line, Col: col, EndLine: line, EndCol: col + width}
}

const sample = `name: ag
summary: s
dtypes: [f32, f16]
sizes:
  - n
tensors:
  input: {dir: in, shape: [n, 4]}
  flags: &ws
    dir: workspace
    shape: [blocks]
    dtype: u64
variants:
  push: &push
    template: t
    access: {input: local_read, flags: [remote_write, local_read]}
    aliasing: allow
    barriers: [device]
    launch: {threads: 256, min_blocks: 32}
  copy: *push
`

func TestParsePositions(t *testing.T) {
	f, errs := Parse("f.yaml", []byte(sample))
	require.Empty(t, errs)
	assert.True(t, f.Read)
	assert.Equal(t, at(1, 1), f.Pos)

	assert.Equal(t, "ag", f.Name.Value)
	assert.Equal(t, tok(1, 7, 2), f.Name.Pos)
	assert.Equal(t, tok(1, 1, 4), f.Name.KeyPos)
	assert.True(t, f.Name.OK())

	assert.Equal(t, []Str{
		{Node: Node{Pos: tok(3, 10, 3), Set: true}, Value: "f32"},
		{Node: Node{Pos: tok(3, 15, 3), Set: true}, Value: "f16"},
	}, f.DTypes.Items)
	assert.Equal(t, tok(5, 5, 1), f.Sizes.Items[0].Pos, "block lists too")
	assert.False(t, f.Ops.Set, "absent")

	require.Len(t, f.Tensors.List, 2)
	in := f.Tensors.List[0]
	assert.Equal(t, tok(7, 3, 5), in.Name.Pos)
	assert.Equal(t, "in", in.Dir.Value)
	assert.Equal(t, tok(7, 16, 2), in.Dir.Pos)
	assert.Equal(t, []Dim{{Pos: tok(7, 28, 1), Symbol: "n"}, {Pos: tok(7, 31, 1), Const: 4}}, in.Shape.Dims)
	assert.False(t, in.DType.Set)
	ws := f.Tensors.List[1]
	assert.Equal(t, "u64", ws.DType.Value)
	assert.Equal(t, tok(11, 12, 3), ws.DType.Pos)

	require.Len(t, f.Variants.List, 2)
	push := f.Variants.List[0]
	assert.Equal(t, "t", push.Template.Value)
	require.Len(t, push.Access.List, 2)
	a := push.Access.List[0]
	assert.Equal(t, "input", a.Tensor.Value)
	assert.Equal(t, tok(15, 14, 5), a.Tensor.Pos)
	assert.Equal(t, []Str{{Node: Node{Pos: tok(15, 21, 10), Set: true}, Value: "local_read"}}, a.Kinds.Items, "one kind is a one-item list")
	assert.Len(t, push.Access.List[1].Kinds.Items, 2)
	assert.Equal(t, "allow", push.Aliasing.Value)
	assert.Equal(t, int64(256), push.Launch.Threads.Value)
	assert.Equal(t, tok(18, 23, 3), push.Launch.Threads.Pos)
	assert.False(t, push.Launch.MaxBlocks.Set)
	assert.Equal(t, int64(32), push.Launch.MinBlocks.Value)
	assert.Equal(t, tok(18, 40, 2), push.Launch.MinBlocks.Pos)
	assert.Equal(t, tok(18, 28, 10), push.Launch.MinBlocks.KeyPos)

	// An alias reads as the anchored value, positions included.
	cp := f.Variants.List[1]
	assert.Equal(t, "copy", cp.Name.Value)
	assert.Equal(t, "t", cp.Template.Value)
	assert.Equal(t, tok(14, 15, 1), cp.Template.Pos)
	assert.Len(t, cp.Access.List, 2)
}

func TestParseBadValuesAreMarked(t *testing.T) {
	f, errs := Parse("f.yaml", []byte("name: {a: 1}\ndtypes: [f32, [x]]\ntensors:\n  x: {shape: [n, 1.5]}\n"))
	require.Len(t, errs, 3)
	assert.True(t, f.Name.Set)
	assert.True(t, f.Name.Bad)
	assert.False(t, f.Name.OK())
	assert.True(t, f.DTypes.Bad, "a list with a bad item")
	assert.Equal(t, "f32", f.DTypes.Items[0].Value, "good items are kept")
	assert.True(t, f.Tensors.List[0].Shape.Bad)
	assert.Len(t, f.Tensors.List[0].Shape.Dims, 1)
	assert.Equal(t, "f.yaml:1:7: error: name must be a string, found a mapping", errs[0].Error())
}

func TestParseNeverPanics(t *testing.T) {
	for _, src := range []string{
		"", "\x00", "---", "--- |\n  text", "[", "{", ":", "? ", "&a *a", "a: &a [*a, *a]",
		"name: !!binary !!str x", "%YAML 1.1\n%YAML 1.1\n---\na: 1",
		"a:\n  - b\n   - c", "\ufeff", "\"\\xZZ\"",
	} {
		f, _ := Parse("f.yaml", []byte(src))
		assert.NotNil(t, f, "%q", src)
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"summary", "template", "access", "aliasing", "barriers", "launch"}
	for word, want := range map[string]string{
		"acess":    "access",
		"acecss":   "access",
		"Access":   "access",
		"templte":  "template",
		"barrier":  "barriers",
		"luanch":   "launch",
		"xyz":      "",
		"a":        "",
		"alias":    "",
		"summmary": "summary",
	} {
		assert.Equal(t, want, Closest(word, keys), word)
	}
	assert.Equal(t, "", Closest("f64", []string{"f32", "i64"}), "too short to guess")
	assert.Equal(t, "i32", Closest("int32", []string{"f32", "i32"}))
}

func TestIdentifiers(t *testing.T) {
	for s, want := range map[string]bool{
		"all_gather": true, "a": true, "x2_y": true,
		"": false, "All": false, "2a": false, "_a": false, "a-b": false, "a b": false, "ä": false,
	} {
		assert.Equal(t, want, IsIdentifier(s), s)
	}
	assert.True(t, IsReserved("func"))
	assert.True(t, IsReserved("int"))
	assert.False(t, IsReserved("input"))
}

// TestAliasBudget: aliases that would make a small file walk as a huge one
// stop with one error, quickly.
func TestAliasBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("name: x\nsummary: s\nsizes: &s [")
	for i := 0; i < 20000; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "n%d", i)
	}
	b.WriteString("]\nvariants:\n")
	for i := 0; i < 5000; i++ {
		fmt.Fprintf(&b, "  v%d: {template: t, barriers: *s}\n", i)
	}
	start := time.Now()
	_, errs := Parse("f.yaml", []byte(b.String()))
	assert.Less(t, time.Since(start), 5*time.Second)
	var budget []string
	for _, e := range errs {
		if strings.Contains(e.Msg, "aliases make this file too large") {
			budget = append(budget, e.Error())
		}
	}
	require.Len(t, budget, 1, "said once")
	assert.Contains(t, budget[0], "error: aliases make this file too large to read (more values than 4 per byte of it); write the values out instead of repeating large anchors")

	// Ordinary reuse of anchors is far below the budget.
	_, errs = Parse("f.yaml", []byte("name: x\nsummary: s\nvariants:\n  a: &v {template: t, launch: &l {threads: 64}}\n  b: *v\n  c: {template: t, launch: *l}\n"))
	assert.Empty(t, errs)
}

func TestFileLimit(t *testing.T) {
	_, errs := Parse("f.yaml", []byte("name: x\n#"+strings.Repeat("x", MaxFileBytes)))
	require.Len(t, errs, 1)
	assert.Equal(t, "f.yaml:1:1: error: the spec is 1048585 bytes; irisgen reads files of at most 1048576 bytes (1 MiB): split it", errs[0].Error())
}

// TestParseParams: parameters as a type name or a mapping, and a tensor's
// ranks, with their positions.
func TestParseParams(t *testing.T) {
	const src = `name: b
params:
  root: rank
  k: {type: int, min: -2, max: 8}
tensors:
  input: {dir: in, shape: [n], ranks: root}
`
	f, errs := Parse("f.yaml", []byte(src))
	require.Empty(t, errs)
	require.Len(t, f.Params.List, 2)
	root, k := f.Params.List[0], f.Params.List[1]
	assert.Equal(t, Str{Node: Node{Pos: tok(3, 3, 4), KeyPos: tok(3, 3, 4), Set: true}, Value: "root"}, root.Name)
	assert.Equal(t, "rank", root.Type.Value)
	assert.Equal(t, tok(3, 9, 4), root.Type.Pos)
	assert.False(t, root.Min.Set)
	assert.Equal(t, "int", k.Type.Value)
	assert.Equal(t, int64(-2), k.Min.Value)
	assert.Equal(t, tok(4, 23, 2), k.Min.Pos)
	assert.Equal(t, int64(8), k.Max.Value)
	assert.Equal(t, "root", f.Tensors.List[0].Ranks.Value)
	assert.Equal(t, tok(6, 39, 4), f.Tensors.List[0].Ranks.Pos)

	_, errs = Parse("f.yaml", []byte("params: [root]\n"))
	require.Len(t, errs, 1)
	assert.Equal(t, "f.yaml:1:9: error: params must be a mapping from parameter names to types, e.g. {root: rank, eps: f32}; found a list", errs[0].Error())
	_, errs = Parse("f.yaml", []byte("params: {k: {type: int, min: 1.5, mx: 2}}\n"))
	require.Len(t, errs, 2)
	assert.Contains(t, errs[0].Error(), "min of parameter \"k\" must be an integer, found the number 1.5")
	assert.Contains(t, errs[1].Error(), `unknown key "mx" in parameter "k" (expected one of: type, min, max)`)
}

// TestParseEnds: the end of a position is just past the token as written:
// quotes and escapes count, a flow list ends at its bracket (on a later
// line too, past a quoted bracket and a comment), an alias at its name,
// columns in characters; a block scalar has no end.
func TestParseEnds(t *testing.T) {
	src := "name: \"a\\\"g\"\nsummary: |\n  text\ndtypes: ['f''32', \"]\", # ]\n  f16]\nsizes: [é_n]\nops: &o [sum]\ntensors: {x: {dir: in, shape: [n]}}\n"
	r, root := NewReader("f.yaml", []byte(src), Kind{Name: "spec"})
	require.NotNil(t, root)
	val := func(key string) Pos {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value == key {
				return r.Pos(root.Content[i+1])
			}
		}
		t.Fatalf("no key %s", key)
		return Pos{}
	}
	assert.Equal(t, tok(1, 7, 6), val("name"), `"a\"g" is 6 characters as written`)
	assert.Equal(t, at(2, 10), val("summary"), "a block scalar has no end")
	dtypes := val("dtypes")
	assert.Equal(t, Pos{File: "f.yaml", Line: 4, Col: 9, EndLine: 5, EndCol: 7}, dtypes)
	list := root.Content[5]
	assert.Equal(t, tok(4, 10, 7), r.Pos(list.Content[0]), "'f''32'")
	assert.Equal(t, tok(6, 8, 5), val("sizes"), "[é_n]: columns count characters, not bytes")
	assert.Equal(t, tok(7, 6, 8), val("ops"), "the anchor is part of the node")
}

// TestKeyOfAnotherLevel enumerates every key of every mapping of the
// language written in every other mapping that lacks it: the error names
// the mapping it belongs to, unless the key looks like a misspelling of
// one that is there ("did you mean").
func TestKeyOfAnotherLevel(t *testing.T) {
	in := map[string]func(key string) string{
		"the top level":      func(k string) string { return "name: a\n" + k + ": 1\n" },
		"a param":            func(k string) string { return "params: {p: {" + k + ": 1}}\n" },
		"a tensor":           func(k string) string { return "tensors: {t: {" + k + ": 1}}\n" },
		"a variant":          func(k string) string { return "variants: {v: {" + k + ": 1}}\n" },
		"a copy":             func(k string) string { return "variants: {v: {copies: [{" + k + ": 1}]}}\n" },
		"a variant's launch": func(k string) string { return "variants: {v: {launch: {" + k + ": 1}}}\n" },
	}
	require.Len(t, in, len(specLevels))
	checked := 0
	for _, here := range specLevels {
		for _, other := range specLevels {
			for _, key := range other.keys {
				if slices.Contains(here.keys, key) {
					continue
				}
				_, errs := Parse("s.yaml", []byte(in[here.name](key)))
				msg := ""
				for _, e := range errs {
					if strings.Contains(e.Error(), fmt.Sprintf("unknown key %q", key)) {
						msg = e.Error()
					}
				}
				require.NotEmpty(t, msg, "%s in %s: %v", key, here.name, errs)
				if Closest(key, here.keys) != "" {
					require.Contains(t, msg, "did you mean", "%s in %s", key, here.name)
					continue
				}
				require.Contains(t, msg, "; "+key+" is a key of "+(&parser{levels: specLevels}).levelOf(key), "%s in %s", key, here.name)
				checked++
			}
		}
	}
	require.Positive(t, checked)
}

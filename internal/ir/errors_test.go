package ir

import (
	"fmt"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/diag"
)

// testTemplates is a templates fs for tests, independent of the real
// catalogue under templates/.
func testTemplates() fstest.MapFS {
	fsys := fstest.MapFS{}
	for _, n := range []string{"t_a", "t_b", "all_gather_push"} {
		fsys[n+TemplateExt] = &fstest.MapFile{Data: []byte("// " + n + "\n")}
	}
	return fsys
}

// errorCase is a spec and the errors it must give, one a string:
// "line:col: error: ..." with its notes after newlines.
type errorCase struct {
	name string
	src  string
	want []string
}

// errorCases lists every user error with its exact positions; want is the
// whole error output of Compile("spec.yaml", src, testTemplates()) without
// the "spec.yaml:" prefix, one error per item, sorted.
var errorCases = []errorCase{
	{
		name: "parameters",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
params:
  root: rank
  k: {type: int, min: 4, max: 1}
  eps: {type: f32, min: 0}
  r2: {type: rank, max: 3}
  bad: {type: rnk}
  none: {min: 1}
  n: rank
  list: [rank]
  Root: rank
  func: int
  root: int
  ok: {type: int, mx: 3}
tensors:
  input: {dir: in, shape: [n]}
  eps: {dir: out, shape: [n]}
variants:
  v:
    template: t_a
    access: {input: local_read, eps: local_write}
`,
		want: []string{
			"7:31: error: parameter \"k\" has min 4 above max 1; no value would pass",
			"8:20: error: min of parameter \"eps\": only int parameters take a range (f32 parameters are not range-checked); remove it",
			"9:20: error: max of parameter \"r2\": only int parameters take a range (a rank is always checked against the world: 0 <= p < world); remove it",
			"10:15: error: unknown type \"rnk\" of parameter \"bad\" (expected one of: rank, int, f32)",
			"11:3: error: parameter \"none\" has no type; give one of: rank, int, f32 (e.g. none: rank)",
			"12:3: error: parameter \"n\" has the name of a size symbol; rename the parameter",
			"13:9: error: parameter \"list\" must be a type (rank, int, f32) or a mapping like {type: int, min: 0, max: 8}; found a list",
			"14:3: error: parameter name \"Root\" is not an identifier: use lower-case letters, digits and _, starting with a letter (e.g. \"root\")",
			"15:3: error: parameter name \"func\" is a Go or C keyword and would not compile in the generated code; pick another name",
			"16:3: error: duplicate parameter \"root\" (first defined at 6:3); parameter names must be unique",
			"17:19: error: unknown key \"mx\" in parameter \"ok\" (expected one of: type, min, max)",
			"20:3: error: tensor \"eps\" has the name of a parameter; rename the tensor or the parameter",
		},
	},
	{
		name: "tensors only one rank passes",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
params: {root: rank, k: int}
tensors:
  a: {dir: in, shape: [n], ranks: root}
  b: {dir: in, shape: [n], ranks: roots}
  c: {dir: in, shape: [n], ranks: k}
  d: {dir: in, shape: [n], ranks: root, optional: true}
  e: {dir: workspace, shape: [n], ranks: root}
  f: {dir: out, shape: [n], ranks: [root]}
variants:
  v:
    template: t_a
    access: {a: remote_read, b: local_read, c: local_read, d: local_read, e: local_write, f: local_write}
  w:
    template: t_a
    access: {a: local_read, b: local_read, c: local_read, d: none, e: none, f: local_write}
`,
		want: []string{
			"8:35: error: ranks of tensor \"b\" names \"roots\", which is not a rank parameter (did you mean \"root\"?)",
			"9:35: error: ranks of tensor \"c\" names int parameter \"k\"; it must name a rank parameter (type rank), whose rank alone uses the tensor",
			"10:35: error: tensor \"d\" is optional and ranks: root; optional already lets every rank leave it out: keep one of the two",
			"11:42: error: tensor \"e\" is a workspace, which the plan allocates on every rank; remove ranks: root",
			"12:36: error: ranks of tensor \"f\" (the name of a rank parameter, e.g. ranks: root) must be a string, found a list",
		},
	},
	{
		name: "ranks without rank parameters",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  a: {dir: in, shape: [n], ranks: root}
variants:
  v:
    template: t_a
    access: {a: local_read}
`,
		want: []string{
			"6:35: error: ranks of tensor \"a\" names \"root\", but the spec has no rank parameter; declare it, e.g. params: {root: rank}",
		},
	},
	{
		name: "too many parameters",
		src:  "name: ag\nsummary: s\nparams: {" + manyParams(17) + "}\nvariants: {v: {template: t_a}}\n",
		want: []string{
			"3:" + fmt.Sprint(10+len(manyParams(16))+2) + ": error: the spec has 17 params; a collective may have at most 16 (each is a kernel argument and a parameter of Launch)",
		},
	},
	{
		name: "unknown top-level key",
		src: `name: ag
summry: s
`,
		want: []string{
			"1:1: error: the spec has no variants; add `variants:` with at least one variant (template, access, ...)",
			"2:1: error: unknown key \"summry\" at the top level (did you mean \"summary\"?)",
		},
	},
	{
		name: "unknown key in tensor",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input: {dir: in, shape: [n], dtyp: f32}
variants:
  v:
    template: t_a
    access: {input: local_read}
`,
		want: []string{
			"6:32: error: unknown key \"dtyp\" in tensor \"input\" (did you mean \"dtype\"?)",
		},
	},
	{
		name: "index dtype lists and optional tensors",
		src: `name: m
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x:   {dir: in, shape: [n], dtype: [i64, f32]}
  y:   {dir: in, shape: [n], dtype: [i32]}
  z:   {dir: out, shape: [n], dtype: [i64, i32]}
  w:   {dir: out, shape: [n], optional: true}
  v:   {dir: in, shape: [n], optional: yes please}
  o:   {dir: in, shape: [n], optional: true}
  d:   {dir: in, shape: [n], dtype: [i64, i64]}
variants:
  a:
    template: t_a
    access: {x: local_read, y: local_read, z: local_write, w: local_write, v: local_read, o: remote_read, d: local_read}
`,
		want: []string{
			"6:43: error: a dtype list of tensor \"x\" may hold only index types (i32, i64), not f32; give one dtype instead",
			"7:37: error: the dtype list of tensor \"y\" has one entry; write dtype: i32",
			"8:38: error: tensor \"z\" has a dtype list but dir: out; only dir: in tensors may come in several index types",
			"9:41: error: tensor \"w\" is optional but dir: out; only dir: in tensors may be left out of a launch",
			"10:40: error: optional of tensor \"v\" must be true or false, found the string \"yes please\"",
			"12:43: error: dtype i64 of tensor \"d\" is listed twice; remove one",
			"16:94: error: tensor \"o\" is optional, but variant \"a\" lets peers touch it (remote_read); a tensor left out has nothing to put on the heap: make it required or access it locally",
		},
	},
	{
		name: "empty dtype list (a panic once)",
		src: `name: m
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n], dtype: []}
  y: {dir: out, shape: [n]}
variants:
  a:
    template: t_a
    access: {x: local_read, y: local_write}
`,
		want: []string{
			"6:35: error: the dtype list of tensor \"x\" is empty; give one dtype (e.g. dtype: i32), or a list of index types such as [i64, i32]",
		},
	},
	{
		name: "unknown key in variant",
		src: `name: ag
summary: s
variants:
  push:
    template: t_a
    acess: {}
`,
		want: []string{
			"6:5: error: unknown key \"acess\" in variant \"push\" (did you mean \"access\"?)",
		},
	},
	{
		name: "unknown key in launch",
		src: `name: ag
summary: s
variants:
  push:
    template: t_a
    launch: {thread: 512}
`,
		want: []string{
			"6:14: error: unknown key \"thread\" in launch of variant \"push\" (did you mean \"threads\"?)",
		},
	},
	{
		name: "duplicate top-level key",
		src: `name: ag
summary: s
name: ag2
variants:
  v: {template: t_a}
`,
		want: []string{
			"3:1: error: duplicate key \"name\" at the top level (first at 1:1); keep only one",
		},
	},
	{
		name: "duplicate key in variant",
		src: `name: ag
summary: s
variants:
  v:
    template: t_a
    template: t_b
`,
		want: []string{
			"6:5: error: duplicate key \"template\" in variant \"v\" (first at 5:5); keep only one",
		},
	},
	{
		name: "duplicate tensor",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
  x: {dir: out, shape: [n]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"7:3: error: duplicate tensor \"x\" (first defined at 6:3); tensor names must be unique",
		},
	},
	{
		name: "duplicate variant",
		src: `name: ag
summary: s
variants:
  v: {template: t_a}
  v: {template: t_b}
`,
		want: []string{
			"5:3: error: duplicate variant \"v\" (first defined at 4:3); variant names must be unique",
		},
	},
	{
		name: "duplicate access entry",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: inout, shape: [n]}
variants:
  v:
    template: t_a
    access: {x: local_read, x: local_write}
`,
		want: []string{
			"10:29: error: duplicate access entry for tensor \"x\" in variant \"v\" (first at 10:14); write all its kinds in one list, e.g. x: [local_read, remote_read]",
		},
	},
	{
		name: "wrong type string for list",
		src: `name: ag
summary: s
dtypes: f32
variants:
  v: {template: t_a}
`,
		want: []string{
			"3:9: error: dtypes must be a list of element types, e.g. [f32, f16, bf16]; found the string \"f32\"",
		},
	},
	{
		name: "wrong type list for string",
		src: `name: [ag]
summary: s
variants:
  v: {template: t_a}
`,
		want: []string{
			"1:7: error: name must be a string, found a list",
		},
	},
	{
		name: "wrong type mapping for list",
		src: `name: ag
summary: s
variants:
  v: {template: t_a, barriers: {device: 1}}
`,
		want: []string{
			"4:32: error: barriers of variant \"v\" must be a list of barrier modes, e.g. [device, host, none]; found a mapping",
		},
	},
	{
		name: "wrong type tensor not mapping",
		src: `name: ag
summary: s
tensors:
  x: in
variants:
  v: {template: t_a}
`,
		want: []string{
			"4:6: error: tensor \"x\" must be a mapping like {dir: in, shape: [n]}; found the string \"in\"",
			"6:3: error: variant \"v\" has no access; add access: with one entry per tensor, e.g. {x: local_read}",
		},
	},
	{
		name: "wrong type access",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {x: {local_read: 1}}}
`,
		want: []string{
			"8:34: error: access of tensor \"x\" in variant \"v\" must be an access kind or a list of kinds (e.g. [local_read, remote_write]), found a mapping",
		},
	},
	{
		name: "non-integer launch",
		src: `name: ag
summary: s
variants:
  v:
    template: t_a
    launch: {threads: 512.5, max_blocks: "16", vector_bytes: 16}
  w:
    template: t_a
    launch: {max_blocks: 64, min_blocks: 8.5}
  x: {template: t_a, launch: {min_blocks: "8"}}
  y: {template: t_a, launch: {min_blocks: [8]}}
`,
		want: []string{
			"6:23: error: threads of variant \"v\" must be an integer, found the number 512.5",
			"6:42: error: max_blocks of variant \"v\" must be an integer, found the string \"16\"",
			"9:42: error: min_blocks of variant \"w\" must be an integer, found the number 8.5",
			"10:43: error: min_blocks of variant \"x\" must be an integer, found the string \"8\"",
			"11:43: error: min_blocks of variant \"y\" must be an integer, found a list",
		},
	},
	{
		name: "non-integer dimension",
		src: `name: ag
summary: s
dtypes: [f32]
tensors:
  x: {dir: in, shape: [2.5, [1]]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"5:24: error: dimension 2.5 of tensor \"x\" is not an integer; dimensions are size symbols or positive integers",
			"5:29: error: a dimension of tensor \"x\" must be a size symbol or a positive integer, found a list",
		},
	},
	{
		name: "null value",
		src: `name: ag
summary:
variants:
  v: {template: t_a}
`,
		want: []string{
			"2:9: error: summary must be a string, found nothing",
		},
	},
	{
		name: "unknown access kind",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
  y: {dir: out, shape: [n]}
variants:
  v:
    template: t_a
    access: {x: remote_raed, y: [local_write, remote_store]}
`,
		want: []string{
			"11:17: error: unknown access kind \"remote_raed\" of tensor \"x\" in variant \"v\" (did you mean \"remote_read\"?)",
			"11:47: error: unknown access kind \"remote_store\" of tensor \"y\" in variant \"v\" (expected one of: local_read, local_write, remote_read, remote_write, remote_atomic, none)",
		},
	},
	{
		name: "access none mixed and duplicate kind",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
  y: {dir: out, shape: [n]}
variants:
  v:
    template: t_a
    access: {x: [none, local_read], y: [local_write, local_write]}
`,
		want: []string{
			"11:17: error: access of tensor \"x\" in variant \"v\" combines none with other kinds; use none alone",
			"11:54: error: access kind \"local_write\" of tensor \"y\" in variant \"v\" is listed twice (first at 11:41); remove one",
		},
	},
	{
		name: "empty access list",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v:
    template: t_a
    access: {x: []}
`,
		want: []string{
			"10:17: error: access of tensor \"x\" in variant \"v\" is empty; give at least one kind, or none if the variant does not touch it",
		},
	},
	{
		name: "unknown dtype",
		src: `name: ag
summary: s
dtypes: [f32, fp8]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"3:15: error: unknown dtype \"fp8\" (expected one of: f32, f16, bf16, i32, i64, u64)",
		},
	},
	{
		name: "unknown tensor dtype",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
  ids: {dir: in, shape: [n], dtype: int32}
variants:
  v: {template: t_a, access: {x: local_read, ids: local_read}}
`,
		want: []string{
			"7:37: error: unknown dtype \"int32\" of tensor \"ids\" (did you mean \"i32\"?)",
		},
	},
	{
		name: "duplicate dtype",
		src: `name: ag
summary: s
dtypes: [f32, f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"3:15: error: dtype \"f32\" is listed twice (first at 3:10); remove one",
		},
	},
	{
		name: "unknown op",
		src: `name: ag
summary: s
dtypes: [f32]
ops: [sum, avg]
sizes: [n]
tensors:
  x: {dir: inout, shape: [n]}
variants:
  v: {template: t_a, access: {x: [remote_read, local_write]}}
`,
		want: []string{
			"4:12: error: unknown op \"avg\" (expected one of: sum, max, min)",
		},
	},
	{
		name: "empty ops",
		src: `name: ag
summary: s
dtypes: [f32]
ops: []
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"4:6: error: ops is empty; omit ops for a collective that does not reduce, or list operators, e.g. [sum]",
		},
	},
	{
		name: "ops without data",
		src: `name: b
summary: s
ops: [sum]
variants:
  v: {template: t_a}
`,
		want: []string{
			"3:1: error: ops is given but the collective has no data tensors to reduce; remove ops",
		},
	},
	{
		name: "empty dtypes",
		src: `name: ag
summary: s
dtypes: []
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"3:9: error: dtypes is empty; list the element types to generate kernels for, e.g. [f32, f16, bf16]",
		},
	},
	{
		name: "missing dtypes",
		src: `name: ag
summary: s
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"1:1: error: the spec has no dtypes, but tensor \"x\" takes the kernel's element type; add e.g. dtypes: [f32, f16, bf16]",
		},
	},
	{
		name: "dtypes without data tensors",
		src: `name: ag
summary: s
dtypes: [f32]
tensors:
  flags: {dir: workspace, shape: [blocks], dtype: u64}
variants:
  v: {template: t_a, access: {flags: remote_write}}
`,
		want: []string{
			"3:1: error: dtypes is given but no tensor takes the kernel's element type (each has a fixed dtype, or there are none), so the kernels would all be the same; remove dtypes",
		},
	},
	{
		name: "unknown template",
		src: `name: ag
summary: s
variants:
  v: {template: t_c}
  w: {template: all_gather_pusj}
`,
		want: []string{
			"4:17: error: template \"t_c\" of variant \"v\" not found: there is no templates/t_c.hip.tmpl (add the file or name an existing template)",
			"5:17: error: template \"all_gather_pusj\" of variant \"w\" not found: there is no templates/all_gather_pusj.hip.tmpl (did you mean \"all_gather_push\"?)",
		},
	},
	{
		name: "template not an identifier",
		src: `name: ag
summary: s
variants:
  v: {template: ../etc/passwd}
`,
		want: []string{
			"4:17: error: template name \"../etc/passwd\" is not an identifier: use lower-case letters, digits and _, starting with a letter (e.g. \"etcpasswd\")",
		},
	},
	{
		name: "missing template",
		src: `name: ag
summary: s
variants:
  v: {barriers: [device]}
`,
		want: []string{
			"4:3: error: variant \"v\" has no template; add template: <name> for the file templates/<name>.hip.tmpl",
		},
	},
	{
		name: "undefined tensor in access",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {inptu: local_read, input: local_read, zzz: none}}
`,
		want: []string{
			"8:31: error: access of variant \"v\" names undefined tensor \"inptu\" (did you mean \"input\"?)",
			"8:69: error: access of variant \"v\" names undefined tensor \"zzz\" (tensors are: input)",
		},
	},
	{
		name: "undefined shape symbol",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [world, m]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"6:31: error: undefined size symbol \"m\" in the shape of tensor \"x\": declare it in sizes (`sizes: [n, m]`)",
		},
	},
	{
		name: "blocks in user tensor",
		src: `name: ag
summary: s
dtypes: [f32]
tensors:
  x: {dir: in, shape: [blocks, 8]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"5:24: error: tensor \"x\" uses blocks in its shape, but only workspace shapes may: the plan picks blocks, the caller does not know it",
		},
	},
	{
		name: "bad constant dimension",
		src: `name: ag
summary: s
dtypes: [f32, f16]
sizes: [n]
tensors:
  x: {dir: in, shape: [0, -4]}
  y: {dir: in, shape: [4611686018427387904, 4]}
  z: {dir: in, shape: [n, 2305843009213693952]}
  i: {dir: in, shape: [1152921504606846976, world, 2], dtype: i64}
  ok: {dir: in, shape: [1152921504606846975, n, 2], dtype: i32}
variants:
  v: {template: t_a, access: {x: local_read, y: local_read, z: local_read, i: local_read, ok: local_read}}
`,
		want: []string{
			"6:24: error: dimension 0 of tensor \"x\" must be positive",
			"6:27: error: dimension -4 of tensor \"x\" must be positive",
			"7:3: error: tensor \"y\" has more than 2^63-1 bytes for every launch: its constant dimensions multiply to more than 2^64 elements of up to 4 bytes; shrink them",
			"8:3: error: tensor \"z\" has more than 2^63-1 bytes for every launch: its constant dimensions multiply to 2305843009213693952 elements of up to 4 bytes; shrink them",
			"9:3: error: tensor \"i\" has more than 2^63-1 bytes for every launch: its constant dimensions multiply to 2305843009213693952 elements of up to 8 bytes; shrink them",
		},
	},
	{
		name: "missing access entry",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
  y: {dir: out, shape: [n]}
variants:
  v:
    template: t_a
    access: {x: local_read}
`,
		want: []string{
			"11:5: error: access of variant \"v\" has no entry for tensor \"y\"; add y: <kind> (one of: local_read, local_write, remote_read, remote_write, remote_atomic; none if the variant does not touch it)",
		},
	},
	{
		name: "missing access",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v:
    template: t_a
`,
		want: []string{
			"8:3: error: variant \"v\" has no access; add access: with one entry per tensor, e.g. {x: local_read}",
		},
	},
	{
		name: "launch out of range",
		src: `name: ag
summary: s
variants:
  a: {template: t_a, launch: {threads: 32, max_blocks: 0, vector_bytes: 2}}
  b: {template: t_a, launch: {threads: 1088, max_blocks: 1025, vector_bytes: 32}}
  c: {template: t_a, launch: {threads: 100}}
`,
		want: []string{
			"4:40: error: threads of variant \"a\" is 32; it must be a multiple of 64 from 64 to 1024",
			"4:56: error: max_blocks of variant \"a\" is 0; it must be from 1 to 1024",
			"4:73: error: vector_bytes of variant \"a\" is 2; it must be 4, 8 or 16",
			"5:40: error: threads of variant \"b\" is 1088; it must be a multiple of 64 from 64 to 1024",
			"5:58: error: max_blocks of variant \"b\" is 1025; it must be from 1 to 1024",
			"5:78: error: vector_bytes of variant \"b\" is 32; it must be 4, 8 or 16",
			"6:40: error: threads of variant \"c\" is 100; it must be a multiple of 64 from 64 to 1024",
		},
	},
	{
		// min_blocks: 1 to max_blocks (the variant's, or the default 16);
		// against the hard limit alone where max_blocks is itself wrong.
		// Valid: a, b, c (min_blocks = max_blocks, the default, 1).
		name: "min_blocks out of range",
		src: `name: ag
summary: s
variants:
  a: {template: t_a, launch: {threads: 512, max_blocks: 128, min_blocks: 64}}
  b: {template: t_a, launch: {threads: 64, max_blocks: 1024, min_blocks: 1024}}
  c: {template: t_a, launch: {min_blocks: 1}}
  d: {template: t_a, launch: {max_blocks: 32, min_blocks: 0}}
  e: {template: t_a, launch: {max_blocks: 32, min_blocks: -4}}
  f: {template: t_a, launch: {max_blocks: 32, min_blocks: 33}}
  g: {template: t_a, launch: {min_blocks: 17}}
  h: {template: t_a, launch: {min_blocks: 0}}
  i: {template: t_a, launch: {max_blocks: 0, min_blocks: 4}}
  j: {template: t_a, launch: {max_blocks: 2000, min_blocks: 1025}}
  k: {template: t_a, launch: {max_blocks: "x", min_blocks: 0}}
`,
		want: []string{
			"7:59: error: min_blocks of variant \"d\" is 0; it must be from 1 to its max_blocks, 32; remove it for the default, 1 (the grid the size gives)",
			"8:59: error: min_blocks of variant \"e\" is -4; it must be from 1 to its max_blocks, 32; remove it for the default, 1 (the grid the size gives)",
			"9:59: error: min_blocks of variant \"f\" is 33; it must be from 1 to its max_blocks, 32: lower min_blocks or raise max_blocks",
			"10:43: error: min_blocks of variant \"g\" is 17; it must be from 1 to its max_blocks, 16 (the default): lower min_blocks or set a larger max_blocks",
			"11:43: error: min_blocks of variant \"h\" is 0; it must be from 1 to its max_blocks, 16 (the default); remove it for the default, 1 (the grid the size gives)",
			"12:43: error: max_blocks of variant \"i\" is 0; it must be from 1 to 1024",
			"13:43: error: max_blocks of variant \"j\" is 2000; it must be from 1 to 1024",
			"13:61: error: min_blocks of variant \"j\" is 1025; it must be from 1 to max_blocks (at most 1024): lower min_blocks",
			"14:43: error: max_blocks of variant \"k\" must be an integer, found the string \"x\"",
			"14:60: error: min_blocks of variant \"k\" is 0; it must be from 1 to max_blocks (at most 1024); remove it for the default, 1 (the grid the size gives)",
		},
	},
	{
		name: "contradictory aliasing",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input: {dir: in, shape: [n]}
  output: {dir: out, shape: [world, n]}
variants:
  pull:
    template: t_a
    access: {input: remote_read, output: local_write}
    aliasing: allow
`,
		want: []string{
			"12:15: error: aliasing: allow is unsafe in variant \"pull\": peers read \"input\", so it may not be the same memory as \"output\" (peers would read memory this rank is overwriting); use aliasing: forbid\n" +
				"11:14: note: \"input\" is remote_read here (rule table row 5)",
		},
	},
	{
		name: "aliasing allowed where peers write the output",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input: {dir: in, shape: [n]}
  output: {dir: out, shape: [world, n]}
variants:
  push:
    template: t_a
    access: {input: local_read, output: remote_write}
    aliasing: allow
  both:
    template: t_a
    access: {input: local_read, output: [local_write, remote_read, remote_atomic]}
    aliasing: allow
`,
		want: []string{
			"12:15: error: aliasing: allow is unsafe in variant \"push\": peers write \"output\", so it may not be the same memory as \"input\" (peers would overwrite memory this rank has yet to read); use aliasing: forbid\n" +
				"11:33: note: \"output\" is remote_write here (rule table row 11)",
			"16:15: error: aliasing: allow is unsafe in variant \"both\": peers read and write \"output\", so it may not be the same memory as \"input\" (peers would read memory this rank is overwriting and overwrite memory it has yet to read); use aliasing: forbid\n" +
				"15:33: note: \"output\" is local_write,remote_read,remote_atomic here (rule table row 11)",
		},
	},
	{
		name: "aliasing allowed where peers read what this rank writes",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input: {dir: in, shape: [n]}
  output: {dir: out, shape: [n]}
variants:
  v:
    template: t_a
    access: {input: local_read, output: [local_write, remote_read]}
    aliasing: allow
`,
		want: []string{
			"12:15: error: aliasing: allow is unsafe in variant \"v\": peers read \"output\", so it may not be the same memory as \"input\" (peers would read memory this rank is overwriting); use aliasing: forbid\n" +
				"11:33: note: \"output\" is local_write,remote_read here (rule table row 10)",
		},
	},
	{
		name: "unknown aliasing",
		src: `name: ag
summary: s
variants:
  v: {template: t_a, aliasing: maybe}
`,
		want: []string{
			"4:32: error: unknown aliasing \"maybe\" of variant \"v\" (expected one of: forbid, allow, own_block)",
		},
	},
	{
		name: "write to input",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {x: [local_read, remote_atomic]}}
`,
		want: []string{
			"8:34: error: tensor \"x\" is dir: in, but variant \"v\" writes it (remote_atomic); make it dir: inout or drop the write",
		},
	},
	{
		name: "output never written",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: out, shape: [n]}
  y: {dir: inout, shape: [n]}
variants:
  v: {template: t_a, access: {x: none, y: remote_read}}
`,
		want: []string{
			"9:34: error: tensor \"x\" is dir: out, but variant \"v\" never writes it; give it a write kind (local_write, remote_write or remote_atomic)",
			"9:43: error: tensor \"y\" is dir: inout, but variant \"v\" never writes it; give it a write kind (local_write, remote_write or remote_atomic)",
		},
	},
	{
		name: "workspace of the data type without dtypes",
		src: `name: ag
summary: s
tensors:
  flags: {dir: workspace, shape: [blocks]}
variants:
  v: {template: t_a, access: {flags: remote_write}}
`,
		want: []string{
			"1:1: error: the spec has no dtypes, but tensor \"flags\" takes the kernel's element type; add e.g. dtypes: [f32, f16, bf16]",
		},
	},
	{
		name: "unknown dir",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: input, shape: [n]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"6:12: error: unknown dir \"input\" of tensor \"x\" (did you mean \"inout\"?)",
		},
	},
	{
		name: "missing dir and shape",
		src: `name: ag
summary: s
dtypes: [f32]
tensors:
  x: {dtype: f32}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"5:3: error: tensor \"x\" has no dir; add dir: in, out, inout or workspace",
			"5:3: error: tensor \"x\" has no shape; add one, e.g. shape: [n]",
		},
	},
	{
		name: "empty shape",
		src: `name: ag
summary: s
dtypes: [f32]
tensors:
  x: {dir: in, shape: []}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"5:23: error: shape of tensor \"x\" is empty; give at least one dimension, e.g. [n]",
		},
	},
	{
		name: "names not identifiers",
		src: `name: All-Gather
summary: s
dtypes: [f32]
sizes: [N]
tensors:
  In: {dir: in, shape: [4]}
variants:
  Push: {template: t_a, access: {In: local_read}}
`,
		want: []string{
			"1:7: error: collective name \"All-Gather\" is not an identifier: use lower-case letters, digits and _, starting with a letter (e.g. \"all_gather\")",
			"4:9: error: size \"N\" is not an identifier: use lower-case letters, digits and _, starting with a letter (e.g. \"n\")",
			"6:3: error: tensor name \"In\" is not an identifier: use lower-case letters, digits and _, starting with a letter (e.g. \"in\")",
			"8:3: error: variant name \"Push\" is not an identifier: use lower-case letters, digits and _, starting with a letter (e.g. \"push\")",
		},
	},
	{
		name: "reserved names",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [int]
tensors:
  func: {dir: in, shape: [int]}
variants:
  v: {template: t_a, access: {func: local_read}}
`,
		want: []string{
			"4:9: error: size \"int\" is a Go or C keyword and would not compile in the generated code; pick another name",
			"6:3: error: tensor name \"func\" is a Go or C keyword and would not compile in the generated code; pick another name",
		},
	},
	{
		name: "tensor named like a size",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  n: {dir: in, shape: [n]}
  world: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {n: local_read, world: local_read}}
`,
		want: []string{
			"6:3: error: tensor \"n\" has the name of a size symbol; rename the tensor",
			"7:3: error: tensor \"world\" has the name of a size symbol; rename the tensor",
		},
	},
	{
		name: "size declarations",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n, n, world, m]
tensors:
  x: {dir: in, shape: [n]}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"4:12: error: size \"n\" is declared twice (first at 4:9); remove one",
			"4:15: error: size \"world\" is built in; remove it from sizes",
		},
	},
	{
		name: "barriers",
		src: `name: ag
summary: s
variants:
  a: {template: t_a, barriers: []}
  b: {template: t_a, barriers: [device, graph, device]}
`,
		want: []string{
			"4:32: error: barriers of variant \"a\" is empty; list the supported modes, default first, e.g. [device, host, none]",
			"5:41: error: unknown barrier mode \"graph\" of variant \"b\" (expected one of: device, host, none)",
			"5:48: error: barrier mode \"device\" of variant \"b\" is listed twice (first at 5:33); remove one",
		},
	},
	{
		name: "missing name summary variants",
		src: `dtypes: [f32]
`,
		want: []string{
			"1:1: error: the spec has no name; add `name: <collective>` (a lower-case identifier such as all_gather)",
			"1:1: error: the spec has no summary; add `summary: <one sentence>` (it becomes the doc comment of the generated wrappers)",
			"1:1: error: dtypes is given but no tensor takes the kernel's element type (each has a fixed dtype, or there are none), so the kernels would all be the same; remove dtypes",
			"1:1: error: the spec has no variants; add `variants:` with at least one variant (template, access, ...)",
		},
	},
	{
		name: "empty summary and variants",
		src: `name: ag
summary: "  "
variants: {}
`,
		want: []string{
			"2:10: error: summary is empty; write one sentence saying what the collective does",
			"3:11: error: variants is empty; define at least one variant",
		},
	},
	{
		name: "empty file",
		src: `
`,
		want: []string{
			"1:1: error: the spec is empty; start it with `name: <collective>` (see docs/spec.md)",
		},
	},
	{
		name: "comment-only file",
		src: `# nothing here
`,
		want: []string{
			"1:1: error: the spec is empty; start it with `name: <collective>` (see docs/spec.md)",
		},
	},
	{
		name: "not a mapping",
		src: `- name: ag
`,
		want: []string{
			"1:1: error: a spec must be a mapping with the keys name, summary, dtypes, ops, sizes, params, tensors, variants; found a list",
		},
	},
	{
		name: "tab indentation",
		src: `name: ag
variants:
	v: {}
`,
		want: []string{
			"3:1: error: invalid YAML: found character that cannot start any token",
		},
	},
	{
		name: "two documents",
		src: `name: ag
summary: s
variants:
  v: {template: t_a}
---
name: other
`,
		want: []string{
			"5:1: error: a spec file holds one YAML document; move this one to its own file",
		},
	},
	{
		name: "merge key and complex key",
		src: `name: ag
summary: s
base: &b {template: t_a}
variants:
  v:
    <<: *b
    ? [x]
    : 1
`,
		want: []string{
			"3:1: error: unknown key \"base\" at the top level (expected one of: name, summary, dtypes, ops, sizes, params, tensors, variants)",
			"5:3: error: variant \"v\" has no template; add template: <name> for the file templates/<name>.hip.tmpl",
			"6:5: error: merge keys (<<) are not supported; write the keys out",
			"7:7: error: a key must be a plain name, found a list",
		},
	},
	{
		name: "aliases are followed",
		src: `name: ag
summary: s
dtypes: &d [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: *d}
variants:
  v: {template: t_a, access: {x: local_read}}
`,
		want: []string{
			"3:13: error: undefined size symbol \"f32\" in the shape of tensor \"x\": declare it in sizes (`sizes: [n, f32]`)",
		},
	},
	{
		name: "unclosed flow list",
		src: `name: ag
summary: [s
`,
		want: []string{
			"2:1: error: invalid YAML: did not find expected ',' or ']'",
		},
	},
	{
		name: "unclosed flow mapping",
		src: `name: ag
summary: s
variants:
  v: {template: t_a
`,
		want: []string{
			"4:1: error: invalid YAML: did not find expected ',' or '}'",
		},
	},
	{
		name: "unterminated string",
		src: `name: ag
summary: "unterminated
variants: {}
`,
		want: []string{
			"2:1: error: invalid YAML: found unexpected end of stream",
		},
	},
	{
		name: "bad indentation",
		src: `name: ag
 summary: s
`,
		want: []string{
			"2:1: error: invalid YAML: mapping values are not allowed in this context",
		},
	},
	{
		name: "dedented key",
		src: `name: ag
summary: s
variants:
  v:
    template: t_a
   access: {}
`,
		want: []string{
			"4:1: error: invalid YAML: did not find expected key",
		},
	},
	{
		name: "stray bracket",
		src: `name: ag
summary: s
tensors:
  x: {dir: in, shape: [n]]}
`,
		want: []string{
			"4:1: error: invalid YAML: did not find expected ',' or '}'",
		},
	},
	{
		name: "list item in a mapping",
		src: `name: ag
summary: s
variants:
  - v
  w: 1
`,
		want: []string{
			"4:1: error: invalid YAML: did not find expected '-' indicator",
		},
	},
	{
		name: "unknown anchor",
		src: `name: ag
summary: s
x: *nope
`,
		want: []string{
			"3:4: error: invalid YAML: alias *nope refers to no anchor; define &nope first",
		},
	},
	{
		name: "flow mapping item without value",
		src: `name: ag
summary: s
variants: {a: b, c}
`,
		want: []string{
			"3:15: error: variant \"a\" must be a mapping with the keys summary, template, engine, copies, access, aliasing, barriers, launch; found the string \"b\"",
			"3:19: error: variant \"c\" must be a mapping with the keys summary, template, engine, copies, access, aliasing, barriers, launch; found nothing",
		},
	},
	{
		name: "nested colons in flow list",
		src: `name: ag
summary: s
variants: [a, b: c: d]
`,
		want: []string{
			"3:1: error: invalid YAML: did not find expected ',' or ']'",
		},
	},
	{
		name: "misspelled tensor is not also missing",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input: {dir: in, shape: [n]}
  output: {dir: out, shape: [n]}
variants:
  v: {template: t_a, access: {inptu: local_read}}
`,
		want: []string{
			"9:22: error: access of variant \"v\" has no entry for tensor \"output\"; add output: <kind> (one of: local_read, local_write, remote_read, remote_write, remote_atomic; none if the variant does not touch it)",
			"9:31: error: access of variant \"v\" names undefined tensor \"inptu\" (did you mean \"input\"?)",
		},
	},
	{
		name: "misspelled key is not also missing",
		src: `name: ag
summary: s
dtype: [f32]
sizes: [n]
tensors:
  input: {dir: in, shap: [n]}
variants:
  v: {templat: t_a, access: {input: local_read}}
`,
		want: []string{
			"3:1: error: unknown key \"dtype\" at the top level (did you mean \"dtypes\"?)",
			"6:20: error: unknown key \"shap\" in tensor \"input\" (did you mean \"shape\"?)",
			"8:7: error: unknown key \"templat\" in variant \"v\" (did you mean \"template\"?)",
		},
	},
}

func TestCompileErrors(t *testing.T) { checkErrorCases(t, errorCases) }

// checkErrorCases compiles every case's spec and compares its errors,
// positions and notes included, with the case's.
func checkErrorCases(t *testing.T, cases []errorCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NotEmpty(t, tc.want, "an error case must expect errors")
			c, err := Compile("spec.yaml", []byte(tc.src), testTemplates())
			require.Error(t, err)
			assert.Nil(t, c, "no Collective on errors")
			var list diag.List
			require.ErrorAs(t, err, &list)
			var got []string
			for _, e := range list {
				assert.Equal(t, "spec.yaml", e.Pos.File)
				got = append(got, strings.ReplaceAll(strings.TrimPrefix(e.Error(), "spec.yaml:"), "\nspec.yaml:", "\n"))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// manyParams is "p0: int, p1: int, ..." with n parameters.
func manyParams(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("p%d: int", i)
	}
	return strings.Join(parts, ", ")
}

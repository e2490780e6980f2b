package ir

import (
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// reduceSpec exercises every derivation: all access kinds, a workspace,
// ops, two sizes declared in non-alphabetical order, defaults.
const reduceSpec = `name: red
summary: A reduction with every kind of access.
dtypes: [f32, bf16]
ops: [sum, max]
sizes: [n, k]
tensors:
  input:  {dir: in, shape: [n]}
  output: {dir: out, shape: [world, n]}
  acc:    {dir: inout, shape: [k, 2]}
  ids:    {dir: in, shape: [k], dtype: i32}
  flags:  {dir: workspace, shape: [blocks, world], dtype: u64}
variants:
  one:
    summary: First.
    template: t_a
    access:
      input: remote_read
      output: [local_read, remote_write]
      acc: [remote_read, local_write]
      ids: local_read
      flags: [remote_atomic, local_read]
    barriers: [none, device]
    launch: {threads: 256, max_blocks: 8, vector_bytes: 8, min_blocks: 4}
  two:
    template: t_b
    access: {input: local_read, output: local_write, acc: [local_read, local_write], ids: none, flags: none}
    aliasing: allow
`

func compileOK(t *testing.T, src string, templates fstest.MapFS) *Collective {
	t.Helper()
	c, err := Compile("specs/x.yaml", []byte(src), templates)
	require.NoError(t, err)
	require.NotNil(t, c)
	return c
}

func TestCompileDerivations(t *testing.T) {
	c := compileOK(t, reduceSpec, testTemplates())

	assert.Equal(t, "red", c.Name)
	assert.Equal(t, "A reduction with every kind of access.", c.Summary)
	assert.Equal(t, "specs/x.yaml", c.SpecFile)
	assert.Equal(t, Pos{File: "specs/x.yaml", Line: 1, Col: 7}, c.Pos.Start())
	assert.Equal(t, []irismodel.DType{irismodel.F32, irismodel.BF16}, c.DTypes)
	assert.Equal(t, []Op{OpSum, OpMax}, c.Ops)
	assert.Equal(t, []string{"n", "k"}, c.Symbols, "declaration order, not alphabetical")
	assert.Len(t, c.SpecHash, 16)

	require.Len(t, c.Tensors, 5)
	assert.Equal(t, irismodel.Shape{irismodel.DimSize(1), 2}, c.Tensors[2].Shape)
	assert.Equal(t, irismodel.I32, c.Tensors[3].DType)
	assert.Equal(t, irismodel.Workspace, c.Tensors[4].Dir)
	assert.Equal(t, Pos{File: "specs/x.yaml", Line: 11, Col: 3}, c.Tensors[4].Pos.Start())

	one := c.Variant("one")
	require.NotNil(t, one)
	assert.Equal(t, "t_a", one.Template)
	assert.Equal(t, Pos{File: "specs/x.yaml", Line: 13, Col: 3}, one.Pos.Start())
	assert.Equal(t, AliasForbid, one.Aliasing, "forbid is the default")
	assert.Equal(t, []irismodel.Barrier{irismodel.BarrierNone, irismodel.BarrierDevice}, one.Barriers, "order kept: first is the default")
	assert.Equal(t, Launch{Threads: 256, MaxBlocks: 8, MinBlocks: 4, VectorBytes: 8}, one.Launch)

	type useWant struct {
		access    Access
		placement Placement
		line      int
	}
	wantOne := map[string]useWant{
		"input":  {RemoteRead, PlaceImport, 17},
		"output": {LocalRead | RemoteWrite, PlaceHeap, 18},
		"acc":    {RemoteRead | LocalWrite, PlaceHeap, 19}, // peers read what this rank writes: never staged
		"ids":    {LocalRead, PlaceAny, 20},
		"flags":  {RemoteAtomic | LocalRead, PlacePlan, 21},
	}
	require.Len(t, one.Uses, 5)
	for i, u := range one.Uses {
		assert.Same(t, c.Tensors[i], u.Tensor, "uses follow tensor order")
		w := wantOne[u.Tensor.Name]
		assert.Equal(t, w.access, u.Access, u.Tensor.Name)
		assert.Equal(t, w.placement, u.Placement, u.Tensor.Name)
		assert.Equal(t, Pos{File: "specs/x.yaml", Line: w.line, Col: 7}, u.Pos.Start(), u.Tensor.Name)
	}

	two := c.Variant("two")
	require.NotNil(t, two)
	assert.Equal(t, AliasAllow, two.Aliasing)
	assert.Equal(t, []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone}, two.Barriers, "default modes")
	assert.Equal(t, Launch{Threads: 512, MaxBlocks: 16, MinBlocks: 1, VectorBytes: 16}, two.Launch, "default launch")
	assert.Equal(t, Access(0), two.Use("ids").Access, "none is the empty access")
	assert.Equal(t, PlaceAny, two.Use("ids").Placement)
	assert.Equal(t, PlaceAny, two.Use("acc").Placement, "only local access")
	assert.Equal(t, 9, two.Use("acc").Rule.Row)

	assert.Equal(t, []Capture{
		{Mode: irismodel.BarrierNone, Capturable: true},
		{Mode: irismodel.BarrierDevice, Capturable: true},
	}, one.Capture)
	assert.Equal(t, []Capture{
		{Mode: irismodel.BarrierDevice, Capturable: true},
		{Mode: irismodel.BarrierHost, Capturable: false, Reason: "the host barrier synchronises the stream and waits on the CPU"},
		{Mode: irismodel.BarrierNone, Capturable: true},
	}, two.Capture)

	assert.Equal(t, []Kernel{
		{Name: "irisgen_red_one_bf16_max", DType: irismodel.BF16, Op: OpMax},
		{Name: "irisgen_red_one_bf16_sum", DType: irismodel.BF16, Op: OpSum},
		{Name: "irisgen_red_one_f32_max", DType: irismodel.F32, Op: OpMax},
		{Name: "irisgen_red_one_f32_sum", DType: irismodel.F32, Op: OpSum},
	}, one.Kernels)
}

func TestCompileCatalogue(t *testing.T) {
	cs, err := CompileAll(os.DirFS("../../specs"), os.DirFS("../../templates"), "specs")
	require.NoError(t, err)
	byName := map[string]*Collective{}
	for _, c := range cs {
		byName[c.Name] = c
	}

	ag := byName["all_gather"]
	require.NotNil(t, ag)
	assert.Equal(t, "specs/all_gather.yaml", ag.SpecFile)
	assert.Equal(t, []string{"n"}, ag.Symbols)
	assert.Equal(t, "[world, n]", ag.ShapeString(ag.Tensor("output")))
	push, pull := ag.Variant("push"), ag.Variant("pull")
	require.NotNil(t, push)
	require.NotNil(t, pull)
	assert.Equal(t, PlaceAny, push.Use("input").Placement)
	assert.Equal(t, PlaceHeap, push.Use("output").Placement)
	assert.Equal(t, PlaceImport, pull.Use("input").Placement)
	assert.Equal(t, PlaceAny, pull.Use("output").Placement)
	for _, v := range []*Variant{push, pull} {
		assert.Equal(t, AliasForbid, v.Aliasing)
		assert.Equal(t, Launch{Threads: 512, MaxBlocks: 128, MinBlocks: 1, VectorBytes: 16}, v.Launch)
		assert.Len(t, v.Kernels, 3)
	}
	assert.Equal(t, "irisgen_all_gather_push_bf16", push.Kernels[0].Name)

	b := byName["barrier"]
	require.NotNil(t, b)
	assert.Empty(t, b.DTypes)
	assert.Empty(t, b.Tensors)
	dev := b.Variant("device")
	require.NotNil(t, dev)
	assert.Equal(t, []Kernel{{Name: "irisgen_barrier_device"}}, dev.Kernels)
	assert.Equal(t, []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost}, dev.Barriers)
	assert.Empty(t, dev.Uses)
}

func TestSpecHash(t *testing.T) {
	hash := func(src string, templates fstest.MapFS) string {
		return compileOK(t, src, templates).SpecHash
	}
	base := hash(reduceSpec, testTemplates())
	assert.Regexp(t, `^[0-9a-f]{16}$`, base)
	assert.Equal(t, base, hash(reduceSpec, testTemplates()), "stable")
	assert.NotEqual(t, base, hash(reduceSpec+"# comment\n", testTemplates()), "any spec byte counts")

	used := testTemplates()
	used["t_b"+TemplateExt] = &fstest.MapFile{Data: []byte("// changed\n")}
	assert.NotEqual(t, base, hash(reduceSpec, used), "a used template counts")

	unused := testTemplates()
	unused["all_gather_push"+TemplateExt] = &fstest.MapFile{Data: []byte("// changed\n")}
	unused["other"+TemplateExt] = &fstest.MapFile{Data: []byte("new")}
	assert.Equal(t, base, hash(reduceSpec, unused), "templates the spec does not use do not count")

	// Moving bytes between a template's name and its content, or between
	// templates, must change the hash: fields are length-prefixed.
	a := fstest.MapFS{"t_a" + TemplateExt: {Data: []byte("xy")}, "t_b" + TemplateExt: {Data: []byte("z")}}
	b := fstest.MapFS{"t_a" + TemplateExt: {Data: []byte("x")}, "t_b" + TemplateExt: {Data: []byte("yz")}}
	assert.NotEqual(t, hash(reduceSpec, a), hash(reduceSpec, b))
}

func TestCompileAll(t *testing.T) {
	okSpec := func(name string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("name: " + name + "\nsummary: s\nvariants:\n  v: {template: t_a}\n")}
	}
	specs := fstest.MapFS{
		"b.yaml":    okSpec("bee"),
		"a.yaml":    okSpec("ay"),
		"notes.txt": {Data: []byte("not a spec")},
	}
	cs, err := CompileAll(specs, testTemplates(), "specs")
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.Equal(t, "ay", cs[0].Name, "file order")
	assert.Equal(t, "specs/a.yaml", cs[0].SpecFile)
	assert.Equal(t, "specs/b.yaml", cs[1].SpecFile)

	specs = fstest.MapFS{
		"a.yaml": okSpec("same"),
		"b.yaml": okSpec("same"),
		"c.yaml": {Data: []byte("name: c\nsummary: s\nvariants:\n  v: {template: nope}\n")},
		"d.yaml": {Data: []byte("name: d\nsumary: s\n")},
	}
	cs, err = CompileAll(specs, testTemplates(), "specs")
	assert.Nil(t, cs)
	var list diag.List
	require.ErrorAs(t, err, &list)
	assert.Equal(t, strings.Join([]string{
		`specs/b.yaml:1:7: error: collective "same" is already defined in specs/a.yaml (at specs/a.yaml:1:7); collective names must be unique across spec files`,
		`specs/c.yaml:4:17: error: template "nope" of variant "v" not found: there is no templates/nope.hip.tmpl (add the file or name an existing template)`,
		`specs/d.yaml:1:1: error: the spec has no variants; add ` + "`variants:`" + ` with at least one variant (template, access, ...)`,
		`specs/d.yaml:2:1: error: unknown key "sumary" at the top level (did you mean "summary"?)`,
	}, "\n"), list.Error())
}

func TestCompileNilTemplates(t *testing.T) {
	_, err := Compile("s.yaml", []byte("name: a\nsummary: s\nvariants:\n  v: {template: t_a}\n"), nil)
	assert.EqualError(t, err, `s.yaml:4:17: error: template "t_a" of variant "v" not found: there is no templates/t_a.hip.tmpl (add the file or name an existing template)`)
}

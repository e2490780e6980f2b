package ir

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// copySpecs are collectives with copy-engine variants, written as the
// catalogue's specs write them (every tensor, parameter and shape of the
// real ones), each with its push schedule (the source issues every copy).
var copySpecs = map[string]string{
	"all_gather": `name: all_gather
summary: s
dtypes: [f32, bf16]
sizes: [n]
tensors:
  input:  {dir: in,  shape: [n]}
  output: {dir: out, shape: [world, n]}
  lamport: {dir: workspace, shape: [3, world, n]}
variants:
  copy_push:
    engine: copy
    copies:
      - each: [r, p]
        from: input@r
        to: output[r]@p
    access: {input: local_read, output: remote_write, lamport: none}
    aliasing: own_block
`,
	"all_to_all": `name: all_to_all
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input:  {dir: in,  shape: [world, n]}
  output: {dir: out, shape: [world, n]}
variants:
  copy_push:
    engine: copy
    copies: [{each: [r, p], from: "input[p]@r", to: "output[r]@p"}]
    access: {input: local_read, output: remote_write}
`,
	"broadcast": `name: broadcast
summary: s
dtypes: [f32]
sizes: [n]
params: {root: rank}
tensors:
  input:  {dir: in,  shape: [n], ranks: root}
  output: {dir: out, shape: [n]}
variants:
  copy_push:
    engine: copy
    copies: [{each: [p], from: input@root, to: output@p}]
    access: {input: local_read, output: remote_write}
`,
	"send_recv": `name: send_recv
summary: s
dtypes: [f32]
sizes: [n]
params: {src: rank, dst: rank}
tensors:
  input:  {dir: in,  shape: [n], ranks: src}
  output: {dir: out, shape: [n], ranks: dst}
variants:
  copy_push:
    engine: copy
    copies: [{from: input@src, to: output@dst}]
    access: {input: local_read, output: remote_write}
`,
	"gather": `name: gather
summary: s
dtypes: [f32]
sizes: [n]
params: {root: rank}
tensors:
  input:  {dir: in,  shape: [n]}
  output: {dir: out, shape: [world, n], ranks: root}
variants:
  copy_push:
    engine: copy
    copies: [{each: [r], from: input@r, to: "output[r]@root"}]
    access: {input: local_read, output: remote_write}
`,
	"scatter": `name: scatter
summary: s
dtypes: [f32]
sizes: [n]
params: {root: rank}
tensors:
  input:  {dir: in,  shape: [world, n], ranks: root}
  output: {dir: out, shape: [n]}
variants:
  copy_push:
    engine: copy
    copies: [{each: [p], from: "input[p]@root", to: output@p}]
    access: {input: local_read, output: remote_write}
`,
	"shift": `name: shift
summary: s
dtypes: [f32]
sizes: [n]
params: {offset: int}
tensors:
  input:  {dir: in,  shape: [n]}
  output: {dir: out, shape: [n]}
variants:
  copy_push:
    engine: copy
    copies: [{each: [r], from: input@r, to: output@r+offset}]
    access: {input: local_read, output: remote_write}
`,
}

func compileCopySpec(t *testing.T, name string) *Collective {
	t.Helper()
	c, err := Compile(name+".yaml", []byte(copySpecs[name]), testTemplates())
	require.NoError(t, err)
	return c
}

// TestCopySchedules enumerates the schedules the generator derives: every
// copy of every rank, in issue order, on 2 and 3 ranks.
func TestCopySchedules(t *testing.T) {
	for _, tc := range []struct {
		collective, variant string
		world               int
		params              []int64
		want                string
	}{
		{"all_gather", "copy_push", 2, nil, `
input@0 -> output[0]@1 (by 0)
input@0 -> output[0]@0 (by 0)
input@1 -> output[1]@0 (by 1)
input@1 -> output[1]@1 (by 1)`},
		{"all_gather", "copy_push", 3, nil, `
input@0 -> output[0]@1 (by 0)
input@0 -> output[0]@2 (by 0)
input@0 -> output[0]@0 (by 0)
input@1 -> output[1]@2 (by 1)
input@1 -> output[1]@0 (by 1)
input@1 -> output[1]@1 (by 1)
input@2 -> output[2]@0 (by 2)
input@2 -> output[2]@1 (by 2)
input@2 -> output[2]@2 (by 2)`},
		{"all_to_all", "copy_push", 3, nil, `
input[1]@0 -> output[0]@1 (by 0)
input[2]@0 -> output[0]@2 (by 0)
input[0]@0 -> output[0]@0 (by 0)
input[2]@1 -> output[1]@2 (by 1)
input[0]@1 -> output[1]@0 (by 1)
input[1]@1 -> output[1]@1 (by 1)
input[0]@2 -> output[2]@0 (by 2)
input[1]@2 -> output[2]@1 (by 2)
input[2]@2 -> output[2]@2 (by 2)`},
		{"broadcast", "copy_push", 3, []int64{1}, `
input@1 -> output@2 (by 1)
input@1 -> output@0 (by 1)
input@1 -> output@1 (by 1)`},
		{"send_recv", "copy_push", 3, []int64{2, 0}, `
input@2 -> output@0 (by 2)`},
		{"send_recv", "copy_push", 2, []int64{1, 1}, `
input@1 -> output@1 (by 1)`},
		{"gather", "copy_push", 3, []int64{2}, `
input@0 -> output[0]@2 (by 0)
input@1 -> output[1]@2 (by 1)
input@2 -> output[2]@2 (by 2)`},
		{"scatter", "copy_push", 2, []int64{0}, `
input[1]@0 -> output@1 (by 0)
input[0]@0 -> output@0 (by 0)`},
		{"shift", "copy_push", 3, []int64{-4}, `
input@0 -> output@2 (by 0)
input@1 -> output@0 (by 1)
input@2 -> output@1 (by 2)`},
	} {
		t.Run(tc.collective+"/"+tc.variant, func(t *testing.T) {
			c := compileCopySpec(t, tc.collective)
			v := c.Variant(tc.variant)
			require.NotNil(t, v)
			assert.Empty(t, v.Kernels, "a copy-engine variant has no kernel")
			assert.Equal(t, strings.TrimPrefix(tc.want, "\n")+"\n", v.Schedule(c, tc.world, tc.params))
		})
	}
}

// copyErrorCases are the refusals of copy-engine variants, with their
// exact positions (as errorCases).
var copyErrorCases = []errorCase{
	{
		name: "own_block",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
params: {offset: int}
tensors:
  input: {dir: in, shape: [n]}
  output: {dir: out, shape: [world, n]}
variants:
  a: {template: t_a, aliasing: own_block, access: {input: local_read, output: remote_write}}
  b: {engine: copy, aliasing: own_block, copies: [{each: [r, p], from: input@r, to: "output[r+offset]@p"}], access: {input: local_read, output: remote_write}}
`,
		want: []string{
			"10:32: error: aliasing: own_block in variant \"a\" needs engine: copy: irisgen proves it safe from the copies, and a kernel's accesses are not known block by block; use aliasing: forbid, or allow for the very same tensor",
			"11:51: error: copy 1 of variant \"b\" writes block 1 of \"output\" on rank 1 on 2 ranks with offset = 1, which under aliasing: own_block may be \"input\" itself there: a launch in place would overwrite its input before reading it; use aliasing: forbid",
		},
	},
	{
		name: "own_block without a block",
		src: `name: aa
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input: {dir: in, shape: [world, n]}
  output: {dir: out, shape: [world, n]}
variants:
  a: {engine: copy, aliasing: own_block, copies: [{each: [r, p], from: "input[p]@r", to: "output[r]@p"}], access: {input: local_read, output: remote_write}}
`,
		want: []string{
			"9:31: error: aliasing: own_block in variant \"a\" allows nothing: no dir: in tensor is one block of a written tensor (shape [world] followed by the in tensor's, the same dtype); use aliasing: forbid",
		},
	},
	{
		name: "engine and keys",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  input: {dir: in, shape: [n]}
  output: {dir: out, shape: [world, n]}
variants:
  a: {engine: dma, template: t_a, access: {input: local_read, output: remote_write}}
  b: {template: t_a, copies: [], access: {input: local_read, output: remote_write}}
  c: {engine: copy, template: t_a, launch: {threads: 64}, copies: [{each: [r, p], from: input@r, to: "output[r]@p"}], access: {input: local_read, output: remote_write}}
  d: {engine: copy, access: {input: local_read, output: remote_write}}
  e: {engine: copy, copies: [], access: {input: local_read, output: remote_write}}
  f: {engine: copy, copies: [{each: [r, p], frm: input@r, to: "output[r]@p"}], access: {input: local_read, output: remote_write}}
  g: {engine: copy, copies: [{each: [r, p], from: input@r}], access: {input: local_read, output: remote_write}}
`,
		want: []string{
			"9:15: error: unknown engine \"dma\" of variant \"a\" (expected one of: sm, copy)",
			"10:22: error: copies of variant \"b\": only a copy-engine variant has a copy schedule; add engine: copy (and drop template), or remove copies",
			"11:21: error: variant \"c\" has engine: copy, so no kernel and no template: its copies are its schedule; remove template",
			"11:36: error: variant \"c\" has engine: copy, which launches no kernel: threads, blocks and vectors mean nothing to it; remove launch",
			"12:15: error: variant \"d\" has engine: copy but no copies; add copies: with the blocks it moves, e.g. [{each: [r, p], from: input@r, to: \"output[r]@p\"}]",
			"13:29: error: copies of variant \"e\" is empty; add the blocks it moves, e.g. {each: [r, p], from: input@r, to: \"output[r]@p\"}",
			"14:30: error: copy 1 of variant \"f\" has no from; add from: <tensor>[<block>]@<rank>, e.g. from: input@r",
			"14:45: error: unknown key \"frm\" in copy 1 of variant \"f\" (expected one of: each, from, to)",
			"15:30: error: copy 1 of variant \"g\" has no to; add to: <tensor>[<block>]@<rank>, e.g. to: output[r]@p",
		},
	},
	{
		name: "ends",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
params: {root: rank, k: int, eps: f32}
tensors:
  input: {dir: in, shape: [n]}
  output: {dir: out, shape: [world, n]}
variants:
  a:
    engine: copy
    copies:
      - {each: [r, p], from: input, to: "output[r]@p"}
      - {each: [r, p], from: inptu@r, to: "output[r@p"}
      - {each: [r, p], from: "input[r]@p", to: "output[r]@q"}
      - {each: [r, r, root, n], from: input@k, to: "output[r]@eps"}
      - {each: [r, p], from: input@r+root, to: "output[r]@p+"}
    access: {input: local_read, output: remote_write}
`,
		want: []string{
			"13:30: error: from of copy 1 of variant \"a\" is \"input\", which names no rank; write <tensor>@<rank> or <tensor>[<block>]@<rank>, e.g. input@r or output[r]@p",
			"14:30: error: from of copy 2 of variant \"a\" names undefined tensor \"inptu\" (did you mean \"input\"?)",
			"14:50: error: to of copy 2 of variant \"a\": the block index of \"output[r@p\" is not closed by ]; write <tensor>@<rank> or <tensor>[<block>]@<rank>, e.g. input@r or output[r]@p",
			"15:37: error: from of copy 3 of variant \"a\" indexes tensor \"input\", whose first dimension is n, not world: a block index picks one rank's block of a [world, ...] tensor; copy the whole tensor (input@...)",
			"15:59: error: the rank of to of copy 3 of variant \"a\" names \"q\", which is no rank variable or rank parameter (ranks are the variables of each and the rank parameters: r, p, root)",
			"16:20: error: rank variable \"r\" of copy 4 of variant \"a\" is listed twice; list each once",
			"16:23: error: rank variable \"root\" of copy 4 of variant \"a\" has the name of a parameter, tensor or size; pick another name, e.g. r or p",
			"16:29: error: rank variable \"n\" of copy 4 of variant \"a\" has the name of a parameter, tensor or size; pick another name, e.g. r or p",
			"16:45: error: the rank of from of copy 4 of variant \"a\" is int parameter \"k\", not a rank: name a rank variable of each or a rank parameter (r, root), and add an int parameter to it (r+k)",
			"16:63: error: the rank of to of copy 4 of variant \"a\" is f32 parameter \"eps\", not a rank: name a rank variable of each or a rank parameter (r, root), and add an int parameter to it (r+eps)",
			"17:38: error: the rank of from of copy 5 of variant \"a\" adds \"root\", which is not an int parameter: a rank moves by an int parameter, taken mod world (e.g. params: {offset: int}, then r+offset)",
			"17:59: error: the rank of to of copy 5 of variant \"a\" is \"p+\", which adds nothing; write <rank>+<int parameter>, e.g. r+offset",
		},
	},
	{
		name: "access, shapes and coverage",
		src: `name: ag
summary: s
dtypes: [f32]
sizes: [n]
params: {root: rank, k: int}
tensors:
  input: {dir: in, shape: [n]}
  other: {dir: in, shape: [n], dtype: i32}
  output: {dir: out, shape: [world, n]}
  out2: {dir: out, shape: [n]}
  ws: {dir: workspace, shape: [n]}
variants:
  both_local:
    engine: copy
    copies: [{each: [r, p], from: input@r, to: "output[r]@p"}, {from: input@root, to: out2@root+k}]
    access: {input: local_read, other: none, output: local_write, out2: remote_write, ws: none}
  untouched:
    engine: copy
    copies: [{each: [r, p], from: input@r, to: "output[r]@p"}, {from: input@root, to: out2@root+k}]
    access: {input: local_read, other: local_read, output: remote_write, out2: remote_write, ws: [remote_write, local_read]}
  shapes:
    engine: copy
    copies: [{each: [p], from: input@root, to: output@p}, {each: [p], from: other@p, to: out2@p}]
    access: {input: local_read, other: local_read, output: remote_write, out2: remote_write, ws: none}
  twice:
    engine: copy
    copies: [{each: [r, p], from: input@r, to: "output[p]@p"}, {each: [p], from: input@p, to: out2@root+k}]
    access: {input: local_read, other: none, output: remote_write, out2: remote_write, ws: none}
  never:
    engine: copy
    copies: [{each: [r], from: input@r, to: "output[r]@root"}, {each: [p], from: input@p, to: out2@p+k}]
    access: {input: local_read, other: none, output: remote_write, out2: remote_write, ws: none}
  pull:
    engine: copy
    copies: [{each: [r, p], from: input@r, to: "output[r]@p"}, {from: input@root, to: out2@root+k}]
    access: {input: remote_read, other: none, output: local_write, out2: local_write, ws: none}
`,
		want: []string{
			"15:14: error: copy 1 of variant \"both_local\" reads \"input\" (local_read) and writes \"output\" (local_write): the rank that holds the source issues a copy, reading it locally and writing the destination through the heap; declare from local_read and to remote_write\n16:14: note: the access entries are here",
			"20:33: error: variant \"untouched\" declares local_read access to \"other\", but none of its copies touches it; set it to none or add a copy",
			"20:94: error: variant \"untouched\" declares local_read,remote_write access to \"ws\", but none of its copies touches it; set it to none or add a copy",
			"23:48: error: copy 1 of variant \"shapes\" copies a block of shape [n] of \"input\" into a block of shape [world, n] of \"output\": a copy moves one contiguous block into one of the same shape; index the [world, ...] side with [rank] or fix the shapes",
			"23:90: error: copy 2 of variant \"shapes\" copies \"other\" into \"out2\", whose element types differ (or vary per launch): a copy moves bytes, so both take the same dtype; give them the same dtype",
			"27:14: error: copy 1 of variant \"twice\" writes block 0 of \"output\" on rank 0 again (copy 1 wrote it first) on 2 ranks with root = 0, k = 0: every block of a written tensor is written once; fix the ranks or the block index",
			"32:46: error: the copies of variant \"never\" never write block 0 of \"output\" on rank 1 on 2 ranks with root = 0, k = 0, so the launch would leave it as it was; add the copy that fills it",
			"36:14: error: copy 1 of variant \"pull\" reads \"input\" through the heap (remote_read), so the rank at its destination would issue it; such copies deadlocked when launched back to back by 4 ranks on H100s (the driver appears to run a peer copy on the GPU that holds its source, where the copies several ranks issue to read it queue in an order no barrier controls): let the source issue it, input local_read and output remote_write\n35:14: note: the copy is here",
			"36:14: error: copy 2 of variant \"pull\" reads \"input\" through the heap (remote_read), so the rank at its destination would issue it; such copies deadlocked when launched back to back by 4 ranks on H100s (the driver appears to run a peer copy on the GPU that holds its source, where the copies several ranks issue to read it queue in an order no barrier controls): let the source issue it, input local_read and out2 remote_write\n35:64: note: the copy is here",
		},
	},
	{
		name: "one rank's tensors and reductions",
		src: `name: sr
summary: s
dtypes: [f32]
sizes: [n]
params: {src: rank, dst: rank}
tensors:
  input: {dir: in, shape: [n], ranks: src}
  output: {dir: out, shape: [n], ranks: dst}
variants:
  push:
    engine: copy
    copies: [{from: input@src, to: output@dst}]
    access: {input: local_read, output: remote_write}
  wrong_rank:
    engine: copy
    copies: [{each: [p], from: input@p, to: output@dst}]
    access: {input: local_read, output: remote_write}
`,
		want: []string{
			"5:10: error: parameter \"src\" is never used by the copies of variant \"wrong_rank\": a launch would pass it for nothing; place a rank with it (tensor@src) or remove it\n16:14: note: the copies are here",
			"16:32: error: copy 1 of variant \"wrong_rank\" places \"input\" on another rank than src's, but only rank src passes it (ranks: src); write input@src",
		},
	},
	{
		name: "reducing collective",
		src: `name: ar
summary: s
dtypes: [f32]
ops: [sum]
sizes: [n]
tensors:
  input: {dir: in, shape: [n]}
  output: {dir: out, shape: [n]}
variants:
  a:
    engine: copy
    copies: [{each: [r], from: input@r, to: output@r}]
    access: {input: local_read, output: remote_write}
`,
		want: []string{
			"11:13: error: variant \"a\" has engine: copy, but ar reduces (ops: sum): a copy engine moves bytes and cannot add them; use a kernel (remove engine)",
		},
	},
}

func TestCopyErrors(t *testing.T) { checkErrorCases(t, copyErrorCases) }

// TestCopyStagedOutputs enumerates which copy-engine variants write a
// tensor only one rank passes (through its staging buffer, StagesAlways)
// and so have no mode none, and the refusal of a none the spec lists.
func TestCopyStagedOutputs(t *testing.T) {
	staged := map[string]bool{"gather": true, "send_recv": true}
	for name := range copySpecs {
		t.Run(name, func(t *testing.T) {
			v := compileCopySpec(t, name).Variant("copy_push")
			require.NotNil(t, v)
			assert.Equal(t, staged[name], v.StagesAlways())
			assert.Equal(t, !staged[name], slices.Contains(v.Barriers, irismodel.BarrierNone), "mode none offered: %v", v.Barriers)
		})
	}
	src := strings.Replace(copySpecs["send_recv"], "access: {input: local_read, output: remote_write}",
		"access: {input: local_read, output: remote_write}\n    barriers: [device, none]", 1)
	_, err := Compile("send_recv.yaml", []byte(src), testTemplates())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `writes a tensor only one rank passes through its copy engines, so the peers write that rank's staging buffer and it copies the buffer into the tensor at every launch, and in mode none nothing would order that copy after the peers' writes; remove none`)
}

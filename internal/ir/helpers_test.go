package ir

import (
	"math"
	"testing"

	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelpers(t *testing.T) {
	c := compileOK(t, reduceSpec, testTemplates())

	assert.Nil(t, c.Variant("three"))
	assert.Nil(t, c.Tensor("nope"))
	assert.Equal(t, "acc", c.Tensor("acc").Name)
	assert.True(t, c.Reduces())

	var users []string
	for _, u := range c.UserTensors() {
		users = append(users, u.Name)
	}
	assert.Equal(t, []string{"input", "output", "acc", "ids"}, users)
	assert.False(t, c.Tensor("flags").User())

	assert.Equal(t, irismodel.BF16, c.Tensor("input").ElemType(irismodel.BF16))
	assert.Equal(t, irismodel.I32, c.Tensor("ids").ElemType(irismodel.BF16), "a fixed dtype wins")

	out := c.Tensor("output")
	assert.Equal(t, "[world, n]", c.ShapeString(out))
	assert.Equal(t, "world*n", c.NumelString(out))
	assert.Equal(t, "[k, 2]", c.ShapeString(c.Tensor("acc")))

	numel := func(tn *Tensor, n int64) (int64, bool) {
		vals := map[string]int64{"n": n, "k": 3}
		sizes := make([]int64, len(c.Symbols))
		for i, s := range c.Symbols {
			sizes[i] = vals[s]
		}
		return tn.Shape.Numel(8, 16, sizes)
	}
	n, ok := numel(out, 1000)
	assert.True(t, ok)
	assert.EqualValues(t, 8000, n)
	n, ok = numel(c.Tensor("acc"), 1000)
	assert.True(t, ok)
	assert.EqualValues(t, 6, n)
	_, ok = numel(out, math.MaxInt64/4)
	assert.False(t, ok, "overflow")
	_, ok = numel(out, -1)
	assert.False(t, ok, "negative size")
	n, ok = numel(out, 0)
	assert.True(t, ok)
	assert.EqualValues(t, 0, n)

	one, two := c.Variant("one"), c.Variant("two")
	assert.Nil(t, one.Use("nope"))
	assert.Equal(t, RemoteRead, one.Use("input").Access)
	assert.True(t, one.Supports(irismodel.BarrierNone))
	assert.False(t, one.Supports(irismodel.BarrierHost))
	assert.Equal(t, irismodel.BarrierNone, one.DefaultBarrier())
	assert.Equal(t, irismodel.BarrierDevice, two.DefaultBarrier())

	cp, ok := two.CaptureOf(irismodel.BarrierHost)
	assert.True(t, ok)
	assert.False(t, cp.Capturable)
	assert.Equal(t, HostCaptureReason, cp.Reason)
	_, ok = one.CaptureOf(irismodel.BarrierHost)
	assert.False(t, ok)

	k, ok := one.Kernel(irismodel.F32, OpSum)
	assert.True(t, ok)
	assert.Equal(t, "irisgen_red_one_f32_sum", k.Name)
	_, ok = one.Kernel(irismodel.F16, OpSum)
	assert.False(t, ok)

	var pairs [][2]string
	for _, p := range one.AliasPairs() {
		pairs = append(pairs, [2]string{p[0].Name, p[1].Name})
	}
	// input, ids are read; output is written; acc is both.
	assert.Equal(t, [][2]string{
		{"input", "output"}, {"input", "acc"},
		{"output", "acc"}, {"output", "ids"},
		{"acc", "ids"},
	}, pairs)
	assert.Len(t, two.AliasPairs(), len(pairs), "aliasing allow checks the same pairs")
	in, out, acc, ids := c.Tensor("input"), c.Tensor("output"), c.Tensor("acc"), c.Tensor("ids")
	assert.False(t, one.InPlace(in, out), "aliasing forbid: no pair in place")
	assert.True(t, two.InPlace(in, out), "an input and a written tensor")
	assert.True(t, two.InPlace(acc, ids))
	assert.False(t, two.InPlace(out, acc), "two written tensors are never the same memory")
}

func TestHelpersWithoutOps(t *testing.T) {
	c := compileOK(t, `name: b
summary: s
variants:
  device: {template: t_a, barriers: [device, host]}
`, testTemplates())
	assert.False(t, c.Reduces())
	require.Len(t, c.Variants, 1)
	k, ok := c.Variants[0].Kernel(0, OpNone)
	assert.True(t, ok)
	assert.Equal(t, "irisgen_b_device", k.Name)
}

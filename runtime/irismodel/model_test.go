package irismodel

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDType(t *testing.T) {
	sizes := map[DType]int64{F32: 4, F16: 2, BF16: 2, I32: 4, I64: 8, U64: 8}
	require.Len(t, DTypes(), len(sizes))
	for _, d := range DTypes() {
		assert.Equal(t, sizes[d], d.Size(), d.String())
		back, err := ParseDType(d.String())
		require.NoError(t, err)
		assert.Equal(t, d, back)
	}
	assert.Equal(t, "bf16", BF16.String())
	back, err := ParseDType("BF16")
	require.NoError(t, err, "case-insensitive")
	assert.Equal(t, BF16, back)
	assert.False(t, DType(0).Valid())
	assert.Equal(t, int64(0), DType(0).Size())
	assert.Equal(t, "dtype(9)", DType(9).String())
	_, err = ParseDType("f64")
	assert.Error(t, err)
	assert.Equal(t, "i64 or i32", JoinDTypes([]DType{I64, I32}, " or "))
}

func TestBarrierNames(t *testing.T) {
	assert.Equal(t, Barrier(0), BarrierDevice, "the zero value is the device barrier")
	for _, b := range Barriers() {
		assert.True(t, b.Valid())
		back, err := ParseBarrier(b.String())
		require.NoError(t, err)
		assert.Equal(t, b, back)
	}
	assert.Equal(t, []string{"device", "host", "none"}, []string{BarrierDevice.String(), BarrierHost.String(), BarrierNone.String()})
	assert.False(t, Barrier(3).Valid())
	assert.Equal(t, "barrier(3)", Barrier(3).String())
	_, err := ParseBarrier("nccl")
	assert.Error(t, err)
}

func TestShape(t *testing.T) {
	sizes := []string{"n", "k"}
	s := Shape{3, DimWorld, DimSize(0), DimBlocks, DimSize(1)}
	assert.Equal(t, "[3, world, n, blocks, k]", s.String(sizes))
	assert.Equal(t, "3*world*n*blocks*k", s.Product(sizes))
	n, ok := s.Numel(2, 4, []int64{5, 7})
	require.True(t, ok)
	assert.Equal(t, int64(3*2*5*4*7), n)
	n, ok = s.Numel(2, 4, []int64{0, 7})
	assert.True(t, ok, "a size of 0 is an empty tensor")
	assert.Zero(t, n)
	_, ok = s.Numel(2, 4, []int64{-1, 7})
	assert.False(t, ok, "negative")
	_, ok = s.Numel(2, 4, []int64{5})
	assert.False(t, ok, "a size the caller did not give")
	_, ok = Shape{DimSize(0), DimSize(0)}.Numel(1, 1, []int64{1 << 32})
	assert.False(t, ok, "2^64 does not fit")
	n, ok = Shape{DimSize(0), DimSize(0)}.Numel(1, 1, []int64{1<<31 + 1<<29})
	assert.True(t, ok, "6.25 x 2^60 fits")
	assert.Equal(t, int64(1<<31+1<<29)*(1<<31+1<<29), n)

	for _, c := range []struct {
		sym  string
		want Dim
		ok   bool
	}{{"world", DimWorld, true}, {"blocks", DimBlocks, true}, {"n", DimSize(0), true}, {"k", DimSize(1), true}, {"m", 0, false}} {
		d, ok := ParseDim(c.sym, sizes)
		assert.Equal(t, c.ok, ok, c.sym)
		assert.Equal(t, c.want, d, c.sym)
		if ok {
			assert.Equal(t, c.sym, d.Name(sizes))
		}
	}
	assert.Equal(t, -1, DimWorld.Size())
	assert.Equal(t, -1, Dim(4).Size())
	assert.Equal(t, 2, DimSize(2).Size())
	assert.Equal(t, "4", Dim(4).Name(sizes))

	td := TensorDesc{Name: "ids", Dir: In, DType: I64}
	assert.Equal(t, I64, td.ElemType(F32), "a fixed dtype")
	td.DType = 0
	assert.Equal(t, F32, td.ElemType(F32), "the plan's")
	assert.True(t, td.User())
	assert.False(t, (&TensorDesc{Dir: Workspace}).User())
	for _, d := range Dirs() {
		assert.Equal(t, d == Out || d == InOut, d.Writes(), d.String())
	}
}

func TestParams(t *testing.T) {
	root := ParamDesc{Name: "root", Kind: ParamRank}
	k := ParamDesc{Name: "k", Kind: ParamInt, Min: 1, Max: 64}
	for _, c := range []struct {
		d     ParamDesc
		world int
		want  string
	}{
		{root, 2, "0 <= root < 2 (world)"},
		{root, 0, "0 <= root < world"},
		{k, 2, "1 <= k <= 64"},
		{ParamDesc{Name: "k", Kind: ParamInt, Min: 1, Max: math.MaxInt64}, 2, "k >= 1"},
		{ParamDesc{Name: "k", Kind: ParamInt, Min: math.MinInt64, Max: 9}, 2, "k <= 9"},
		{Unbounded("k", ParamInt), 2, "any int64"},
		{ParamDesc{Name: "eps", Kind: ParamF32}, 2, "any f32"},
	} {
		assert.Equal(t, c.want, c.d.Range(c.world))
	}
	for _, c := range []struct {
		d    ParamDesc
		v    Param
		want bool
	}{
		{root, IntParam(0), true}, {root, IntParam(1), true}, {root, IntParam(2), false}, {root, IntParam(-1), false},
		{root, F32Param(1), false}, {root, Param{}, false},
		{k, IntParam(1), true}, {k, IntParam(64), true}, {k, IntParam(0), false}, {k, IntParam(65), false},
		{ParamDesc{Kind: ParamF32}, F32Param(0.5), true}, {ParamDesc{Kind: ParamF32}, IntParam(0), false},
		{ParamDesc{Kind: 9}, IntParam(0), false},
	} {
		assert.Equal(t, c.want, c.d.Accepts(c.v, 2), "%s %v", c.d.Range(2), c.v)
	}
	assert.Equal(t, ParamInt, IntParam(-3).Kind())
	assert.Equal(t, int64(-3), IntParam(-3).Int())
	assert.Equal(t, uint64(math.MaxUint64-2), IntParam(-3).Word())
	assert.Equal(t, math.Float64bits(0.5), F32Param(0.5).Word(), "an f32 reaches the kernel as a double")
	assert.Equal(t, "0.1", F32Param(0.1).String())
	assert.Equal(t, "no value", Param{}.String())
	for _, kind := range ParamKinds() {
		assert.NotContains(t, kind.String(), "ParamKind")
	}
	assert.Equal(t, "ParamKind(0)", ParamKind(0).String())
}

func TestNames(t *testing.T) {
	assert.Equal(t, "irisgen_all_reduce_ring_bf16_sum", KernelName("all_reduce", "ring", BF16, "sum"))
	assert.Equal(t, "irisgen_all_gather_push_f32", KernelName("all_gather", "push", F32, ""))
	assert.Equal(t, "irisgen_barrier_device", KernelName("barrier", "device", 0, ""))
	assert.Equal(t, "irisgen_spec_hash_barrier", SpecHashSymbol("barrier"))

	rules := []AutoRule{{World: 2, MaxBytes: 100, Variant: "a"}, {World: 2, Variant: "b"}, {MaxBytes: 10, Variant: "c"}, {Variant: "d"}}
	for _, c := range []struct {
		world int
		bytes int64
		want  string
	}{{2, 100, "a"}, {2, 101, "b"}, {4, 10, "c"}, {4, 11, "d"}, {1, 0, "c"}} {
		assert.Equal(t, c.want, Choose(rules, c.world, c.bytes), "%d ranks, %d bytes", c.world, c.bytes)
	}
	assert.Equal(t, "", Choose(nil, 2, 1))
}

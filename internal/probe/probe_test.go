package probe

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// TestEighthsInHalf: the probe's values, multiples of 1/8 in [-1, 1], are
// exact halves.
func TestEighthsInHalf(t *testing.T) {
	for k, want := range map[int]uint16{8: 0x3c00, 1: 0x3000, -8: 0xbc00, 0: 0, 3: 0x3600, -5: 0xb900} {
		require.Equal(t, want, irisrt.F32ToF16(float32(k)/8), "k=%d", k)
		require.Equal(t, float32(k)/8, irisrt.F16ToF32(want), "k=%d", k)
	}
}

func TestEighths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := eighths(irisrt.BF16, 1000, rng)
	require.Len(t, b, 2000)
	for i := 0; i < 1000; i++ {
		h := binary.LittleEndian.Uint16(b[2*i:])
		// bf16 of k/8, |k| <= 8: exponent at most that of 1.0, 3 mantissa bits at most.
		require.LessOrEqual(t, h&0x7fff, uint16(0x3f80), "element %d = %#x", i, h)
		require.Zero(t, h&0x0f, "element %d = %#x is not a multiple of 1/8", i, h)
	}
}

func TestMergeKeepsFailure(t *testing.T) {
	m := merge([]Result{{Replays: 20}, {Replays: 3, Failed: true, Reason: "x"}})
	require.True(t, m.Failed)
	require.Equal(t, "x", m.Reason)
	require.Equal(t, 3, m.Replays)
}

func TestFirstDiff(t *testing.T) {
	require.Equal(t, -1, firstDiff([]byte{1, 2}, []byte{1, 2}))
	require.Equal(t, 1, firstDiff([]byte{1, 2}, []byte{1, 3}))
	require.Equal(t, 2, firstDiff([]byte{1, 2}, []byte{1, 2, 3}))
}

func TestMoEReference(t *testing.T) {
	for _, dt := range []irisrt.DType{irisrt.F32, irisrt.F16, irisrt.BF16} {
		rng := rand.New(rand.NewPCG(3, 4))
		x := eighths(dt, moeTokens*moeHidden, rng)
		wts := eighths(irisrt.F32, moeTokens*moeK, rng)
		// The exact product, encoded like the GPU would round it.
		out := make([]byte, len(x))
		es := int(dt.Size())
		for i := range len(x) / es {
			tok := i / moeHidden
			var sum float32
			for j := range moeK {
				sum += decode(irisrt.F32, wts[4*(tok*moeK+j):])
			}
			encode(t, dt, out[i*es:], decode(dt, x[i*es:])*sum)
		}
		require.Equal(t, -1, moeMismatch(dt, out, x, wts), "%s: the reference accepts the exact result", dt)
		out[es*moeHidden+1] ^= 0x40 // token 1
		require.Equal(t, moeHidden, moeMismatch(dt, out, x, wts), "%s: a corrupted element is found", dt)
	}
}

// encode writes v (exactly representable in dt) as dt.
func encode(t *testing.T, dt irisrt.DType, b []byte, v float32) {
	bits := math.Float32bits(v)
	switch dt {
	case irisrt.F32:
		binary.LittleEndian.PutUint32(b, bits)
	case irisrt.BF16:
		require.Zero(t, bits&0xffff, "%g is not exact in bf16", v)
		binary.LittleEndian.PutUint16(b, uint16(bits>>16))
	case irisrt.F16:
		binary.LittleEndian.PutUint16(b, irisrt.F32ToF16(v))
		require.Equal(t, v, decode(irisrt.F16, b), "%g is not exact in f16", v)
	}
}

// TestShareResultMerges: every rank of a world gets the worst rank's
// result of a case (RunRank in a multi-process world).
func TestShareResultMerges(t *testing.T) {
	w, err := irisrt.NewLocalWorld(3, irisrt.Options{Platform: fakegpu.New(3), HeapBytes: 1 << 16})
	require.NoError(t, err)
	defer w.Close()
	got := make([]Result, 3)
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		res := Result{Collective: "all_gather", Variant: "push", Captured: true, Replays: 10 + r.Rank()}
		if r.Rank() == 1 {
			res.Failed, res.Reason, res.Replays = true, "replay 4: output byte 3 differs", 4
		}
		var err error
		got[r.Rank()], err = shareResult(r, res)
		return err
	}))
	for k, res := range got {
		assert.Equal(t, Result{Collective: "all_gather", Variant: "push", Captured: true, Replays: 4, Failed: true, Reason: "replay 4: output byte 3 differs"}, res, "rank %d", k)
	}
}

// TestParamSets: a variant with parameters is captured with two sets of
// values, each rank parameter a different rank in each, an int its least
// value from 1 then from -1 within its range, an f32 1 then 0.5; a variant
// without parameters once.
func TestParamSets(t *testing.T) {
	entry := func(coll string) collectives.Entry {
		e, ok := collectives.Lookup(coll, "push")
		require.True(t, ok, coll)
		return e
	}
	text := func(e collectives.Entry, world int) []string {
		var out []string
		for _, ps := range paramSets(e, world) {
			out = append(out, paramText(e, ps))
		}
		return out
	}
	require.Equal(t, []string{"root=0", "root=1"}, text(entry("broadcast"), 2))
	require.Equal(t, []string{"src=0 dst=1", "src=1 dst=0"}, text(entry("send_recv"), 2))
	require.Equal(t, []string{"src=0 dst=1", "src=1 dst=2"}, text(entry("send_recv"), 4))
	require.Equal(t, []string{"offset=1", "offset=-1"}, text(entry("shift"), 2))
	require.Equal(t, []string{""}, text(entry("all_gather"), 2))
	bounded := collectives.Entry{Params: []irisrt.ParamDesc{{Name: "k", Kind: irisrt.ParamInt, Min: 2, Max: 8}, {Name: "eps", Kind: irisrt.ParamF32}}}
	require.Equal(t, []string{"k=2 eps=1", "k=2 eps=0.5"}, text(bounded, 2))
}

// TestProbeSizes: the last size parameter is N, the others a few rows.
func TestProbeSizes(t *testing.T) {
	require.Empty(t, probeSizes(0, 9))
	require.Equal(t, []int64{9}, probeSizes(1, 9))
	require.Equal(t, []int64{rowsOf, 9}, probeSizes(2, 9))
	require.Equal(t, []int64{rowsOf, rowsOf, 9}, probeSizes(3, 9))
}

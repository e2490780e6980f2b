package irismodel

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHalfRoundTrips: every half and bfloat16 but NaNs survives widening
// and rounding back.
func TestHalfRoundTrips(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
			if got := F32ToF16(F16ToF32(uint16(h))); got != uint16(h) {
				t.Fatalf("f16 %#04x -> %g -> %#04x", h, F16ToF32(uint16(h)), got)
			}
		}
		if b := uint16(h); b&0x7f80 != 0x7f80 || b&0x7f == 0 {
			if got := F32ToBF16(BF16ToF32(b)); got != b {
				t.Fatalf("bf16 %#04x round trip gives %#04x", b, got)
			}
		}
	}
}

// TestHalfRounding enumerates the rounding cases: ties to even, overflow,
// subnormals, NaN.
func TestHalfRounding(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},           // tie between 1 and 1+2^-10: even (1)
		{1 + 3.0/2048, 0x3c02},           // tie: even (1+2^-9)
		{65504, 0x7bff},                  // largest half
		{65520, 0x7c00},                  // rounds to inf
		{float32(math.Inf(-1)), 0xfc00},  // -inf
		{float32(math.Ldexp(1, -25)), 0}, // half the smallest subnormal: even (0)
		{float32(math.Ldexp(3, -26)), 1}, // above half: 2^-24
		{float32(math.Ldexp(1, -14)) * (1 - 1.0/4096), 0x0400},
		{-0.5, 0xb800},
	} {
		require.Equal(t, c.want, F32ToF16(c.f), "F32ToF16(%g)", c.f)
	}
	require.True(t, math.IsNaN(float64(F16ToF32(F32ToF16(nan)))))
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie: even
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie: even, up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above the tie
		{math.MaxFloat32, 0x7f80},                  // rounds to inf
	} {
		require.Equal(t, c.want, F32ToBF16(c.f), "F32ToBF16(%g)", c.f)
	}
	require.True(t, math.IsNaN(float64(BF16ToF32(F32ToBF16(nan)))))
}

func TestEncodeDecode(t *testing.T) {
	v := []float32{0, 1, -2.5, 1.0 / 3}
	for _, dt := range []DType{F32, F16, BF16} {
		b, err := Encode(dt, v)
		require.NoError(t, err)
		require.Len(t, b, len(v)*int(dt.Size()))
		got, err := Decode(dt, b)
		require.NoError(t, err)
		require.Equal(t, v[:3], got[:3], dt.String())
		require.InDelta(t, 1.0/3, got[3], 1.0/256, dt.String())
	}
	b, _ := Encode(F16, []float32{1})
	require.Equal(t, []byte{0x00, 0x3c}, b, "little-endian")
	_, err := Encode(I32, v)
	require.ErrorContains(t, err, "i32 is not a floating-point dtype")
	_, err = Decode(BF16, []byte{1, 2, 3})
	require.ErrorContains(t, err, "3 bytes are not whole bf16 elements")
}

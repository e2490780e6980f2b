//go:build gpu

package gpu_test

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Element values of the suite: uniform in [-1, 1), quantised to the dtype, so
// that every value is exactly representable and the CPU reference sees the
// same inputs as the GPU.

// splitmix64 is a counter-based generator: value i of stream s is a pure
// function of (s, i), so ranks and goroutines generate any part of any
// rank's input independently.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// stream names the input of one rank in one round of one case.
func stream(seed, rank, round uint64) uint64 {
	return splitmix64(seed*0x100000001b3 ^ rank<<40 ^ round)
}

// values returns n quantised values of stream s.
func values(dt irisrt.DType, n int64, s uint64) []float32 {
	out := make([]float32, n)
	parallel(n, func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			u := splitmix64(s ^ uint64(i)*0xd1342543de82ef95)
			f := float32(int64(u>>40)-(1<<23)) / (1 << 23) // [-1, 1)
			out[i] = quantize(dt, f)
		}
	})
	return out
}

// parallel splits [0, n) over the CPUs.
func parallel(n int64, fn func(lo, hi int64)) {
	parts := int64(runtime.NumCPU())
	if n < 1<<16 || parts < 2 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	per := (n + parts - 1) / parts
	for lo := int64(0); lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Add(1)
		go func() { defer wg.Done(); fn(lo, hi) }()
	}
	wg.Wait()
}

func quantize(dt irisrt.DType, f float32) float32 { return decode1(dt, encode1(dt, f)) }

// encode1 is f rounded to nearest even in dt, as the device header rounds.
func encode1(dt irisrt.DType, f float32) uint32 {
	switch dt {
	case irisrt.F16:
		return uint32(f32ToF16(f))
	case irisrt.BF16:
		return uint32(f32ToBF16(f))
	}
	return math.Float32bits(f)
}

func decode1(dt irisrt.DType, b uint32) float32 {
	switch dt {
	case irisrt.F16:
		return f16ToF32(uint16(b))
	case irisrt.BF16:
		return math.Float32frombits(b << 16)
	}
	return math.Float32frombits(b)
}

// encode packs values as dt's little-endian bytes.
func encode(dt irisrt.DType, v []float32) []byte {
	es := int64(dt.Size())
	b := make([]byte, int64(len(v))*es)
	parallel(int64(len(v)), func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			x := encode1(dt, v[i])
			if es == 2 {
				binary.LittleEndian.PutUint16(b[i*2:], uint16(x))
			} else {
				binary.LittleEndian.PutUint32(b[i*4:], x)
			}
		}
	})
	return b
}

// decode unpacks dt's little-endian bytes.
func decode(dt irisrt.DType, b []byte) []float32 {
	es := int64(dt.Size())
	v := make([]float32, int64(len(b))/es)
	parallel(int64(len(v)), func(lo, hi int64) {
		for i := lo; i < hi; i++ {
			if es == 2 {
				v[i] = decode1(dt, uint32(binary.LittleEndian.Uint16(b[i*2:])))
			} else {
				v[i] = decode1(dt, binary.LittleEndian.Uint32(b[i*4:]))
			}
		}
	})
	return v
}

func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 { // subnormal half (or zero)
		if e < -10 {
			return sign
		}
		full := mant | 0x800000
		shift := uint(14 - e)
		m := full >> shift
		rem, half := full&(1<<shift-1), uint32(1)<<(shift-1)
		if rem > half || (rem == half && m&1 == 1) {
			m++
		}
		return sign | uint16(m)
	}
	m := mant >> 13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && m&1 == 1) {
		m++
		if m == 0x400 {
			m = 0
			e++
			if e >= 0x1f {
				return sign | 0x7c00
			}
		}
	}
	return sign | uint16(e)<<10 | uint16(m)
}

func f16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal
		f := float32(mant) / (1 << 24)
		if sign != 0 {
			f = -f
		}
		return f
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// tiny is half the spacing of dt's subnormals: the absolute error of one
// rounding near zero, where a relative bound says nothing.
func tiny(dt irisrt.DType) float64 {
	switch dt {
	case irisrt.F16:
		return math.Ldexp(1, -25)
	case irisrt.BF16:
		return math.Ldexp(1, -134)
	}
	return math.Ldexp(1, -150)
}

// eps is the unit roundoff of dt.
func eps(dt irisrt.DType) float64 {
	switch dt {
	case irisrt.F16:
		return math.Ldexp(1, -11)
	case irisrt.BF16:
		return math.Ldexp(1, -8)
	}
	return math.Ldexp(1, -24)
}

// TestConversions checks the reference's rounding on its own (no GPU used):
// every half and bfloat16 round-trips, and ties round to even.
func TestConversions(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			continue // NaN
		}
		if got := f32ToF16(f16ToF32(uint16(h))); got != uint16(h) {
			t.Fatalf("f16 %#04x -> %g -> %#04x", h, f16ToF32(uint16(h)), got)
		}
		b := uint16(h)
		if b&0x7f80 == 0x7f80 && b&0x7f != 0 {
			continue
		}
		if got := f32ToBF16(math.Float32frombits(uint32(b) << 16)); got != b {
			t.Fatalf("bf16 %#04x round trip gives %#04x", b, got)
		}
	}
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1 + 1.0/2048, 0x3c00},           // tie between 1 and 1+2^-10: even (1)
		{1 + 3.0/2048, 0x3c02},           // tie: even (1+2^-9)
		{65520, 0x7c00},                  // rounds to inf
		{float32(math.Ldexp(1, -25)), 0}, // half the smallest subnormal: even (0)
		{float32(math.Ldexp(3, -26)), 1}, // above half: 2^-24
		{float32(math.Ldexp(1, -14)) * (1 - 1.0/4096), 0x0400},
	} {
		if got := f32ToF16(c.f); got != c.want {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

//go:build gpu

package gpu_test

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"

	"github.com/irisgen/irisgen/runtime/irismodel"
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
func values(dt irismodel.DType, n int64, s uint64) []float32 {
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

func quantize(dt irismodel.DType, f float32) float32 { return decode1(dt, encode1(dt, f)) }

// encode1 is f rounded to nearest even in dt, as the device header rounds.
func encode1(dt irismodel.DType, f float32) uint32 {
	switch dt {
	case irismodel.F16:
		return uint32(irismodel.F32ToF16(f))
	case irismodel.BF16:
		return uint32(irismodel.F32ToBF16(f))
	}
	return math.Float32bits(f)
}

func decode1(dt irismodel.DType, b uint32) float32 {
	switch dt {
	case irismodel.F16:
		return irismodel.F16ToF32(uint16(b))
	case irismodel.BF16:
		return math.Float32frombits(b << 16)
	}
	return math.Float32frombits(b)
}

// encode packs values as dt's little-endian bytes.
func encode(dt irismodel.DType, v []float32) []byte {
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
func decode(dt irismodel.DType, b []byte) []float32 {
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

// tiny is half the spacing of dt's subnormals: the absolute error of one
// rounding near zero, where a relative bound says nothing.
func tiny(dt irismodel.DType) float64 {
	switch dt {
	case irismodel.F16:
		return math.Ldexp(1, -25)
	case irismodel.BF16:
		return math.Ldexp(1, -134)
	}
	return math.Ldexp(1, -150)
}

// eps is the unit roundoff of dt.
func eps(dt irismodel.DType) float64 {
	switch dt {
	case irismodel.F16:
		return math.Ldexp(1, -11)
	case irismodel.BF16:
		return math.Ldexp(1, -8)
	}
	return math.Ldexp(1, -24)
}

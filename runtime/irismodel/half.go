package irismodel

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Host-side conversions for preparing and checking data of the 16-bit
// dtypes. They round as the device header does (nearest, ties to even), so a
// CPU reference computes on exactly the values the kernels see.

// F32ToF16 rounds f to the nearest IEEE 754 half (binary16), ties to even;
// beyond the half range it gives infinity, NaN stays NaN.
func F32ToF16(f float32) uint16 {
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

// F16ToF32 widens an IEEE 754 half exactly.
func F16ToF32(h uint16) float32 {
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

// F32ToBF16 rounds f to the nearest bfloat16, ties to even; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// BF16ToF32 widens a bfloat16 exactly.
func BF16ToF32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// Encode packs v as dt's little-endian elements (F32, F16 or BF16),
// rounding as F32ToF16 and F32ToBF16 do: the bytes to copy into a tensor.
func Encode(dt DType, v []float32) ([]byte, error) {
	b := make([]byte, int64(len(v))*dt.Size())
	switch dt {
	case F32:
		for i, f := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
	case F16:
		for i, f := range v {
			binary.LittleEndian.PutUint16(b[2*i:], F32ToF16(f))
		}
	case BF16:
		for i, f := range v {
			binary.LittleEndian.PutUint16(b[2*i:], F32ToBF16(f))
		}
	default:
		return nil, fmt.Errorf("irismodel.Encode: %s is not a floating-point dtype (f32, f16, bf16)", dt)
	}
	return b, nil
}

// Decode unpacks dt's little-endian elements (F32, F16 or BF16) into
// float32, exactly; a trailing partial element is an error.
func Decode(dt DType, b []byte) ([]float32, error) {
	switch dt {
	case F32, F16, BF16:
	default:
		return nil, fmt.Errorf("irismodel.Decode: %s is not a floating-point dtype (f32, f16, bf16)", dt)
	}
	es := int(dt.Size())
	if len(b)%es != 0 {
		return nil, fmt.Errorf("irismodel.Decode: %d bytes are not whole %s elements", len(b), dt)
	}
	v := make([]float32, len(b)/es)
	for i := range v {
		switch dt {
		case F32:
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		case F16:
			v[i] = F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		default:
			v[i] = BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	}
	return v, nil
}

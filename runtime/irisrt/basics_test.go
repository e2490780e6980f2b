package irisrt

import (
	"errors"
	"testing"

	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTensorSliceAndOverlap(t *testing.T) {
	x := Tensor{Ptr: 0x1000, DType: irismodel.F32, Len: 100}
	assert.Equal(t, int64(400), x.Bytes())
	s := x.Slice(10, 20)
	assert.Equal(t, Tensor{Ptr: 0x1000 + 40, DType: irismodel.F32, Len: 20}, s)
	assert.Equal(t, int64(0), x.Slice(100, 0).Len)
	assert.Panics(t, func() { x.Slice(90, 11) })
	assert.Panics(t, func() { x.Slice(-1, 1) })
	assert.Panics(t, func() { x.Slice(1, -1) })

	assert.True(t, x.Overlaps(s))
	assert.True(t, s.Overlaps(x))
	assert.False(t, x.Slice(0, 10).Overlaps(x.Slice(10, 10)), "adjacent slices do not overlap")
	assert.False(t, x.Overlaps(x.Slice(5, 0)), "empty tensors overlap nothing")
	big := Tensor{Ptr: 1 << 40, DType: irismodel.U64, Len: 1 << 30}
	assert.True(t, big.Overlaps(Tensor{Ptr: 1<<40 + 8<<30 - 8, DType: irismodel.U64, Len: 1}), "64-bit ends")
	assert.False(t, big.Overlaps(Tensor{Ptr: 1<<40 + 8<<30, DType: irismodel.U64, Len: 1}))
}

func TestChecks(t *testing.T) {
	x := Tensor{Ptr: 0x1000, DType: irismodel.F16, Len: 8}
	assert.NoError(t, checkTensor("op", "x", x, irismodel.F16, 8))
	var de *DTypeError
	require.ErrorAs(t, checkTensor("op", "x", x, irismodel.F32, 8), &de)
	assert.True(t, errors.Is(de, ErrDType))
	var se *ShapeError
	require.ErrorAs(t, checkTensor("op", "x", x, irismodel.F16, 9), &se)
	assert.Contains(t, se.Error(), "has 8 elements, want 9")
	require.ErrorAs(t, checkTensor("op", "x", Tensor{DType: irismodel.F16, Len: 8}, irismodel.F16, 8), &se)
	assert.Contains(t, se.Error(), "nil device pointer")

	require.NoError(t, checkTensorOneOf("op", "ids", Tensor{Ptr: 64, DType: irismodel.I32, Len: 8}, []irismodel.DType{irismodel.I64, irismodel.I32}, 8))
	require.ErrorAs(t, checkTensorOneOf("op", "ids", Tensor{Ptr: 64, DType: irismodel.F32, Len: 8}, []irismodel.DType{irismodel.I64, irismodel.I32}, 8), &de)
	assert.Contains(t, de.Error(), "want i64 or i32")
	require.ErrorAs(t, checkTensorOneOf("op", "ids", Tensor{Ptr: 64, DType: irismodel.I32, Len: 7}, []irismodel.DType{irismodel.I64, irismodel.I32}, 8), &se)
	require.ErrorAs(t, checkTensorOneOf("op", "ids", Tensor{DType: irismodel.I32, Len: 8}, []irismodel.DType{irismodel.I64, irismodel.I32}, 8), &se, "nil pointer")
	ok := Tensor{Ptr: 64, DType: irismodel.I32, Len: 8}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = checkTensorOneOf("op", "ids", ok, []irismodel.DType{irismodel.I64, irismodel.I32}, 8) }),
		"the launch path allocates nothing")
}

func TestErrorMessagesSayWhatToDo(t *testing.T) {
	cases := map[error][]string{
		&PlacementError{Op: "all_gather", Name: "output", Tensor: Tensor{Ptr: 1, DType: irismodel.F32, Len: 1}}:                 {"allocate it with rank.Heap().Alloc", "an import would silently drop the peers' writes"},
		&KernelError{Module: "m", Looked: []string{"/a/m.fatbin"}, Command: "make kernels"}:                                     {"/a/m.fatbin", "run `make kernels`"},
		&KernelError{Package: "x/y", Module: "m", Stale: true, WantHash: "x", GotHash: "y", Command: "go tool irisgen kernels"}: {"of x/y is stale", "go generate", "`go tool irisgen kernels`"},
		&KernelError{Module: "m"}:                                  {"looked nowhere", "`irisgen kernels`", "IRISGEN_KERNELS"},
		&HeapError{Want: 10, Size: 100}:                            {"Options.HeapBytes", "IRISGEN_HEAP_BYTES", "100-byte heap"},
		&BarrierTimeoutError{Rank: 0, Peer: 1, Block: 2, Epoch: 7}: {"rank 1", "block 2", "undefined", "start it again"},
		&BarrierModeError{Op: "o", Variant: "v", Mode: irismodel.BarrierHost, Supported: []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierNone}}: {"device, none"},
	}
	for err, want := range cases {
		for _, w := range want {
			assert.Contains(t, err.Error(), w)
		}
	}
	assert.True(t, errors.Is(&BarrierTimeoutError{}, ErrBarrierTimeout))
	assert.True(t, errors.Is(&WorldError{Peer: -1}, ErrWorld))
	assert.True(t, errors.Is(&CaptureError{}, ErrCapture))
	assert.True(t, errors.Is(&KernelError{}, ErrKernel))
	assert.True(t, errors.Is(&HeapError{}, ErrHeap))
	assert.True(t, errors.Is(&PlacementError{}, ErrPlacement))
}

func TestParseBytesAndEnvOptions(t *testing.T) {
	for s, want := range map[string]int64{"1024": 1024, "4GiB": 4 << 30, "512MiB": 512 << 20, "2G": 2 << 30, "3 KB": 3 << 10, "1T": 1 << 40} {
		n, err := ParseBytes(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, n, s)
	}
	for _, s := range []string{"", "x", "4X", "-1", "99999999999T"} {
		_, err := ParseBytes(s)
		assert.Error(t, err, s)
	}

	t.Setenv("IRISGEN_HEAP_BYTES", "")
	t.Setenv("IRISGEN_TIMEOUT", "")
	o, err := Options{}.resolve()
	require.NoError(t, err)
	assert.Equal(t, defaultHeapBytes, o.HeapBytes)
	assert.Equal(t, defaultTimeout, o.Timeout)

	t.Setenv("IRISGEN_HEAP_BYTES", "64MiB")
	t.Setenv("IRISGEN_TIMEOUT", "2.5")
	o, err = Options{}.resolve()
	require.NoError(t, err)
	assert.Equal(t, int64(64<<20), o.HeapBytes)
	assert.Equal(t, 2500*1e6, float64(o.Timeout))
	o, err = Options{HeapBytes: 1 << 20, Timeout: 3e9}.resolve()
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), o.HeapBytes, "an explicit option wins over the environment")
	assert.Equal(t, 3e9, float64(o.Timeout))

	t.Setenv("IRISGEN_HEAP_BYTES", "lots")
	_, err = Options{}.resolve()
	assert.ErrorContains(t, err, "IRISGEN_HEAP_BYTES")
	t.Setenv("IRISGEN_HEAP_BYTES", "")
	t.Setenv("IRISGEN_TIMEOUT", "soon")
	_, err = Options{}.resolve()
	assert.ErrorContains(t, err, "IRISGEN_TIMEOUT")
	t.Setenv("IRISGEN_TIMEOUT", "")

	// CopyStreams: 0 (the world size) unless the environment says; the
	// option wins; 1 to MaxWorld.
	t.Setenv("IRISGEN_COPY_STREAMS", "")
	o, err = Options{}.resolve()
	require.NoError(t, err)
	assert.Equal(t, 0, o.CopyStreams)
	t.Setenv("IRISGEN_COPY_STREAMS", "1")
	o, err = Options{}.resolve()
	require.NoError(t, err)
	assert.Equal(t, 1, o.CopyStreams)
	o, err = Options{CopyStreams: 4}.resolve()
	require.NoError(t, err)
	assert.Equal(t, 4, o.CopyStreams, "an explicit option wins over the environment")
	for _, v := range []string{"0", "9", "many"} {
		t.Setenv("IRISGEN_COPY_STREAMS", v)
		_, err = Options{}.resolve()
		assert.ErrorContains(t, err, "IRISGEN_COPY_STREAMS="+`"`+v+`": want 1`, v)
	}
	t.Setenv("IRISGEN_COPY_STREAMS", "")
	for _, n := range []int{-1, MaxWorld + 1} {
		_, err = Options{CopyStreams: n}.resolve()
		assert.ErrorContains(t, err, "Options.CopyStreams", n)
	}
}

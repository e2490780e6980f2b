package gpu_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
)

// plainDevice is a device without gpu.DependentLauncher, as HIP's is: the
// embedded interface promotes only gpu.Device's methods.
type plainDevice struct{ gpu.Device }

// gpu.LaunchDependent takes the device's programmatic launch where it has
// one and its plain Launch elsewhere, with the same arguments either way; a
// device that has one launches a dependent only where it does them.
func TestLaunchDependent(t *testing.T) {
	for _, c := range []struct {
		name       string
		on, hidden bool
		want       bool
	}{
		{"no DependentLauncher (HIP)", true, true, false},
		{"DependentLauncher, off (IRISGEN_PDL=0, below sm_90)", false, false, false},
		{"DependentLauncher, on", true, false, true},
	} {
		p := fakegpu.New(1)
		p.SetDependentLaunches(c.on)
		d, err := p.Open(0)
		require.NoError(t, err)
		p.AddModule([]byte("img"), []string{"k"}, nil)
		m, err := d.LoadModule([]byte("img"))
		require.NoError(t, err)
		f, err := d.Function(m, "k")
		require.NoError(t, err)
		s, err := d.NewStream()
		require.NoError(t, err)
		if c.hidden {
			d = plainDevice{d}
		}
		grid, block := gpu.Dim3{X: 3, Y: 1, Z: 1}, gpu.Dim3{X: 64, Y: 1, Z: 1}
		require.NoError(t, gpu.LaunchDependent(d, f, grid, block, 0, s, []byte{7}), c.name)
		ls := p.Launches()
		require.Len(t, ls, 1, c.name)
		l := ls[0]
		assert.Equal(t, c.want, l.Dependent, c.name)
		assert.Equal(t, "k", l.Function, c.name)
		assert.Equal(t, grid, l.Grid, c.name)
		assert.Equal(t, block, l.Block, c.name)
		assert.Equal(t, s, l.Stream, c.name)
		assert.Equal(t, []byte{7}, l.Args, c.name)
	}
}

// valueRecorder is a Device without a batch of stream memory operations:
// it records its WriteValue32 and WaitValue32 calls.
type valueRecorder struct {
	gpu.Device
	calls []string
}

func (v *valueRecorder) WriteValue32(dst gpu.DevicePtr, x uint32, s gpu.Stream) error {
	v.calls = append(v.calls, fmt.Sprintf("write %#x %d", uint64(dst), x))
	return nil
}

func (v *valueRecorder) WaitValue32(dst gpu.DevicePtr, x uint32, s gpu.Stream) error {
	v.calls = append(v.calls, fmt.Sprintf("wait %#x %d", uint64(dst), x))
	return nil
}

// batcher is one with a batch: it records the batch whole.
type batcher struct {
	valueRecorder
	batches [][]gpu.ValueOp
}

func (b *batcher) ValueOps(ops []gpu.ValueOp, s gpu.Stream) error {
	b.batches = append(b.batches, append([]gpu.ValueOp(nil), ops...))
	return nil
}

// TestValueOps: a batch goes whole to a ValueBatcher, and one call an
// operation, in order, to any other Device.
func TestValueOps(t *testing.T) {
	ops := []gpu.ValueOp{{Dst: 0x40, Value: 1}, {Dst: 0x44, Value: 1, Wait: true}, {Dst: 0x44}}
	var plain valueRecorder
	require.NoError(t, gpu.ValueOps(&plain, ops, 7))
	assert.Equal(t, []string{"write 0x40 1", "wait 0x44 1", "write 0x44 0"}, plain.calls)
	var b batcher
	require.NoError(t, gpu.ValueOps(&b, ops, 7))
	assert.Equal(t, [][]gpu.ValueOp{ops}, b.batches)
	assert.Empty(t, b.calls, "a batcher's batch makes no single calls")
}

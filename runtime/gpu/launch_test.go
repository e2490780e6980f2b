package gpu_test

import (
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

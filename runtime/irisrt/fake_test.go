package irisrt

import (
	"testing"
	"time"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/stretchr/testify/require"
)

func gpuPtr(n int64) gpu.DevicePtr { return gpu.DevicePtr(n) }

// newFakeWorld makes an in-process world on a fresh fake platform of n GPUs.
func newFakeWorld(t *testing.T, n int, opts Options) *World {
	t.Helper()
	if opts.Platform == nil {
		opts.Platform = fakegpu.New(n)
	}
	if opts.HeapBytes == 0 {
		opts.HeapBytes = 1 << 20
	}
	if opts.RendezvousTimeout == 0 {
		opts.RendezvousTimeout = 20 * time.Second
	}
	w, err := NewLocalWorld(n, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, w.Close()) })
	return w
}

func fakeOf(r *Rank) *fakegpu.Platform { return r.opts.Platform.(*fakegpu.Platform) }

package fakegpu

import (
	"sync/atomic"

	"github.com/irisgen/irisgen/runtime/gpu"
)

// Quiet is a fake platform whose kernel launches and device-to-device
// copies only count (Launches, Copies) instead of running, so that
// testing.AllocsPerRun sees the runtime's launch path alone.
type Quiet struct {
	*Platform
	Launches, Copies *atomic.Int64
}

// NewQuiet wraps p.
func NewQuiet(p *Platform) Quiet { return Quiet{p, &atomic.Int64{}, &atomic.Int64{}} }

type quietDevice struct {
	gpu.Device
	p Quiet
}

// Open opens device i of the underlying platform, quietened.
func (p Quiet) Open(i int) (gpu.Device, error) {
	d, err := p.Platform.Open(i)
	return quietDevice{d, p}, err
}

func (d quietDevice) Launch(gpu.Function, gpu.Dim3, gpu.Dim3, uint32, gpu.Stream, []byte) error {
	d.p.Launches.Add(1)
	return nil
}

func (d quietDevice) CopyDtoDAsync(gpu.DevicePtr, gpu.DevicePtr, int64, gpu.Stream) error {
	d.p.Copies.Add(1)
	return nil
}

func (d quietDevice) CanAccessPeer(peer gpu.Device) (bool, error) {
	return d.Device.CanAccessPeer(peer.(quietDevice).Device)
}

func (d quietDevice) EnablePeerAccess(peer gpu.Device) error {
	return d.Device.EnablePeerAccess(peer.(quietDevice).Device)
}

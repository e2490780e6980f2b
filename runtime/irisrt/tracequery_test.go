package irisrt_test

import "github.com/irisgen/irisgen/runtime/gpu"

// StreamQuery completes traceDevice (closed_test.go) as a gpu.Device: a
// world fault's release of copy-engine launches waits for streams with it.
func (d traceDevice) StreamQuery(s gpu.Stream) (bool, error) {
	d.note("StreamQuery")
	return d.d.StreamQuery(s)
}

package irismodel

import (
	"fmt"
	"strings"
)

// Barrier is how a launch is ordered against the peers' launches of the same
// plan. The zero value is BarrierDevice.
type Barrier uint8

// Barrier modes, selectable per launch among those a variant supports.
const (
	// BarrierDevice: the kernel synchronises with its peers through GPU
	// atomics on heap flags; capturable in a graph.
	BarrierDevice Barrier = iota
	// BarrierHost: stream synchronise + CPU rendezvous before and after the
	// kernel; not capturable.
	BarrierHost
	// BarrierNone: no barrier; the caller orders the ranks' launches.
	BarrierNone
)

var barrierNames = [...]string{"device", "host", "none"}

// Barriers lists every mode, in the order of the constants.
func Barriers() []Barrier { return []Barrier{BarrierDevice, BarrierHost, BarrierNone} }

// Valid reports whether b is one of the defined modes.
func (b Barrier) Valid() bool { return int(b) < len(barrierNames) }

// String returns the spec spelling: "device", "host" or "none".
func (b Barrier) String() string {
	if b.Valid() {
		return barrierNames[b]
	}
	return fmt.Sprintf("barrier(%d)", uint8(b))
}

// ParseBarrier parses "device", "host" or "none", case-insensitively.
func ParseBarrier(s string) (Barrier, error) {
	for _, b := range Barriers() {
		if strings.EqualFold(barrierNames[b], s) {
			return b, nil
		}
	}
	return 0, fmt.Errorf("unknown barrier mode %q (want device, host or none)", s)
}

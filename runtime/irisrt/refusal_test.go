package irisrt

import (
	"errors"
	"testing"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/stretchr/testify/assert"
)

// TestRefusalReasons enumerates the reason every kind of refusal carries.
func TestRefusalReasons(t *testing.T) {
	for _, c := range []struct {
		err  error
		want RefusalReason
	}{
		{&DTypeError{}, RefusedDType}, {&ShapeError{}, RefusedShape}, {&PlacementError{}, RefusedPlacement},
		{&AliasError{}, RefusedAlias}, {&AlignmentError{}, RefusedAlignment}, {&LiveError{}, RefusedNotLive},
		{&ParamError{}, RefusedParam}, {&BarrierModeError{}, RefusedBarrierMode}, {&CaptureError{}, RefusedCapture},
		{&InUseError{}, RefusedInUse}, {&ClosedError{}, RefusedClosed}, {&BarrierTimeoutError{}, RefusedWorldFault},
		{&PeerRefusedError{}, RefusedWorldFault}, {&DeviceFaultError{World: true}, RefusedWorldFault},
		{&MismatchError{World: true}, RefusedWorldFault}, {&MismatchError{}, RefusedMismatch},
		{&gpu.Error{Call: "cuLaunchKernel"}, RefusedPlatform}, {errors.New("wrong count"), RefusedOther},
	} {
		got := reasonOf(errors.Join(errors.New("context"), c.err))
		assert.Equal(t, c.want, got, "%T", c.err)
		assert.NotContains(t, got.String(), "RefusalReason(", "%T", c.err)
	}
	assert.Equal(t, "RefusalReason(99)", RefusalReason(99).String())
}

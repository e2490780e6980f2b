package nccl

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestOpenMissing loads from a path that is not a library: the error names
// every library tried and how to point at NCCL; nothing is marked open.
func TestOpenMissing(t *testing.T) {
	if _, err := Open(); err == nil {
		t.Skip("this machine has NCCL: the missing-library path cannot be tried")
	}
	bogus := filepath.Join(t.TempDir(), "libnccl.so.2")
	require.NoError(t, os.WriteFile(bogus, []byte("not an ELF"), 0o644))
	t.Setenv(EnvLibrary, bogus)
	_, err := Open()
	var nf *NotFoundError
	require.True(t, errors.As(err, &nf), "%v", err)
	require.Contains(t, err.Error(), bogus)
	require.Contains(t, err.Error(), "libnccl.so.2")
	require.Contains(t, err.Error(), EnvLibrary)
	require.False(t, Has(SymmetricWindows))
	_, err = Version()
	require.ErrorIs(t, err, errNotOpen)
	_, err = NewID()
	require.ErrorIs(t, err, errNotOpen)
	require.False(t, Has(CopyEngineCollectives))
	_, err = InitRankPolicy(2, ID{}, 0, CTAPolicyZero)
	require.ErrorIs(t, err, errNotOpen)
}

// TestConfigLayout pins the ncclConfig_t prefix passed to
// ncclCommInitRankConfig to nccl.h's (2.27 to 2.29, 64-bit): size_t size,
// two unsigned ints, four ints, a pointer, two ints, a pointer, then
// collnetEnable and CTAPolicy, shrinkShare and nvlsCTAs.
func TestConfigLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the offsets below are a 64-bit ABI's")
	}
	size, at := configLayout()
	require.Equal(t, 72, size)
	require.Equal(t, 60, at)
}

func TestVersionString(t *testing.T) {
	require.Equal(t, "2.28.9", VersionString(22809))
	require.Equal(t, "2.27.3", VersionString(22703))
	require.Equal(t, "2.8.4", VersionString(2804))
}

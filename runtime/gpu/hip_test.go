//go:build !gpu

// The CPU CI's tests of the HIP platform layer against Debian's HIP runtime
// (libamdhip64-5) and headers (libamdhip64-dev): `make test` runs them;
// GPU test binaries (tag gpu) leave them out, GPU machines have no ROCm.

package gpu

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const hipInstall = "install the HIP runtime and headers: apt-get install libamdhip64-5 libamdhip64-dev (hipcc pulls both)"

// TestHIPRuntimeLoads opens the real HIP runtime through the platform
// layer: the library must open, every function hip.go calls must resolve,
// and with no AMD GPU here the load must end in the runtime's own answer to
// hipInit (or hipGetDeviceCount), wrapped in *NoPlatformError, not in a
// crash.
func TestHIPRuntimeLoads(t *testing.T) {
	p, err := load("hip")
	if n, total := hipResolved(); n != total || total < 40 {
		t.Errorf("%d of %d HIP functions resolved", n, total)
	}
	if err == nil {
		// An AMD GPU machine: the platform must work.
		if c, err := p.DeviceCount(); err != nil || c < 1 {
			t.Fatalf("HIP loaded with %d devices, %v", c, err)
		}
		t.Skipf("an AMD GPU is here (%s): the no-device answer is not testable", p.Name())
	}
	var np *NoPlatformError
	if !errors.As(err, &np) || !errors.Is(err, ErrNoPlatform) {
		t.Fatalf("load(hip) = %T %v, want a *NoPlatformError", err, err)
	}
	var he *Error
	if !errors.As(err, &he) {
		t.Fatalf("the HIP runtime did not answer (not found, or a symbol missing?): %v\n%s", err, hipInstall)
	}
	if he.Call != "hipInit" && he.Call != "hipGetDeviceCount" {
		t.Errorf("the runtime refused %s, want hipInit or hipGetDeviceCount: %v", he.Call, he)
	}
	// ROCm answers hipErrorNoDevice, or hipErrorInvalidDevice when there is
	// no /dev/kfd at all (Debian's 5.2 in a container).
	if he.Name != "hipErrorNoDevice" && he.Name != "hipErrorInvalidDevice" {
		t.Errorf("hipInit answered %s (%d), want hipErrorNoDevice or hipErrorInvalidDevice", he.Name, he.Code)
	}
	if !strings.HasPrefix(np.Tried[len(np.Tried)-1].Error(), "libamdhip64.so") {
		t.Errorf("Tried = %q", np.Tried)
	}
	t.Logf("%v", err)
}

// TestHIPDeclarationsMatchHeaders compiles hip_api.h and driver.h after the
// real <hip/hip_runtime_api.h>: every function hip.go calls is assigned to a
// pointer of the type hip_api.h or driver.h's IG_API spells, and every type size and constant is
// compared with the header's, so a wrong name, parameter, return type or
// value is a compile error. A deliberately wrong declaration must fail the
// same way, or the check proves nothing.
func TestHIPDeclarationsMatchHeaders(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Fatalf("no C compiler %q: %v", cc, err)
	}
	// Debian's libamdhip64-dev, else ROCm's.
	inc := ""
	for _, dir := range []string{"/usr/include", os.Getenv("ROCM_PATH") + "/include", "/opt/rocm/include"} {
		if _, err := os.Stat(filepath.Join(dir, "hip", "hip_runtime_api.h")); err == nil {
			inc = dir
			break
		}
	}
	if inc == "" {
		t.Fatalf("no hip/hip_runtime_api.h in /usr/include, $ROCM_PATH/include or /opt/rocm/include: %s", hipInstall)
	}
	header := filepath.Join(inc, "hip", "hip_runtime_api.h")
	pkg, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	check := `#define IGHIP_REAL_HEADER 1
#include <hip/hip_runtime_api.h>
#include "driver.h"
#include "hip_api.h"
#define IGHIP_CHECK(name, params) hipError_t (*const ighip_check_##name) params = name;
#define IGHIP_CHECK_API(cuda, cparams, name, params) IGHIP_CHECK(name, params)
IG_API(IGHIP_CHECK_API)
IGHIP_ONLY(IGHIP_CHECK)
#define IGHIP_STR_CHECK(name, params) const char *(*const ighip_check_##name) params = name;
IGHIP_STR_SYMS(IGHIP_STR_CHECK)
`
	compile := func(src string) ([]byte, error) {
		f := filepath.Join(t.TempDir(), "check.c")
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		// C11 with every incompatible pointer an error: a function of
		// another type cannot initialise the pointer.
		return exec.Command(cc, "-std=c11", "-fsyntax-only", "-Wall", "-Werror", "-Werror=incompatible-pointer-types",
			"-D__HIP_PLATFORM_AMD__", "-I", pkg, "-I", inc, f).CombinedOutput()
	}
	if out, err := compile(check); err != nil {
		t.Fatalf("hip_api.h does not match %s: %v\n%s", header, err, out)
	}
	for name, wrong := range map[string]string{
		"capture mode as int": `hipError_t (*const bad)(hipStream_t, int) = hipStreamBeginCapture;`,
		"missing const":       `hipError_t (*const bad)(hipModule_t *, void *) = hipModuleLoadData;`,
		"wrong value":         `IGHIP_SAME(IG_HOST_ALLOC_MAPPED, hipHostMallocPortable);`,
	} {
		if out, err := compile(check + wrong + "\n"); err == nil {
			t.Errorf("a %s compiles: the check cannot fail\n%s", name, out)
		}
	}
}

//go:build !gpu

// The bindings of driver.h exercised on the CPU against fake CUDA and HIP
// libraries built from the same tables: every Device method reaches the
// library function the table names, after binding its device, with its
// arguments and handles, and the library's errors come back typed. GPU
// test binaries (tag gpu) leave it out: it needs a C compiler at run time.

package gpu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// fakeHeader, fakeCalls and fakeAnswers are a GPU library that logs every
// call into $IG_FAKE_LOG: fakeCalls has one weak function per symbol of the
// tables, which logs its name; fakeAnswers the ones that answer what the
// binding needs (device counts, handles, the names of errors) or log the
// arguments the test looks at, which the linker takes instead.
const fakeHeader = `
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#ifdef FAKE_CUDA
#include "cuda_api.h"
#define R CUresult
#else
#include "hip_api.h"
#define R hipError_t
#endif
#include "driver.h"
void say(const char *fmt, ...);
`

const fakeCalls = fakeHeader + `
#define WEAK(name, params) __attribute__((weak)) R name params { say(#name); return 0; }
#ifdef FAKE_CUDA
#define WEAK_API(cn, cp, hn, hp) WEAK(cn, cp)
IGCU_ONLY(WEAK)
#else
#define WEAK_API(cn, cp, hn, hp) WEAK(hn, hp)
IGHIP_ONLY(WEAK)
#endif
IG_API(WEAK_API)
`

const fakeAnswers = fakeHeader + `
#include <stdarg.h>
void say(const char *fmt, ...) {
	FILE *f = fopen(getenv("IG_FAKE_LOG"), "a");
	if (f == NULL) return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	fclose(f);
}
#ifdef FAKE_CUDA
R cuDeviceGetCount(int *n) { say("cuDeviceGetCount"); *n = 2; return 0; }
R cuDriverGetVersion(int *v) {
	say("cuDriverGetVersion"); *v = getenv("IG_FAKE_DRIVER") ? atoi(getenv("IG_FAKE_DRIVER")) : 12040; return 0;
}
R cuDeviceGet(CUdevice *d, int ordinal) { say("cuDeviceGet %d", ordinal); *d = 10 + ordinal; return 0; }
R cuDeviceGetAttribute(int *v, int attr, CUdevice d) { say("cuDeviceGetAttribute %d %d", attr, d); *v = 9; return 0; }
R cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) { say("cuDevicePrimaryCtxRetain %d", d); *c = (CUcontext)(uintptr_t)(0xC0 + d); return 0; }
R cuCtxSetCurrent(CUcontext c) { say("cuCtxSetCurrent %#lx", (unsigned long)(uintptr_t)c); return 0; }
R cuGetErrorName(CUresult r, const char **s) { *s = "FAKE_ERROR_NAME"; return 0; }
R cuGetErrorString(CUresult r, const char **s) { *s = "fake error"; return 0; }
R cuMemFree_v2(CUdeviceptr p) { say("cuMemFree_v2 %#llx", p); return p == 0xbad ? 2 : 0; }
R cuStreamCreate(CUstream *s, unsigned int flags) { say("cuStreamCreate %u", flags); *s = (CUstream)0x5000; return 0; }
R cuStreamSynchronize(CUstream s) { say("cuStreamSynchronize %#lx", (unsigned long)(uintptr_t)s); return 0; }
// cuStreamQuery: stream 0x600 still works (CUDA_ERROR_NOT_READY), 0xbad is
// no stream (CUDA_ERROR_INVALID_HANDLE), any other is done.
R cuStreamQuery(CUstream s) {
	say("cuStreamQuery %#lx", (unsigned long)(uintptr_t)s);
	return (uintptr_t)s == 0x600 ? 600 : (uintptr_t)s == 0xbad ? 400 : 0;
}
R cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
	say("cuMemsetD32Async %#llx %u %zu %#lx", d, v, n, (unsigned long)(uintptr_t)s); return 0;
}
R cuStreamWriteValue32_v2(CUstream s, CUdeviceptr d, unsigned int v, unsigned int f) {
	say("cuStreamWriteValue32_v2 %#lx %#llx %u %u", (unsigned long)(uintptr_t)s, d, v, f); return 0;
}
R cuStreamWaitValue32_v2(CUstream s, CUdeviceptr d, unsigned int v, unsigned int f) {
	say("cuStreamWaitValue32_v2 %#lx %#llx %u %u", (unsigned long)(uintptr_t)s, d, v, f); return 0;
}
R cuStreamBatchMemOp_v2(CUstream s, unsigned int n, IGCU_BatchMemOpParams *p, unsigned int f) {
	char b[512]; int k = snprintf(b, sizeof b, "cuStreamBatchMemOp_v2 %#lx %u %u", (unsigned long)(uintptr_t)s, n, f);
	for (unsigned int i = 0; i < n && k < (int)sizeof b; i++)
		k += snprintf(b + k, sizeof b - k, " [%d %#llx %u %u]", p[i].op.operation, p[i].op.address, p[i].op.value, p[i].op.flags);
	say("%s", b); return 0;
}
R cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice p) { say("cuDeviceCanAccessPeer %d %d", d, p); *can = 1; return 0; }
R cuCtxEnablePeerAccess(CUcontext p, unsigned int f) { say("cuCtxEnablePeerAccess %#lx", (unsigned long)(uintptr_t)p); return 704; }
R cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { say("cuEventElapsedTime_v2"); *ms = 1.5f; return 0; }
R cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
		unsigned int bz, unsigned int sh, CUstream s, void **kp, void **ex) {
	say("cuLaunchKernel %u %u %u %d", gx, bx, sh, kp ? *(int *)kp[0] : -1); return 0;
}
R cuLaunchKernelEx(const IGCU_LaunchConfig *c, CUfunction f, void **kp, void **ex) {
	say("cuLaunchKernelEx %u %u %d %d", c->gridDimX, c->blockDimX, c->attrs[0].id, kp ? *(int *)kp[0] : -1); return 0;
}
#else
R hipGetDeviceCount(int *n) { say("hipGetDeviceCount"); *n = 2; return 0; }
R hipSetDevice(int d) { say("hipSetDevice %d", d); return 0; }
const char *hipGetErrorName(hipError_t r) { return "FAKE_ERROR_NAME"; }
const char *hipGetErrorString(hipError_t r) { return "fake error"; }
R hipFree(void *p) { say("hipFree %#lx", (unsigned long)(uintptr_t)p); return (uintptr_t)p == 0xbad ? 2 : 0; }
R hipStreamCreateWithFlags(hipStream_t *s, unsigned int flags) { say("hipStreamCreateWithFlags %u", flags); *s = (hipStream_t)0x5000; return 0; }
R hipStreamSynchronize(hipStream_t s) { say("hipStreamSynchronize %#lx", (unsigned long)(uintptr_t)s); return 0; }
// hipStreamQuery: as cuStreamQuery (hipErrorNotReady, hipErrorInvalidHandle).
R hipStreamQuery(hipStream_t s) {
	say("hipStreamQuery %#lx", (unsigned long)(uintptr_t)s);
	return (uintptr_t)s == 0x600 ? 600 : (uintptr_t)s == 0xbad ? 400 : 0;
}
R hipMemsetD32Async(hipDeviceptr_t d, int v, size_t n, hipStream_t s) {
	say("hipMemsetD32Async %#lx %u %zu %#lx", (unsigned long)(uintptr_t)d, (unsigned)v, n, (unsigned long)(uintptr_t)s); return 0;
}
R hipStreamWriteValue32(hipStream_t s, void *d, uint32_t v, unsigned int f) {
	say("hipStreamWriteValue32 %#lx %#lx %u %u", (unsigned long)(uintptr_t)s, (unsigned long)(uintptr_t)d, v, f); return 0;
}
R hipStreamWaitValue32(hipStream_t s, void *d, uint32_t v, unsigned int f, uint32_t m) {
	say("hipStreamWaitValue32 %#lx %#lx %u %u %#x", (unsigned long)(uintptr_t)s, (unsigned long)(uintptr_t)d, v, f, m); return 0;
}
R hipDeviceCanAccessPeer(int *can, int d, int p) { say("hipDeviceCanAccessPeer %d %d", d, p); *can = 1; return 0; }
R hipDeviceEnablePeerAccess(int p, unsigned int f) { say("hipDeviceEnablePeerAccess %d", p); return 704; }
R hipEventElapsedTime(float *ms, hipEvent_t a, hipEvent_t b) { say("hipEventElapsedTime"); *ms = 1.5f; return 0; }
R hipExtMallocWithFlags(void **p, size_t n, unsigned int flags) {
	say("hipExtMallocWithFlags %zu %u", n, flags); *p = (void *)0xd000; return flags == 3 ? 1 : 0;
}
R hipModuleLaunchKernel(hipFunction_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
		unsigned int by, unsigned int bz, unsigned int sh, hipStream_t s, void **kp, void **ex) {
	say("hipModuleLaunchKernel %u %u %u %d", gx, bx, sh, kp ? *(int *)kp[0] : -1); return 0;
}
#endif
`

// fakeBinding builds the fake library of binding name and returns the
// binding loading it, and the file its calls are logged into; cflags go to
// the C compiler.
func fakeBinding(t *testing.T, name string, cflags ...string) (binding, string) {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	pkg, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "libfake"+name+".so")
	var srcs []string
	for i, src := range []string{fakeCalls, fakeAnswers} {
		srcs = append(srcs, filepath.Join(dir, fmt.Sprintf("fake%d.c", i)))
		if err := os.WriteFile(srcs[i], []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append(append([]string{"-shared", "-fPIC", "-o", lib, "-DFAKE_" + strings.ToUpper(name), "-I", pkg}, cflags...), srcs...)
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the fake %s library: %v\n%s", name, err, out)
	}
	log := filepath.Join(dir, "calls.log")
	t.Setenv("IG_FAKE_LOG", log)
	b := bindings[name]
	b.libraries = []string{lib}
	return b, log
}

// calls returns the calls logged since the last time, and forgets them.
func calls(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	_ = os.Remove(log)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestBindings(t *testing.T) {
	for _, name := range []string{"cuda", "hip"} {
		t.Run(name, func(t *testing.T) {
			b, log := fakeBinding(t, name)
			t.Setenv(EnvPDL, "")
			p, why := b.load()
			if p == nil {
				t.Fatalf("the fake %s library does not load: %v", name, why)
			}
			init := map[string][]string{"cuda": {"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDriverGetVersion"}, "hip": {"hipInit", "hipGetDeviceCount"}}[name]
			if got := calls(t, log); strings.Join(got, ",") != strings.Join(init, ",") {
				t.Errorf("loading called %q, want %q", got, init)
			}
			d0, err := p.Open(0)
			if err != nil {
				t.Fatal(err)
			}
			d1, err := p.Open(1)
			if err != nil {
				t.Fatal(err)
			}
			calls(t, log)
			// bind is how each library makes device 0 current: its
			// primary context (0xC0 + CUdevice 10), or its ordinal.
			bind := map[string]string{"cuda": "cuCtxSetCurrent 0xca", "hip": "hipSetDevice 0"}[name]
			args := []byte{42, 0, 0, 0}
			host := make([]byte, 8)
			cases := []struct {
				do        func() error
				cuda, hip []string // after the bind
				noBind    bool
			}{
				{func() error { _, err := d0.Alloc(64, false); return err }, []string{"cuMemAlloc_v2"}, []string{"hipMalloc"}, false},
				{func() error { _, err := d0.Alloc(64, true); return err }, []string{"cuMemAlloc_v2"},
					[]string{"hipExtMallocWithFlags 64 3", "hipExtMallocWithFlags 64 1"}, false}, // uncached, else fine-grained
				{func() error { return d0.Free(0x1234) }, []string{"cuMemFree_v2 0x1234"}, []string{"hipFree 0x1234"}, false},
				{func() error { _, _, err := d0.AllocHostMapped(64); return err }, []string{"cuMemHostAlloc", "cuMemHostGetDevicePointer_v2"},
					[]string{"hipHostMalloc", "hipHostGetDevicePointer"}, false},
				{func() error { return d0.FreeHost(unsafe.Pointer(&host[0])) }, []string{"cuMemFreeHost"}, []string{"hipHostFree"}, false},
				{func() error { return d0.CopyHtoD(0x10, unsafe.Pointer(&host[0]), 8) }, []string{"cuMemcpyHtoD_v2", "cuStreamSynchronize 0x1"},
					[]string{"hipMemcpyHtoD", "hipStreamSynchronize 0"}, false}, // the legacy (null) stream
				{func() error { return d0.CopyDtoH(unsafe.Pointer(&host[0]), 0x10, 8) }, []string{"cuMemcpyDtoH_v2"}, []string{"hipMemcpyDtoH"}, false},
				{func() error { return d0.CopyDtoDAsync(0x10, 0x20, 8, 7) }, []string{"cuMemcpyDtoDAsync_v2"}, []string{"hipMemcpyDtoDAsync"}, false},
				{func() error { return d0.CopyHtoDAsync(0x10, unsafe.Pointer(&host[0]), 8, 7) }, []string{"cuMemcpyHtoDAsync_v2"}, []string{"hipMemcpyHtoDAsync"}, false},
				{func() error { return d0.CopyDtoHAsync(unsafe.Pointer(&host[0]), 0x10, 8, 7) }, []string{"cuMemcpyDtoHAsync_v2"}, []string{"hipMemcpyDtoHAsync"}, false},
				{func() error { return d0.MemsetD8Async(0x10, 1, 8, 7) }, []string{"cuMemsetD8Async"}, []string{"hipMemsetD8Async"}, false},
				{func() error { return d0.MemsetD32Async(0x10, 0xdeadbeef, 3, 7) }, []string{"cuMemsetD32Async 0x10 3735928559 3 0x7"},
					[]string{"hipMemsetD32Async 0x10 3735928559 3 0x7"}, false},
				// The stream memory operations: GEQ (0) waits, writes with
				// the default memory barrier (0), the whole word compared.
				{func() error { return d0.WriteValue32(0x40, 1, 7) }, []string{"cuStreamWriteValue32_v2 0x7 0x40 1 0"},
					[]string{"hipStreamWriteValue32 0x7 0x40 1 0"}, false},
				{func() error { return d0.WaitValue32(0x44, 1, 7) }, []string{"cuStreamWaitValue32_v2 0x7 0x44 1 0"},
					[]string{"hipStreamWaitValue32 0x7 0x44 1 0 0xffffffff"}, false},
				// A batch: one cuStreamBatchMemOp on CUDA (write 2, wait 1,
				// in order, the same flags), one call each on HIP.
				{func() error {
					return ValueOps(d0, []ValueOp{{Dst: 0x40, Value: 1}, {Dst: 0x44, Value: 1, Wait: true}, {Dst: 0x44}}, 7)
				}, []string{"cuStreamBatchMemOp_v2 0x7 3 0 [2 0x40 1 0] [1 0x44 1 0] [2 0x44 0 0]"},
					[]string{"hipStreamWriteValue32 0x7 0x40 1 0", "hipStreamWaitValue32 0x7 0x44 1 0 0xffffffff", "hipStreamWriteValue32 0x7 0x44 0 0"}, false},
				{func() error { return d0.(ThreadBinder).BindThread() }, nil, nil, false},
				{d0.Synchronize, []string{"cuCtxSynchronize"}, []string{"hipDeviceSynchronize"}, false},
				{func() error {
					s, err := d0.NewStream()
					if err == nil && s != 0x5000 {
						t.Errorf("NewStream = %#x, want the library's 0x5000", s)
					}
					return err
				}, []string{"cuStreamCreate 1"}, []string{"hipStreamCreateWithFlags 1"}, false}, // non-blocking
				{func() error { return d0.DestroyStream(7) }, []string{"cuStreamDestroy_v2"}, []string{"hipStreamDestroy"}, false},
				{func() error { return d0.StreamSynchronize(0x5000) }, []string{"cuStreamSynchronize 0x5000"}, []string{"hipStreamSynchronize 0x5000"}, false},
				// A query: done, not ready (no error), and a library error.
				{func() error {
					done, err := d0.StreamQuery(0x5000)
					if err == nil && !done {
						t.Error("StreamQuery of a finished stream: not done")
					}
					return err
				}, []string{"cuStreamQuery 0x5000"}, []string{"hipStreamQuery 0x5000"}, false},
				{func() error {
					done, err := d0.StreamQuery(0x600)
					if err == nil && done {
						t.Error("StreamQuery of a stream still working: done")
					}
					return err
				}, []string{"cuStreamQuery 0x600"}, []string{"hipStreamQuery 0x600"}, false},
				{func() error {
					done, err := d0.StreamQuery(0xbad)
					var e *Error
					if !errors.As(err, &e) || e.Code != 400 || done {
						t.Errorf("StreamQuery(0xbad) = %v, %#v: want the library's error", done, err)
					}
					return nil
				}, []string{"cuStreamQuery 0xbad"}, []string{"hipStreamQuery 0xbad"}, false},
				{func() error { _, err := d0.NewEvent(false); return err }, []string{"cuEventCreate"}, []string{"hipEventCreateWithFlags"}, false},
				{func() error { return d0.DestroyEvent(3) }, []string{"cuEventDestroy_v2"}, []string{"hipEventDestroy"}, false},
				{func() error { return d0.RecordEvent(3, 7) }, []string{"cuEventRecord"}, []string{"hipEventRecord"}, false},
				{func() error { return d0.SynchronizeEvent(3) }, []string{"cuEventSynchronize"}, []string{"hipEventSynchronize"}, false},
				{func() error { return d0.(EventWaiter).WaitEvent(7, 3) }, []string{"cuStreamWaitEvent"}, []string{"hipStreamWaitEvent"}, false},
				{func() error {
					ms, err := d0.Elapsed(3, 4)
					if err == nil && ms.Microseconds() != 1500 {
						t.Errorf("Elapsed = %v, want 1.5ms", ms)
					}
					return err
				}, []string{"cuEventElapsedTime_v2"}, []string{"hipEventElapsedTime"}, false},
				{func() error { _, err := d0.LoadModule([]byte("image")); return err }, []string{"cuModuleLoadData"}, []string{"hipModuleLoadData"}, false},
				{func() error { return d0.UnloadModule(5) }, []string{"cuModuleUnload"}, []string{"hipModuleUnload"}, false},
				{func() error { _, err := d0.Function(5, "k"); return err }, []string{"cuModuleGetFunction"}, []string{"hipModuleGetFunction"}, false},
				{func() error { _, _, err := d0.Global(5, "g"); return err }, []string{"cuModuleGetGlobal_v2"}, []string{"hipModuleGetGlobal"}, false},
				{func() error { return d0.Launch(6, Dim3{2, 1, 1}, Dim3{64, 1, 1}, 0, 7, args) }, []string{"cuLaunchKernel 2 64 0 42"},
					[]string{"hipModuleLaunchKernel 2 64 0 42"}, false},
				{func() error { return LaunchDependent(d0, 6, Dim3{2, 1, 1}, Dim3{64, 1, 1}, 0, 7, args) },
					[]string{"cuLaunchKernelEx 2 64 6 42"}, // sm_90, CUDA 12.4: programmatic stream serialization
					[]string{"hipModuleLaunchKernel 2 64 0 42"}, false},
				{func() error {
					can, err := d0.CanAccessPeer(d1)
					if err == nil && !can {
						t.Error("CanAccessPeer = false")
					}
					return err
				}, []string{"cuDeviceCanAccessPeer 10 11"}, []string{"hipDeviceCanAccessPeer 0 1"}, true},
				{func() error { return d0.EnablePeerAccess(d1) }, []string{"cuCtxEnablePeerAccess 0xcb"}, []string{"hipDeviceEnablePeerAccess 1"}, false}, // already enabled: no error
				{func() error { _, err := d0.IPCGetHandle(0x10); return err }, []string{"cuIpcGetMemHandle"}, []string{"hipIpcGetMemHandle"}, false},
				{func() error { _, err := d0.IPCOpenHandle(IPCHandle{}); return err }, []string{"cuIpcOpenMemHandle_v2"}, []string{"hipIpcOpenMemHandle"}, false},
				{func() error { return d0.IPCCloseHandle(0x10) }, []string{"cuIpcCloseMemHandle"}, []string{"hipIpcCloseMemHandle"}, false},
				{func() error { return d0.BeginCapture(7, CaptureRelaxed) }, []string{"cuStreamBeginCapture_v2"}, []string{"hipStreamBeginCapture"}, false},
				{func() error { _, err := d0.EndCapture(7); return err }, []string{"cuStreamEndCapture"}, []string{"hipStreamEndCapture"}, false},
				{func() error { _, err := d0.CaptureStatus(7); return err }, []string{"cuStreamIsCapturing"}, []string{"hipStreamIsCapturing"}, false},
				{func() error { _, err := d0.Instantiate(8); return err }, []string{"cuGraphInstantiateWithFlags"}, []string{"hipGraphInstantiate"}, false},
				{func() error { return d0.LaunchGraph(9, 7) }, []string{"cuGraphLaunch"}, []string{"hipGraphLaunch"}, false},
				{func() error { return d0.DestroyGraph(8) }, []string{"cuGraphDestroy"}, []string{"hipGraphDestroy"}, false},
				{func() error { return d0.DestroyGraphExec(9) }, []string{"cuGraphExecDestroy"}, []string{"hipGraphExecDestroy"}, false},
			}
			for i, c := range cases {
				err := c.do()
				want := map[string][]string{"cuda": c.cuda, "hip": c.hip}[name]
				if !c.noBind {
					want = append([]string{bind}, want...)
				}
				if got := calls(t, log); err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("case %d: %v; called %q, want %q", i, err, got, want)
				}
			}
			if d0.(DependentLauncher).DependentLaunches() != (name == "cuda") {
				t.Errorf("DependentLaunches = %v", !(name == "cuda"))
			}
			// A library's error is an *Error named by the library.
			err = d0.Free(0xbad)
			var e *Error
			free := map[string]string{"cuda": "cuMemFree_v2", "hip": "hipFree"}[name]
			if !errors.As(err, &e) || *e != (Error{Call: free, Code: 2, Name: "FAKE_ERROR_NAME", Desc: "fake error"}) {
				t.Errorf("Free(0xbad) = %#v", err)
			}
			// IRISGEN_PDL=0 turns dependent launches off; another value is
			// an error (CUDA: the only library that launches them).
			for v, off := range map[string]bool{"0": true, "false": true, "1": false, "bogus": false} {
				t.Setenv(EnvPDL, v)
				p, why := b.load()
				if name == "hip" || v != "bogus" {
					d, err := p.Open(0)
					if err != nil {
						t.Fatal(err)
					}
					if got := d.(DependentLauncher).DependentLaunches(); got != (name == "cuda" && !off) {
						t.Errorf("%s=%s: DependentLaunches = %v", EnvPDL, v, got)
					}
				} else if p != nil || len(why) == 0 || !strings.Contains(why[0].Error(), EnvPDL) {
					t.Errorf("%s=bogus: %v %v", EnvPDL, p, why)
				}
			}
			t.Setenv(EnvPDL, "")
			// Stream memory operations store into peers' memory on CUDA
			// drivers before 13.1 and on HIP, unless IRISGEN_PEER_WRITES
			// is 0; another value is an error.
			for _, c := range []struct {
				driver, env string
				want        bool
			}{
				{"12040", "", true}, {"13000", "", true}, {"13010", "", name == "hip"}, {"13020", "1", name == "hip"},
				{"12040", "0", false}, {"12040", "false", false}, {"12040", "bogus", false},
			} {
				t.Setenv("IG_FAKE_DRIVER", c.driver)
				t.Setenv(EnvPeerWrites, c.env)
				p, why := b.load()
				if c.env == "bogus" {
					if p != nil || len(why) == 0 || !strings.Contains(why[0].Error(), EnvPeerWrites) {
						t.Errorf("%s=bogus: %v %v", EnvPeerWrites, p, why)
					}
					continue
				}
				if p == nil {
					t.Fatalf("driver %s, %s=%q: %v", c.driver, EnvPeerWrites, c.env, why)
				}
				d, err := p.Open(0)
				if err != nil {
					t.Fatal(err)
				}
				if got := PeerValueWrites(d); got != c.want {
					t.Errorf("driver %s, %s=%q: PeerValueWrites = %v, want %v", c.driver, EnvPeerWrites, c.env, got, c.want)
				}
			}
		})
	}
}

// TestBindingsNeedStreamQuery: a library without the stream query (its
// symbol renamed away) does not load; the error names the missing symbol,
// as for every function of driver.h's table.
func TestBindingsNeedStreamQuery(t *testing.T) {
	for name, sym := range map[string]string{"cuda": "cuStreamQuery", "hip": "hipStreamQuery"} {
		t.Run(name, func(t *testing.T) {
			b, _ := fakeBinding(t, name, "-D"+sym+"=igfake_renamed_query")
			p, why := b.load()
			if p != nil || len(why) == 0 || !strings.Contains(why[0].Error(), "missing symbol "+sym) {
				t.Errorf("load = %v, %v: want it to fail on the missing symbol %s", p, why, sym)
			}
			// The table's functions are the process's: load them all again
			// for the tests after this one.
			if b, _ := fakeBinding(t, name); b.table != nil {
				if p, why := b.load(); p == nil {
					t.Fatalf("the whole fake %s library does not load: %v", name, why)
				}
			}
		})
	}
}

package gpu

/*
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The HIP runtime API the platform layer calls, with HIP's own types and
// values, declared in hip_api.h and checked against hip_runtime_api.h by
// hip_test.go.
#include "hip_api.h"

#define IGHIP_DECL(name, params) static hipError_t (*ighip_##name) params;
IGHIP_SYMS(IGHIP_DECL)
#define IGHIP_STR_DECL(name, params) static const char *(*ighip_##name) params;
IGHIP_STR_SYMS(IGHIP_STR_DECL)

// ighip_open loads the HIP runtime; *opened tells whether dlopen worked.
static const char *ighip_open(const char *lib, int *opened) {
	*opened = 0;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		return e ? e : "dlopen failed";
	}
	*opened = 1;
#define IGHIP_LOAD(name, params) \
	ighip_##name = (hipError_t (*) params)dlsym(h, #name); \
	if (ighip_##name == NULL) return "missing symbol " #name;
	IGHIP_SYMS(IGHIP_LOAD)
#define IGHIP_STR_LOAD(name, params) \
	ighip_##name = (const char *(*) params)dlsym(h, #name); \
	if (ighip_##name == NULL) return "missing symbol " #name;
	IGHIP_STR_SYMS(IGHIP_STR_LOAD)
	return NULL;
}

// ighip_resolved counts the functions of both lists that are loaded, out
// of *total.
static int ighip_resolved(int *total) {
	int n = 0;
	*total = 0;
#define IGHIP_COUNT(name, params) (*total)++; if (ighip_##name != NULL) n++;
	IGHIP_SYMS(IGHIP_COUNT)
	IGHIP_STR_SYMS(IGHIP_COUNT)
	return n;
}

// Each wrapper selects the device and makes its call in one C call, so the
// goroutine cannot move to another OS thread in between (the current device
// is per thread).
#define IGHIP_BIND(dev) do { \
	hipError_t r_ = ighip_hipSetDevice(dev); \
	if (r_ != 0) { *call = "hipSetDevice"; return r_; } \
} while (0)
#define IGHIP_CALL(name, args) (*call = #name, ighip_##name args)

static hipError_t ighip_init(int *count, const char **call) {
	hipError_t r = IGHIP_CALL(hipInit, (0));
	if (r != 0) return r;
	return IGHIP_CALL(hipGetDeviceCount, (count));
}

static void ighip_error(hipError_t code, const char **name, const char **desc) {
	*name = ighip_hipGetErrorName(code);
	*desc = ighip_hipGetErrorString(code);
}

// ighip_alloc: fine asks for memory that kernels on several GPUs read, write
// and update atomically at once (the heap: barrier flags, epochs, locks and
// the tensors peers write). hipMalloc memory is coarse-grained, "up-to-date
// only after synchronization" (HIP documentation, Memory management >
// Coherence control); hipExtMallocWithFlags gives fine-grained memory with
// hipDeviceMallocFinegrained and uncached memory with hipDeviceMallocUncached
// (HIP runtime API reference, hipExtMallocWithFlags). Uncached is what
// RCCL's tests (ROCm/rccl-tests#95) and vLLM's ROCm custom all-reduce
// (allocate_meta_buffer) use for memory other GPUs signal in during a
// kernel, and what the AMD side of the device header assumes: one_shot_lamport
// relies on plain stores becoming visible to peers by themselves.
// hipMallocSignalMemory is no heap: one 8-byte HSA signal. The uncached flag
// exists since ROCm 5.7; an older runtime answers hipErrorInvalidValue and
// gets fine-grained memory, what RCCL used before.
static hipError_t ighip_alloc(int dev, size_t n, int fine, uintptr_t *p, const char **call) {
	IGHIP_BIND(dev);
	void *ptr = NULL;
	hipError_t r;
	if (fine) {
		r = IGHIP_CALL(hipExtMallocWithFlags, (&ptr, n, IGHIP_DEVICE_MALLOC_UNCACHED));
		if (r == IGHIP_ERROR_INVALID_VALUE)
			r = IGHIP_CALL(hipExtMallocWithFlags, (&ptr, n, IGHIP_DEVICE_MALLOC_FINEGRAINED));
	} else {
		r = IGHIP_CALL(hipMalloc, (&ptr, n));
	}
	*p = (uintptr_t)ptr;
	return r;
}

static hipError_t ighip_free(int dev, uintptr_t p, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipFree, ((void *)p));
}

// ighip_host_alloc: pinned host memory mapped into the device, for the error
// record kernels write. With hipHostMallocMapped it is fine-grained whatever
// HIP_HOST_COHERENT says (Coherence control, note on hipHostMalloc), so a
// kernel's system-scope release makes the record visible to the host.
static hipError_t ighip_host_alloc(int dev, size_t n, void **host, uintptr_t *d, const char **call) {
	IGHIP_BIND(dev);
	hipError_t r = IGHIP_CALL(hipHostMalloc, (host, n, IGHIP_HOST_MALLOC_MAPPED | IGHIP_HOST_MALLOC_PORTABLE));
	if (r != 0) return r;
	void *dp = NULL;
	r = IGHIP_CALL(hipHostGetDevicePointer, (&dp, *host, 0));
	if (r != 0) {
		ighip_hipHostFree(*host);
		*host = NULL;
	}
	*d = (uintptr_t)dp;
	return r;
}

static hipError_t ighip_host_free(int dev, void *host, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipHostFree, (host));
}

// ighip_htod returns once the bytes are in device memory: as on CUDA (see
// igcu_htod), a copy from pageable memory may return while its DMA is in
// flight, so it waits for the null stream that ran it.
static hipError_t ighip_htod(int dev, uintptr_t dst, void *src, size_t n, const char **call) {
	IGHIP_BIND(dev);
	hipError_t r = IGHIP_CALL(hipMemcpyHtoD, ((hipDeviceptr_t)dst, src, n));
	if (r != 0) return r;
	return IGHIP_CALL(hipStreamSynchronize, ((hipStream_t)0));
}

static hipError_t ighip_dtoh(int dev, void *dst, uintptr_t src, size_t n, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipMemcpyDtoH, (dst, (hipDeviceptr_t)src, n));
}

static hipError_t ighip_dtod_async(int dev, uintptr_t dst, uintptr_t src, size_t n, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipMemcpyDtoDAsync, ((hipDeviceptr_t)dst, (hipDeviceptr_t)src, n, (hipStream_t)s));
}

static hipError_t ighip_htod_async(int dev, uintptr_t dst, void *src, size_t n, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipMemcpyHtoDAsync, ((hipDeviceptr_t)dst, src, n, (hipStream_t)s));
}

static hipError_t ighip_dtoh_async(int dev, void *dst, uintptr_t src, size_t n, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipMemcpyDtoHAsync, (dst, (hipDeviceptr_t)src, n, (hipStream_t)s));
}

static hipError_t ighip_memset_async(int dev, uintptr_t dst, unsigned char v, size_t n, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipMemsetD8Async, ((hipDeviceptr_t)dst, v, n, (hipStream_t)s));
}

static hipError_t ighip_memset32_async(int dev, uintptr_t dst, unsigned int v, size_t n, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipMemsetD32Async, ((hipDeviceptr_t)dst, (int)v, n, (hipStream_t)s));
}

static hipError_t ighip_sync(int dev, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipDeviceSynchronize, ());
}

static hipError_t ighip_stream_create(int dev, uintptr_t *s, const char **call) {
	IGHIP_BIND(dev);
	hipStream_t st = NULL;
	hipError_t r = IGHIP_CALL(hipStreamCreateWithFlags, (&st, IGHIP_STREAM_NON_BLOCKING));
	*s = (uintptr_t)st;
	return r;
}

static hipError_t ighip_stream_destroy(int dev, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipStreamDestroy, ((hipStream_t)s));
}

static hipError_t ighip_stream_sync(int dev, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipStreamSynchronize, ((hipStream_t)s));
}

static hipError_t ighip_event_create(int dev, int timing, uintptr_t *e, const char **call) {
	IGHIP_BIND(dev);
	hipEvent_t ev = NULL;
	hipError_t r = IGHIP_CALL(hipEventCreateWithFlags, (&ev, timing ? 0 : IGHIP_EVENT_DISABLE_TIMING));
	*e = (uintptr_t)ev;
	return r;
}

static hipError_t ighip_event_destroy(int dev, uintptr_t e, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipEventDestroy, ((hipEvent_t)e));
}

static hipError_t ighip_event_record(int dev, uintptr_t e, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipEventRecord, ((hipEvent_t)e, (hipStream_t)s));
}

static hipError_t ighip_event_sync(int dev, uintptr_t e, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipEventSynchronize, ((hipEvent_t)e));
}

static hipError_t ighip_event_elapsed(int dev, uintptr_t a, uintptr_t b, float *ms, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipEventElapsedTime, (ms, (hipEvent_t)a, (hipEvent_t)b));
}

// ighip_module_load: image is one code object or an offload bundle of them
// (hipModuleLoadData: "either a single code object or a fat binary"); from a
// bundle the runtime loads the code object of the device's ISA.
static hipError_t ighip_module_load(int dev, const void *image, uintptr_t *m, const char **call) {
	IGHIP_BIND(dev);
	hipModule_t mod = NULL;
	hipError_t r = IGHIP_CALL(hipModuleLoadData, (&mod, image));
	*m = (uintptr_t)mod;
	return r;
}

static hipError_t ighip_module_unload(int dev, uintptr_t m, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipModuleUnload, ((hipModule_t)m));
}

static hipError_t ighip_function(int dev, uintptr_t m, const char *name, uintptr_t *f, const char **call) {
	IGHIP_BIND(dev);
	hipFunction_t fn = NULL;
	hipError_t r = IGHIP_CALL(hipModuleGetFunction, (&fn, (hipModule_t)m, name));
	*f = (uintptr_t)fn;
	return r;
}

static hipError_t ighip_global(int dev, uintptr_t m, const char *name, uintptr_t *p, size_t *bytes, const char **call) {
	IGHIP_BIND(dev);
	hipDeviceptr_t dp = NULL;
	hipError_t r = IGHIP_CALL(hipModuleGetGlobal, (&dp, bytes, (hipModule_t)m, name));
	*p = (uintptr_t)dp;
	return r;
}

// One by-value struct parameter: kernelParams holds one pointer to a C copy
// of its bytes.
static hipError_t ighip_launch(int dev, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t s,
		const void *args, size_t n, const char **call) {
	IGHIP_BIND(dev);
	// The driver copies the parameter bytes before it returns, so the
	// caller's buffer (Go memory, pinned for the call) is used as is.
	void *params[1] = {(void *)args};
	void **kp = n > 0 ? params : NULL;
	hipError_t r = IGHIP_CALL(hipModuleLaunchKernel, ((hipFunction_t)f, gx, gy, gz, bx, by, bz, shared, (hipStream_t)s, kp, NULL));
	return r;
}

static hipError_t ighip_can_peer(int dev, int peer, int *can, const char **call) {
	return IGHIP_CALL(hipDeviceCanAccessPeer, (can, dev, peer));
}

// ighip_enable_peer maps peer's memory for dev. flags is reserved and must
// be 0; a second call answers hipErrorPeerAccessAlreadyEnabled (HIP runtime
// API reference, hipDeviceEnablePeerAccess), which is no error here.
static hipError_t ighip_enable_peer(int dev, int peer, const char **call) {
	IGHIP_BIND(dev);
	hipError_t r = IGHIP_CALL(hipDeviceEnablePeerAccess, (peer, 0));
	return r == IGHIP_ERROR_PEER_ACCESS_ALREADY_ENABLED ? 0 : r;
}

// ighip_ipc_get exports the heap. p is the base of its one allocation, so the
// handle covers all of it at offset 0 (hipIpcGetMemHandle: "for an existing
// device memory allocation"). The memory type belongs to the allocation: a
// peer that opens the handle maps it uncached too, as vLLM's ROCm
// all-reduce relies on for the uncached buffers it shares this way.
static hipError_t ighip_ipc_get(int dev, uintptr_t p, void *out, const char **call) {
	IGHIP_BIND(dev);
	hipIpcMemHandle_t h;
	hipError_t r = IGHIP_CALL(hipIpcGetMemHandle, (&h, (void *)p));
	if (r == 0) memcpy(out, h.reserved, sizeof h.reserved);
	return r;
}

// ighip_ipc_open maps a peer's heap. The runtime accepts exactly one flag,
// hipIpcMemLazyEnablePeerAccess, and answers hipErrorInvalidValue to any
// other value (clr, hipIpcOpenMemHandle); its value is 0x1 in ROCm 6 (as in
// CUDA) but 0 in ROCm 5's headers: try the new value, then the old. The
// address may differ from one opening to the next (a documented difference
// from CUDA); the bases table takes whatever comes back.
static hipError_t ighip_ipc_open(int dev, const void *in, uintptr_t *p, const char **call) {
	IGHIP_BIND(dev);
	hipIpcMemHandle_t h;
	memcpy(h.reserved, in, sizeof h.reserved);
	void *dp = NULL;
	hipError_t r = IGHIP_CALL(hipIpcOpenMemHandle, (&dp, h, IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
	if (r == IGHIP_ERROR_INVALID_VALUE)
		r = IGHIP_CALL(hipIpcOpenMemHandle, (&dp, h, IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS_V5));
	*p = (uintptr_t)dp;
	return r;
}

static hipError_t ighip_ipc_close(int dev, uintptr_t p, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipIpcCloseMemHandle, ((void *)p));
}

// ighip_begin_capture: mode is an IGHIP_CAPTURE_MODE_*, HIP's values (the
// same as CUDA's).
static hipError_t ighip_begin_capture(int dev, uintptr_t s, int mode, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipStreamBeginCapture, ((hipStream_t)s, mode));
}

static hipError_t ighip_end_capture(int dev, uintptr_t s, uintptr_t *g, const char **call) {
	IGHIP_BIND(dev);
	hipGraph_t gr = NULL;
	hipError_t r = IGHIP_CALL(hipStreamEndCapture, ((hipStream_t)s, &gr));
	*g = (uintptr_t)gr;
	return r;
}

static hipError_t ighip_is_capturing(int dev, uintptr_t s, int *status, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipStreamIsCapturing, ((hipStream_t)s, status));
}

// ighip_instantiate asks for no error node and no log (HIP runtime API
// reference, hipGraphInstantiate: both optional).
static hipError_t ighip_instantiate(int dev, uintptr_t g, uintptr_t *e, const char **call) {
	IGHIP_BIND(dev);
	hipGraphExec_t ex = NULL;
	hipError_t r = IGHIP_CALL(hipGraphInstantiate, (&ex, (hipGraph_t)g, NULL, NULL, 0));
	*e = (uintptr_t)ex;
	return r;
}

static hipError_t ighip_graph_launch(int dev, uintptr_t e, uintptr_t s, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipGraphLaunch, ((hipGraphExec_t)e, (hipStream_t)s));
}

static hipError_t ighip_graph_destroy(int dev, uintptr_t g, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipGraphDestroy, ((hipGraph_t)g));
}

static hipError_t ighip_graph_exec_destroy(int dev, uintptr_t e, const char **call) {
	IGHIP_BIND(dev);
	return IGHIP_CALL(hipGraphExecDestroy, ((hipGraphExec_t)e));
}
*/
import "C"

import (
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// hipPlatform is the HIP runtime, loaded and initialised.
type hipPlatform struct {
	count int
	mu    sync.Mutex
	devs  map[int]*hipDevice
}

// loadHIP opens lib and initialises HIP. opened reports whether the library
// itself could be opened.
func loadHIP(lib string) (p Platform, opened bool, err error) {
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	var op C.int
	if msg := C.ighip_open(clib, &op); msg != nil {
		return nil, op != 0, fmt.Errorf("%s: %s", lib, C.GoString(msg))
	}
	var count C.int
	var call *C.char
	if r := C.ighip_init(&count, &call); r != 0 {
		return nil, true, fmt.Errorf("%s: %w", lib, hipError(call, r))
	}
	if count == 0 {
		return nil, true, fmt.Errorf("%s: no HIP devices", lib)
	}
	return &hipPlatform{count: int(count), devs: map[int]*hipDevice{}}, true, nil
}

// hipResolved reports how many HIP functions are loaded, out of how many
// the platform layer calls (for the loader test).
func hipResolved() (resolved, total int) {
	var t C.int
	n := C.ighip_resolved(&t)
	return int(n), int(t)
}

// hipError turns a HIP result into an *Error named by the runtime.
func hipError(call *C.char, r C.hipError_t) *Error {
	var name, desc *C.char
	C.ighip_error(r, &name, &desc)
	e := &Error{Call: C.GoString(call), Code: int(r), Name: C.GoString(name), Desc: C.GoString(desc)}
	if name == nil {
		e.Name = fmt.Sprintf("hipError_t(%d)", int(r))
	}
	if desc == nil {
		e.Desc = "unknown error"
	}
	return e
}

func hipCheck(call *C.char, r C.hipError_t) error {
	if r == 0 {
		return nil
	}
	return hipError(call, r)
}

func (p *hipPlatform) Name() string { return "hip" }

func (p *hipPlatform) DeviceCount() (int, error) { return p.count, nil }

// Open returns the same Device for the same ordinal.
func (p *hipPlatform) Open(ordinal int) (Device, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.devs[ordinal]; ok {
		return d, nil
	}
	if ordinal < 0 || ordinal >= p.count {
		return nil, fmt.Errorf("hip: device %d does not exist (%d devices)", ordinal, p.count)
	}
	d := &hipDevice{p: p, ord: ordinal, dev: C.int(ordinal)}
	p.devs[ordinal] = d
	return d, nil
}

// hipDevice is one GPU; every call selects it first (hipSetDevice).
type hipDevice struct {
	p   *hipPlatform
	ord int
	dev C.int
}

func (d *hipDevice) Ordinal() int       { return d.ord }
func (d *hipDevice) Platform() Platform { return d.p }

// Alloc with fine returns uncached (fine-grained) memory: see ighip_alloc.
func (d *hipDevice) Alloc(bytes int64, fine bool) (DevicePtr, error) {
	var p C.uintptr_t
	var call *C.char
	f := C.int(0)
	if fine {
		f = 1
	}
	if r := C.ighip_alloc(d.dev, C.size_t(bytes), f, &p, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return DevicePtr(p), nil
}

func (d *hipDevice) Free(p DevicePtr) error {
	var call *C.char
	r := C.ighip_free(d.dev, C.uintptr_t(p), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) AllocHostMapped(bytes int64) (unsafe.Pointer, DevicePtr, error) {
	var host unsafe.Pointer
	var dev C.uintptr_t
	var call *C.char
	if r := C.ighip_host_alloc(d.dev, C.size_t(bytes), &host, &dev, &call); r != 0 {
		return nil, 0, hipError(call, r)
	}
	return host, DevicePtr(dev), nil
}

func (d *hipDevice) FreeHost(host unsafe.Pointer) error {
	var call *C.char
	r := C.ighip_host_free(d.dev, host, &call)
	return hipCheck(call, r)
}

func (d *hipDevice) CopyHtoD(dst DevicePtr, src unsafe.Pointer, bytes int64) error {
	var call *C.char
	r := C.ighip_htod(d.dev, C.uintptr_t(dst), src, C.size_t(bytes), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) CopyDtoH(dst unsafe.Pointer, src DevicePtr, bytes int64) error {
	var call *C.char
	r := C.ighip_dtoh(d.dev, dst, C.uintptr_t(src), C.size_t(bytes), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) CopyDtoDAsync(dst, src DevicePtr, bytes int64, s Stream) error {
	var call *C.char
	r := C.ighip_dtod_async(d.dev, C.uintptr_t(dst), C.uintptr_t(src), C.size_t(bytes), C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

// CopyHtoDAsync: src must stay valid until the stream has run the copy.
func (d *hipDevice) CopyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes int64, s Stream) error {
	var call *C.char
	r := C.ighip_htod_async(d.dev, C.uintptr_t(dst), src, C.size_t(bytes), C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

// CopyDtoHAsync: dst must stay valid until the stream has run the copy.
func (d *hipDevice) CopyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes int64, s Stream) error {
	var call *C.char
	r := C.ighip_dtoh_async(d.dev, dst, C.uintptr_t(src), C.size_t(bytes), C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) MemsetD8Async(dst DevicePtr, v byte, bytes int64, s Stream) error {
	var call *C.char
	r := C.ighip_memset_async(d.dev, C.uintptr_t(dst), C.uchar(v), C.size_t(bytes), C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) MemsetD32Async(dst DevicePtr, v uint32, n int64, s Stream) error {
	var call *C.char
	r := C.ighip_memset32_async(d.dev, C.uintptr_t(dst), C.uint(v), C.size_t(n), C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) Synchronize() error {
	var call *C.char
	r := C.ighip_sync(d.dev, &call)
	return hipCheck(call, r)
}

func (d *hipDevice) NewStream() (Stream, error) {
	var s C.uintptr_t
	var call *C.char
	if r := C.ighip_stream_create(d.dev, &s, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return Stream(s), nil
}

func (d *hipDevice) DestroyStream(s Stream) error {
	var call *C.char
	r := C.ighip_stream_destroy(d.dev, C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) StreamSynchronize(s Stream) error {
	var call *C.char
	r := C.ighip_stream_sync(d.dev, C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) NewEvent(timing bool) (Event, error) {
	var e C.uintptr_t
	var call *C.char
	t := C.int(0)
	if timing {
		t = 1
	}
	if r := C.ighip_event_create(d.dev, t, &e, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return Event(e), nil
}

func (d *hipDevice) DestroyEvent(e Event) error {
	var call *C.char
	r := C.ighip_event_destroy(d.dev, C.uintptr_t(e), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) RecordEvent(e Event, s Stream) error {
	var call *C.char
	r := C.ighip_event_record(d.dev, C.uintptr_t(e), C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) SynchronizeEvent(e Event) error {
	var call *C.char
	r := C.ighip_event_sync(d.dev, C.uintptr_t(e), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) Elapsed(start, end Event) (time.Duration, error) {
	var ms C.float
	var call *C.char
	if r := C.ighip_event_elapsed(d.dev, C.uintptr_t(start), C.uintptr_t(end), &ms, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return msToDuration(float64(ms)), nil
}

func (d *hipDevice) LoadModule(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, fmt.Errorf("hip: LoadModule: empty image")
	}
	img := C.CBytes(image)
	defer C.free(img)
	var m C.uintptr_t
	var call *C.char
	if r := C.ighip_module_load(d.dev, img, &m, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return Module(m), nil
}

func (d *hipDevice) UnloadModule(m Module) error {
	var call *C.char
	r := C.ighip_module_unload(d.dev, C.uintptr_t(m), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) Function(m Module, name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uintptr_t
	var call *C.char
	if r := C.ighip_function(d.dev, C.uintptr_t(m), cname, &f, &call); r != 0 {
		return 0, fmt.Errorf("function %q: %w", name, hipError(call, r))
	}
	return Function(f), nil
}

func (d *hipDevice) Global(m Module, name string) (DevicePtr, int64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p C.uintptr_t
	var n C.size_t
	var call *C.char
	if r := C.ighip_global(d.dev, C.uintptr_t(m), cname, &p, &n, &call); r != 0 {
		return 0, 0, fmt.Errorf("global %q: %w", name, hipError(call, r))
	}
	return DevicePtr(p), int64(n), nil
}

func (d *hipDevice) Launch(f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error {
	var call *C.char
	var ap unsafe.Pointer
	if len(args) > 0 {
		ap = unsafe.Pointer(&args[0]) // read by the driver during the call; not retained
	}
	r := C.ighip_launch(d.dev, C.uintptr_t(f),
		C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z), C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
		C.uint(sharedBytes), C.uintptr_t(s), ap, C.size_t(len(args)), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) peer(peer Device) (*hipDevice, error) {
	pd, ok := peer.(*hipDevice)
	if !ok {
		return nil, fmt.Errorf("hip: peer %T is not a HIP device", peer)
	}
	return pd, nil
}

func (d *hipDevice) CanAccessPeer(peer Device) (bool, error) {
	pd, err := d.peer(peer)
	if err != nil {
		return false, err
	}
	var can C.int
	var call *C.char
	if r := C.ighip_can_peer(d.dev, pd.dev, &can, &call); r != 0 {
		return false, hipError(call, r)
	}
	return can != 0, nil
}

// EnablePeerAccess maps peer's memory for d; enabling it again is not an error.
func (d *hipDevice) EnablePeerAccess(peer Device) error {
	pd, err := d.peer(peer)
	if err != nil {
		return err
	}
	var call *C.char
	r := C.ighip_enable_peer(d.dev, pd.dev, &call)
	return hipCheck(call, r)
}

func (d *hipDevice) IPCGetHandle(p DevicePtr) (IPCHandle, error) {
	var h IPCHandle
	var call *C.char
	if r := C.ighip_ipc_get(d.dev, C.uintptr_t(p), unsafe.Pointer(&h[0]), &call); r != 0 {
		return h, hipError(call, r)
	}
	return h, nil
}

func (d *hipDevice) IPCOpenHandle(h IPCHandle) (DevicePtr, error) {
	var p C.uintptr_t
	var call *C.char
	if r := C.ighip_ipc_open(d.dev, unsafe.Pointer(&h[0]), &p, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return DevicePtr(p), nil
}

func (d *hipDevice) IPCCloseHandle(p DevicePtr) error {
	var call *C.char
	r := C.ighip_ipc_close(d.dev, C.uintptr_t(p), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) BeginCapture(s Stream, mode CaptureMode) error {
	var m C.int
	switch mode {
	case CaptureGlobal:
		m = C.IGHIP_CAPTURE_MODE_GLOBAL
	case CaptureThreadLocal:
		m = C.IGHIP_CAPTURE_MODE_THREAD_LOCAL
	case CaptureRelaxed:
		m = C.IGHIP_CAPTURE_MODE_RELAXED
	default:
		return fmt.Errorf("hip: unknown capture mode %d", int(mode))
	}
	var call *C.char
	r := C.ighip_begin_capture(d.dev, C.uintptr_t(s), m, &call)
	return hipCheck(call, r)
}

func (d *hipDevice) EndCapture(s Stream) (Graph, error) {
	var g C.uintptr_t
	var call *C.char
	if r := C.ighip_end_capture(d.dev, C.uintptr_t(s), &g, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return Graph(g), nil
}

func (d *hipDevice) CaptureStatus(s Stream) (CaptureStatus, error) {
	var st C.int
	var call *C.char
	if r := C.ighip_is_capturing(d.dev, C.uintptr_t(s), &st, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return captureStatus(int(st))
}

func (d *hipDevice) Instantiate(g Graph) (GraphExec, error) {
	var e C.uintptr_t
	var call *C.char
	if r := C.ighip_instantiate(d.dev, C.uintptr_t(g), &e, &call); r != 0 {
		return 0, hipError(call, r)
	}
	return GraphExec(e), nil
}

func (d *hipDevice) LaunchGraph(g GraphExec, s Stream) error {
	var call *C.char
	r := C.ighip_graph_launch(d.dev, C.uintptr_t(g), C.uintptr_t(s), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) DestroyGraph(g Graph) error {
	var call *C.char
	r := C.ighip_graph_destroy(d.dev, C.uintptr_t(g), &call)
	return hipCheck(call, r)
}

func (d *hipDevice) DestroyGraphExec(g GraphExec) error {
	var call *C.char
	r := C.ighip_graph_exec_destroy(d.dev, C.uintptr_t(g), &call)
	return hipCheck(call, r)
}

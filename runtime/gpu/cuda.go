package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The few CUDA driver types irisgen uses, declared here so that no SDK header
// is needed to build (values checked against the CUDA driver API reference).
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct { char reserved[64]; } CUipcMemHandle;

// cuLaunchKernelEx's configuration (CUDA 12.0+), with room for one launch
// attribute: CUlaunchAttribute is its id, 4 bytes of padding and a 64-byte
// union, CUlaunchConfig the grid, the block, the shared bytes, the stream
// and the attribute array.
typedef struct {
	int id;
	char pad[4];
	union { char bytes[64]; int value; unsigned long long align; } val;
} IGCU_LaunchAttribute;
typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	IGCU_LaunchAttribute *attrs;
	unsigned int numAttrs;
} IGCU_LaunchConfig;

enum {
	IGCU_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
	IGCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	IGCU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
	IGCU_MEMHOSTALLOC_PORTABLE = 0x01,
	IGCU_MEMHOSTALLOC_DEVICEMAP = 0x02,
	IGCU_STREAM_NON_BLOCKING = 0x1,
	IGCU_EVENT_DISABLE_TIMING = 0x2,
	IGCU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1,
};
// CU_STREAM_LEGACY: the legacy default stream, whatever the per-thread mode.
#define IGCU_STREAM_LEGACY ((CUstream)0x1)

// Every driver entry point used, with its exact (versioned) symbol name.
#define IGCU_SYMS(X) \
	X(cuInit, (unsigned int flags)) \
	X(cuDriverGetVersion, (int *version)) \
	X(cuDeviceGetCount, (int *count)) \
	X(cuDeviceGetAttribute, (int *value, int attrib, CUdevice dev)) \
	X(cuDeviceGet, (CUdevice *dev, int ordinal)) \
	X(cuDevicePrimaryCtxRetain, (CUcontext *ctx, CUdevice dev)) \
	X(cuCtxSetCurrent, (CUcontext ctx)) \
	X(cuCtxSynchronize, (void)) \
	X(cuMemAlloc_v2, (CUdeviceptr *p, size_t n)) \
	X(cuMemFree_v2, (CUdeviceptr p)) \
	X(cuMemHostAlloc, (void **pp, size_t n, unsigned int flags)) \
	X(cuMemHostGetDevicePointer_v2, (CUdeviceptr *d, void *p, unsigned int flags)) \
	X(cuMemFreeHost, (void *p)) \
	X(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n)) \
	X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n)) \
	X(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)) \
	X(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream s)) \
	X(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream s)) \
	X(cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s)) \
	X(cuMemsetD32Async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s)) \
	X(cuStreamCreate, (CUstream *s, unsigned int flags)) \
	X(cuStreamDestroy_v2, (CUstream s)) \
	X(cuStreamSynchronize, (CUstream s)) \
	X(cuEventCreate, (CUevent *e, unsigned int flags)) \
	X(cuEventDestroy_v2, (CUevent e)) \
	X(cuEventRecord, (CUevent e, CUstream s)) \
	X(cuEventSynchronize, (CUevent e)) \
	X(cuModuleLoadData, (CUmodule *m, const void *image)) \
	X(cuModuleUnload, (CUmodule m)) \
	X(cuModuleGetFunction, (CUfunction *f, CUmodule m, const char *name)) \
	X(cuModuleGetGlobal_v2, (CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name)) \
	X(cuLaunchKernel, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, \
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream s, \
		void **params, void **extra)) \
	X(cuDeviceCanAccessPeer, (int *can, CUdevice dev, CUdevice peer)) \
	X(cuCtxEnablePeerAccess, (CUcontext peer, unsigned int flags)) \
	X(cuIpcGetMemHandle, (CUipcMemHandle *h, CUdeviceptr p)) \
	X(cuIpcOpenMemHandle_v2, (CUdeviceptr *p, CUipcMemHandle h, unsigned int flags)) \
	X(cuIpcCloseMemHandle, (CUdeviceptr p)) \
	X(cuStreamBeginCapture_v2, (CUstream s, int mode)) \
	X(cuStreamEndCapture, (CUstream s, CUgraph *g)) \
	X(cuStreamIsCapturing, (CUstream s, int *status)) \
	X(cuGraphInstantiateWithFlags, (CUgraphExec *e, CUgraph g, unsigned long long flags)) \
	X(cuGraphLaunch, (CUgraphExec e, CUstream s)) \
	X(cuGraphDestroy, (CUgraph g)) \
	X(cuGraphExecDestroy, (CUgraphExec e)) \
	X(cuGetErrorName, (CUresult r, const char **s)) \
	X(cuGetErrorString, (CUresult r, const char **s))

#define IGCU_DECL(name, params) static CUresult (*igcu_##name) params;
IGCU_SYMS(IGCU_DECL)
// cuEventElapsedTime_v2 (CUDA 12.8+) where the driver has it, else the original.
static CUresult (*igcu_elapsed)(float *ms, CUevent a, CUevent b);
static const char *igcu_elapsed_name;
// cuLaunchKernelEx (CUDA 12.0+) where the driver has it: Programmatic
// Dependent Launch. Optional: older drivers launch with cuLaunchKernel.
static CUresult (*igcu_launch_ex)(const IGCU_LaunchConfig *config, CUfunction f, void **params, void **extra);

// igcu_open loads the driver library and resolves every symbol. On failure it
// returns the message (dlerror's, or the missing symbol's).
static const char *igcu_open(const char *lib) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		return e ? e : "dlopen failed";
	}
#define IGCU_LOAD(name, params) \
	igcu_##name = (CUresult (*) params)dlsym(h, #name); \
	if (igcu_##name == NULL) return "missing symbol " #name;
	IGCU_SYMS(IGCU_LOAD)
	igcu_elapsed_name = "cuEventElapsedTime_v2";
	igcu_elapsed = (CUresult (*)(float *, CUevent, CUevent))dlsym(h, igcu_elapsed_name);
	if (igcu_elapsed == NULL) {
		igcu_elapsed_name = "cuEventElapsedTime";
		igcu_elapsed = (CUresult (*)(float *, CUevent, CUevent))dlsym(h, igcu_elapsed_name);
	}
	if (igcu_elapsed == NULL) return "missing symbol cuEventElapsedTime";
	igcu_launch_ex = (CUresult (*)(const IGCU_LaunchConfig *, CUfunction, void **, void **))dlsym(h, "cuLaunchKernelEx");
	return NULL;
}

// Each wrapper binds the context and makes its call in one C call, so the
// goroutine cannot move to another OS thread in between. *call names the
// function that produced the result.
#define IGCU_BIND(ctx) do { \
	CUresult r_ = igcu_cuCtxSetCurrent((CUcontext)(ctx)); \
	if (r_ != 0) { *call = "cuCtxSetCurrent"; return r_; } \
} while (0)
#define IGCU_CALL(name, args) (*call = #name, igcu_##name args)

static CUresult igcu_init(int *count, int *version, int *launch_ex, const char **call) {
	CUresult r = IGCU_CALL(cuInit, (0));
	if (r != 0) return r;
	r = IGCU_CALL(cuDriverGetVersion, (version));
	if (r != 0) return r;
	*launch_ex = igcu_launch_ex != NULL;
	return IGCU_CALL(cuDeviceGetCount, (count));
}

static CUresult igcu_device(int ordinal, CUdevice *dev, uintptr_t *ctx, int *major, const char **call) {
	CUresult r = IGCU_CALL(cuDeviceGet, (dev, ordinal));
	if (r != 0) return r;
	r = IGCU_CALL(cuDeviceGetAttribute, (major, IGCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, *dev));
	if (r != 0) return r;
	CUcontext c;
	r = IGCU_CALL(cuDevicePrimaryCtxRetain, (&c, *dev));
	*ctx = (uintptr_t)c;
	return r;
}

static void igcu_error(CUresult code, const char **name, const char **desc) {
	if (igcu_cuGetErrorName(code, name) != 0) *name = NULL;
	if (igcu_cuGetErrorString(code, desc) != 0) *desc = NULL;
}

static CUresult igcu_alloc(uintptr_t ctx, size_t n, CUdeviceptr *p, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemAlloc_v2, (p, n));
}

static CUresult igcu_free(uintptr_t ctx, CUdeviceptr p, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemFree_v2, (p));
}

static CUresult igcu_host_alloc(uintptr_t ctx, size_t n, void **host, CUdeviceptr *dev, const char **call) {
	IGCU_BIND(ctx);
	CUresult r = IGCU_CALL(cuMemHostAlloc, (host, n, IGCU_MEMHOSTALLOC_PORTABLE | IGCU_MEMHOSTALLOC_DEVICEMAP));
	if (r != 0) return r;
	r = IGCU_CALL(cuMemHostGetDevicePointer_v2, (dev, *host, 0));
	if (r != 0) {
		igcu_cuMemFreeHost(*host);
		*host = NULL;
	}
	return r;
}

static CUresult igcu_host_free(uintptr_t ctx, void *host, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemFreeHost, (host));
}

// igcu_htod returns once the bytes are in device memory. cuMemcpyHtoD alone
// does not promise that: from pageable memory it returns once the bytes are
// staged for DMA, "but the DMA to final destination may not have completed"
// (CUDA driver API, API synchronization behavior), and nothing orders that
// DMA before a kernel on a non-blocking stream. The suite saw it on an H100:
// the last sixteenth of a 4 MiB upload still in flight when the collective
// read it. Waiting for the legacy stream, which ran the copy, closes it.
static CUresult igcu_htod(uintptr_t ctx, CUdeviceptr dst, const void *src, size_t n, const char **call) {
	IGCU_BIND(ctx);
	CUresult r = IGCU_CALL(cuMemcpyHtoD_v2, (dst, src, n));
	if (r != 0) return r;
	return IGCU_CALL(cuStreamSynchronize, (IGCU_STREAM_LEGACY));
}

static CUresult igcu_dtoh(uintptr_t ctx, void *dst, CUdeviceptr src, size_t n, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemcpyDtoH_v2, (dst, src, n));
}

static CUresult igcu_dtod_async(uintptr_t ctx, CUdeviceptr dst, CUdeviceptr src, size_t n, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemcpyDtoDAsync_v2, (dst, src, n, (CUstream)s));
}

static CUresult igcu_htod_async(uintptr_t ctx, CUdeviceptr dst, const void *src, size_t n, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemcpyHtoDAsync_v2, (dst, src, n, (CUstream)s));
}

static CUresult igcu_dtoh_async(uintptr_t ctx, void *dst, CUdeviceptr src, size_t n, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemcpyDtoHAsync_v2, (dst, src, n, (CUstream)s));
}

static CUresult igcu_memset_async(uintptr_t ctx, CUdeviceptr dst, unsigned char v, size_t n, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemsetD8Async, (dst, v, n, (CUstream)s));
}

static CUresult igcu_memset32_async(uintptr_t ctx, CUdeviceptr dst, unsigned int v, size_t n, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuMemsetD32Async, (dst, v, n, (CUstream)s));
}

static CUresult igcu_bind(uintptr_t ctx, const char **call) {
	IGCU_BIND(ctx);
	return 0;
}

static CUresult igcu_sync(uintptr_t ctx, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuCtxSynchronize, ());
}

static CUresult igcu_stream_create(uintptr_t ctx, uintptr_t *s, const char **call) {
	IGCU_BIND(ctx);
	CUstream st = NULL;
	CUresult r = IGCU_CALL(cuStreamCreate, (&st, IGCU_STREAM_NON_BLOCKING));
	*s = (uintptr_t)st;
	return r;
}

static CUresult igcu_stream_destroy(uintptr_t ctx, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuStreamDestroy_v2, ((CUstream)s));
}

static CUresult igcu_stream_sync(uintptr_t ctx, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuStreamSynchronize, ((CUstream)s));
}

static CUresult igcu_event_create(uintptr_t ctx, int timing, uintptr_t *e, const char **call) {
	IGCU_BIND(ctx);
	CUevent ev = NULL;
	CUresult r = IGCU_CALL(cuEventCreate, (&ev, timing ? 0 : IGCU_EVENT_DISABLE_TIMING));
	*e = (uintptr_t)ev;
	return r;
}

static CUresult igcu_event_destroy(uintptr_t ctx, uintptr_t e, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuEventDestroy_v2, ((CUevent)e));
}

static CUresult igcu_event_record(uintptr_t ctx, uintptr_t e, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuEventRecord, ((CUevent)e, (CUstream)s));
}

static CUresult igcu_event_sync(uintptr_t ctx, uintptr_t e, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuEventSynchronize, ((CUevent)e));
}

static CUresult igcu_event_elapsed(uintptr_t ctx, uintptr_t a, uintptr_t b, float *ms, const char **call) {
	IGCU_BIND(ctx);
	*call = igcu_elapsed_name;
	return igcu_elapsed(ms, (CUevent)a, (CUevent)b);
}

// The image is copied to C memory by the caller; the driver reads it during
// the call only.
static CUresult igcu_module_load(uintptr_t ctx, const void *image, uintptr_t *m, const char **call) {
	IGCU_BIND(ctx);
	CUmodule mod = NULL;
	CUresult r = IGCU_CALL(cuModuleLoadData, (&mod, image));
	*m = (uintptr_t)mod;
	return r;
}

static CUresult igcu_module_unload(uintptr_t ctx, uintptr_t m, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuModuleUnload, ((CUmodule)m));
}

static CUresult igcu_function(uintptr_t ctx, uintptr_t m, const char *name, uintptr_t *f, const char **call) {
	IGCU_BIND(ctx);
	CUfunction fn = NULL;
	CUresult r = IGCU_CALL(cuModuleGetFunction, (&fn, (CUmodule)m, name));
	*f = (uintptr_t)fn;
	return r;
}

static CUresult igcu_global(uintptr_t ctx, uintptr_t m, const char *name, CUdeviceptr *p, size_t *bytes, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuModuleGetGlobal_v2, (p, bytes, (CUmodule)m, name));
}

// The kernel takes one by-value struct: kernelParams holds one pointer to
// its bytes (the driver copies the parameters before it returns, so the
// caller's buffer, Go memory pinned for the call, is used as is). With
// dependent, cuLaunchKernelEx with the programmatic stream serialization
// attribute: the kernel may start once the kernel before it on the stream
// has triggered (griddepcontrol.launch_dependents) or ended, and waits for it
// with griddepcontrol.wait; stream capture records the programmatic edge.
static CUresult igcu_launch(uintptr_t ctx, int dependent, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t s,
		const void *args, size_t n, const char **call) {
	IGCU_BIND(ctx);
	void *params[1] = {(void *)args};
	void **kp = n > 0 ? params : NULL;
	if (!dependent)
		return IGCU_CALL(cuLaunchKernel, ((CUfunction)f, gx, gy, gz, bx, by, bz, shared, (CUstream)s, kp, NULL));
	IGCU_LaunchAttribute attr;
	memset(&attr, 0, sizeof attr);
	attr.id = IGCU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attr.val.value = 1;
	IGCU_LaunchConfig cfg = {gx, gy, gz, bx, by, bz, shared, (CUstream)s, &attr, 1};
	*call = "cuLaunchKernelEx";
	return igcu_launch_ex(&cfg, (CUfunction)f, kp, NULL);
}

static CUresult igcu_can_peer(CUdevice dev, CUdevice peer, int *can, const char **call) {
	return IGCU_CALL(cuDeviceCanAccessPeer, (can, dev, peer));
}

static CUresult igcu_enable_peer(uintptr_t ctx, uintptr_t peer, const char **call) {
	IGCU_BIND(ctx);
	CUresult r = IGCU_CALL(cuCtxEnablePeerAccess, ((CUcontext)peer, 0));
	return r == IGCU_ERROR_PEER_ACCESS_ALREADY_ENABLED ? 0 : r;
}

static CUresult igcu_ipc_get(uintptr_t ctx, CUdeviceptr p, void *out, const char **call) {
	IGCU_BIND(ctx);
	CUipcMemHandle h;
	CUresult r = IGCU_CALL(cuIpcGetMemHandle, (&h, p));
	if (r == 0) memcpy(out, h.reserved, sizeof h.reserved);
	return r;
}

static CUresult igcu_ipc_open(uintptr_t ctx, const void *in, CUdeviceptr *p, const char **call) {
	IGCU_BIND(ctx);
	CUipcMemHandle h;
	memcpy(h.reserved, in, sizeof h.reserved);
	return IGCU_CALL(cuIpcOpenMemHandle_v2, (p, h, IGCU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
}

static CUresult igcu_ipc_close(uintptr_t ctx, CUdeviceptr p, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuIpcCloseMemHandle, (p));
}

static CUresult igcu_begin_capture(uintptr_t ctx, uintptr_t s, int mode, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuStreamBeginCapture_v2, ((CUstream)s, mode));
}

static CUresult igcu_end_capture(uintptr_t ctx, uintptr_t s, uintptr_t *g, const char **call) {
	IGCU_BIND(ctx);
	CUgraph gr = NULL;
	CUresult r = IGCU_CALL(cuStreamEndCapture, ((CUstream)s, &gr));
	*g = (uintptr_t)gr;
	return r;
}

static CUresult igcu_is_capturing(uintptr_t ctx, uintptr_t s, int *status, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuStreamIsCapturing, ((CUstream)s, status));
}

static CUresult igcu_instantiate(uintptr_t ctx, uintptr_t g, uintptr_t *e, const char **call) {
	IGCU_BIND(ctx);
	CUgraphExec ex = NULL;
	CUresult r = IGCU_CALL(cuGraphInstantiateWithFlags, (&ex, (CUgraph)g, 0));
	*e = (uintptr_t)ex;
	return r;
}

static CUresult igcu_graph_launch(uintptr_t ctx, uintptr_t e, uintptr_t s, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuGraphLaunch, ((CUgraphExec)e, (CUstream)s));
}

static CUresult igcu_graph_destroy(uintptr_t ctx, uintptr_t g, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuGraphDestroy, ((CUgraph)g));
}

static CUresult igcu_graph_exec_destroy(uintptr_t ctx, uintptr_t e, const char **call) {
	IGCU_BIND(ctx);
	return IGCU_CALL(cuGraphExecDestroy, ((CUgraphExec)e));
}
*/
import "C"

import (
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// cudaLibrary is the CUDA driver library's name.
const cudaLibrary = "libcuda.so.1"

// cudaPlatform is the CUDA driver, loaded and initialised.
type cudaPlatform struct {
	count int
	pdl   bool // the driver does Programmatic Dependent Launch and IRISGEN_PDL allows it
	mu    sync.Mutex
	devs  map[int]*cudaDevice
}

// pdlDriver is the first driver version (CUDA 12.3) whose stream capture
// records programmatic dependencies as graph edges.
const pdlDriver = 12030

// loadCUDA opens the driver and initialises it; the error says why not.
func loadCUDA() (Platform, error) {
	lib := C.CString(cudaLibrary)
	defer C.free(unsafe.Pointer(lib))
	if msg := C.igcu_open(lib); msg != nil {
		return nil, fmt.Errorf("%s: %s", cudaLibrary, C.GoString(msg))
	}
	var count, version, launchEx C.int
	var call *C.char
	if r := C.igcu_init(&count, &version, &launchEx, &call); r != 0 {
		return nil, fmt.Errorf("%s: %w", cudaLibrary, cudaError(call, r))
	}
	if count == 0 {
		return nil, fmt.Errorf("%s: no CUDA devices", cudaLibrary)
	}
	allowed, err := pdlAllowed()
	if err != nil {
		return nil, err
	}
	pdl := allowed && launchEx != 0 && version >= pdlDriver
	return &cudaPlatform{count: int(count), pdl: pdl, devs: map[int]*cudaDevice{}}, nil
}

// cudaError turns a driver result into an *Error named by the driver.
func cudaError(call *C.char, r C.CUresult) *Error {
	var name, desc *C.char
	C.igcu_error(r, &name, &desc)
	e := &Error{Call: C.GoString(call), Code: int(r), Name: C.GoString(name), Desc: C.GoString(desc)}
	if name == nil {
		e.Name = fmt.Sprintf("CUresult(%d)", int(r))
	}
	if desc == nil {
		e.Desc = "unknown error"
	}
	return e
}

func cudaCheck(call *C.char, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return cudaError(call, r)
}

func (p *cudaPlatform) Name() string { return "cuda" }

func (p *cudaPlatform) DeviceCount() (int, error) { return p.count, nil }

// Open retains the device's primary context (kept for the process's life)
// and returns the same Device for the same ordinal.
func (p *cudaPlatform) Open(ordinal int) (Device, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.devs[ordinal]; ok {
		return d, nil
	}
	if ordinal < 0 || ordinal >= p.count {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d devices)", ordinal, p.count)
	}
	var dev C.CUdevice
	var ctx C.uintptr_t
	var major C.int
	var call *C.char
	if r := C.igcu_device(C.int(ordinal), &dev, &ctx, &major, &call); r != 0 {
		return nil, cudaError(call, r)
	}
	d := &cudaDevice{p: p, ord: ordinal, dev: dev, ctx: ctx, pdl: p.pdl && major >= 9}
	p.devs[ordinal] = d
	return d, nil
}

// cudaDevice is one GPU bound to its primary context.
type cudaDevice struct {
	p   *cudaPlatform
	ord int
	dev C.CUdevice
	ctx C.uintptr_t
	pdl bool // LaunchDependent launches programmatic dependents
}

func (d *cudaDevice) Ordinal() int       { return d.ord }
func (d *cudaDevice) Platform() Platform { return d.p }

// Alloc ignores fine: ordinary device memory is coherent for peer atomics
// and system-scope flags on NVIDIA.
func (d *cudaDevice) Alloc(bytes int64, fine bool) (DevicePtr, error) {
	var p C.CUdeviceptr
	var call *C.char
	if r := C.igcu_alloc(d.ctx, C.size_t(bytes), &p, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return DevicePtr(p), nil
}

func (d *cudaDevice) Free(p DevicePtr) error {
	var call *C.char
	r := C.igcu_free(d.ctx, C.CUdeviceptr(p), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) AllocHostMapped(bytes int64) (unsafe.Pointer, DevicePtr, error) {
	var host unsafe.Pointer
	var dev C.CUdeviceptr
	var call *C.char
	if r := C.igcu_host_alloc(d.ctx, C.size_t(bytes), &host, &dev, &call); r != 0 {
		return nil, 0, cudaError(call, r)
	}
	return host, DevicePtr(dev), nil
}

func (d *cudaDevice) FreeHost(host unsafe.Pointer) error {
	var call *C.char
	r := C.igcu_host_free(d.ctx, host, &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) CopyHtoD(dst DevicePtr, src unsafe.Pointer, bytes int64) error {
	var call *C.char
	r := C.igcu_htod(d.ctx, C.CUdeviceptr(dst), src, C.size_t(bytes), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) CopyDtoH(dst unsafe.Pointer, src DevicePtr, bytes int64) error {
	var call *C.char
	r := C.igcu_dtoh(d.ctx, dst, C.CUdeviceptr(src), C.size_t(bytes), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) CopyDtoDAsync(dst, src DevicePtr, bytes int64, s Stream) error {
	var call *C.char
	r := C.igcu_dtod_async(d.ctx, C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(bytes), C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

// CopyHtoDAsync: src must stay valid until the stream has run the copy; use
// memory from AllocHostMapped (or C memory) for a truly asynchronous copy.
func (d *cudaDevice) CopyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes int64, s Stream) error {
	var call *C.char
	r := C.igcu_htod_async(d.ctx, C.CUdeviceptr(dst), src, C.size_t(bytes), C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

// CopyDtoHAsync: dst must stay valid until the stream has run the copy.
func (d *cudaDevice) CopyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes int64, s Stream) error {
	var call *C.char
	r := C.igcu_dtoh_async(d.ctx, dst, C.CUdeviceptr(src), C.size_t(bytes), C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) MemsetD8Async(dst DevicePtr, v byte, bytes int64, s Stream) error {
	var call *C.char
	r := C.igcu_memset_async(d.ctx, C.CUdeviceptr(dst), C.uchar(v), C.size_t(bytes), C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) MemsetD32Async(dst DevicePtr, v uint32, n int64, s Stream) error {
	var call *C.char
	r := C.igcu_memset32_async(d.ctx, C.CUdeviceptr(dst), C.uint(v), C.size_t(n), C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

// BindThread makes the device's primary context current on the calling OS
// thread (gpu.ThreadBinder).
func (d *cudaDevice) BindThread() error {
	var call *C.char
	r := C.igcu_bind(d.ctx, &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) Synchronize() error {
	var call *C.char
	r := C.igcu_sync(d.ctx, &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) NewStream() (Stream, error) {
	var s C.uintptr_t
	var call *C.char
	if r := C.igcu_stream_create(d.ctx, &s, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return Stream(s), nil
}

func (d *cudaDevice) DestroyStream(s Stream) error {
	var call *C.char
	r := C.igcu_stream_destroy(d.ctx, C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) StreamSynchronize(s Stream) error {
	var call *C.char
	r := C.igcu_stream_sync(d.ctx, C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) NewEvent(timing bool) (Event, error) {
	var e C.uintptr_t
	var call *C.char
	t := C.int(0)
	if timing {
		t = 1
	}
	if r := C.igcu_event_create(d.ctx, t, &e, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return Event(e), nil
}

func (d *cudaDevice) DestroyEvent(e Event) error {
	var call *C.char
	r := C.igcu_event_destroy(d.ctx, C.uintptr_t(e), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) RecordEvent(e Event, s Stream) error {
	var call *C.char
	r := C.igcu_event_record(d.ctx, C.uintptr_t(e), C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) SynchronizeEvent(e Event) error {
	var call *C.char
	r := C.igcu_event_sync(d.ctx, C.uintptr_t(e), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) Elapsed(start, end Event) (time.Duration, error) {
	var ms C.float
	var call *C.char
	if r := C.igcu_event_elapsed(d.ctx, C.uintptr_t(start), C.uintptr_t(end), &ms, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return msToDuration(float64(ms)), nil
}

func (d *cudaDevice) LoadModule(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, fmt.Errorf("cuda: LoadModule: empty image")
	}
	img := C.CBytes(image)
	defer C.free(img)
	var m C.uintptr_t
	var call *C.char
	if r := C.igcu_module_load(d.ctx, img, &m, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return Module(m), nil
}

func (d *cudaDevice) UnloadModule(m Module) error {
	var call *C.char
	r := C.igcu_module_unload(d.ctx, C.uintptr_t(m), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) Function(m Module, name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uintptr_t
	var call *C.char
	if r := C.igcu_function(d.ctx, C.uintptr_t(m), cname, &f, &call); r != 0 {
		return 0, fmt.Errorf("function %q: %w", name, cudaError(call, r))
	}
	return Function(f), nil
}

func (d *cudaDevice) Global(m Module, name string) (DevicePtr, int64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p C.CUdeviceptr
	var n C.size_t
	var call *C.char
	if r := C.igcu_global(d.ctx, C.uintptr_t(m), cname, &p, &n, &call); r != 0 {
		return 0, 0, fmt.Errorf("global %q: %w", name, cudaError(call, r))
	}
	return DevicePtr(p), int64(n), nil
}

func (d *cudaDevice) Launch(f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error {
	return d.launch(false, f, grid, block, sharedBytes, s, args)
}

// LaunchDependent launches f as a programmatic dependent of the kernel
// before it on s where the device does that (DependentLaunches), else as
// Launch does (gpu.DependentLauncher).
func (d *cudaDevice) LaunchDependent(f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error {
	return d.launch(d.pdl, f, grid, block, sharedBytes, s, args)
}

func (d *cudaDevice) launch(dependent bool, f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error {
	var call *C.char
	var ap unsafe.Pointer
	if len(args) > 0 {
		ap = unsafe.Pointer(&args[0]) // read by the driver during the call; not retained
	}
	dep := C.int(0)
	if dependent {
		dep = 1
	}
	r := C.igcu_launch(d.ctx, dep, C.uintptr_t(f),
		C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z), C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
		C.uint(sharedBytes), C.uintptr_t(s), ap, C.size_t(len(args)), &call)
	return cudaCheck(call, r)
}

// DependentLaunches reports whether LaunchDependent overlaps kernels: an
// sm_90 or later GPU, a CUDA 12.3 or later driver, and IRISGEN_PDL not 0.
func (d *cudaDevice) DependentLaunches() bool { return d.pdl }

func (d *cudaDevice) peer(peer Device) (*cudaDevice, error) {
	pd, ok := peer.(*cudaDevice)
	if !ok {
		return nil, fmt.Errorf("cuda: peer %T is not a CUDA device", peer)
	}
	return pd, nil
}

func (d *cudaDevice) CanAccessPeer(peer Device) (bool, error) {
	pd, err := d.peer(peer)
	if err != nil {
		return false, err
	}
	var can C.int
	var call *C.char
	if r := C.igcu_can_peer(d.dev, pd.dev, &can, &call); r != 0 {
		return false, cudaError(call, r)
	}
	return can != 0, nil
}

// EnablePeerAccess maps peer's memory into d's context; enabling it again is
// not an error.
func (d *cudaDevice) EnablePeerAccess(peer Device) error {
	pd, err := d.peer(peer)
	if err != nil {
		return err
	}
	var call *C.char
	r := C.igcu_enable_peer(d.ctx, pd.ctx, &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) IPCGetHandle(p DevicePtr) (IPCHandle, error) {
	var h IPCHandle
	var call *C.char
	if r := C.igcu_ipc_get(d.ctx, C.CUdeviceptr(p), unsafe.Pointer(&h[0]), &call); r != 0 {
		return h, cudaError(call, r)
	}
	return h, nil
}

// IPCOpenHandle maps another process's allocation (with lazy peer access).
// CUDA refuses handles exported by the same process.
func (d *cudaDevice) IPCOpenHandle(h IPCHandle) (DevicePtr, error) {
	var p C.CUdeviceptr
	var call *C.char
	if r := C.igcu_ipc_open(d.ctx, unsafe.Pointer(&h[0]), &p, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return DevicePtr(p), nil
}

func (d *cudaDevice) IPCCloseHandle(p DevicePtr) error {
	var call *C.char
	r := C.igcu_ipc_close(d.ctx, C.CUdeviceptr(p), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) BeginCapture(s Stream, mode CaptureMode) error {
	var call *C.char
	r := C.igcu_begin_capture(d.ctx, C.uintptr_t(s), C.int(mode), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) EndCapture(s Stream) (Graph, error) {
	var g C.uintptr_t
	var call *C.char
	if r := C.igcu_end_capture(d.ctx, C.uintptr_t(s), &g, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return Graph(g), nil
}

func (d *cudaDevice) CaptureStatus(s Stream) (CaptureStatus, error) {
	var st C.int
	var call *C.char
	if r := C.igcu_is_capturing(d.ctx, C.uintptr_t(s), &st, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return captureStatus(int(st))
}

func (d *cudaDevice) Instantiate(g Graph) (GraphExec, error) {
	var e C.uintptr_t
	var call *C.char
	if r := C.igcu_instantiate(d.ctx, C.uintptr_t(g), &e, &call); r != 0 {
		return 0, cudaError(call, r)
	}
	return GraphExec(e), nil
}

func (d *cudaDevice) LaunchGraph(g GraphExec, s Stream) error {
	var call *C.char
	r := C.igcu_graph_launch(d.ctx, C.uintptr_t(g), C.uintptr_t(s), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) DestroyGraph(g Graph) error {
	var call *C.char
	r := C.igcu_graph_destroy(d.ctx, C.uintptr_t(g), &call)
	return cudaCheck(call, r)
}

func (d *cudaDevice) DestroyGraphExec(g GraphExec) error {
	var call *C.char
	r := C.igcu_graph_exec_destroy(d.ctx, C.uintptr_t(g), &call)
	return cudaCheck(call, r)
}

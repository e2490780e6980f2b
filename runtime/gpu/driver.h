// driver.h: one table of what the platform layer asks of a GPU library,
// and for every operation the CUDA driver call and the HIP runtime call
// that do it. cuda.go and hip.go each pick their column (IG_SIDE) and
// generate their wrappers from it; driver.go binds Go to the ig_driver
// table those wrappers fill, once for every platform. Only what really
// differs between the libraries is written by hand in a platform's file
// (loading, the device, allocation, launch, ...: the operations of kind
// own below).
#ifndef IG_DRIVER_H
#define IG_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// The values both libraries give alike: CUDA's checked against the CUDA
// driver API reference, HIP's against its header (hip_api.h). The capture
// modes and states are gpu.CaptureMode's and gpu.CaptureStatus's too.
enum {
	IG_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
	IG_ERROR_NOT_READY = 600, // CUDA_ERROR_NOT_READY, hipErrorNotReady: work still pending (a query's answer)
	IG_HOST_ALLOC_PORTABLE = 0x1, // CU_MEMHOSTALLOC_PORTABLE, hipHostMallocPortable
	IG_HOST_ALLOC_MAPPED = 0x2,   // CU_MEMHOSTALLOC_DEVICEMAP, hipHostMallocMapped
	IG_STREAM_NON_BLOCKING = 0x1,
	IG_EVENT_DISABLE_TIMING = 0x2,
	IG_IPC_LAZY_ENABLE_PEER_ACCESS = 0x1, // ROCm 6 and CUDA; ROCm 5's headers say 0
	IG_CAPTURE_MODE_GLOBAL = 0,
	IG_CAPTURE_MODE_THREAD_LOCAL = 1,
	IG_CAPTURE_MODE_RELAXED = 2,
	IG_CAPTURE_STATUS_NONE = 0,
	IG_CAPTURE_STATUS_ACTIVE = 1,
	IG_CAPTURE_STATUS_INVALIDATED = 2,
	IG_WRITE_VALUE_DEFAULT = 0x0, // CU_STREAM_WRITE_VALUE_DEFAULT (a memory barrier first); HIP's flags are reserved, 0
	IG_WAIT_VALUE_GEQ = 0x0,      // CU_STREAM_WAIT_VALUE_GEQ, hipStreamWaitValueGte
};

// IG_API(X) lists the functions both libraries have, as X(CUDA name,
// (CUDA parameters), HIP name, (HIP parameters)), with the exact (versioned)
// symbol names and parameter lists of cuda.h and hip_runtime_api.h; every
// one returns the library's result code. IGCU_ONLY and IGHIP_ONLY (in
// cuda.go and hip_api.h) list the few that one library alone has.
#define IG_API(X) \
	X(cuInit, (unsigned int flags), hipInit, (unsigned int flags)) \
	X(cuDeviceGetCount, (int *count), hipGetDeviceCount, (int *count)) \
	X(cuCtxSetCurrent, (CUcontext ctx), hipSetDevice, (int deviceId)) \
	X(cuCtxSynchronize, (void), hipDeviceSynchronize, (void)) \
	X(cuMemAlloc_v2, (CUdeviceptr *p, size_t n), hipMalloc, (void **ptr, size_t size)) \
	X(cuMemFree_v2, (CUdeviceptr p), hipFree, (void *ptr)) \
	X(cuMemHostAlloc, (void **pp, size_t n, unsigned int flags), hipHostMalloc, (void **ptr, size_t size, unsigned int flags)) \
	X(cuMemHostGetDevicePointer_v2, (CUdeviceptr *d, void *p, unsigned int flags), \
		hipHostGetDevicePointer, (void **devPtr, void *hstPtr, unsigned int flags)) \
	X(cuMemFreeHost, (void *p), hipHostFree, (void *ptr)) \
	X(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n), hipMemcpyHtoD, (hipDeviceptr_t dst, void *src, size_t sizeBytes)) \
	X(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n), hipMemcpyDtoH, (void *dst, hipDeviceptr_t src, size_t sizeBytes)) \
	X(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), \
		hipMemcpyDtoDAsync, (hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream)) \
	X(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream s), \
		hipMemcpyHtoDAsync, (hipDeviceptr_t dst, void *src, size_t sizeBytes, hipStream_t stream)) \
	X(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream s), \
		hipMemcpyDtoHAsync, (void *dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream)) \
	X(cuMemsetD8Async, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s), \
		hipMemsetD8Async, (hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream)) \
	X(cuMemsetD32Async, (CUdeviceptr dst, unsigned int v, size_t n, CUstream s), \
		hipMemsetD32Async, (hipDeviceptr_t dest, int value, size_t count, hipStream_t stream)) \
	X(cuStreamCreate, (CUstream *s, unsigned int flags), hipStreamCreateWithFlags, (hipStream_t *stream, unsigned int flags)) \
	X(cuStreamWriteValue32_v2, (CUstream s, CUdeviceptr addr, unsigned int value, unsigned int flags), \
		hipStreamWriteValue32, (hipStream_t stream, void *ptr, uint32_t value, unsigned int flags)) \
	X(cuStreamWaitValue32_v2, (CUstream s, CUdeviceptr addr, unsigned int value, unsigned int flags), \
		hipStreamWaitValue32, (hipStream_t stream, void *ptr, uint32_t value, unsigned int flags, uint32_t mask)) \
	X(cuStreamDestroy_v2, (CUstream s), hipStreamDestroy, (hipStream_t stream)) \
	X(cuStreamSynchronize, (CUstream s), hipStreamSynchronize, (hipStream_t stream)) \
	X(cuStreamQuery, (CUstream s), hipStreamQuery, (hipStream_t stream)) \
	X(cuEventCreate, (CUevent *e, unsigned int flags), hipEventCreateWithFlags, (hipEvent_t *event, unsigned int flags)) \
	X(cuEventDestroy_v2, (CUevent e), hipEventDestroy, (hipEvent_t event)) \
	X(cuEventRecord, (CUevent e, CUstream s), hipEventRecord, (hipEvent_t event, hipStream_t stream)) \
	X(cuEventSynchronize, (CUevent e), hipEventSynchronize, (hipEvent_t event)) \
	X(cuStreamWaitEvent, (CUstream s, CUevent e, unsigned int flags), \
		hipStreamWaitEvent, (hipStream_t stream, hipEvent_t event, unsigned int flags)) \
	X(cuModuleLoadData, (CUmodule *m, const void *image), hipModuleLoadData, (hipModule_t *module, const void *image)) \
	X(cuModuleUnload, (CUmodule m), hipModuleUnload, (hipModule_t module)) \
	X(cuModuleGetFunction, (CUfunction *f, CUmodule m, const char *name), \
		hipModuleGetFunction, (hipFunction_t *function, hipModule_t module, const char *kname)) \
	X(cuModuleGetGlobal_v2, (CUdeviceptr *p, size_t *bytes, CUmodule m, const char *name), \
		hipModuleGetGlobal, (hipDeviceptr_t *dptr, size_t *bytes, hipModule_t hmod, const char *name)) \
	X(cuLaunchKernel, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, \
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream s, \
		void **params, void **extra), \
		hipModuleLaunchKernel, (hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, \
		unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, \
		unsigned int sharedMemBytes, hipStream_t stream, void **kernelParams, void **extra)) \
	X(cuDeviceCanAccessPeer, (int *can, CUdevice dev, CUdevice peer), \
		hipDeviceCanAccessPeer, (int *canAccessPeer, int deviceId, int peerDeviceId)) \
	X(cuCtxEnablePeerAccess, (CUcontext peer, unsigned int flags), hipDeviceEnablePeerAccess, (int peerDeviceId, unsigned int flags)) \
	X(cuIpcGetMemHandle, (CUipcMemHandle *h, CUdeviceptr p), hipIpcGetMemHandle, (hipIpcMemHandle_t *handle, void *devPtr)) \
	X(cuIpcOpenMemHandle_v2, (CUdeviceptr *p, CUipcMemHandle h, unsigned int flags), \
		hipIpcOpenMemHandle, (void **devPtr, hipIpcMemHandle_t handle, unsigned int flags)) \
	X(cuIpcCloseMemHandle, (CUdeviceptr p), hipIpcCloseMemHandle, (void *devPtr)) \
	X(cuStreamBeginCapture_v2, (CUstream s, int mode), hipStreamBeginCapture, (hipStream_t stream, hipStreamCaptureMode mode)) \
	X(cuStreamEndCapture, (CUstream s, CUgraph *g), hipStreamEndCapture, (hipStream_t stream, hipGraph_t *pGraph)) \
	X(cuStreamIsCapturing, (CUstream s, int *status), hipStreamIsCapturing, (hipStream_t stream, hipStreamCaptureStatus *pCaptureStatus)) \
	X(cuGraphInstantiateWithFlags, (CUgraphExec *e, CUgraph g, unsigned long long flags), \
		hipGraphInstantiate, (hipGraphExec_t *pGraphExec, hipGraph_t graph, hipGraphNode_t *pErrorNode, \
		char *pLogBuffer, size_t bufferSize)) \
	X(cuGraphLaunch, (CUgraphExec e, CUstream s), hipGraphLaunch, (hipGraphExec_t graphExec, hipStream_t stream)) \
	X(cuGraphDestroy, (CUgraph g), hipGraphDestroy, (hipGraph_t graph)) \
	X(cuGraphExecDestroy, (CUgraphExec e), hipGraphExecDestroy, (hipGraphExec_t graphExec))

// ig_value_op is one stream memory operation of a batch (value_ops): with
// wait (1), WaitValue32's wait until the word at dst is at least value,
// else (0) WriteValue32's store of value into it. gpu.ValueOp has this
// layout (driver.go checks it), so Go passes its slice as it is.
typedef struct {
	uint64_t dst;
	uint32_t value;
	uint8_t wait;
	uint8_t pad_[3];
} ig_value_op;

// IG_OPS(X) lists the operations of a binding (the ig_driver table), as
// X(kind, op, (parameters), (argument names), what each library does).
// Every operation returns the library's result code (0: success) and sets
// *call to the name of the function that produced it. The kinds, and what
// follows the argument names:
//   one     (bind, then one call) CUDA function, (its arguments), HIP function, (its arguments)
//   out     (bind, one call that creates a handle into the local o, stored to *outptr)
//           outptr, CUDA handle type, function, (arguments), HIP type, function, (arguments)
//   two     (bind, two calls, the second only when the first succeeds)
//           CUDA function, (arguments), function, (arguments), HIP function, (arguments), function, (arguments)
//   again   (bind, one call that may answer "already enabled", which is no error) as one
//   ready   (bind, one call that may answer "not ready", which is no error: *done says
//           whether the work is done) as one
//   nobind  (one call, no device bound) as one
//   handle  (bind, export an IPC handle into out's 64 bytes) CUDA handle type, function, (arguments), HIP ...
//   mapped  (bind, pinned host memory and its device address; the memory is freed when the
//           address cannot be had) CUDA alloc function, (arguments), device pointer type,
//           function, (arguments), free function, HIP ...
//   bind    (bind the device to the calling thread, nothing else)
//   start   (initialise the library with the first call, ask the binding whether it may
//           launch programmatic dependents, count the devices with the second) as two
//   launch  (bind, launch a kernel: its one by-value struct parameter is args, and
//           kernelParams holds one pointer to it; the library copies the bytes before it
//           returns, so the caller's buffer, Go memory pinned for the call, is used as is;
//           with dependent, the binding's launch_dependent) CUDA function, HIP function
//   load    (open: load the library and its functions, written once below)
//   own     (written in the platform's file)
// A parameter h is the device's handle (a CUDA context, a HIP ordinal), id
// its device number; handles and device addresses travel as uintptr_t.
#define IG_OPS(X) \
	X(own, alloc, (uintptr_t h, size_t n, int fine, uintptr_t *p, const char **call), (h, n, fine, p, call)) \
	X(one, free, (uintptr_t h, uintptr_t p, const char **call), (h, p, call), \
		cuMemFree_v2, ((CUdeviceptr)p), hipFree, ((void *)p)) \
	X(mapped, host_alloc, (uintptr_t h, size_t n, void **host, uintptr_t *dev, const char **call), (h, n, host, dev, call), \
		cuMemHostAlloc, (host, n, IG_HOST_ALLOC_PORTABLE | IG_HOST_ALLOC_MAPPED), \
		CUdeviceptr, cuMemHostGetDevicePointer_v2, (&o, *host, 0), cuMemFreeHost, \
		hipHostMalloc, (host, n, IG_HOST_ALLOC_MAPPED | IG_HOST_ALLOC_PORTABLE), \
		void *, hipHostGetDevicePointer, (&o, *host, 0), hipHostFree) \
	X(one, host_free, (uintptr_t h, void *host, const char **call), (h, host, call), \
		cuMemFreeHost, (host), hipHostFree, (host)) \
	X(two, htod, (uintptr_t h, uintptr_t dst, const void *src, size_t n, const char **call), (h, dst, src, n, call), \
		cuMemcpyHtoD_v2, ((CUdeviceptr)dst, src, n), cuStreamSynchronize, (IGCU_STREAM_LEGACY), \
		hipMemcpyHtoD, ((hipDeviceptr_t)dst, (void *)src, n), hipStreamSynchronize, ((hipStream_t)0)) \
	X(one, dtoh, (uintptr_t h, void *dst, uintptr_t src, size_t n, const char **call), (h, dst, src, n, call), \
		cuMemcpyDtoH_v2, (dst, (CUdeviceptr)src, n), hipMemcpyDtoH, (dst, (hipDeviceptr_t)src, n)) \
	X(one, dtod_async, (uintptr_t h, uintptr_t dst, uintptr_t src, size_t n, uintptr_t s, const char **call), \
		(h, dst, src, n, s, call), \
		cuMemcpyDtoDAsync_v2, ((CUdeviceptr)dst, (CUdeviceptr)src, n, (CUstream)s), \
		hipMemcpyDtoDAsync, ((hipDeviceptr_t)dst, (hipDeviceptr_t)src, n, (hipStream_t)s)) \
	X(one, htod_async, (uintptr_t h, uintptr_t dst, const void *src, size_t n, uintptr_t s, const char **call), \
		(h, dst, src, n, s, call), \
		cuMemcpyHtoDAsync_v2, ((CUdeviceptr)dst, src, n, (CUstream)s), \
		hipMemcpyHtoDAsync, ((hipDeviceptr_t)dst, (void *)src, n, (hipStream_t)s)) \
	X(one, dtoh_async, (uintptr_t h, void *dst, uintptr_t src, size_t n, uintptr_t s, const char **call), \
		(h, dst, src, n, s, call), \
		cuMemcpyDtoHAsync_v2, (dst, (CUdeviceptr)src, n, (CUstream)s), \
		hipMemcpyDtoHAsync, (dst, (hipDeviceptr_t)src, n, (hipStream_t)s)) \
	X(one, memset_async, (uintptr_t h, uintptr_t dst, unsigned char v, size_t n, uintptr_t s, const char **call), \
		(h, dst, v, n, s, call), \
		cuMemsetD8Async, ((CUdeviceptr)dst, v, n, (CUstream)s), hipMemsetD8Async, ((hipDeviceptr_t)dst, v, n, (hipStream_t)s)) \
	X(one, memset32_async, (uintptr_t h, uintptr_t dst, unsigned int v, size_t n, uintptr_t s, const char **call), \
		(h, dst, v, n, s, call), \
		cuMemsetD32Async, ((CUdeviceptr)dst, v, n, (CUstream)s), hipMemsetD32Async, ((hipDeviceptr_t)dst, (int)v, n, (hipStream_t)s)) \
	X(one, write_value32, (uintptr_t h, uintptr_t dst, unsigned int v, uintptr_t s, const char **call), (h, dst, v, s, call), \
		cuStreamWriteValue32_v2, ((CUstream)s, (CUdeviceptr)dst, v, IG_WRITE_VALUE_DEFAULT), \
		hipStreamWriteValue32, ((hipStream_t)s, (void *)dst, v, IG_WRITE_VALUE_DEFAULT)) \
	X(one, wait_value32, (uintptr_t h, uintptr_t dst, unsigned int v, uintptr_t s, const char **call), (h, dst, v, s, call), \
		cuStreamWaitValue32_v2, ((CUstream)s, (CUdeviceptr)dst, v, IG_WAIT_VALUE_GEQ), \
		hipStreamWaitValue32, ((hipStream_t)s, (void *)dst, v, IG_WAIT_VALUE_GEQ, 0xffffffffu)) \
	X(own, value_ops, (uintptr_t h, const ig_value_op *ops, unsigned int n, uintptr_t s, const char **call), \
		(h, ops, n, s, call)) \
	X(bind, bind, (uintptr_t h, const char **call), (h, call)) \
	X(one, sync, (uintptr_t h, const char **call), (h, call), cuCtxSynchronize, (), hipDeviceSynchronize, ()) \
	X(out, stream_create, (uintptr_t h, uintptr_t *s, const char **call), (h, s, call), s, \
		CUstream, cuStreamCreate, (&o, IG_STREAM_NON_BLOCKING), \
		hipStream_t, hipStreamCreateWithFlags, (&o, IG_STREAM_NON_BLOCKING)) \
	X(one, stream_destroy, (uintptr_t h, uintptr_t s, const char **call), (h, s, call), \
		cuStreamDestroy_v2, ((CUstream)s), hipStreamDestroy, ((hipStream_t)s)) \
	X(one, stream_sync, (uintptr_t h, uintptr_t s, const char **call), (h, s, call), \
		cuStreamSynchronize, ((CUstream)s), hipStreamSynchronize, ((hipStream_t)s)) \
	X(ready, stream_query, (uintptr_t h, uintptr_t s, int *done, const char **call), (h, s, done, call), \
		cuStreamQuery, ((CUstream)s), hipStreamQuery, ((hipStream_t)s)) \
	X(out, event_create, (uintptr_t h, int timing, uintptr_t *e, const char **call), (h, timing, e, call), e, \
		CUevent, cuEventCreate, (&o, timing ? 0 : IG_EVENT_DISABLE_TIMING), \
		hipEvent_t, hipEventCreateWithFlags, (&o, timing ? 0 : IG_EVENT_DISABLE_TIMING)) \
	X(one, event_destroy, (uintptr_t h, uintptr_t e, const char **call), (h, e, call), \
		cuEventDestroy_v2, ((CUevent)e), hipEventDestroy, ((hipEvent_t)e)) \
	X(one, event_record, (uintptr_t h, uintptr_t e, uintptr_t s, const char **call), (h, e, s, call), \
		cuEventRecord, ((CUevent)e, (CUstream)s), hipEventRecord, ((hipEvent_t)e, (hipStream_t)s)) \
	X(one, event_sync, (uintptr_t h, uintptr_t e, const char **call), (h, e, call), \
		cuEventSynchronize, ((CUevent)e), hipEventSynchronize, ((hipEvent_t)e)) \
	X(one, wait_event, (uintptr_t h, uintptr_t s, uintptr_t e, const char **call), (h, s, e, call), \
		cuStreamWaitEvent, ((CUstream)s, (CUevent)e, 0), hipStreamWaitEvent, ((hipStream_t)s, (hipEvent_t)e, 0)) \
	X(own, event_elapsed, (uintptr_t h, uintptr_t a, uintptr_t b, float *ms, const char **call), (h, a, b, ms, call)) \
	X(out, module_load, (uintptr_t h, const void *image, uintptr_t *m, const char **call), (h, image, m, call), m, \
		CUmodule, cuModuleLoadData, (&o, image), hipModule_t, hipModuleLoadData, (&o, image)) \
	X(one, module_unload, (uintptr_t h, uintptr_t m, const char **call), (h, m, call), \
		cuModuleUnload, ((CUmodule)m), hipModuleUnload, ((hipModule_t)m)) \
	X(out, function, (uintptr_t h, uintptr_t m, const char *name, uintptr_t *f, const char **call), (h, m, name, f, call), f, \
		CUfunction, cuModuleGetFunction, (&o, (CUmodule)m, name), hipFunction_t, hipModuleGetFunction, (&o, (hipModule_t)m, name)) \
	X(out, global, (uintptr_t h, uintptr_t m, const char *name, uintptr_t *p, size_t *bytes, const char **call), \
		(h, m, name, p, bytes, call), p, \
		CUdeviceptr, cuModuleGetGlobal_v2, (&o, bytes, (CUmodule)m, name), \
		hipDeviceptr_t, hipModuleGetGlobal, (&o, bytes, (hipModule_t)m, name)) \
	X(launch, launch, (uintptr_t h, int dependent, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz, \
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t s, \
		const void *args, size_t n, const char **call), (h, dependent, f, gx, gy, gz, bx, by, bz, shared, s, args, n, call), \
		cuLaunchKernel, hipModuleLaunchKernel) \
	X(nobind, can_peer, (uintptr_t id, uintptr_t peer, int *can, const char **call), (id, peer, can, call), \
		cuDeviceCanAccessPeer, (can, (CUdevice)id, (CUdevice)peer), hipDeviceCanAccessPeer, (can, (int)id, (int)peer)) \
	X(again, enable_peer, (uintptr_t h, uintptr_t peer, const char **call), (h, peer, call), \
		cuCtxEnablePeerAccess, ((CUcontext)peer, 0), hipDeviceEnablePeerAccess, ((int)peer, 0)) \
	X(handle, ipc_get, (uintptr_t h, uintptr_t p, void *out, const char **call), (h, p, out, call), \
		CUipcMemHandle, cuIpcGetMemHandle, (&o, (CUdeviceptr)p), hipIpcMemHandle_t, hipIpcGetMemHandle, (&o, (void *)p)) \
	X(own, ipc_open, (uintptr_t h, const void *in, uintptr_t *p, const char **call), (h, in, p, call)) \
	X(one, ipc_close, (uintptr_t h, uintptr_t p, const char **call), (h, p, call), \
		cuIpcCloseMemHandle, ((CUdeviceptr)p), hipIpcCloseMemHandle, ((void *)p)) \
	X(one, begin_capture, (uintptr_t h, uintptr_t s, int mode, const char **call), (h, s, mode, call), \
		cuStreamBeginCapture_v2, ((CUstream)s, mode), hipStreamBeginCapture, ((hipStream_t)s, mode)) \
	X(out, end_capture, (uintptr_t h, uintptr_t s, uintptr_t *g, const char **call), (h, s, g, call), g, \
		CUgraph, cuStreamEndCapture, ((CUstream)s, &o), hipGraph_t, hipStreamEndCapture, ((hipStream_t)s, &o)) \
	X(one, is_capturing, (uintptr_t h, uintptr_t s, int *status, const char **call), (h, s, status, call), \
		cuStreamIsCapturing, ((CUstream)s, status), hipStreamIsCapturing, ((hipStream_t)s, status)) \
	X(out, instantiate, (uintptr_t h, uintptr_t g, uintptr_t *e, const char **call), (h, g, e, call), e, \
		CUgraphExec, cuGraphInstantiateWithFlags, (&o, (CUgraph)g, 0), \
		hipGraphExec_t, hipGraphInstantiate, (&o, (hipGraph_t)g, NULL, NULL, 0)) \
	X(one, graph_launch, (uintptr_t h, uintptr_t e, uintptr_t s, const char **call), (h, e, s, call), \
		cuGraphLaunch, ((CUgraphExec)e, (CUstream)s), hipGraphLaunch, ((hipGraphExec_t)e, (hipStream_t)s)) \
	X(one, graph_destroy, (uintptr_t h, uintptr_t g, const char **call), (h, g, call), \
		cuGraphDestroy, ((CUgraph)g), hipGraphDestroy, ((hipGraph_t)g)) \
	X(one, graph_exec_destroy, (uintptr_t h, uintptr_t e, const char **call), (h, e, call), \
		cuGraphExecDestroy, ((CUgraphExec)e), hipGraphExecDestroy, ((hipGraphExec_t)e)) \
	X(load, open, (const char *lib, int *opened, const char **msg), (lib, opened, msg)) \
	X(own, dependent, (int *dependent, const char **call), (dependent, call)) \
	X(own, peer_writes, (int *ok, const char **call), (ok, call)) \
	X(start, init, (int *count, int *dependent, const char **call), (count, dependent, call), \
		cuInit, (0), cuDeviceGetCount, (count), hipInit, (0), hipGetDeviceCount, (count)) \
	X(own, device, (int ordinal, uintptr_t *h, uintptr_t *id, int *dependent, const char **call), \
		(ordinal, h, id, dependent, call)) \
	X(own, error, (int code, const char **name, const char **desc), (code, name, desc))

// ig_driver is a binding: its operations, filled by the platform's file.
typedef struct {
#define IG_FIELD(kind, op, params, ...) int (*op) params;
	IG_OPS(IG_FIELD)
#undef IG_FIELD
} ig_driver;

// A binding (cuda.go, hip.go) defines IG_SIDE(cuda, hip) to pick its
// column and includes this file after its types: the rest follows from the
// tables. It writes its own operations (kind own, and dependent: may the
// library launch programmatic dependents) after the include, then expands
// IG_TABLE().
#ifdef IG_SIDE
#include <dlfcn.h>

#define IG_CAT(a, b) IG_CAT_(a, b)
#define IG_CAT_(a, b) a##b
#define IG_NAME(op) IG_CAT(IG_SIDE(igcu_, ighip_), op)
#define IG_FN(fn) IG_CAT(IG_SIDE(igcu_, ighip_), fn)
#define IG_ONLY(X) IG_SIDE(IGCU_ONLY, IGHIP_ONLY)(X)
#define IG_CALL(fn, args) IG_CALL_(fn, args)
#define IG_CALL_(fn, args) (*call = #fn, IG_FN(fn) args)

// The library's functions, loaded by open.
#define IG_DECL(name, params) static IG_SIDE(CUresult, hipError_t) (*IG_FN(name)) params;
#define IG_DECL_API(cn, cp, hn, hp) IG_DECL(IG_SIDE(cn, hn), IG_SIDE(cp, hp))
IG_API(IG_DECL_API)
IG_ONLY(IG_DECL)

// Every wrapper binds the device (the CUDA context; the HIP device, which is
// per thread) and makes its call in one C call, so the goroutine cannot
// move to another OS thread in between. *call names the function that
// produced the result.
#define IG_BIND(h) do { \
	int r_ = IG_CALL(IG_SIDE(cuCtxSetCurrent, hipSetDevice), (IG_SIDE((CUcontext), (int))(h))); \
	if (r_ != 0) return r_; \
} while (0)

// The binding's own operations, written after the include, and open_more,
// which loads the functions the lists leave out.
#define IG_PROTO(kind, op, params, ...) IG_PROTO_##kind(op, params)
#define IG_PROTO_own(op, params) static int IG_NAME(op) params;
#define IG_PROTO_one(op, params)
#define IG_PROTO_out(op, params)
#define IG_PROTO_two(op, params)
#define IG_PROTO_start(op, params)
#define IG_PROTO_again(op, params)
#define IG_PROTO_ready(op, params)
#define IG_PROTO_nobind(op, params)
#define IG_PROTO_handle(op, params)
#define IG_PROTO_mapped(op, params)
#define IG_PROTO_bind(op, params)
#define IG_PROTO_load(op, params)
#define IG_PROTO_launch(op, params)
IG_OPS(IG_PROTO)
static int IG_NAME(open_more)(void *h, const char **msg);
static int IG_NAME(launch_dependent)(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t s, void **kp, const char **call);

// open loads the library and every function of the lists, then the
// binding's others (open_more). On
// failure it sets *msg (dlerror's, or the missing symbol's); *opened tells
// whether dlopen worked.
static int IG_NAME(open)(const char *lib, int *opened, const char **msg) {
	*opened = 0;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		*msg = e ? e : "dlopen failed";
		return 1;
	}
	*opened = 1;
#define IG_LOAD(name, params) \
	IG_FN(name) = (IG_SIDE(CUresult, hipError_t) (*) params)dlsym(h, IG_STR(name)); \
	if (IG_FN(name) == NULL) { *msg = "missing symbol " IG_STR(name); return 1; }
#define IG_STR(x) IG_STR_(x)
#define IG_STR_(x) #x
#define IG_LOAD_API(cn, cp, hn, hp) IG_LOAD(IG_SIDE(cn, hn), IG_SIDE(cp, hp))
	IG_API(IG_LOAD_API)
	IG_ONLY(IG_LOAD)
	return IG_NAME(open_more)(h, msg);
}

#define IG_WRAP(kind, op, params, args, ...) IG_WRAP_##kind(op, params, __VA_ARGS__)
#define IG_WRAP_own(op, params, ...)
#define IG_WRAP_load(op, params, ...)
#define IG_WRAP_bind(op, params, ...) \
	static int IG_NAME(op) params { IG_BIND(h); return 0; }
#define IG_WRAP_one(op, params, cf, ca, hf, ha) \
	static int IG_NAME(op) params { IG_BIND(h); return IG_CALL(IG_SIDE(cf, hf), IG_SIDE(ca, ha)); }
#define IG_WRAP_nobind(op, params, cf, ca, hf, ha) \
	static int IG_NAME(op) params { return IG_CALL(IG_SIDE(cf, hf), IG_SIDE(ca, ha)); }
#define IG_WRAP_again(op, params, cf, ca, hf, ha) \
	static int IG_NAME(op) params { \
		IG_BIND(h); \
		int r = IG_CALL(IG_SIDE(cf, hf), IG_SIDE(ca, ha)); \
		return r == IG_ERROR_PEER_ACCESS_ALREADY_ENABLED ? 0 : r; \
	}
#define IG_WRAP_ready(op, params, cf, ca, hf, ha) \
	static int IG_NAME(op) params { \
		IG_BIND(h); \
		int r = IG_CALL(IG_SIDE(cf, hf), IG_SIDE(ca, ha)); \
		*done = r == 0; \
		return r == IG_ERROR_NOT_READY ? 0 : r; \
	}
#define IG_WRAP_out(op, params, outptr, ct, cf, ca, ht, hf, ha) \
	static int IG_NAME(op) params { \
		IG_BIND(h); \
		IG_SIDE(ct, ht) o = 0; \
		int r = IG_CALL(IG_SIDE(cf, hf), IG_SIDE(ca, ha)); \
		*outptr = (uintptr_t)o; \
		return r; \
	}
#define IG_WRAP_two(op, params, cf1, ca1, cf2, ca2, hf1, ha1, hf2, ha2) \
	static int IG_NAME(op) params { \
		IG_BIND(h); \
		int r = IG_CALL(IG_SIDE(cf1, hf1), IG_SIDE(ca1, ha1)); \
		if (r != 0) return r; \
		return IG_CALL(IG_SIDE(cf2, hf2), IG_SIDE(ca2, ha2)); \
	}
#define IG_WRAP_handle(op, params, ct, cf, ca, ht, hf, ha) \
	static int IG_NAME(op) params { \
		IG_BIND(h); \
		IG_SIDE(ct, ht) o; \
		int r = IG_CALL(IG_SIDE(cf, hf), IG_SIDE(ca, ha)); \
		if (r == 0) memcpy(out, o.reserved, sizeof o.reserved); \
		return r; \
	}
#define IG_WRAP_launch(op, params, cf, hf) \
	static int IG_NAME(op) params { \
		IG_BIND(h); \
		void *one[1] = {(void *)args}; \
		void **kp = n > 0 ? one : NULL; \
		if (dependent) return IG_NAME(launch_dependent)(f, gx, gy, gz, bx, by, bz, shared, s, kp, call); \
		return IG_CALL(IG_SIDE(cf, hf), ((IG_SIDE(CUfunction, hipFunction_t))f, gx, gy, gz, bx, by, bz, shared, \
			(IG_SIDE(CUstream, hipStream_t))s, kp, NULL)); \
	}
#define IG_WRAP_start(op, params, cf1, ca1, cf2, ca2, hf1, ha1, hf2, ha2) \
	static int IG_NAME(op) params { \
		int r = IG_CALL(IG_SIDE(cf1, hf1), IG_SIDE(ca1, ha1)); \
		if (r == 0) r = IG_NAME(dependent)(dependent, call); \
		if (r != 0) return r; \
		return IG_CALL(IG_SIDE(cf2, hf2), IG_SIDE(ca2, ha2)); \
	}
#define IG_WRAP_mapped(op, params, caf, caa, cdt, cdf, cda, cff, haf, haa, hdt, hdf, hda, hff) \
	static int IG_NAME(op) params { \
		IG_BIND(h); \
		int r = IG_CALL(IG_SIDE(caf, haf), IG_SIDE(caa, haa)); \
		if (r != 0) return r; \
		IG_SIDE(cdt, hdt) o = 0; \
		r = IG_CALL(IG_SIDE(cdf, hdf), IG_SIDE(cda, hda)); \
		if (r != 0) { \
			IG_FN(IG_SIDE(cff, hff))(*host); \
			*host = NULL; \
		} \
		*dev = (uintptr_t)o; \
		return r; \
	}

IG_OPS(IG_WRAP)

// IG_TABLE() defines the binding's ig_driver, and igcu_driver() or
// ighip_driver(), which hands it to Go.
#define IG_ENTRY(kind, op, ...) .op = IG_NAME(op),
#define IG_TABLE() \
	static const ig_driver IG_NAME(table) = {IG_OPS(IG_ENTRY)}; \
	static const ig_driver *IG_NAME(driver)(void) { return &IG_NAME(table); }

#endif // IG_SIDE
#endif

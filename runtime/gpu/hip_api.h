// hip_api.h: the part of the HIP runtime API (hip_runtime_api.h) that the
// platform layer calls through dlopen, so that no ROCm header is needed to
// build it.
//
// hip.go includes it with its own declarations of the types. The test
// hip_test.go includes it after the real <hip/hip_runtime_api.h> with
// IGHIP_REAL_HEADER defined: every function of the lists is then assigned
// to a pointer of the type spelled here, the sizes of the types declared
// here are compared with the real ones, and every constant with the
// header's, so a wrong name, parameter list or value fails to compile.
#ifndef IGHIP_API_H
#define IGHIP_API_H

#include <stddef.h>

#ifndef IGHIP_REAL_HEADER
typedef int hipError_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;
typedef struct ihipGraph *hipGraph_t;
typedef struct hipGraphExec *hipGraphExec_t;
typedef struct hipGraphNode *hipGraphNode_t;
typedef void *hipDeviceptr_t;
typedef struct { char reserved[64]; } hipIpcMemHandle_t;
typedef int hipStreamCaptureMode;
typedef int hipStreamCaptureStatus;
#else
_Static_assert(sizeof(hipError_t) == sizeof(int), "hipError_t is not an int");
_Static_assert(sizeof(hipDeviceptr_t) == sizeof(void *), "hipDeviceptr_t is not a pointer");
_Static_assert(sizeof(hipIpcMemHandle_t) == 64, "hipIpcMemHandle_t is not 64 bytes");
_Static_assert(sizeof(hipStreamCaptureMode) == sizeof(int), "hipStreamCaptureMode is not an int");
_Static_assert(sizeof(hipStreamCaptureStatus) == sizeof(int), "hipStreamCaptureStatus is not an int");
#endif

enum {
	IGHIP_ERROR_INVALID_VALUE = 1,
	IGHIP_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
	IGHIP_DEVICE_MALLOC_FINEGRAINED = 0x1,
	IGHIP_DEVICE_MALLOC_UNCACHED = 0x3, // ROCm 5.7 and later
	IGHIP_HOST_MALLOC_PORTABLE = 0x1,
	IGHIP_HOST_MALLOC_MAPPED = 0x2,
	IGHIP_STREAM_NON_BLOCKING = 0x1,
	IGHIP_EVENT_DISABLE_TIMING = 0x2,
	IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 0x1,    // ROCm 6 (and CUDA)
	IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS_V5 = 0x0, // ROCm 5 headers
	// The values of gpu.CaptureMode and gpu.CaptureStatus.
	IGHIP_CAPTURE_MODE_GLOBAL = 0,
	IGHIP_CAPTURE_MODE_THREAD_LOCAL = 1,
	IGHIP_CAPTURE_MODE_RELAXED = 2,
	IGHIP_CAPTURE_STATUS_NONE = 0,
	IGHIP_CAPTURE_STATUS_ACTIVE = 1,
	IGHIP_CAPTURE_STATUS_INVALIDATED = 2,
};

#ifdef IGHIP_REAL_HEADER
#define IGHIP_SAME(ours, hips) _Static_assert((long)(ours) == (long)(hips), #hips)
IGHIP_SAME(IGHIP_ERROR_INVALID_VALUE, hipErrorInvalidValue);
IGHIP_SAME(IGHIP_ERROR_PEER_ACCESS_ALREADY_ENABLED, hipErrorPeerAccessAlreadyEnabled);
IGHIP_SAME(IGHIP_DEVICE_MALLOC_FINEGRAINED, hipDeviceMallocFinegrained);
#ifdef hipDeviceMallocUncached
IGHIP_SAME(IGHIP_DEVICE_MALLOC_UNCACHED, hipDeviceMallocUncached);
#endif
IGHIP_SAME(IGHIP_HOST_MALLOC_PORTABLE, hipHostMallocPortable);
IGHIP_SAME(IGHIP_HOST_MALLOC_MAPPED, hipHostMallocMapped);
IGHIP_SAME(IGHIP_STREAM_NON_BLOCKING, hipStreamNonBlocking);
IGHIP_SAME(IGHIP_EVENT_DISABLE_TIMING, hipEventDisableTiming);
_Static_assert(hipIpcMemLazyEnablePeerAccess == IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS ||
	hipIpcMemLazyEnablePeerAccess == IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS_V5, "hipIpcMemLazyEnablePeerAccess");
IGHIP_SAME(IGHIP_CAPTURE_MODE_GLOBAL, hipStreamCaptureModeGlobal);
IGHIP_SAME(IGHIP_CAPTURE_MODE_THREAD_LOCAL, hipStreamCaptureModeThreadLocal);
IGHIP_SAME(IGHIP_CAPTURE_MODE_RELAXED, hipStreamCaptureModeRelaxed);
IGHIP_SAME(IGHIP_CAPTURE_STATUS_NONE, hipStreamCaptureStatusNone);
IGHIP_SAME(IGHIP_CAPTURE_STATUS_ACTIVE, hipStreamCaptureStatusActive);
IGHIP_SAME(IGHIP_CAPTURE_STATUS_INVALIDATED, hipStreamCaptureStatusInvalidated);
#endif

// IGHIP_SYMS lists every function the platform layer calls that returns a
// hipError_t: X(name, parameter list as in hip_runtime_api.h).
#define IGHIP_SYMS(X) \
	X(hipInit, (unsigned int flags)) \
	X(hipGetDeviceCount, (int *count)) \
	X(hipSetDevice, (int deviceId)) \
	X(hipDeviceSynchronize, (void)) \
	X(hipMalloc, (void **ptr, size_t size)) \
	X(hipExtMallocWithFlags, (void **ptr, size_t sizeBytes, unsigned int flags)) \
	X(hipFree, (void *ptr)) \
	X(hipHostMalloc, (void **ptr, size_t size, unsigned int flags)) \
	X(hipHostGetDevicePointer, (void **devPtr, void *hstPtr, unsigned int flags)) \
	X(hipHostFree, (void *ptr)) \
	X(hipMemcpyHtoD, (hipDeviceptr_t dst, void *src, size_t sizeBytes)) \
	X(hipMemcpyDtoH, (void *dst, hipDeviceptr_t src, size_t sizeBytes)) \
	X(hipMemcpyDtoDAsync, (hipDeviceptr_t dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream)) \
	X(hipMemcpyHtoDAsync, (hipDeviceptr_t dst, void *src, size_t sizeBytes, hipStream_t stream)) \
	X(hipMemcpyDtoHAsync, (void *dst, hipDeviceptr_t src, size_t sizeBytes, hipStream_t stream)) \
	X(hipMemsetD8Async, (hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream)) \
	X(hipMemsetD32Async, (hipDeviceptr_t dest, int value, size_t count, hipStream_t stream)) \
	X(hipStreamCreateWithFlags, (hipStream_t *stream, unsigned int flags)) \
	X(hipStreamDestroy, (hipStream_t stream)) \
	X(hipStreamSynchronize, (hipStream_t stream)) \
	X(hipEventCreateWithFlags, (hipEvent_t *event, unsigned int flags)) \
	X(hipEventDestroy, (hipEvent_t event)) \
	X(hipEventRecord, (hipEvent_t event, hipStream_t stream)) \
	X(hipEventSynchronize, (hipEvent_t event)) \
	X(hipEventElapsedTime, (float *ms, hipEvent_t start, hipEvent_t stop)) \
	X(hipModuleLoadData, (hipModule_t *module, const void *image)) \
	X(hipModuleUnload, (hipModule_t module)) \
	X(hipModuleGetFunction, (hipFunction_t *function, hipModule_t module, const char *kname)) \
	X(hipModuleGetGlobal, (hipDeviceptr_t *dptr, size_t *bytes, hipModule_t hmod, const char *name)) \
	X(hipModuleLaunchKernel, (hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, \
		unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, \
		unsigned int sharedMemBytes, hipStream_t stream, void **kernelParams, void **extra)) \
	X(hipDeviceCanAccessPeer, (int *canAccessPeer, int deviceId, int peerDeviceId)) \
	X(hipDeviceEnablePeerAccess, (int peerDeviceId, unsigned int flags)) \
	X(hipIpcGetMemHandle, (hipIpcMemHandle_t *handle, void *devPtr)) \
	X(hipIpcOpenMemHandle, (void **devPtr, hipIpcMemHandle_t handle, unsigned int flags)) \
	X(hipIpcCloseMemHandle, (void *devPtr)) \
	X(hipStreamBeginCapture, (hipStream_t stream, hipStreamCaptureMode mode)) \
	X(hipStreamEndCapture, (hipStream_t stream, hipGraph_t *pGraph)) \
	X(hipStreamIsCapturing, (hipStream_t stream, hipStreamCaptureStatus *pCaptureStatus)) \
	X(hipGraphInstantiate, (hipGraphExec_t *pGraphExec, hipGraph_t graph, hipGraphNode_t *pErrorNode, \
		char *pLogBuffer, size_t bufferSize)) \
	X(hipGraphLaunch, (hipGraphExec_t graphExec, hipStream_t stream)) \
	X(hipGraphDestroy, (hipGraph_t graph)) \
	X(hipGraphExecDestroy, (hipGraphExec_t graphExec))

// IGHIP_STR_SYMS lists the functions that name an error.
#define IGHIP_STR_SYMS(X) \
	X(hipGetErrorName, (hipError_t hip_error)) \
	X(hipGetErrorString, (hipError_t hipError))

#endif

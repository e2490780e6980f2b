// hip_api.h: the part of the HIP runtime API (hip_runtime_api.h) that the
// platform layer calls through dlopen, so that no ROCm header is needed to
// build it: HIP's types and values, and the functions only HIP has (the
// HIP column of driver.h's IG_API lists those CUDA has too).
//
// hip.go includes it with its own declarations of the types. The test
// hip_test.go includes it and driver.h after the real
// <hip/hip_runtime_api.h> with IGHIP_REAL_HEADER defined: every function of
// the lists is then assigned to a pointer of the type spelled here or in
// IG_API, the sizes of the types declared here are compared with the real
// ones, and every constant with the header's, so a wrong name, parameter
// list or value fails to compile.
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

// The values only HIP uses (those both libraries share are driver.h's).
enum {
	IGHIP_ERROR_INVALID_VALUE = 1,
	IGHIP_DEVICE_MALLOC_FINEGRAINED = 0x1,
	IGHIP_DEVICE_MALLOC_UNCACHED = 0x3, // ROCm 5.7 and later
	IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS_V5 = 0x0, // ROCm 5 headers
};

// The check (hip_test.go) includes driver.h before this file, so that its
// shared values are compared with HIP's too.
#ifdef IGHIP_REAL_HEADER
#define IGHIP_SAME(ours, hips) _Static_assert((long)(ours) == (long)(hips), #hips)
IGHIP_SAME(IGHIP_ERROR_INVALID_VALUE, hipErrorInvalidValue);
IGHIP_SAME(IG_ERROR_PEER_ACCESS_ALREADY_ENABLED, hipErrorPeerAccessAlreadyEnabled);
IGHIP_SAME(IG_ERROR_NOT_READY, hipErrorNotReady);
IGHIP_SAME(IGHIP_DEVICE_MALLOC_FINEGRAINED, hipDeviceMallocFinegrained);
#ifdef hipDeviceMallocUncached
IGHIP_SAME(IGHIP_DEVICE_MALLOC_UNCACHED, hipDeviceMallocUncached);
#endif
IGHIP_SAME(IG_HOST_ALLOC_PORTABLE, hipHostMallocPortable);
IGHIP_SAME(IG_HOST_ALLOC_MAPPED, hipHostMallocMapped);
IGHIP_SAME(IG_STREAM_NON_BLOCKING, hipStreamNonBlocking);
IGHIP_SAME(IG_EVENT_DISABLE_TIMING, hipEventDisableTiming);
_Static_assert(hipIpcMemLazyEnablePeerAccess == IG_IPC_LAZY_ENABLE_PEER_ACCESS ||
	hipIpcMemLazyEnablePeerAccess == IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS_V5, "hipIpcMemLazyEnablePeerAccess");
IGHIP_SAME(IG_CAPTURE_MODE_GLOBAL, hipStreamCaptureModeGlobal);
IGHIP_SAME(IG_CAPTURE_MODE_THREAD_LOCAL, hipStreamCaptureModeThreadLocal);
IGHIP_SAME(IG_CAPTURE_MODE_RELAXED, hipStreamCaptureModeRelaxed);
IGHIP_SAME(IG_CAPTURE_STATUS_NONE, hipStreamCaptureStatusNone);
IGHIP_SAME(IG_CAPTURE_STATUS_ACTIVE, hipStreamCaptureStatusActive);
IGHIP_SAME(IG_CAPTURE_STATUS_INVALIDATED, hipStreamCaptureStatusInvalidated);
IGHIP_SAME(IG_WAIT_VALUE_GEQ, hipStreamWaitValueGte);
#endif

// IGHIP_ONLY lists the functions the platform layer calls that only HIP
// has, each returning a hipError_t (driver.h's IG_API lists those CUDA has
// too): X(name, parameter list as in hip_runtime_api.h).
#define IGHIP_ONLY(X) \
	X(hipExtMallocWithFlags, (void **ptr, size_t sizeBytes, unsigned int flags)) \
	X(hipEventElapsedTime, (float *ms, hipEvent_t start, hipEvent_t stop))

// IGHIP_STR_SYMS lists the functions that name an error.
#define IGHIP_STR_SYMS(X) \
	X(hipGetErrorName, (hipError_t hip_error)) \
	X(hipGetErrorString, (hipError_t hipError))

#endif

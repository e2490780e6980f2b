package gpu

/*
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The HIP runtime API the platform layer calls, with HIP's own types and
// values, declared in hip_api.h and driver.h and checked against
// hip_runtime_api.h by hip_test.go.
#include "hip_api.h"
#define IG_SIDE(cuda, hip) hip
#include "driver.h"

#define IGHIP_STR_DECL(name, params) static const char *(*ighip_##name) params;
IGHIP_STR_SYMS(IGHIP_STR_DECL)

// ighip_open_more loads the functions that name an error.
static int ighip_open_more(void *h, const char **msg) {
#define IGHIP_STR_LOAD(name, params) \
	ighip_##name = (const char *(*) params)dlsym(h, #name); \
	if (ighip_##name == NULL) { *msg = "missing symbol " #name; return 1; }
	IGHIP_STR_SYMS(IGHIP_STR_LOAD)
	return 0;
}

// ighip_resolved counts the functions of every list that are loaded, out
// of *total.
static int ighip_resolved(int *total) {
	int n = 0;
	*total = 0;
#define IGHIP_COUNT(name, params) (*total)++; if (ighip_##name != NULL) n++;
#define IGHIP_COUNT_API(cuda, cparams, name, params) IGHIP_COUNT(name, params)
	IG_API(IGHIP_COUNT_API)
	IGHIP_ONLY(IGHIP_COUNT)
	IGHIP_STR_SYMS(IGHIP_COUNT)
	return n;
}

// ighip_dependent: HIP launches no programmatic dependents.
static int ighip_dependent(int *dependent, const char **call) {
	*dependent = 0;
	return 0;
}

// ighip_peer_writes: hipStreamWriteValue32 stores into a peer GPU's
// memory.
static int ighip_peer_writes(int *ok, const char **call) {
	*ok = 1;
	return 0;
}

// ighip_device: every call selects the device by its ordinal.
static int ighip_device(int ordinal, uintptr_t *h, uintptr_t *id, int *dependent, const char **call) {
	*h = *id = (uintptr_t)ordinal;
	*dependent = 0;
	return 0;
}

static int ighip_error(int code, const char **name, const char **desc) {
	*name = ighip_hipGetErrorName(code);
	*desc = ighip_hipGetErrorString(code);
	return 0;
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
// gets fine-grained memory, what RCCL used before. Pinned host memory
// (host_alloc, hipHostMallocMapped) is fine-grained whatever
// HIP_HOST_COHERENT says (Coherence control, note on hipHostMalloc), so a
// kernel's system-scope release makes the error record visible to the host.
static int ighip_alloc(uintptr_t dev, size_t n, int fine, uintptr_t *p, const char **call) {
	IG_BIND(dev);
	void *ptr = NULL;
	hipError_t r;
	if (fine) {
		r = IG_CALL(hipExtMallocWithFlags, (&ptr, n, IGHIP_DEVICE_MALLOC_UNCACHED));
		if (r == IGHIP_ERROR_INVALID_VALUE)
			r = IG_CALL(hipExtMallocWithFlags, (&ptr, n, IGHIP_DEVICE_MALLOC_FINEGRAINED));
	} else {
		r = IG_CALL(hipMalloc, (&ptr, n));
	}
	*p = (uintptr_t)ptr;
	return r;
}

// ighip_value_ops enqueues the operations one call each, in order (HIP has
// no batch of stream memory operations that every ROCm since 5 has).
static int ighip_value_ops(uintptr_t dev, const ig_value_op *ops, unsigned int n, uintptr_t s, const char **call) {
	IG_BIND(dev);
	for (unsigned int i = 0; i < n; i++) {
		hipError_t r = ops[i].wait
			? IG_CALL(hipStreamWaitValue32, ((hipStream_t)s, (void *)(uintptr_t)ops[i].dst, ops[i].value, IG_WAIT_VALUE_GEQ, 0xffffffffu))
			: IG_CALL(hipStreamWriteValue32, ((hipStream_t)s, (void *)(uintptr_t)ops[i].dst, ops[i].value, IG_WRITE_VALUE_DEFAULT));
		if (r != 0) return r;
	}
	return 0;
}

static int ighip_event_elapsed(uintptr_t dev, uintptr_t a, uintptr_t b, float *ms, const char **call) {
	IG_BIND(dev);
	return IG_CALL(hipEventElapsedTime, (ms, (hipEvent_t)a, (hipEvent_t)b));
}

// ighip_ipc_open maps a peer's heap. The runtime accepts exactly one flag,
// hipIpcMemLazyEnablePeerAccess, and answers hipErrorInvalidValue to any
// other value (clr, hipIpcOpenMemHandle); its value is 0x1 in ROCm 6 (as in
// CUDA) but 0 in ROCm 5's headers: try the new value, then the old. The
// address may differ from one opening to the next (a documented difference
// from CUDA); the bases table takes whatever comes back. The handle (ipc_get)
// covers the heap's one allocation at offset 0, and its memory type belongs
// to the allocation: a peer that opens it maps it uncached too, as vLLM's
// ROCm all-reduce relies on for the uncached buffers it shares this way.
static int ighip_ipc_open(uintptr_t dev, const void *in, uintptr_t *p, const char **call) {
	IG_BIND(dev);
	hipIpcMemHandle_t h;
	memcpy(h.reserved, in, sizeof h.reserved);
	void *dp = NULL;
	hipError_t r = IG_CALL(hipIpcOpenMemHandle, (&dp, h, IG_IPC_LAZY_ENABLE_PEER_ACCESS));
	if (r == IGHIP_ERROR_INVALID_VALUE)
		r = IG_CALL(hipIpcOpenMemHandle, (&dp, h, IGHIP_IPC_MEM_LAZY_ENABLE_PEER_ACCESS_V5));
	*p = (uintptr_t)dp;
	return r;
}

// ighip_launch_dependent: HIP has no programmatic dependent launch, and a
// HIP device never asks for one (its DependentLaunches is false).
static int ighip_launch_dependent(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t s, void **kp, const char **call) {
	*call = "ighip_launch_dependent";
	return IGHIP_ERROR_INVALID_VALUE;
}

IG_TABLE()
*/
import "C"

// The HIP runtime, bound through the table above: the first of its
// libraries that opens is used; one that opens but does not work (no
// device, no driver) ends the search, since another name for the same
// runtime will not do better.
func init() {
	registerBinding(binding{name: "hip", devices: "HIP", libraries: []string{"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"}, table: C.ighip_driver()})
}

// hipResolved reports how many HIP functions are loaded, out of how many
// the platform layer calls (for the loader test).
func hipResolved() (resolved, total int) {
	var t C.int
	n := C.ighip_resolved(&t)
	return int(n), int(t)
}

package gpu

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"

#define IG_SIDE(cuda, hip) cuda
#include "driver.h"

// cuEventElapsedTime_v2 (CUDA 12.8+) where the driver has it, else the
// original; cuLaunchKernelEx (CUDA 12.0+) where the driver has it, for
// Programmatic Dependent Launch (older drivers launch with cuLaunchKernel).
static CUresult (*igcu_elapsed)(float *ms, CUevent a, CUevent b);
static const char *igcu_elapsed_name;
static CUresult (*igcu_launch_ex)(const IGCU_LaunchConfig *config, CUfunction f, void **params, void **extra);

static int igcu_open_more(void *h, const char **msg) {
	igcu_elapsed_name = "cuEventElapsedTime_v2";
	igcu_elapsed = (CUresult (*)(float *, CUevent, CUevent))dlsym(h, igcu_elapsed_name);
	if (igcu_elapsed == NULL) {
		igcu_elapsed_name = "cuEventElapsedTime";
		igcu_elapsed = (CUresult (*)(float *, CUevent, CUevent))dlsym(h, igcu_elapsed_name);
	}
	if (igcu_elapsed == NULL) {
		*msg = "missing symbol cuEventElapsedTime";
		return 1;
	}
	igcu_launch_ex = (CUresult (*)(const IGCU_LaunchConfig *, CUfunction, void **, void **))dlsym(h, "cuLaunchKernelEx");
	return 0;
}

// igcu_dependent: the driver launches programmatic dependents that capture
// records as graph edges with cuLaunchKernelEx and CUDA 12.3 or later.
static int igcu_dependent(int *dependent, const char **call) {
	int version = 0;
	CUresult r = IG_CALL(cuDriverGetVersion, (&version));
	*dependent = igcu_launch_ex != NULL && version >= IGCU_PDL_DRIVER;
	return r;
}

// igcu_peer_writes: drivers before CUDA 13.1 store a stream memory
// operation's value into a peer GPU's memory.
static int igcu_peer_writes(int *ok, const char **call) {
	int version = 0;
	CUresult r = IG_CALL(cuDriverGetVersion, (&version));
	*ok = version < IGCU_NO_PEER_WRITES_DRIVER;
	return r;
}

// igcu_device retains the device's primary context (kept for the process's
// life): h is the context, id the CUdevice; only an sm_90 or later GPU
// launches dependents.
static int igcu_device(int ordinal, uintptr_t *h, uintptr_t *id, int *dependent, const char **call) {
	CUdevice dev;
	CUresult r = IG_CALL(cuDeviceGet, (&dev, ordinal));
	if (r != 0) return r;
	int major = 0;
	r = IG_CALL(cuDeviceGetAttribute, (&major, IGCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
	if (r != 0) return r;
	CUcontext c;
	r = IG_CALL(cuDevicePrimaryCtxRetain, (&c, dev));
	*h = (uintptr_t)c;
	*id = (uintptr_t)dev;
	*dependent = major >= 9;
	return r;
}

static int igcu_error(int code, const char **name, const char **desc) {
	if (igcu_cuGetErrorName(code, name) != 0) *name = NULL;
	if (igcu_cuGetErrorString(code, desc) != 0) *desc = NULL;
	return 0;
}

// igcu_alloc ignores fine: ordinary device memory is coherent for peer
// atomics and system-scope flags on NVIDIA.
static int igcu_alloc(uintptr_t ctx, size_t n, int fine, uintptr_t *p, const char **call) {
	IG_BIND(ctx);
	CUdeviceptr d = 0;
	CUresult r = IG_CALL(cuMemAlloc_v2, (&d, n));
	*p = (uintptr_t)d;
	return r;
}

// igcu_value_ops enqueues the operations as one cuStreamBatchMemOp, in
// order: one stream operation (and one graph node) instead of one each.
static int igcu_value_ops(uintptr_t ctx, const ig_value_op *ops, unsigned int n, uintptr_t s, const char **call) {
	IG_BIND(ctx);
	if (n > IGCU_BATCH_MEM_OPS_MAX) {
		*call = "cuStreamBatchMemOp_v2";
		return IGCU_ERROR_INVALID_VALUE;
	}
	IGCU_BatchMemOpParams p[IGCU_BATCH_MEM_OPS_MAX];
	memset(p, 0, n * sizeof p[0]);
	for (unsigned int i = 0; i < n; i++) {
		p[i].op.operation = ops[i].wait ? IGCU_STREAM_MEM_OP_WAIT_VALUE_32 : IGCU_STREAM_MEM_OP_WRITE_VALUE_32;
		p[i].op.address = (CUdeviceptr)ops[i].dst;
		p[i].op.value = ops[i].value;
		p[i].op.flags = ops[i].wait ? IG_WAIT_VALUE_GEQ : IG_WRITE_VALUE_DEFAULT;
	}
	return IG_CALL(cuStreamBatchMemOp_v2, ((CUstream)s, n, p, 0));
}

static int igcu_event_elapsed(uintptr_t ctx, uintptr_t a, uintptr_t b, float *ms, const char **call) {
	IG_BIND(ctx);
	*call = igcu_elapsed_name;
	return igcu_elapsed(ms, (CUevent)a, (CUevent)b);
}

// igcu_ipc_open maps another process's allocation (with lazy peer access).
// CUDA refuses handles exported by the same process.
static int igcu_ipc_open(uintptr_t ctx, const void *in, uintptr_t *p, const char **call) {
	IG_BIND(ctx);
	CUipcMemHandle h;
	memcpy(h.reserved, in, sizeof h.reserved);
	CUdeviceptr d = 0;
	CUresult r = IG_CALL(cuIpcOpenMemHandle_v2, (&d, h, IG_IPC_LAZY_ENABLE_PEER_ACCESS));
	*p = (uintptr_t)d;
	return r;
}

// igcu_launch_dependent launches with cuLaunchKernelEx and the
// programmatic stream serialization attribute: the kernel may start once
// the kernel before it on the stream has triggered
// (griddepcontrol.launch_dependents) or ended, and waits for it with
// griddepcontrol.wait; stream capture records the programmatic edge.
static int igcu_launch_dependent(uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, uintptr_t s, void **kp, const char **call) {
	IGCU_LaunchAttribute attr;
	memset(&attr, 0, sizeof attr);
	attr.id = IGCU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
	attr.val.value = 1;
	IGCU_LaunchConfig cfg = {gx, gy, gz, bx, by, bz, shared, (CUstream)s, &attr, 1};
	*call = "cuLaunchKernelEx";
	return igcu_launch_ex(&cfg, (CUfunction)f, kp, NULL);
}

IG_TABLE()
*/
import "C"

// The CUDA driver (libcuda.so.1), bound through the table above; it alone
// launches programmatic dependents, where IRISGEN_PDL allows.
func init() {
	registerBinding(binding{name: "cuda", devices: "CUDA", libraries: []string{"libcuda.so.1"}, table: C.igcu_driver(), pdl: true})
}

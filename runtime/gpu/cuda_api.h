// cuda_api.h: the part of the CUDA driver API (cuda.h) that the platform
// layer calls through dlopen, so that no CUDA SDK is needed to build it:
// the driver's types and values, and the functions only CUDA has (the CUDA
// column of driver.h's IG_API lists those HIP has too).
#ifndef IGCU_API_H
#define IGCU_API_H

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

// cuStreamBatchMemOp's parameters of one operation (CUstreamBatchMemOpParams:
// a 48-byte union; the wait and write members share this layout).
typedef union {
	struct {
		int operation; // IGCU_STREAM_MEM_OP_*
		CUdeviceptr address;
		union { unsigned int value; unsigned long long value64; };
		unsigned int flags;
		CUdeviceptr alias; // the driver's
	} op;
	unsigned long long pad[6];
} IGCU_BatchMemOpParams;

// The values only the CUDA driver uses (those both libraries share are
// driver.h's).
enum {
	IGCU_STREAM_MEM_OP_WAIT_VALUE_32 = 1,
	IGCU_STREAM_MEM_OP_WRITE_VALUE_32 = 2,
	// cuStreamBatchMemOp takes fewer than 256 operations a call.
	IGCU_BATCH_MEM_OPS_MAX = 255,
	IGCU_ERROR_INVALID_VALUE = 1,
	IGCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	IGCU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
	// The first driver version (CUDA 12.3) whose stream capture records
	// programmatic dependencies as graph edges.
	IGCU_PDL_DRIVER = 12030,
	// The first driver version (CUDA 13.1) whose stream memory operations
	// no longer store into a peer GPU's memory (NVIDIA's NCCL maintainers,
	// NVIDIA/nccl#2052; NCCL 2.29 copies its flags since).
	IGCU_NO_PEER_WRITES_DRIVER = 13010,
};
// CU_STREAM_LEGACY: the legacy default stream, whatever the per-thread mode.
#define IGCU_STREAM_LEGACY ((CUstream)0x1)

// The functions only the CUDA driver has (IG_API in driver.h lists those
// HIP has too), with their exact (versioned) symbol names.
#define IGCU_ONLY(X) \
	X(cuDriverGetVersion, (int *version)) \
	X(cuDeviceGetAttribute, (int *value, int attrib, CUdevice dev)) \
	X(cuDeviceGet, (CUdevice *dev, int ordinal)) \
	X(cuDevicePrimaryCtxRetain, (CUcontext *ctx, CUdevice dev)) \
	X(cuGetErrorName, (CUresult r, const char **s)) \
	X(cuGetErrorString, (CUresult r, const char **s)) \
	X(cuStreamBatchMemOp_v2, (CUstream s, unsigned int count, IGCU_BatchMemOpParams *ops, unsigned int flags))

#endif

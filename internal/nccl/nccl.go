// Package nccl calls NCCL (or RCCL on AMD) through its own C API, loaded with
// dlopen like the GPU platform, so that irisgen bench can measure NCCL at its
// best (one communicator per GPU, its own calls, graphs, symmetric windows)
// rather than through a framework. Nothing of NCCL is needed to build.
//
// NCCL's calls use the platform's runtime API on the calling thread: a caller
// locks its goroutine to an OS thread and makes its device current there
// (gpu.ThreadBinder) before it initialises a communicator, and makes every
// later call of that communicator from the same thread.
package nccl

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// The NCCL types used, declared here so that no NCCL header is needed to
// build (from nccl.h: ncclResult_t, ncclDataType_t and ncclRedOp_t are C
// enums, ncclUniqueId is 128 bytes).
typedef int ncclResult_t;
typedef struct ncclComm *ncclComm_t;
typedef struct ncclWindow_vidmem *ncclWindow_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef void *cudaStream_t;

#define IGN_REQUIRED(X) \
	X(ncclGetVersion, (int *version)) \
	X(ncclGetUniqueId, (ncclUniqueId *id)) \
	X(ncclCommInitRank, (ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)) \
	X(ncclCommDestroy, (ncclComm_t comm)) \
	X(ncclGroupStart, (void)) \
	X(ncclGroupEnd, (void)) \
	X(ncclAllReduce, (const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, cudaStream_t st)) \
	X(ncclAllGather, (const void *s, void *r, size_t n, int dt, ncclComm_t c, cudaStream_t st)) \
	X(ncclReduceScatter, (const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, cudaStream_t st)) \
	X(ncclBroadcast, (const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, cudaStream_t st)) \
	X(ncclReduce, (const void *s, void *r, size_t n, int dt, int op, int root, ncclComm_t c, cudaStream_t st)) \
	X(ncclSend, (const void *s, size_t n, int dt, int peer, ncclComm_t c, cudaStream_t st)) \
	X(ncclRecv, (void *r, size_t n, int dt, int peer, ncclComm_t c, cudaStream_t st))

// ign_config is the start of ncclConfig_t as NCCL 2.27 declared it (later
// versions append fields): NCCL copies `size` bytes over its defaults and
// takes `version` to say which fields are set, so a caller may pass a
// prefix. Every field is NCCL's "unset" but the CTA policy.
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
	int cgaClusterSize;
	int minCTAs;
	int maxCTAs;
	const char *netName;
	int splitShare;
	int trafficClass;
	const char *commName;
	int collnetEnable;
	int CTAPolicy;
	int shrinkShare;
	int nvlsCTAs;
} ign_config;

// Newer calls: symmetric windows (2.27), all-to-all, gather and scatter
// verbs (2.28), communicators with a configuration (2.14). Absent ones stay
// NULL.
#define IGN_OPTIONAL(X) \
	X(ncclCommInitRankConfig, (ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ign_config *config)) \
	X(ncclMemAlloc, (void **p, size_t n)) \
	X(ncclMemFree, (void *p)) \
	X(ncclCommWindowRegister, (ncclComm_t c, void *p, size_t n, ncclWindow_t *w, int flags)) \
	X(ncclCommWindowDeregister, (ncclComm_t c, ncclWindow_t w)) \
	X(ncclAlltoAll, (const void *s, void *r, size_t n, int dt, ncclComm_t c, cudaStream_t st)) \
	X(ncclGather, (const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, cudaStream_t st)) \
	X(ncclScatter, (const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, cudaStream_t st))

#define IGN_DECL(name, params) static ncclResult_t (*ign_##name) params;
IGN_REQUIRED(IGN_DECL)
IGN_OPTIONAL(IGN_DECL)
static const char *(*ign_ncclGetErrorString)(ncclResult_t r);
static const char *(*ign_ncclGetLastError)(ncclComm_t c);

// ign_open loads the library and resolves every symbol; NULL or a message.
static const char *ign_open(const char *lib) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		return e ? e : "dlopen failed";
	}
#define IGN_LOAD(name, params) \
	ign_##name = (ncclResult_t (*) params)dlsym(h, #name); \
	if (ign_##name == NULL) return "missing symbol " #name;
	IGN_REQUIRED(IGN_LOAD)
#define IGN_LOAD_OPT(name, params) ign_##name = (ncclResult_t (*) params)dlsym(h, #name);
	IGN_OPTIONAL(IGN_LOAD_OPT)
	ign_ncclGetErrorString = (const char *(*)(ncclResult_t))dlsym(h, "ncclGetErrorString");
	if (ign_ncclGetErrorString == NULL) return "missing symbol ncclGetErrorString";
	ign_ncclGetLastError = (const char *(*)(ncclComm_t))dlsym(h, "ncclGetLastError");
	return NULL;
}

static int ign_has(int which) {
	switch (which) {
	case 0: return ign_ncclMemAlloc != NULL && ign_ncclMemFree != NULL &&
		ign_ncclCommWindowRegister != NULL && ign_ncclCommWindowDeregister != NULL;
	case 1: return ign_ncclAlltoAll != NULL;
	case 2: return ign_ncclGather != NULL && ign_ncclScatter != NULL;
	case 3: return ign_ncclCommInitRankConfig != NULL;
	}
	return 0;
}

static const char *ign_error_string(ncclResult_t r) { return ign_ncclGetErrorString(r); }
static const char *ign_last_error(uintptr_t c) {
	return ign_ncclGetLastError ? ign_ncclGetLastError((ncclComm_t)c) : NULL;
}

static ncclResult_t ign_version(int *v) { return ign_ncclGetVersion(v); }
static ncclResult_t ign_unique_id(ncclUniqueId *id) { return ign_ncclGetUniqueId(id); }
static ncclResult_t ign_init_rank(uintptr_t *c, int n, ncclUniqueId *id, int rank) {
	ncclComm_t comm = NULL;
	ncclResult_t r = ign_ncclCommInitRank(&comm, n, *id, rank);
	*c = (uintptr_t)comm;
	return r;
}
static ncclResult_t ign_init_rank_policy(uintptr_t *c, int n, ncclUniqueId *id, int rank, int policy) {
	ign_config cfg = {
		sizeof(ign_config), 0xcafebeef, 22700, // NCCL_API_MAGIC, NCCL_VERSION(2, 27, 0)
		INT_MIN, INT_MIN, INT_MIN, INT_MIN, NULL, INT_MIN, INT_MIN, NULL, INT_MIN, policy, INT_MIN, INT_MIN,
	};
	ncclComm_t comm = NULL;
	ncclResult_t r = ign_ncclCommInitRankConfig(&comm, n, *id, rank, &cfg);
	*c = (uintptr_t)comm;
	return r;
}
static void ign_config_layout(int *size, int *policy_at) {
	*size = (int)sizeof(ign_config);
	*policy_at = (int)offsetof(ign_config, CTAPolicy);
}
static ncclResult_t ign_destroy(uintptr_t c) { return ign_ncclCommDestroy((ncclComm_t)c); }
static ncclResult_t ign_group_start(void) { return ign_ncclGroupStart(); }
static ncclResult_t ign_group_end(void) { return ign_ncclGroupEnd(); }

static ncclResult_t ign_mem_alloc(uint64_t *p, size_t n) {
	void *q = NULL;
	ncclResult_t r = ign_ncclMemAlloc(&q, n);
	*p = (uint64_t)(uintptr_t)q;
	return r;
}
static ncclResult_t ign_mem_free(uint64_t p) { return ign_ncclMemFree((void *)(uintptr_t)p); }
static ncclResult_t ign_window_register(uintptr_t c, uint64_t p, size_t n, uintptr_t *w, int flags) {
	ncclWindow_t win = NULL;
	ncclResult_t r = ign_ncclCommWindowRegister((ncclComm_t)c, (void *)(uintptr_t)p, n, &win, flags);
	*w = (uintptr_t)win;
	return r;
}
static ncclResult_t ign_window_deregister(uintptr_t c, uintptr_t w) {
	return ign_ncclCommWindowDeregister((ncclComm_t)c, (ncclWindow_t)w);
}

#define P(x) ((void *)(uintptr_t)(x))
#define CP(x) ((const void *)(uintptr_t)(x))
#define C(x) ((ncclComm_t)(x))
#define S(x) ((cudaStream_t)(x))

// ign_coll runs one collective verb; kind selects it (see the Go side).
static ncclResult_t ign_coll(int kind, uint64_t s, uint64_t r, size_t n, int dt, int op, int root, uintptr_t c, uintptr_t st) {
	switch (kind) {
	case 0: return ign_ncclAllReduce(CP(s), P(r), n, dt, op, C(c), S(st));
	case 1: return ign_ncclAllGather(CP(s), P(r), n, dt, C(c), S(st));
	case 2: return ign_ncclReduceScatter(CP(s), P(r), n, dt, op, C(c), S(st));
	case 3: return ign_ncclBroadcast(CP(s), P(r), n, dt, root, C(c), S(st));
	case 4: return ign_ncclReduce(CP(s), P(r), n, dt, op, root, C(c), S(st));
	case 5: return ign_ncclSend(CP(s), n, dt, root, C(c), S(st));
	case 6: return ign_ncclRecv(P(r), n, dt, root, C(c), S(st));
	case 7: return ign_ncclAlltoAll(CP(s), P(r), n, dt, C(c), S(st));
	case 8: return ign_ncclGather(CP(s), P(r), n, dt, root, C(c), S(st));
	case 9: return ign_ncclScatter(CP(s), P(r), n, dt, root, C(c), S(st));
	}
	return 4; // ncclInvalidArgument
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
)

// EnvLibrary names the environment variable that points at the library
// (a path or a name for dlopen); Open tries it first.
const EnvLibrary = "IRISGEN_NCCL"

// Libraries are the names Open tries after $IRISGEN_NCCL and its own
// arguments: NCCL, then RCCL.
var Libraries = []string{"libnccl.so.2", "libnccl.so", "librccl.so.1", "librccl.so"}

var (
	openMu   sync.Mutex
	openPath string // the library loaded; "" until Open succeeds
)

// Open loads NCCL once per process: from $IRISGEN_NCCL, then each of paths,
// then Libraries, and returns the path it loaded. Later calls return the
// first library loaded (its C symbols are process-wide).
func Open(paths ...string) (string, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if openPath != "" {
		return openPath, nil
	}
	var try []string
	if p := os.Getenv(EnvLibrary); p != "" {
		try = append(try, p)
	}
	try = append(append(try, paths...), Libraries...)
	var why []string
	for _, lib := range try {
		cs := C.CString(lib)
		msg := C.ign_open(cs)
		C.free(unsafe.Pointer(cs))
		if msg == nil {
			openPath = lib
			return lib, nil
		}
		why = append(why, lib+": "+C.GoString(msg))
	}
	return "", &NotFoundError{Tried: why}
}

// NotFoundError says which libraries Open tried and why each failed.
type NotFoundError struct{ Tried []string }

func (e *NotFoundError) Error() string {
	msg := "NCCL not found"
	for _, t := range e.Tried {
		msg += "; " + t
	}
	return msg + " (set " + EnvLibrary + " to libnccl.so.2's path, e.g. the one in the nvidia-nccl Python package)"
}

// Error is a failed NCCL call.
type Error struct {
	Call string
	Code int
	Msg  string // ncclGetErrorString, and ncclGetLastError where it says more
}

func (e *Error) Error() string { return fmt.Sprintf("%s: NCCL error %d (%s)", e.Call, e.Code, e.Msg) }

func check(call string, r C.ncclResult_t, comm C.uintptr_t) error {
	if r == 0 {
		return nil
	}
	msg := C.GoString(C.ign_error_string(r))
	if last := C.ign_last_error(comm); last != nil {
		if s := C.GoString(last); s != "" {
			msg += ": " + s
		}
	}
	return &Error{Call: call, Code: int(r), Msg: msg}
}

var errNotOpen = errors.New("nccl: Open has not loaded a library")

func opened() error {
	openMu.Lock()
	defer openMu.Unlock()
	if openPath == "" {
		return errNotOpen
	}
	return nil
}

// Version is the library's NCCL_VERSION_CODE (e.g. 22809 for 2.28.9).
func Version() (int, error) {
	if err := opened(); err != nil {
		return 0, err
	}
	var v C.int
	return int(v), check("ncclGetVersion", C.ign_version(&v), 0)
}

// VersionString formats a version code as major.minor.patch.
func VersionString(code int) string {
	if code < 10000 { // NCCL_VERSION before 2.9: X*1000 + Y*100 + Z
		return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
}

// Feature is an optional part of the API.
type Feature int

// Features Has reports.
const (
	SymmetricWindows   Feature = iota // ncclMemAlloc + ncclCommWindowRegister (2.27)
	AllToAllVerb                      // ncclAlltoAll (2.28)
	GatherScatterVerbs                // ncclGather, ncclScatter (2.28)
	// CopyEngineCollectives: a communicator made with CTAPolicyZero runs
	// all-gather, all-to-all, gather and scatter between symmetric windows
	// on copy engines, no kernel (2.28.3).
	CopyEngineCollectives
)

// hasConfig is ign_has's question for ncclCommInitRankConfig (not a
// Feature: CopyEngineCollectives asks it among others).
const hasConfig = 3

// Has reports whether the loaded library has f.
func Has(f Feature) bool {
	if opened() != nil {
		return false
	}
	if f == CopyEngineCollectives {
		v, err := Version()
		return err == nil && v >= 22803 && C.ign_has(hasConfig) != 0 && Has(SymmetricWindows) && Has(AllToAllVerb) && Has(GatherScatterVerbs)
	}
	return C.ign_has(C.int(f)) != 0
}

// ID is a communicator's unique id (ncclUniqueId), made by one rank and
// handed to every rank.
type ID [128]byte

// NewID makes a unique id.
func NewID() (ID, error) {
	var id ID
	if err := opened(); err != nil {
		return id, err
	}
	var cid C.ncclUniqueId
	if err := check("ncclGetUniqueId", C.ign_unique_id(&cid), 0); err != nil {
		return id, err
	}
	copy(id[:], C.GoBytes(unsafe.Pointer(&cid), C.int(len(id))))
	return id, nil
}

// Comm is one rank's communicator.
type Comm struct {
	c     C.uintptr_t
	rank  int
	world int
}

// InitRank makes rank's communicator of world ranks. Every rank calls it at
// the same time from its own thread, with its device current there.
func InitRank(world int, id ID, rank int) (*Comm, error) {
	return initRank("ncclCommInitRank", world, id, rank, func(c *C.uintptr_t, cid *C.ncclUniqueId) C.ncclResult_t {
		return C.ign_init_rank(c, C.int(world), cid, C.int(rank))
	})
}

// initRank makes rank's communicator with init (NCCL's call named call)
// from id.
func initRank(call string, world int, id ID, rank int, init func(c *C.uintptr_t, cid *C.ncclUniqueId) C.ncclResult_t) (*Comm, error) {
	if err := opened(); err != nil {
		return nil, err
	}
	var cid C.ncclUniqueId
	C.memcpy(unsafe.Pointer(&cid), unsafe.Pointer(&id[0]), C.size_t(len(id)))
	var c C.uintptr_t
	if err := check(call, init(&c, &cid), 0); err != nil {
		return nil, err
	}
	return &Comm{c: c, rank: rank, world: world}, nil
}

// CTAPolicyZero is NCCL_CTA_POLICY_ZERO: the communicator's collectives
// use no CTA where NCCL can do without (copy engines; see
// CopyEngineCollectives).
const CTAPolicyZero = 0x02

// InitRankPolicy is InitRank with the communicator's CTA policy set
// (ncclCommInitRankConfig; NCCL 2.27 and later read it).
func InitRankPolicy(world int, id ID, rank, policy int) (*Comm, error) {
	if opened() == nil && C.ign_has(hasConfig) == 0 {
		return nil, errors.New("nccl: this NCCL has no ncclCommInitRankConfig (2.14 or later)")
	}
	return initRank("ncclCommInitRankConfig", world, id, rank, func(c *C.uintptr_t, cid *C.ncclUniqueId) C.ncclResult_t {
		return C.ign_init_rank_policy(c, C.int(world), cid, C.int(rank), C.int(policy))
	})
}

// configLayout is the size of the ncclConfig_t prefix passed and the
// offset of its CTAPolicy field (tested against nccl.h).
func configLayout() (size, policyAt int) {
	var sz, at C.int
	C.ign_config_layout(&sz, &at)
	return int(sz), int(at)
}

// Rank and World are the communicator's.
func (c *Comm) Rank() int  { return c.rank }
func (c *Comm) World() int { return c.world }

// Destroy frees the communicator.
func (c *Comm) Destroy() error {
	if c.c == 0 {
		return nil
	}
	err := check("ncclCommDestroy", C.ign_destroy(c.c), 0)
	c.c = 0
	return err
}

// GroupStart and GroupEnd bracket calls NCCL must issue together (the sends
// and receives of an all-to-all).
func GroupStart() error { return check("ncclGroupStart", C.ign_group_start(), 0) }
func GroupEnd() error   { return check("ncclGroupEnd", C.ign_group_end(), 0) }

// DataType is ncclDataType_t.
type DataType int

// The data types irisgen measures.
const (
	Float16  DataType = 6
	Float32  DataType = 7
	BFloat16 DataType = 9
)

// RedOp is ncclRedOp_t.
type RedOp int

// Reduction operators.
const (
	Sum RedOp = 0
	Max RedOp = 2
	Min RedOp = 3
)

// verbs, as ign_coll numbers them.
const (
	verbAllReduce = iota
	verbAllGather
	verbReduceScatter
	verbBroadcast
	verbReduce
	verbSend
	verbRecv
	verbAlltoAll
	verbGather
	verbScatter
)

var verbNames = [...]string{"ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclReduce",
	"ncclSend", "ncclRecv", "ncclAlltoAll", "ncclGather", "ncclScatter"}

func (c *Comm) coll(verb int, send, recv gpu.DevicePtr, count int64, dt DataType, op RedOp, root int, s gpu.Stream) error {
	r := C.ign_coll(C.int(verb), C.uint64_t(send), C.uint64_t(recv), C.size_t(count), C.int(dt), C.int(op), C.int(root), c.c, C.uintptr_t(s))
	return check(verbNames[verb], r, c.c)
}

// AllReduce is ncclAllReduce of count elements.
func (c *Comm) AllReduce(send, recv gpu.DevicePtr, count int64, dt DataType, op RedOp, s gpu.Stream) error {
	return c.coll(verbAllReduce, send, recv, count, dt, op, 0, s)
}

// AllGather is ncclAllGather: count elements from every rank.
func (c *Comm) AllGather(send, recv gpu.DevicePtr, count int64, dt DataType, s gpu.Stream) error {
	return c.coll(verbAllGather, send, recv, count, dt, 0, 0, s)
}

// ReduceScatter is ncclReduceScatter: count elements kept by every rank.
func (c *Comm) ReduceScatter(send, recv gpu.DevicePtr, count int64, dt DataType, op RedOp, s gpu.Stream) error {
	return c.coll(verbReduceScatter, send, recv, count, dt, op, 0, s)
}

// Broadcast is ncclBroadcast from root.
func (c *Comm) Broadcast(send, recv gpu.DevicePtr, count int64, dt DataType, root int, s gpu.Stream) error {
	return c.coll(verbBroadcast, send, recv, count, dt, 0, root, s)
}

// Reduce is ncclReduce into root.
func (c *Comm) Reduce(send, recv gpu.DevicePtr, count int64, dt DataType, op RedOp, root int, s gpu.Stream) error {
	return c.coll(verbReduce, send, recv, count, dt, op, root, s)
}

// Send is ncclSend to peer.
func (c *Comm) Send(send gpu.DevicePtr, count int64, dt DataType, peer int, s gpu.Stream) error {
	return c.coll(verbSend, send, 0, count, dt, 0, peer, s)
}

// Recv is ncclRecv from peer.
func (c *Comm) Recv(recv gpu.DevicePtr, count int64, dt DataType, peer int, s gpu.Stream) error {
	return c.coll(verbRecv, 0, recv, count, dt, 0, peer, s)
}

// AllToAll sends count elements to every rank: ncclAlltoAll where the
// library has it, else (as nccl-tests does) a group of sends and receives.
func (c *Comm) AllToAll(send, recv gpu.DevicePtr, count int64, dt DataType, es int64, s gpu.Stream) error {
	if Has(AllToAllVerb) {
		return c.coll(verbAlltoAll, send, recv, count, dt, 0, 0, s)
	}
	return c.AllToAllP2P(send, recv, count, dt, es, s)
}

// AllToAllP2P is the all-to-all as one group of sends and receives.
func (c *Comm) AllToAllP2P(send, recv gpu.DevicePtr, count int64, dt DataType, es int64, s gpu.Stream) error {
	if err := GroupStart(); err != nil {
		return err
	}
	bytes := gpu.DevicePtr(count * es)
	var first error
	for p := 0; p < c.world; p++ {
		if err := c.Send(send+gpu.DevicePtr(p)*bytes, count, dt, p, s); err != nil && first == nil {
			first = err
		}
		if err := c.Recv(recv+gpu.DevicePtr(p)*bytes, count, dt, p, s); err != nil && first == nil {
			first = err
		}
	}
	return errors.Join(first, GroupEnd())
}

// Gather is ncclGather into root (NCCL 2.28; see Has).
func (c *Comm) Gather(send, recv gpu.DevicePtr, count int64, dt DataType, root int, s gpu.Stream) error {
	if !Has(GatherScatterVerbs) {
		return errors.New("nccl: this NCCL has no ncclGather (2.28 or later)")
	}
	return c.coll(verbGather, send, recv, count, dt, 0, root, s)
}

// Scatter is ncclScatter from root (NCCL 2.28; see Has).
func (c *Comm) Scatter(send, recv gpu.DevicePtr, count int64, dt DataType, root int, s gpu.Stream) error {
	if !Has(GatherScatterVerbs) {
		return errors.New("nccl: this NCCL has no ncclScatter (2.28 or later)")
	}
	return c.coll(verbScatter, send, recv, count, dt, 0, root, s)
}

// MemAlloc is ncclMemAlloc: memory that can be registered as a symmetric
// window (NCCL 2.27; see Has).
func MemAlloc(bytes int64) (gpu.DevicePtr, error) {
	if !Has(SymmetricWindows) {
		return 0, errors.New("nccl: this NCCL has no ncclMemAlloc/ncclCommWindowRegister (2.27 or later)")
	}
	var p C.uint64_t
	err := check("ncclMemAlloc", C.ign_mem_alloc(&p, C.size_t(bytes)), 0)
	return gpu.DevicePtr(p), err
}

// MemFree frees MemAlloc's memory.
func MemFree(p gpu.DevicePtr) error { return check("ncclMemFree", C.ign_mem_free(C.uint64_t(p)), 0) }

// Window is a registered window.
type Window uintptr

// WinCollSymmetric is NCCL_WIN_COLL_SYMMETRIC: every rank registers a buffer
// of the same size at the same offset, which lets NCCL use its symmetric
// kernels.
const WinCollSymmetric = 0x01

// RegisterWindow registers [p, p+bytes) as a window; collective: every rank
// registers in the same order.
func (c *Comm) RegisterWindow(p gpu.DevicePtr, bytes int64, flags int) (Window, error) {
	var w C.uintptr_t
	err := check("ncclCommWindowRegister", C.ign_window_register(c.c, C.uint64_t(p), C.size_t(bytes), &w, C.int(flags)), c.c)
	return Window(w), err
}

// DeregisterWindow undoes RegisterWindow.
func (c *Comm) DeregisterWindow(w Window) error {
	return check("ncclCommWindowDeregister", C.ign_window_deregister(c.c, C.uintptr_t(w)), c.c)
}

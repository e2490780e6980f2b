package gpu

/*
#include <stdlib.h>
#include "driver.h"

// One trampoline per operation: cgo calls C functions, not pointers to
// them.
#define IG_UNPAREN(...) __VA_ARGS__
#define IG_TRAMPOLINE(kind, op, params, args, ...) \
	static int ig_##op(const ig_driver *d_, IG_UNPAREN params) { return d_->op args; }
IG_OPS(IG_TRAMPOLINE)

// ig_missing counts the operations a table leaves out.
static int ig_missing(const ig_driver *d) {
	int n = 0;
#define IG_MISSING(kind, op, ...) if (d->op == NULL) n++;
	IG_OPS(IG_MISSING)
	return n;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"time"
	"unsafe"
)

// A binding is a GPU library behind driver.h's table: its name (and how
// messages name its devices), the file names tried in order (the first that
// opens is used; one that opens but does not work ends the search), its
// table, and whether it may launch programmatic dependents (then
// IRISGEN_PDL applies).
type binding struct {
	name, devices string
	libraries     []string
	table         *C.ig_driver
	pdl           bool
}

// bindings are the registered bindings, by name.
var bindings = map[string]binding{}

// registerBinding registers b's loader under its name.
func registerBinding(b binding) {
	if n := C.ig_missing(b.table); n != 0 {
		panic(fmt.Sprintf("gpu: the %s binding leaves %d operations out", b.name, int(n)))
	}
	bindings[b.name] = b
	Register(b.name, b.load)
}

// load opens the first of b's libraries that opens and initialises it.
func (b binding) load() (Platform, []error) {
	var why []error
	for _, lib := range b.libraries {
		p, opened, err := b.open(lib)
		if err == nil {
			return p, nil
		}
		why = append(why, err)
		if opened {
			break
		}
	}
	return nil, why
}

func (b binding) open(lib string) (p Platform, opened bool, err error) {
	clib := C.CString(lib)
	defer C.free(unsafe.Pointer(clib))
	var op C.int
	var msg *C.char
	if C.ig_open(b.table, clib, &op, &msg) != 0 {
		return nil, op != 0, fmt.Errorf("%s: %s", lib, C.GoString(msg))
	}
	var count, dependent C.int
	var call *C.char
	if r := C.ig_init(b.table, &count, &dependent, &call); r != 0 {
		return nil, true, fmt.Errorf("%s: %w", lib, b.error(call, r))
	}
	if count == 0 {
		return nil, true, fmt.Errorf("%s: no %s devices", lib, b.devices)
	}
	pdl := false
	if b.pdl {
		allowed, err := pdlAllowed()
		if err != nil {
			return nil, true, err
		}
		pdl = allowed && dependent != 0
	}
	var peerWrites C.int
	if r := C.ig_peer_writes(b.table, &peerWrites, &call); r != 0 {
		return nil, true, fmt.Errorf("%s: %w", lib, b.error(call, r))
	}
	allowed, err := peerWritesAllowed()
	if err != nil {
		return nil, true, err
	}
	return &platform{b: b, count: int(count), pdl: pdl, peerWrites: allowed && peerWrites != 0, devs: map[int]*device{}}, true, nil
}

// error turns a library's result into an *Error named by the library.
func (b binding) error(call *C.char, r C.int) *Error {
	var name, desc *C.char
	C.ig_error(b.table, r, &name, &desc)
	e := &Error{Call: C.GoString(call), Code: int(r), Name: C.GoString(name), Desc: C.GoString(desc)}
	if name == nil {
		e.Name = fmt.Sprintf("%s result %d", b.name, int(r))
	}
	if desc == nil {
		e.Desc = "unknown error"
	}
	return e
}

// check is nil for a result of 0, else its *Error.
func (b binding) check(call *C.char, r C.int) error {
	if r == 0 {
		return nil
	}
	return b.error(call, r)
}

// platform is a loaded GPU library.
type platform struct {
	b     binding
	count int
	pdl   bool // the library launches programmatic dependents and IRISGEN_PDL allows it
	// peerWrites: the library's stream memory operations store into a
	// peer's memory and IRISGEN_PEER_WRITES allows them to.
	peerWrites bool
	mu         sync.Mutex
	devs       map[int]*device
}

func (p *platform) Name() string { return p.b.name }

func (p *platform) DeviceCount() (int, error) { return p.count, nil }

// Open returns the same Device for the same ordinal (on CUDA it retains the
// device's primary context, kept for the process's life).
func (p *platform) Open(ordinal int) (Device, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.devs[ordinal]; ok {
		return d, nil
	}
	if ordinal < 0 || ordinal >= p.count {
		return nil, fmt.Errorf("%s: device %d does not exist (%d devices)", p.b.name, ordinal, p.count)
	}
	var h, id C.uintptr_t
	var dependent C.int
	var call *C.char
	if r := C.ig_device(p.b.table, C.int(ordinal), &h, &id, &dependent, &call); r != 0 {
		return nil, p.b.error(call, r)
	}
	d := &device{p: p, t: p.b.table, ord: ordinal, h: h, id: id, pdl: p.pdl && dependent != 0}
	p.devs[ordinal] = d
	return d, nil
}

// device is one GPU: every call binds it (its context, or its ordinal) to
// the calling OS thread inside the same C call, so callers need not lock
// threads.
type device struct {
	p   *platform
	t   *C.ig_driver
	ord int
	h   C.uintptr_t // the library's handle: a CUDA context, a HIP ordinal
	id  C.uintptr_t // the library's device number
	pdl bool        // LaunchDependent launches programmatic dependents
}

func (d *device) Ordinal() int       { return d.ord }
func (d *device) Platform() Platform { return d.p }

func (d *device) check(call *C.char, r C.int) error { return d.p.b.check(call, r) }

// Alloc: with fine, on AMD uncached (fine-grained) memory; NVIDIA's
// ordinary device memory is coherent for peer atomics and system-scope
// flags already.
func (d *device) Alloc(bytes int64, fine bool) (DevicePtr, error) {
	var p C.uintptr_t
	var call *C.char
	r := C.ig_alloc(d.t, d.h, C.size_t(bytes), cbool(fine), &p, &call)
	return DevicePtr(p), d.check(call, r)
}

func (d *device) Free(p DevicePtr) error {
	var call *C.char
	return d.check(call, C.ig_free(d.t, d.h, C.uintptr_t(p), &call))
}

func (d *device) AllocHostMapped(bytes int64) (unsafe.Pointer, DevicePtr, error) {
	var host unsafe.Pointer
	var dev C.uintptr_t
	var call *C.char
	if r := C.ig_host_alloc(d.t, d.h, C.size_t(bytes), &host, &dev, &call); r != 0 {
		return nil, 0, d.check(call, r)
	}
	return host, DevicePtr(dev), nil
}

func (d *device) FreeHost(host unsafe.Pointer) error {
	var call *C.char
	return d.check(call, C.ig_host_free(d.t, d.h, host, &call))
}

func (d *device) CopyHtoD(dst DevicePtr, src unsafe.Pointer, bytes int64) error {
	var call *C.char
	return d.check(call, C.ig_htod(d.t, d.h, C.uintptr_t(dst), src, C.size_t(bytes), &call))
}

func (d *device) CopyDtoH(dst unsafe.Pointer, src DevicePtr, bytes int64) error {
	var call *C.char
	return d.check(call, C.ig_dtoh(d.t, d.h, dst, C.uintptr_t(src), C.size_t(bytes), &call))
}

func (d *device) CopyDtoDAsync(dst, src DevicePtr, bytes int64, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_dtod_async(d.t, d.h, C.uintptr_t(dst), C.uintptr_t(src), C.size_t(bytes), C.uintptr_t(s), &call))
}

// CopyHtoDAsync: src must stay valid until the stream has run the copy; use
// memory from AllocHostMapped (or C memory) for a truly asynchronous copy.
func (d *device) CopyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes int64, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_htod_async(d.t, d.h, C.uintptr_t(dst), src, C.size_t(bytes), C.uintptr_t(s), &call))
}

// CopyDtoHAsync: dst must stay valid until the stream has run the copy.
func (d *device) CopyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes int64, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_dtoh_async(d.t, d.h, dst, C.uintptr_t(src), C.size_t(bytes), C.uintptr_t(s), &call))
}

func (d *device) MemsetD8Async(dst DevicePtr, v byte, bytes int64, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_memset_async(d.t, d.h, C.uintptr_t(dst), C.uchar(v), C.size_t(bytes), C.uintptr_t(s), &call))
}

func (d *device) MemsetD32Async(dst DevicePtr, v uint32, n int64, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_memset32_async(d.t, d.h, C.uintptr_t(dst), C.uint(v), C.size_t(n), C.uintptr_t(s), &call))
}

func (d *device) WriteValue32(dst DevicePtr, v uint32, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_write_value32(d.t, d.h, C.uintptr_t(dst), C.uint(v), C.uintptr_t(s), &call))
}

func (d *device) WaitValue32(dst DevicePtr, v uint32, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_wait_value32(d.t, d.h, C.uintptr_t(dst), C.uint(v), C.uintptr_t(s), &call))
}

// ValueOps enqueues ops on s in order as one batch where the library has
// one (gpu.ValueBatcher): CUDA's cuStreamBatchMemOp, chunked below its
// limit; HIP one call each. The library reads ops where they lie: a
// ValueOp has ig_value_op's layout (checked below), so a launch copies
// and allocates nothing for them.
func (d *device) ValueOps(ops []ValueOp, s Stream) error {
	for len(ops) > 0 {
		n := min(len(ops), valueOpsChunk)
		var call *C.char
		r := C.ig_value_ops(d.t, d.h, (*C.ig_value_op)(unsafe.Pointer(&ops[0])), C.uint(n), C.uintptr_t(s), &call)
		if err := d.check(call, r); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// valueOpsChunk is the most operations ValueOps passes in one call (the
// CUDA driver takes fewer than 256; a copy-engine barrier of a world of 8
// has 21).
const valueOpsChunk = 255

// ValueOp and ig_value_op agree field by field (a constant that would be
// negative does not compile).
const (
	_ = uint(unsafe.Sizeof(ValueOp{}) - unsafe.Sizeof(C.ig_value_op{}))
	_ = uint(unsafe.Sizeof(C.ig_value_op{}) - unsafe.Sizeof(ValueOp{}))
	_ = uint(unsafe.Offsetof(ValueOp{}.Value) - unsafe.Offsetof(C.ig_value_op{}.value))
	_ = uint(unsafe.Offsetof(C.ig_value_op{}.value) - unsafe.Offsetof(ValueOp{}.Value))
	_ = uint(unsafe.Offsetof(ValueOp{}.Wait) - unsafe.Offsetof(C.ig_value_op{}.wait))
	_ = uint(unsafe.Offsetof(C.ig_value_op{}.wait) - unsafe.Offsetof(ValueOp{}.Wait))
	_ = uint(unsafe.Sizeof(ValueOp{}.Wait) - unsafe.Sizeof(C.ig_value_op{}.wait))
)

// BindThread makes the device (its primary context) current on the calling
// OS thread (gpu.ThreadBinder).
func (d *device) BindThread() error {
	var call *C.char
	return d.check(call, C.ig_bind(d.t, d.h, &call))
}

func (d *device) Synchronize() error {
	var call *C.char
	return d.check(call, C.ig_sync(d.t, d.h, &call))
}

func (d *device) NewStream() (Stream, error) {
	var s C.uintptr_t
	var call *C.char
	r := C.ig_stream_create(d.t, d.h, &s, &call)
	return Stream(s), d.check(call, r)
}

func (d *device) DestroyStream(s Stream) error {
	var call *C.char
	return d.check(call, C.ig_stream_destroy(d.t, d.h, C.uintptr_t(s), &call))
}

func (d *device) StreamSynchronize(s Stream) error {
	var call *C.char
	return d.check(call, C.ig_stream_sync(d.t, d.h, C.uintptr_t(s), &call))
}

// StreamQuery asks the library whether s has finished its work; its "not
// ready" answer (CUDA_ERROR_NOT_READY, hipErrorNotReady) is done false.
func (d *device) StreamQuery(s Stream) (bool, error) {
	var done C.int
	var call *C.char
	if r := C.ig_stream_query(d.t, d.h, C.uintptr_t(s), &done, &call); r != 0 {
		return false, d.check(call, r)
	}
	return done != 0, nil
}

func (d *device) NewEvent(timing bool) (Event, error) {
	var e C.uintptr_t
	var call *C.char
	r := C.ig_event_create(d.t, d.h, cbool(timing), &e, &call)
	return Event(e), d.check(call, r)
}

func (d *device) DestroyEvent(e Event) error {
	var call *C.char
	return d.check(call, C.ig_event_destroy(d.t, d.h, C.uintptr_t(e), &call))
}

func (d *device) RecordEvent(e Event, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_event_record(d.t, d.h, C.uintptr_t(e), C.uintptr_t(s), &call))
}

// WaitEvent makes s wait for e (EventWaiter).
func (d *device) WaitEvent(s Stream, e Event) error {
	var call *C.char
	return d.check(call, C.ig_wait_event(d.t, d.h, C.uintptr_t(s), C.uintptr_t(e), &call))
}

func (d *device) SynchronizeEvent(e Event) error {
	var call *C.char
	return d.check(call, C.ig_event_sync(d.t, d.h, C.uintptr_t(e), &call))
}

func (d *device) Elapsed(start, end Event) (time.Duration, error) {
	var ms C.float
	var call *C.char
	if r := C.ig_event_elapsed(d.t, d.h, C.uintptr_t(start), C.uintptr_t(end), &ms, &call); r != 0 {
		return 0, d.check(call, r)
	}
	return msToDuration(float64(ms)), nil
}

// LoadModule: image is a code object (HIP: one, or an offload bundle of
// them, from which the runtime loads the device's), copied to C memory,
// which the library reads during the call only.
func (d *device) LoadModule(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, fmt.Errorf("%s: LoadModule: empty image", d.p.b.name)
	}
	img := C.CBytes(image)
	defer C.free(img)
	var m C.uintptr_t
	var call *C.char
	r := C.ig_module_load(d.t, d.h, img, &m, &call)
	return Module(m), d.check(call, r)
}

func (d *device) UnloadModule(m Module) error {
	var call *C.char
	return d.check(call, C.ig_module_unload(d.t, d.h, C.uintptr_t(m), &call))
}

func (d *device) Function(m Module, name string) (Function, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var f C.uintptr_t
	var call *C.char
	if r := C.ig_function(d.t, d.h, C.uintptr_t(m), cname, &f, &call); r != 0 {
		return 0, fmt.Errorf("function %q: %w", name, d.check(call, r))
	}
	return Function(f), nil
}

func (d *device) Global(m Module, name string) (DevicePtr, int64, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p C.uintptr_t
	var n C.size_t
	var call *C.char
	if r := C.ig_global(d.t, d.h, C.uintptr_t(m), cname, &p, &n, &call); r != 0 {
		return 0, 0, fmt.Errorf("global %q: %w", name, d.check(call, r))
	}
	return DevicePtr(p), int64(n), nil
}

func (d *device) Launch(f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error {
	return d.launch(false, f, grid, block, sharedBytes, s, args)
}

// LaunchDependent launches f as a programmatic dependent of the kernel
// before it on s where the device does that (DependentLaunches), else as
// Launch does (gpu.DependentLauncher).
func (d *device) LaunchDependent(f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error {
	return d.launch(d.pdl, f, grid, block, sharedBytes, s, args)
}

func (d *device) launch(dependent bool, f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error {
	var call *C.char
	var ap unsafe.Pointer
	if len(args) > 0 {
		ap = unsafe.Pointer(&args[0]) // read by the library during the call; not retained
	}
	return d.check(call, C.ig_launch(d.t, d.h, cbool(dependent), C.uintptr_t(f),
		C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z), C.uint(block.X), C.uint(block.Y), C.uint(block.Z),
		C.uint(sharedBytes), C.uintptr_t(s), ap, C.size_t(len(args)), &call))
}

// PeerValueWrites reports whether WriteValue32 may store into a peer's
// memory: on CUDA drivers before 13.1 and on HIP, unless
// IRISGEN_PEER_WRITES is 0 (gpu.PeerValueWriter).
func (d *device) PeerValueWrites() bool { return d.p.peerWrites }

// DependentLaunches reports whether LaunchDependent overlaps kernels: on
// CUDA an sm_90 or later GPU, a CUDA 12.3 or later driver, and IRISGEN_PDL
// not 0; never on HIP.
func (d *device) DependentLaunches() bool { return d.pdl }

func (d *device) peer(peer Device) (*device, error) {
	pd, ok := peer.(*device)
	if !ok || pd.p != d.p {
		return nil, fmt.Errorf("%s: peer %T is not a %s device", d.p.b.name, peer, d.p.b.name)
	}
	return pd, nil
}

func (d *device) CanAccessPeer(peer Device) (bool, error) {
	pd, err := d.peer(peer)
	if err != nil {
		return false, err
	}
	var can C.int
	var call *C.char
	if r := C.ig_can_peer(d.t, d.id, pd.id, &can, &call); r != 0 {
		return false, d.check(call, r)
	}
	return can != 0, nil
}

// EnablePeerAccess maps peer's memory for d; enabling it again is not an
// error.
func (d *device) EnablePeerAccess(peer Device) error {
	pd, err := d.peer(peer)
	if err != nil {
		return err
	}
	var call *C.char
	return d.check(call, C.ig_enable_peer(d.t, d.h, pd.h, &call))
}

// IPCGetHandle exports the allocation at p (the base of the heap's one
// allocation, so the handle covers all of it at offset 0).
func (d *device) IPCGetHandle(p DevicePtr) (IPCHandle, error) {
	var h IPCHandle
	var call *C.char
	return h, d.check(call, C.ig_ipc_get(d.t, d.h, C.uintptr_t(p), unsafe.Pointer(&h[0]), &call))
}

// IPCOpenHandle maps another process's allocation (with lazy peer access).
// CUDA refuses handles exported by the same process.
func (d *device) IPCOpenHandle(h IPCHandle) (DevicePtr, error) {
	var p C.uintptr_t
	var call *C.char
	r := C.ig_ipc_open(d.t, d.h, unsafe.Pointer(&h[0]), &p, &call)
	return DevicePtr(p), d.check(call, r)
}

func (d *device) IPCCloseHandle(p DevicePtr) error {
	var call *C.char
	return d.check(call, C.ig_ipc_close(d.t, d.h, C.uintptr_t(p), &call))
}

// BeginCapture: the capture modes have the same values on CUDA and HIP
// (hip_api.h checks HIP's), gpu.CaptureMode's.
func (d *device) BeginCapture(s Stream, mode CaptureMode) error {
	if mode < CaptureGlobal || mode > CaptureRelaxed {
		return fmt.Errorf("%s: unknown capture mode %d", d.p.b.name, int(mode))
	}
	var call *C.char
	return d.check(call, C.ig_begin_capture(d.t, d.h, C.uintptr_t(s), C.int(mode), &call))
}

func (d *device) EndCapture(s Stream) (Graph, error) {
	var g C.uintptr_t
	var call *C.char
	r := C.ig_end_capture(d.t, d.h, C.uintptr_t(s), &g, &call)
	return Graph(g), d.check(call, r)
}

func (d *device) CaptureStatus(s Stream) (CaptureStatus, error) {
	var st C.int
	var call *C.char
	if r := C.ig_is_capturing(d.t, d.h, C.uintptr_t(s), &st, &call); r != 0 {
		return 0, d.check(call, r)
	}
	return captureStatus(int(st))
}

func (d *device) Instantiate(g Graph) (GraphExec, error) {
	var e C.uintptr_t
	var call *C.char
	r := C.ig_instantiate(d.t, d.h, C.uintptr_t(g), &e, &call)
	return GraphExec(e), d.check(call, r)
}

func (d *device) LaunchGraph(g GraphExec, s Stream) error {
	var call *C.char
	return d.check(call, C.ig_graph_launch(d.t, d.h, C.uintptr_t(g), C.uintptr_t(s), &call))
}

func (d *device) DestroyGraph(g Graph) error {
	var call *C.char
	return d.check(call, C.ig_graph_destroy(d.t, d.h, C.uintptr_t(g), &call))
}

func (d *device) DestroyGraphExec(g GraphExec) error {
	var call *C.char
	return d.check(call, C.ig_graph_exec_destroy(d.t, d.h, C.uintptr_t(g), &call))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

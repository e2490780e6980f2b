// Package gpu is the platform layer: the small set of GPU operations irisgen's
// runtime needs (Platform, Device), and a registry of the libraries that
// provide them (Register, Load). It binds NVIDIA's CUDA driver library and
// AMD's HIP runtime library through one implementation over a table of
// their functions (driver.h: for every operation, the CUDA call and the HIP
// call; driver.go: the Go side, once), loaded with dlopen at run time, so
// nothing GPU-specific is needed to build; without a GPU library every call
// returns ErrNoPlatform.
package gpu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
	"unsafe"
)

// DevicePtr is an address in the unified GPU address space.
type DevicePtr uint64

// Stream, Event, Module, Function, Graph and GraphExec are opaque platform
// handles. The zero Stream is the legacy default stream.
type (
	Stream    uintptr
	Event     uintptr
	Module    uintptr
	Function  uintptr
	Graph     uintptr
	GraphExec uintptr
)

// IPCHandle is an exported memory handle another process can open (64 bytes
// on both CUDA and HIP).
type IPCHandle [64]byte

// CaptureStatus is the stream-capture state of a stream.
type CaptureStatus int

// Capture states, as reported by cuStreamIsCapturing / hipStreamIsCapturing.
const (
	CaptureNone CaptureStatus = iota
	CaptureActive
	CaptureInvalidated
)

// CaptureMode is how a capture treats potentially unsafe calls (allocations,
// synchronisations) made while it is active: CUDA's and HIP's stream capture
// modes, same values.
type CaptureMode int

// Capture modes.
const (
	// CaptureGlobal: such a call from any thread fails and invalidates the
	// capture. Use it in a process that drives one GPU (multi-process world).
	CaptureGlobal CaptureMode = iota
	// CaptureThreadLocal: only calls from the capturing thread fail. Go moves
	// goroutines between threads, so it guards less than it seems.
	CaptureThreadLocal
	// CaptureRelaxed: nothing is refused but syncing the capturing stream.
	// An in-process world needs it: its ranks are goroutines of one process,
	// and one rank's ordinary sync or allocation must not invalidate
	// another rank's capture.
	CaptureRelaxed
)

// PinCaptureThread keeps the calling goroutine on its OS thread for a
// capture in mode and returns what lets it go (call it after EndCapture).
// CUDA and HIP end a global or thread-local capture only on the thread that
// began it (CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD), and Go moves a
// goroutine between threads whenever it blocks; a relaxed capture may end
// anywhere, so it pins nothing.
func PinCaptureThread(mode CaptureMode) (unpin func()) {
	if mode == CaptureRelaxed {
		return func() {}
	}
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}

// Dim3 is a launch dimension.
type Dim3 struct{ X, Y, Z uint32 }

// ErrNoPlatform is returned (wrapped in *NoPlatformError) by every operation
// when no GPU library could be loaded.
var ErrNoPlatform = errors.New("no GPU platform")

// NoPlatformError says which libraries were looked for and why each failed.
// Where a library loaded and its runtime refused (no device, no driver), the
// entry wraps the runtime's *Error (e.g. hipInit: hipErrorNoDevice), which
// errors.As finds.
type NoPlatformError struct {
	Tried []error // "libcuda.so.1: <dlerror>", "libamdhip64.so: hipInit: ..."
}

func (e *NoPlatformError) Error() string {
	msg := "no GPU platform: could not load any GPU library"
	for _, t := range e.Tried {
		msg += "; " + t.Error()
	}
	return msg + " (install the NVIDIA driver or ROCm, or set " + EnvPlatform + "=" + strings.Join(Platforms(), "|") + " to pick one)"
}

// Unwrap gives ErrNoPlatform and the error of every library tried.
func (e *NoPlatformError) Unwrap() []error { return append([]error{ErrNoPlatform}, e.Tried...) }

// Error is a failed platform call: the API function, its numeric result and
// the platform's own name and description of it.
type Error struct {
	Call string // e.g. "cuMemAlloc_v2"
	Code int
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Desc string
}

func (e *Error) Error() string {
	return e.Call + ": " + e.Name + " (" + e.Desc + ")"
}

// Platform is a loaded GPU library.
type Platform interface {
	// Name is "cuda" or "hip".
	Name() string
	DeviceCount() (int, error)
	// Open makes ordinal usable from any goroutine: every Device method
	// binds the device (context) to the calling OS thread inside the same
	// C call, so callers need not lock threads.
	Open(ordinal int) (Device, error)
}

// Device is one GPU, bound to its (primary) context.
type Device interface {
	Ordinal() int
	Platform() Platform

	// Alloc returns device memory. fine asks for memory that cross-device
	// atomics and flags can use coherently: on AMD fine-grained (uncached)
	// memory, without which remote atomics and spins see stale values; on
	// NVIDIA ordinary device memory already is.
	Alloc(bytes int64, fine bool) (DevicePtr, error)
	Free(p DevicePtr) error
	// AllocHostMapped returns pinned host memory mapped into the device (the
	// error record the kernels write and the host reads without a copy).
	AllocHostMapped(bytes int64) (host unsafe.Pointer, dev DevicePtr, err error)
	FreeHost(host unsafe.Pointer) error

	// CopyHtoD and CopyDtoH return once the copy is complete (the bytes
	// in device memory, or on the host). They are ordered with no stream:
	// wait for the streams that use the memory first.
	CopyHtoD(dst DevicePtr, src unsafe.Pointer, bytes int64) error
	CopyDtoH(dst unsafe.Pointer, src DevicePtr, bytes int64) error
	CopyDtoDAsync(dst, src DevicePtr, bytes int64, s Stream) error
	CopyHtoDAsync(dst DevicePtr, src unsafe.Pointer, bytes int64, s Stream) error
	CopyDtoHAsync(dst unsafe.Pointer, src DevicePtr, bytes int64, s Stream) error
	MemsetD8Async(dst DevicePtr, v byte, bytes int64, s Stream) error
	// MemsetD32Async sets n 32-bit words from dst (4-byte aligned) to v,
	// each with one store: a reader never sees a word in part.
	MemsetD32Async(dst DevicePtr, v uint32, n int64, s Stream) error
	// WriteValue32 stores v into the 4-byte word at dst (device memory,
	// a peer's mapped memory included) once the stream's earlier work is
	// done, after a memory barrier that makes that work's writes visible
	// first (a stream memory operation: cuStreamWriteValue32,
	// hipStreamWriteValue32). WaitValue32 holds the stream's later work
	// until (int32)(*dst - v) >= 0 (cuStreamWaitValue32 with
	// CU_STREAM_WAIT_VALUE_GEQ, hipStreamWaitValue32 with
	// hipStreamWaitValueGte: the same for the words 0 and 1 irisgen
	// waits on); the wait has no time limit. Both run without a kernel,
	// and CUDA captures them into a graph (batch memory-operation nodes).
	WriteValue32(dst DevicePtr, v uint32, s Stream) error
	WaitValue32(dst DevicePtr, v uint32, s Stream) error
	Synchronize() error

	NewStream() (Stream, error) // non-blocking with respect to the legacy stream
	DestroyStream(s Stream) error
	StreamSynchronize(s Stream) error
	// StreamQuery reports whether s has finished all the work enqueued on
	// it so far, without waiting (cuStreamQuery, hipStreamQuery): the
	// library's "not ready" is done false, not an error. Like
	// StreamSynchronize it fails on a stream that captures.
	StreamQuery(s Stream) (done bool, err error)

	NewEvent(timing bool) (Event, error)
	DestroyEvent(e Event) error
	RecordEvent(e Event, s Stream) error
	SynchronizeEvent(e Event) error
	Elapsed(start, end Event) (time.Duration, error)

	LoadModule(image []byte) (Module, error)
	UnloadModule(m Module) error
	Function(m Module, name string) (Function, error)
	// Global returns the address and size of a __device__ variable.
	Global(m Module, name string) (DevicePtr, int64, error)
	// Launch starts f with a single by-value parameter whose bytes are args
	// (every irisgen kernel takes one argument struct).
	Launch(f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error

	CanAccessPeer(peer Device) (bool, error)
	EnablePeerAccess(peer Device) error

	IPCGetHandle(p DevicePtr) (IPCHandle, error)
	IPCOpenHandle(h IPCHandle) (DevicePtr, error)
	IPCCloseHandle(p DevicePtr) error

	// BeginCapture starts a capture on s in mode.
	BeginCapture(s Stream, mode CaptureMode) error
	EndCapture(s Stream) (Graph, error)
	CaptureStatus(s Stream) (CaptureStatus, error)
	Instantiate(g Graph) (GraphExec, error)
	LaunchGraph(g GraphExec, s Stream) error
	DestroyGraph(g Graph) error
	DestroyGraphExec(g GraphExec) error
}

// ValueOp is one stream memory operation of a batch (ValueOps): with Wait,
// WaitValue32's wait until the word at Dst is at least Value, else
// WriteValue32's store of Value into it. The bindings hand a slice of them
// to the library as it lies (driver.h's ig_value_op; driver.go checks that
// the layouts agree), so the fields keep this order.
type ValueOp struct {
	Dst   DevicePtr
	Value uint32
	Wait  bool
}

// ValueBatcher is a Device that enqueues several stream memory operations
// as one, in order (CUDA's cuStreamBatchMemOp: one stream operation and one
// graph node where WriteValue32 and WaitValue32 make one each).
type ValueBatcher interface {
	ValueOps(ops []ValueOp, s Stream) error
}

// ValueOps enqueues ops on s in order: as one batch where d is a
// ValueBatcher, else one WriteValue32 or WaitValue32 each.
func ValueOps(d Device, ops []ValueOp, s Stream) error {
	if b, ok := d.(ValueBatcher); ok {
		return b.ValueOps(ops, s)
	}
	for _, o := range ops {
		var err error
		if o.Wait {
			err = d.WaitValue32(o.Dst, o.Value, s)
		} else {
			err = d.WriteValue32(o.Dst, o.Value, s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// EventWaiter is a Device whose streams can wait for an event recorded on
// another stream (cuStreamWaitEvent, hipStreamWaitEvent). Under capture
// such a wait forks the waiting stream into the capture (when the event
// was recorded in it) or joins its work back, so one launch can capture
// work on several streams as parallel branches of one graph; EndCapture
// fails while a stream that joined the capture holds work the capturing
// stream never waited for.
type EventWaiter interface {
	WaitEvent(s Stream, e Event) error
}

// ThreadBinder is implemented by devices that can make themselves current on
// the calling OS thread, for libraries that use the platform's own runtime
// API on that thread (NCCL, which irisgen bench runs as a baseline). The
// caller locks its goroutine to the thread first (runtime.LockOSThread);
// irisgen's own calls never need it, since every Device method binds the
// device inside its C call.
type ThreadBinder interface {
	BindThread() error
}

// DependentLauncher is implemented by devices that can launch a kernel as a
// programmatic dependent of the kernel before it on the stream (NVIDIA's
// Programmatic Dependent Launch, sm_90 and later): the kernel may be
// scheduled once every block of that kernel has signalled
// (griddepcontrol.launch_dependents) instead of when it has ended, so its
// launch overlaps the previous kernel's tail. Such a kernel must wait
// (griddepcontrol.wait, which returns once the previous kernel has ended and
// its writes are visible) before it touches memory that kernel may write;
// every irisgen kernel does, in irisgen::begin. A captured launch keeps the
// programmatic edge in the graph.
type DependentLauncher interface {
	// LaunchDependent is Launch, as a programmatic dependent where
	// DependentLaunches says so.
	LaunchDependent(f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error
	// DependentLaunches reports whether LaunchDependent really launches
	// programmatic dependents (the GPU, the driver and $IRISGEN_PDL allow
	// it); when false it is Launch.
	DependentLaunches() bool
}

// EnvPDL switches Programmatic Dependent Launch at run time, so one binary
// and one set of kernels A/B it: 0 (or false) turns it off, 1 (or true, or
// unset) uses it where the GPU (sm_90 and later) and the driver (CUDA 12.3
// and later) support it. Read when the CUDA platform loads.
const EnvPDL = "IRISGEN_PDL"

// PeerValueWriter is implemented by devices that know whether a stream
// memory operation may store into a peer GPU's memory (WriteValue32, and
// ValueOps' stores, at an address of a peer's mapped memory). CUDA drivers
// before 13.1 do; from 13.1, NVIDIA's NCCL maintainers report, they do not
// (NCCL 2.29 and later copy their flags to the peers instead), and neither
// does any device when IRISGEN_PEER_WRITES is 0. A device that does not
// implement it may.
type PeerValueWriter interface {
	PeerValueWrites() bool
}

// PeerValueWrites reports whether d's stream memory operations may store
// into a peer's memory (PeerValueWriter; true for a device that does not
// say).
func PeerValueWrites(d Device) bool {
	if w, ok := d.(PeerValueWriter); ok {
		return w.PeerValueWrites()
	}
	return true
}

// EnvPeerWrites switches stream memory operations into peers' memory at run
// time, so one binary A/Bs the copies that replace them and a driver that
// has them tests the path of one that has not: 0 (or false) makes every
// device report that it has none (PeerValueWriter), 1 (or true, or unset)
// leaves it to the driver. Read when the platform loads.
const EnvPeerWrites = "IRISGEN_PEER_WRITES"

// envSwitch reads the run-time switch name: "", 1 or true (any case) is
// on, 0 or false off; another value is an error that names the variable
// and says what each setting does.
func envSwitch(name, off, on string) (bool, error) {
	switch v := os.Getenv(name); strings.ToLower(v) {
	case "", "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want 0 or false (%s), 1 or true (%s, the default)", name, v, off, on)
	}
}

// pdlAllowed reads EnvPDL.
func pdlAllowed() (bool, error) { return envSwitch(EnvPDL, "off", "on where supported") }

// peerWritesAllowed reads EnvPeerWrites.
func peerWritesAllowed() (bool, error) {
	return envSwitch(EnvPeerWrites, "copy the flags into peers' memory", "store them with stream memory operations where the driver can")
}

// LaunchDependent launches f on d as a programmatic dependent of the kernel
// before it on s where d is a DependentLauncher, else with d.Launch. Only
// for kernels that wait before touching memory a previous kernel may write
// (irisgen's: irisgen::begin waits).
func LaunchDependent(d Device, f Function, grid, block Dim3, sharedBytes uint32, s Stream, args []byte) error {
	if dl, ok := d.(DependentLauncher); ok {
		return dl.LaunchDependent(f, grid, block, sharedBytes, s, args)
	}
	return d.Launch(f, grid, block, sharedBytes, s, args)
}

// Package fakegpu is a test double of gpu.Platform for CPU unit tests.
//
// Device memory is host memory behind fake device addresses: device i hands out
// addresses from its own range starting at DeviceBase(i), 256-byte aligned and
// never reused, so a stale pointer is caught instead of silently aliasing a new
// allocation. Copies and memsets really move bytes. Every "asynchronous"
// operation runs to completion when it is called, so stream order holds
// trivially; what the double checks is that the calls are legal: handles
// belong to the device they are used on, peer memory is only touched after
// EnablePeerAccess, and nothing illegal happens during stream capture.
//
// Kernels are not run. Launch records what was launched (see Launches) and
// calls the optional OnLaunch hook, through which a test can simulate a
// kernel's effects with Read and Write, or make the launch fail.
//
// Stream capture follows CUDA's capture modes: while any stream of the
// platform captures in global (or thread-local) mode, Alloc, Free, AllocHostMapped, FreeHost, the synchronous
// copies, Synchronize and StreamQuery fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and
// invalidate every active capture, as do StreamSynchronize of a capturing
// stream (in any mode) and SynchronizeEvent of an event recorded during
// capture. A relaxed capture refuses nothing but its own stream's sync. The
// synchronous copies are stricter than CUDA on purpose (an H200 with driver
// 580 allowed them while a non-blocking stream captured): irisgen's launch
// paths must never copy from the host, and the double is there to catch it.
//
// IPC handles open in the same process here, which CUDA refuses
// (CUDA_ERROR_INVALID_CONTEXT): with the double, goroutines stand in for the
// processes of a multi-process world.
//
// All methods are safe for concurrent use (one rank per goroutine).
package fakegpu

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"time"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
)

// Error codes and names, the CUDA driver's, so errors read like the real ones.
const (
	codeInvalidValue                           = 1
	codeOutOfMemory                            = 2
	codeInvalidDevice                          = 101
	codeInvalidImage                           = 200
	codePeerAccessUnsupported                  = 217
	codeInvalidHandle                          = 400
	codeNotFound                               = 500
	codeIllegalAddress                         = 700
	codePeerAccessNotEnabled                   = 705
	codeStreamCaptureUnsupported               = 900
	codeStreamCaptureInvalidated               = 901
	codeStreamCaptureUnmatched                 = 903
	codeStreamCaptureUnjoined                  = 904
	codeStreamCaptureIsolation                 = 906
	codeStreamCaptureWrongThread               = 908
	codeIllegalState                           = 401
	codeNotSupported                           = 801
	fakeEventTick                              = time.Microsecond
	addressAlign                               = 256
	deviceRangeStride                          = 0x1000_0000_0000
	hostMappedBase               gpu.DevicePtr = 0x0800_0000_0000
	ipcAliasBase                 gpu.DevicePtr = 0x0400_0000_0000
)

var codeNames = map[int][2]string{
	codeInvalidValue:             {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	codeOutOfMemory:              {"CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	codeInvalidDevice:            {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	codeInvalidImage:             {"CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	codePeerAccessUnsupported:    {"CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices"},
	codeInvalidHandle:            {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	codeIllegalState:             {"CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
	codeNotFound:                 {"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	codeNotSupported:             {"CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	codeIllegalAddress:           {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	codePeerAccessNotEnabled:     {"CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
	codeStreamCaptureUnsupported: {"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
	codeStreamCaptureInvalidated: {"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
	codeStreamCaptureUnmatched:   {"CUDA_ERROR_STREAM_CAPTURE_UNMATCHED", "capture was not initiated in this stream"},
	codeStreamCaptureUnjoined:    {"CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "capturing stream has unjoined work"},
	codeStreamCaptureIsolation:   {"CUDA_ERROR_STREAM_CAPTURE_ISOLATION", "dependency created on uncaptured work in another stream"},
	codeStreamCaptureWrongThread: {"CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
}

func fail(call string, code int, detail string) *gpu.Error {
	n := codeNames[code]
	desc := n[1]
	if detail != "" {
		desc += ": " + detail
	}
	return &gpu.Error{Call: call, Code: code, Name: n[0], Desc: desc}
}

// DeviceBase is the first address of device i's fake address range.
func DeviceBase(i int) gpu.DevicePtr { return gpu.DevicePtr(deviceRangeStride * uint64(i+1)) }

// Launch is one recorded kernel launch.
type Launch struct {
	Seq      int // position in Launches, from 0
	Device   int
	Module   gpu.Module
	Function string
	Grid     gpu.Dim3
	Block    gpu.Dim3
	Shared   uint32
	Stream   gpu.Stream
	Args     []byte // a copy of the launch's argument bytes
	// Captured is true when the launch was recorded into a stream capture
	// instead of running; the hook is not called for it.
	Captured bool
	// Dependent is true for a LaunchDependent on a platform that does
	// dependent launches (SetDependentLaunches).
	Dependent bool
	// Graph is the executable graph that replayed this launch, or 0.
	Graph gpu.GraphExec
}

// regionKind says how a memory region came to be.
type regionKind int

const (
	kindDevice regionKind = iota
	kindHostMapped
	kindIPC
	kindGlobal
)

// region is a range of fake device addresses backed by host bytes.
type region struct {
	base  gpu.DevicePtr
	buf   []byte
	owner int // device whose memory it is
	kind  regionKind
	fine  bool
	// opener is the device that opened an IPC alias (it may access it
	// without peer access, like a LAZY_ENABLE_PEER_ACCESS mapping).
	opener int
	target *region // kindIPC: the exported allocation
}

func (r *region) end() gpu.DevicePtr { return r.base + gpu.DevicePtr(len(r.buf)) }

type moduleDef struct {
	functions map[string]bool
	globals   map[string][]byte
}

type module struct {
	dev     int
	def     *moduleDef
	globals map[string]*region
}

type function struct {
	mod  gpu.Module
	dev  int
	name string
}

type stream struct {
	dev       int
	capture   gpu.CaptureStatus
	strict    bool // capturing in global or thread-local mode (not relaxed)
	thread    int  // the OS thread that began a strict capture (0: not known)
	captured  []op
	destroyed bool
	// origin is the stream whose capture this one joined by waiting for an
	// event recorded in it (a fork), nil otherwise: its operations go into
	// the origin's graph. ops counts the operations captured on it, and
	// unjoined says it holds captured work no stream of the capture has
	// waited for since (EndCapture then fails, as CUDA's does).
	origin   *stream
	ops      int
	unjoined bool
	// running counts the calls whose operations on the stream still run
	// (a WaitValue32 waiting for its word, a launch's hook: the lock is
	// released meanwhile); StreamQuery answers not ready while it is not 0.
	running int
}

// root is the stream whose capture s takes part in: s, or the stream it
// joined.
func (s *stream) root() *stream {
	if s.origin != nil {
		return s.origin
	}
	return s
}

type event struct {
	dev      int
	timing   bool
	recorded bool
	captured bool // last recorded during a capture (syncing it is illegal)
	at       time.Duration
	// from and fromOps: the stream a captured record was made on and its
	// operation count then (a wait for it joins from's work up to there).
	from    *stream
	fromOps int
}

type graph struct {
	dev int
	ops []op
}

type opKind int

const (
	opLaunch opKind = iota
	opGraph
	opEvent
	opMemset
	opMemset32
	opHtoD
	opDtoH
	opDtoD
	opWriteValue
	opWaitValue
)

// op is one stream operation, run at once or captured and replayed by
// LaunchGraph.
type op struct {
	kind   opKind
	launch *Launch
	dst    gpu.DevicePtr
	src    gpu.DevicePtr
	host   []byte // HtoD source or DtoH destination: the caller's memory, used when the op runs
	value  byte
	word   uint32 // opMemset32's value
	bytes  int64
	event  gpu.Event
	sub    []op // a captured graph launch
}

// Platform is a fake gpu.Platform with a fixed number of devices.
type Platform struct {
	mu        sync.Mutex
	devs      []*Device
	regions   []*region // sorted by base, non-overlapping
	next      []gpu.DevicePtr
	nextHost  gpu.DevicePtr
	nextIPC   gpu.DevicePtr
	hostByPtr map[unsafe.Pointer]*region
	defs      map[string]*moduleDef
	handle    uintptr
	streams   map[gpu.Stream]*stream
	legacy    []*stream // each device's zero stream
	events    map[gpu.Event]*event
	modules   map[gpu.Module]*module
	functions map[gpu.Function]*function
	graphs    map[gpu.Graph]*graph
	execs     map[gpu.GraphExec]*graph
	launches  []Launch
	memOps    []MemOp
	waitLimit time.Duration // how long a WaitValue32 waits before it fails (SetWaitLimit)
	onLaunch  func(Launch) error
	allocHook func(device int, bytes int64) error
	limit     []int64 // per device; 0: none
	used      []int64
	canPeer   func(from, to int) bool
	dependent bool // devices launch programmatic dependents (SetDependentLaunches)
	// noPeerWrites: WriteValue32 refuses a peer's memory (SetPeerValueWrites)
	noPeerWrites bool
	clock        time.Duration
	capturing    int // streams with a strict (global or thread-local) capture active
	ipcID        uint64
}

var _ gpu.Platform = (*Platform)(nil)

// New returns a platform with the given number of devices, all of which can
// access each other's memory once peer access is enabled.
func New(devices int) *Platform {
	p := &Platform{
		nextHost:  hostMappedBase,
		nextIPC:   ipcAliasBase,
		hostByPtr: map[unsafe.Pointer]*region{},
		defs:      map[string]*moduleDef{},
		streams:   map[gpu.Stream]*stream{},
		events:    map[gpu.Event]*event{},
		modules:   map[gpu.Module]*module{},
		functions: map[gpu.Function]*function{},
		graphs:    map[gpu.Graph]*graph{},
		execs:     map[gpu.GraphExec]*graph{},
		limit:     make([]int64, devices),
		used:      make([]int64, devices),
	}
	for i := 0; i < devices; i++ {
		p.devs = append(p.devs, &Device{p: p, ord: i, peers: map[int]bool{}})
		p.next = append(p.next, DeviceBase(i))
		p.legacy = append(p.legacy, &stream{dev: i})
	}
	return p
}

// Name is "fake".
func (p *Platform) Name() string { return "fake" }

// DeviceCount returns the number of devices given to New.
func (p *Platform) DeviceCount() (int, error) { return len(p.devs), nil }

// Open returns device ordinal (the same *Device on every call).
func (p *Platform) Open(ordinal int) (gpu.Device, error) {
	if ordinal < 0 || ordinal >= len(p.devs) {
		return nil, fail("cuDeviceGet", codeInvalidDevice, fmt.Sprintf("ordinal %d of %d devices", ordinal, len(p.devs)))
	}
	return p.devs[ordinal], nil
}

// Device returns device ordinal as its concrete type; it panics when out of range.
func (p *Platform) Device(ordinal int) *Device { return p.devs[ordinal] }

// AddModule registers a module image: LoadModule of the same bytes yields a
// module with the named functions and globals (each global's initial bytes,
// whose length is its size, are copied into device memory at load).
func (p *Platform) AddModule(image []byte, functions []string, globals map[string][]byte) {
	def := &moduleDef{functions: map[string]bool{}, globals: map[string][]byte{}}
	for _, f := range functions {
		def.functions[f] = true
	}
	for n, b := range globals {
		def.globals[n] = append([]byte(nil), b...)
	}
	p.mu.Lock()
	p.defs[string(image)] = def
	p.mu.Unlock()
}

// OnLaunch sets a hook called for every launch that runs (eagerly or from a
// graph, not while captured), after it is recorded and without the platform's
// lock held, so it may call Read and Write. A non-nil error fails the launch
// (Launch or LaunchGraph returns it). nil removes the hook.
func (p *Platform) OnLaunch(hook func(l Launch) error) {
	p.mu.Lock()
	p.onLaunch = hook
	p.mu.Unlock()
}

// SetDependentLaunches makes every device launch programmatic dependents
// (gpu.DependentLauncher: DependentLaunches reports on, LaunchDependent
// records Launch.Dependent), as an sm_90 GPU with a CUDA 12.3+ driver does;
// off (the default) they are plain launches, as on HIP or with IRISGEN_PDL=0.
// Kernels run the same either way.
func (p *Platform) SetDependentLaunches(on bool) {
	p.mu.Lock()
	p.dependent = on
	p.mu.Unlock()
}

// SetPeerValueWrites makes WriteValue32 store into peers' memory (on, as
// New's platform does) or refuse it with CUDA_ERROR_NOT_SUPPORTED, as
// CUDA drivers from 13.1 do by NVIDIA's account; the devices' PeerValueWrites
// reports it (gpu.PeerValueWriter).
func (p *Platform) SetPeerValueWrites(on bool) {
	p.mu.Lock()
	p.noPeerWrites = !on
	p.mu.Unlock()
}

// Launches returns a copy of every launch recorded so far, in order.
func (p *Platform) Launches() []Launch {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Launch, len(p.launches))
	for i, l := range p.launches {
		l.Args = append([]byte(nil), l.Args...)
		out[i] = l
	}
	return out
}

// ClearLaunches forgets the recorded launches.
func (p *Platform) ClearLaunches() {
	p.mu.Lock()
	p.launches = nil
	p.mu.Unlock()
}

// SetAllocHook sets a function asked before every Alloc and AllocHostMapped
// (device is -1 for the latter); a non-nil error is returned by the call.
// Use OutOfMemory for a realistic one. nil removes the hook.
func (p *Platform) SetAllocHook(hook func(device int, bytes int64) error) {
	p.mu.Lock()
	p.allocHook = hook
	p.mu.Unlock()
}

// OutOfMemory returns the error a real Alloc gives when memory runs out.
func OutOfMemory() error { return fail("cuMemAlloc_v2", codeOutOfMemory, "") }

// SetMemoryLimit makes Alloc on device fail with CUDA_ERROR_OUT_OF_MEMORY
// when its live allocations would exceed limit bytes (0: no limit).
func (p *Platform) SetMemoryLimit(device int, limit int64) {
	p.mu.Lock()
	p.limit[device] = limit
	p.mu.Unlock()
}

// SetPeerTopology decides CanAccessPeer (and so EnablePeerAccess); nil
// restores the default, where every pair of distinct devices can.
func (p *Platform) SetPeerTopology(can func(from, to int) bool) {
	p.mu.Lock()
	p.canPeer = can
	p.mu.Unlock()
}

// Allocated returns the bytes of live Alloc allocations on device.
func (p *Platform) Allocated(device int) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used[device]
}

// LiveStreamsAndEvents counts the streams and events not destroyed yet
// (the legacy streams not among them); tests use it to find leaks.
func (p *Platform) LiveStreamsAndEvents() (streams, events int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.streams), len(p.events)
}

// LiveRegions counts live allocations of every kind (device, host-mapped,
// IPC mappings, module globals); tests use it to find leaks.
func (p *Platform) LiveRegions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.regions)
}

// Read copies n bytes at device address a, whatever device it is on (no
// peer-access check: this is the test's view, or a simulated kernel's).
func (p *Platform) Read(a gpu.DevicePtr, n int64) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.span("Read", -1, a, n)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), b...), nil
}

// Write copies data to device address a, whatever device it is on.
func (p *Platform) Write(a gpu.DevicePtr, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.span("Write", -1, a, int64(len(data)))
	if err != nil {
		return err
	}
	copy(b, data)
	return nil
}

// Update runs f on the n bytes at device address a under the platform's
// lock, for read-modify-write simulations (atomics) from OnLaunch hooks of
// several goroutines. f must not call the platform.
func (p *Platform) Update(a gpu.DevicePtr, n int64, f func(b []byte)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, err := p.span("Update", -1, a, n)
	if err != nil {
		return err
	}
	f(b)
	return nil
}

// Uint64 reads a little-endian uint64 at device address a.
func (p *Platform) Uint64(a gpu.DevicePtr) (uint64, error) {
	b, err := p.Read(a, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// --- internals; callers hold p.mu ---

func (p *Platform) newHandle() uintptr {
	p.handle++
	return p.handle
}

// find returns the region containing a, or nil.
func (p *Platform) find(a gpu.DevicePtr) *region {
	i := sort.Search(len(p.regions), func(i int) bool { return p.regions[i].end() > a })
	if i < len(p.regions) && p.regions[i].base <= a {
		return p.regions[i]
	}
	return nil
}

func (p *Platform) insert(r *region) {
	i := sort.Search(len(p.regions), func(i int) bool { return p.regions[i].base > r.base })
	p.regions = append(p.regions, nil)
	copy(p.regions[i+1:], p.regions[i:])
	p.regions[i] = r
}

func (p *Platform) remove(r *region) {
	for i, x := range p.regions {
		if x == r {
			p.regions = append(p.regions[:i], p.regions[i+1:]...)
			return
		}
	}
}

func alignUp(n int64) int64 { return (n + addressAlign - 1) &^ (addressAlign - 1) }

// span returns the bytes [a, a+n) of one region, checking that device dev
// (-1: anyone) may access them.
func (p *Platform) span(call string, dev int, a gpu.DevicePtr, n int64) ([]byte, error) {
	if n < 0 {
		return nil, fail(call, codeInvalidValue, fmt.Sprintf("negative size %d", n))
	}
	r := p.find(a)
	if r == nil {
		if n == 0 {
			return nil, nil
		}
		return nil, fail(call, codeIllegalAddress, fmt.Sprintf("address %#x is not allocated", uint64(a)))
	}
	off := int64(a - r.base)
	if off+n > int64(len(r.buf)) {
		return nil, fail(call, codeIllegalAddress, fmt.Sprintf("[%#x, +%d) runs past the end of the allocation at %#x (%d bytes)", uint64(a), n, uint64(r.base), len(r.buf)))
	}
	if dev >= 0 && !p.accessible(dev, r) {
		return nil, fail(call, codePeerAccessNotEnabled, fmt.Sprintf("device %d touches %#x on device %d without peer access", dev, uint64(a), r.owner))
	}
	return r.buf[off : off+n], nil
}

func (p *Platform) accessible(dev int, r *region) bool {
	switch {
	case r.kind == kindHostMapped, r.owner == dev:
		return true
	case r.kind == kindIPC && r.opener == dev:
		return true
	}
	return p.devs[dev].peers[r.owner]
}

// captureGuard fails an operation that is illegal while any stream captures
// in a strict mode (global or thread-local; goroutines stand in for threads)
// and invalidates those captures, as CUDA does. Relaxed captures refuse
// nothing.
func (p *Platform) captureGuard(call string) error {
	if p.capturing == 0 {
		return nil
	}
	p.invalidateAll()
	return fail(call, codeStreamCaptureUnsupported, "a stream is capturing (global capture mode)")
}

func (p *Platform) invalidateAll() {
	for _, s := range p.streams {
		if s.capture == gpu.CaptureActive && s.strict {
			p.invalidate(s)
		}
	}
}

// invalidate marks s's active capture invalidated.
func (p *Platform) invalidate(s *stream) {
	s = s.root()
	if s.capture != gpu.CaptureActive {
		return
	}
	s.capture = gpu.CaptureInvalidated
	s.captured = nil
	if s.strict {
		p.capturing--
	}
	for _, x := range p.streams {
		if x.origin == s {
			x.capture = gpu.CaptureInvalidated
		}
	}
}

// endJoined ends the part of the streams that joined r's capture; it
// reports whether one of them held work no stream had waited for.
func (p *Platform) endJoined(r *stream) (unjoined bool) {
	for _, x := range p.streams {
		if x.origin == r {
			unjoined = unjoined || x.unjoined
			x.capture, x.origin, x.ops, x.unjoined = gpu.CaptureNone, nil, 0, false
		}
	}
	return unjoined
}

// stream finds stream h of device dev; 0 is the device's legacy stream.
func (p *Platform) stream(call string, dev int, h gpu.Stream) (*stream, error) {
	if h == 0 {
		return p.legacy[dev], nil
	}
	return lookup(call, "stream", p.streams, dev, h)
}

// owned is what a handle names: an object made on one device.
type owned interface{ device() int }

func (s *stream) device() int   { return s.dev }
func (e *event) device() int    { return e.dev }
func (m *module) device() int   { return m.dev }
func (f *function) device() int { return f.dev }
func (g *graph) device() int    { return g.dev }

// lookup finds the object handle h names in m (the table of one kind of
// handle) for a call on device dev: an unknown handle, or one of another
// device, is CUDA_ERROR_INVALID_HANDLE, as the driver answers.
func lookup[H ~uintptr, T owned](call, kind string, m map[H]T, dev int, h H) (T, error) {
	o, ok := m[h]
	if !ok {
		return o, fail(call, codeInvalidHandle, fmt.Sprintf("unknown %s %#x", kind, uintptr(h)))
	}
	if o.device() != dev {
		return o, fail(call, codeInvalidHandle, fmt.Sprintf("%s %#x belongs to device %d, used on device %d", kind, uintptr(h), o.device(), dev))
	}
	return o, nil
}

// enqueue decides what happens to a stream operation: it returns
// (true, nil) when the op was captured, (false, nil) when it must run now.
func (p *Platform) enqueue(call string, s *stream, o op) (bool, error) {
	switch s.capture {
	case gpu.CaptureActive:
		r := s.root()
		r.captured = append(r.captured, o)
		s.ops++
		if s.origin != nil {
			s.unjoined = true
		}
		return true, nil
	case gpu.CaptureInvalidated:
		return false, fail(call, codeStreamCaptureInvalidated, "the stream's capture was invalidated; end it")
	}
	return false, nil
}

// run executes ops for device dev (the lock held on entry and exit; released
// around hooks). Launches are recorded with stream s and graph g.
func (p *Platform) run(dev int, ops []op, s gpu.Stream, g gpu.GraphExec) error {
	for _, o := range ops {
		if err := p.runOne(dev, o, s, g); err != nil {
			return err
		}
	}
	return nil
}

func (p *Platform) runOne(dev int, o op, s gpu.Stream, g gpu.GraphExec) error {
	p.clock += fakeEventTick
	switch o.kind {
	case opLaunch:
		l := *o.launch
		l.Args = append([]byte(nil), l.Args...)
		l.Stream, l.Graph, l.Captured = s, g, false
		return p.record(l)
	case opGraph:
		return p.run(dev, o.sub, s, g)
	case opEvent:
		if e, ok := p.events[o.event]; ok {
			e.recorded, e.captured, e.at = true, false, p.clock
		}
		return nil
	case opMemset:
		b, err := p.span("cuMemsetD8Async", dev, o.dst, o.bytes)
		if err != nil {
			return err
		}
		for i := range b {
			b[i] = o.value
		}
		return nil
	case opMemset32:
		b, err := p.span("cuMemsetD32Async", dev, o.dst, o.bytes)
		if err != nil {
			return err
		}
		for i := 0; i < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], o.word)
		}
		return nil
	case opWriteValue:
		b, err := p.span("cuStreamWriteValue32_v2", dev, o.dst, 4)
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(b, o.word)
		p.memOps = append(p.memOps, MemOp{Device: dev, Stream: s, Graph: g, Kind: MemOpWrite, Dst: o.dst, Value: o.word})
		return nil
	case opWaitValue:
		return p.waitValue(dev, o, s, g)
	case opHtoD:
		d, err := p.span("cuMemcpyHtoDAsync_v2", dev, o.dst, o.bytes)
		if err != nil {
			return err
		}
		copy(d, o.host)
		return nil
	case opDtoH:
		src, err := p.span("cuMemcpyDtoHAsync_v2", dev, o.src, o.bytes)
		if err != nil {
			return err
		}
		copy(o.host, src)
		return nil
	default:
		src, err := p.span("cuMemcpyDtoDAsync_v2", dev, o.src, o.bytes)
		if err != nil {
			return err
		}
		d, err := p.span("cuMemcpyDtoDAsync_v2", dev, o.dst, o.bytes)
		if err != nil {
			return err
		}
		copy(d, src)
		p.memOps = append(p.memOps, MemOp{Device: dev, Stream: s, Graph: g, Kind: MemOpCopy, Dst: o.dst, Src: o.src, Bytes: o.bytes})
		return nil
	}
}

// waitValue runs a WaitValue32: operations complete when they are called,
// so the caller waits here until (int32)(*dst - value) >= 0, as a stream
// would, the lock released so that another rank's goroutine can write the
// word; after the wait limit (SetWaitLimit) it fails instead of hanging a
// test whose peer never writes.
func (p *Platform) waitValue(dev int, o op, s gpu.Stream, g gpu.GraphExec) error {
	const call = "cuStreamWaitValue32_v2"
	limit := p.waitLimit
	if limit <= 0 {
		limit = DefaultWaitLimit
	}
	deadline := time.Now().Add(limit)
	for {
		b, err := p.span(call, dev, o.dst, 4)
		if err != nil {
			return err
		}
		if int32(binary.LittleEndian.Uint32(b)-o.word) >= 0 {
			p.memOps = append(p.memOps, MemOp{Device: dev, Stream: s, Graph: g, Kind: MemOpWait, Dst: o.dst, Value: o.word})
			return nil
		}
		if time.Now().After(deadline) {
			return fail(call, codeIllegalState, fmt.Sprintf("device %d waited %v for the word at %#x to reach %d; it holds %d (a peer never wrote it: on a GPU the stream would wait for ever)",
				dev, limit, uint64(o.dst), o.word, binary.LittleEndian.Uint32(b)))
		}
		p.mu.Unlock()
		time.Sleep(20 * time.Microsecond)
		p.mu.Lock()
	}
}

// DefaultWaitLimit is how long a WaitValue32 of the fake waits for its
// word before it fails, unless SetWaitLimit says otherwise.
const DefaultWaitLimit = 20 * time.Second

// SetWaitLimit sets how long a WaitValue32 waits for its word before it
// fails (0: DefaultWaitLimit).
func (p *Platform) SetWaitLimit(d time.Duration) {
	p.mu.Lock()
	p.waitLimit = d
	p.mu.Unlock()
}

// MemOpKind is the kind of a recorded stream operation of the copy
// engines and the stream memory operations.
type MemOpKind int

// The kinds of MemOp.
const (
	MemOpCopy  MemOpKind = iota // CopyDtoDAsync: Bytes from Src to Dst
	MemOpWrite                  // WriteValue32: Value into Dst
	MemOpWait                   // WaitValue32: returned once Dst reached Value
)

func (k MemOpKind) String() string {
	return [...]string{"copy", "write", "wait"}[k]
}

// MemOp is a device-to-device copy or a stream memory operation as it ran
// (eagerly, or from a graph: Graph set), in the order the operations ran
// on the platform.
type MemOp struct {
	Device int
	Stream gpu.Stream
	Graph  gpu.GraphExec
	Kind   MemOpKind
	Dst    gpu.DevicePtr
	Src    gpu.DevicePtr
	Bytes  int64
	Value  uint32
}

// MemOps returns the copies and stream memory operations that ran so far,
// in order.
func (p *Platform) MemOps() []MemOp {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]MemOp(nil), p.memOps...)
}

// ClearMemOps forgets the recorded copies and stream memory operations.
func (p *Platform) ClearMemOps() {
	p.mu.Lock()
	p.memOps = nil
	p.mu.Unlock()
}

// record appends a launch and, unless captured, calls the hook with the lock
// released.
func (p *Platform) record(l Launch) error {
	l.Seq = len(p.launches)
	p.launches = append(p.launches, l)
	hook := p.onLaunch
	if l.Captured || hook == nil {
		return nil
	}
	l.Args = append([]byte(nil), l.Args...)
	p.mu.Unlock()
	err := hook(l)
	p.mu.Lock()
	return err
}

// hostBytes views host memory the caller passed in.
func hostBytes(ptr unsafe.Pointer, n int64) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(ptr), n)
}

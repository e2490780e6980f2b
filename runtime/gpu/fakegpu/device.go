package fakegpu

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
)

// Device is one fake GPU.
type Device struct {
	p     *Platform
	ord   int
	peers map[int]bool // guarded by p.mu
}

var _ gpu.Device = (*Device)(nil)

// Ordinal returns the device's index.
func (d *Device) Ordinal() int { return d.ord }

// Platform returns the fake platform.
func (d *Device) Platform() gpu.Platform { return d.p }

// Alloc returns zeroed memory from the device's address range. fine is
// remembered (Fine reports it) but changes nothing else.
func (d *Device) Alloc(bytes int64, fine bool) (gpu.DevicePtr, error) {
	const call = "cuMemAlloc_v2"
	p := d.p
	p.mu.Lock()
	hook := p.allocHook
	p.mu.Unlock()
	if hook != nil {
		if err := hook(d.ord, bytes); err != nil {
			return 0, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.captureGuard(call); err != nil {
		return 0, err
	}
	if bytes <= 0 {
		return 0, fail(call, codeInvalidValue, fmt.Sprintf("size %d", bytes))
	}
	if lim := p.limit[d.ord]; lim > 0 && p.used[d.ord]+bytes > lim {
		return 0, fail(call, codeOutOfMemory, fmt.Sprintf("device %d: %d bytes in use, %d asked, limit %d", d.ord, p.used[d.ord], bytes, lim))
	}
	r := &region{base: p.next[d.ord], buf: make([]byte, bytes), owner: d.ord, kind: kindDevice, fine: fine}
	p.next[d.ord] += gpu.DevicePtr(alignUp(bytes))
	p.used[d.ord] += bytes
	p.insert(r)
	return r.base, nil
}

// Fine reports whether the allocation containing a was made with fine set.
func (p *Platform) Fine(a gpu.DevicePtr) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.find(a)
	if r == nil {
		return false, fail("Fine", codeInvalidValue, fmt.Sprintf("address %#x is not allocated", uint64(a)))
	}
	if r.target != nil {
		r = r.target
	}
	return r.fine, nil
}

// Free releases an allocation made by Alloc (on any device, as CUDA's
// unified addressing allows); its addresses are never handed out again.
func (d *Device) Free(a gpu.DevicePtr) error {
	const call = "cuMemFree_v2"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.captureGuard(call); err != nil {
		return err
	}
	r := p.find(a)
	if r == nil || r.base != a || r.kind != kindDevice {
		return fail(call, codeInvalidValue, fmt.Sprintf("%#x is not the start of a live Alloc allocation", uint64(a)))
	}
	p.remove(r)
	p.used[r.owner] -= int64(len(r.buf))
	return nil
}

// AllocHostMapped returns host memory and its device alias. The host memory
// is a Go byte slice kept reachable by the platform until FreeHost, so the
// returned pointer stays valid (Go does not move heap objects); it must not be
// handed to C, which real pinned memory could be.
func (d *Device) AllocHostMapped(bytes int64) (unsafe.Pointer, gpu.DevicePtr, error) {
	const call = "cuMemHostAlloc"
	p := d.p
	p.mu.Lock()
	hook := p.allocHook
	p.mu.Unlock()
	if hook != nil {
		if err := hook(-1, bytes); err != nil {
			return nil, 0, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.captureGuard(call); err != nil {
		return nil, 0, err
	}
	if bytes <= 0 {
		return nil, 0, fail(call, codeInvalidValue, fmt.Sprintf("size %d", bytes))
	}
	r := &region{base: p.nextHost, buf: make([]byte, bytes), owner: d.ord, kind: kindHostMapped}
	p.nextHost += gpu.DevicePtr(alignUp(bytes))
	p.insert(r)
	host := unsafe.Pointer(&r.buf[0])
	p.hostByPtr[host] = r
	return host, r.base, nil
}

// FreeHost releases memory from AllocHostMapped.
func (d *Device) FreeHost(host unsafe.Pointer) error {
	const call = "cuMemFreeHost"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.captureGuard(call); err != nil {
		return err
	}
	r, ok := p.hostByPtr[host]
	if !ok {
		return fail(call, codeInvalidValue, "not memory from AllocHostMapped")
	}
	delete(p.hostByPtr, host)
	p.remove(r)
	return nil
}

// CopyHtoD copies host memory to the device synchronously.
func (d *Device) CopyHtoD(dst gpu.DevicePtr, src unsafe.Pointer, bytes int64) error {
	return d.copySync("cuMemcpyHtoD_v2", dst, bytes, func(dev []byte) { copy(dev, hostBytes(src, bytes)) })
}

// CopyDtoH copies device memory to the host synchronously.
func (d *Device) CopyDtoH(dst unsafe.Pointer, src gpu.DevicePtr, bytes int64) error {
	return d.copySync("cuMemcpyDtoH_v2", src, bytes, func(dev []byte) { copy(hostBytes(dst, bytes), dev) })
}

// copySync is a synchronous copy to or from the bytes bytes at a: move
// gets them once they are checked. Like every synchronous call it is
// illegal during a global capture.
func (d *Device) copySync(call string, a gpu.DevicePtr, bytes int64, move func(dev []byte)) error {
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.captureGuard(call); err != nil {
		return err
	}
	b, err := p.span(call, d.ord, a, bytes)
	if err != nil {
		return err
	}
	p.clock += fakeEventTick
	move(b)
	return nil
}

// streamOp runs o on stream s now, or captures it.
func (d *Device) streamOp(call string, s gpu.Stream, o op) error {
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return err
	}
	if o.bytes < 0 {
		return fail(call, codeInvalidValue, fmt.Sprintf("negative size %d", o.bytes))
	}
	if captured, err := p.enqueue(call, st, o); captured || err != nil {
		return err
	}
	st.running++
	defer func() { st.running-- }()
	return p.runOne(d.ord, o, s, 0)
}

// CopyDtoDAsync copies between device addresses (either may be a peer's).
func (d *Device) CopyDtoDAsync(dst, src gpu.DevicePtr, bytes int64, s gpu.Stream) error {
	return d.streamOp("cuMemcpyDtoDAsync_v2", s, op{kind: opDtoD, dst: dst, src: src, bytes: bytes})
}

// CopyHtoDAsync copies host memory to the device. Under capture the host
// memory is read when the graph runs, as with a real memcpy node.
func (d *Device) CopyHtoDAsync(dst gpu.DevicePtr, src unsafe.Pointer, bytes int64, s gpu.Stream) error {
	return d.streamOp("cuMemcpyHtoDAsync_v2", s, op{kind: opHtoD, dst: dst, host: hostBytes(src, bytes), bytes: bytes})
}

// CopyDtoHAsync copies device memory to the host.
func (d *Device) CopyDtoHAsync(dst unsafe.Pointer, src gpu.DevicePtr, bytes int64, s gpu.Stream) error {
	return d.streamOp("cuMemcpyDtoHAsync_v2", s, op{kind: opDtoH, src: src, host: hostBytes(dst, bytes), bytes: bytes})
}

// MemsetD8Async sets bytes bytes at dst to v.
func (d *Device) MemsetD8Async(dst gpu.DevicePtr, v byte, bytes int64, s gpu.Stream) error {
	return d.streamOp("cuMemsetD8Async", s, op{kind: opMemset, dst: dst, value: v, bytes: bytes})
}

// MemsetD32Async sets n 32-bit words at dst (4-byte aligned) to v.
func (d *Device) MemsetD32Async(dst gpu.DevicePtr, v uint32, n int64, s gpu.Stream) error {
	if dst%4 != 0 || n < 0 || n > 1<<61 {
		return fail("cuMemsetD32Async", codeInvalidValue, fmt.Sprintf("%#x is not 4-byte aligned, or %d words", uint64(dst), n))
	}
	return d.streamOp("cuMemsetD32Async", s, op{kind: opMemset32, dst: dst, word: v, bytes: 4 * n})
}

// WriteValue32 stores v into the 4-byte word at dst (a peer's too, unless
// SetPeerValueWrites turned that off) once the stream's earlier operations
// are done.
func (d *Device) WriteValue32(dst gpu.DevicePtr, v uint32, s gpu.Stream) error {
	const call = "cuStreamWriteValue32_v2"
	if dst%4 != 0 {
		return fail(call, codeInvalidValue, fmt.Sprintf("%#x is not 4-byte aligned", uint64(dst)))
	}
	p := d.p
	p.mu.Lock()
	r := p.find(dst)
	refuse := p.noPeerWrites && r != nil && r.owner != d.ord
	p.mu.Unlock()
	if refuse {
		return fail(call, codeNotSupported, fmt.Sprintf("%#x is device %d's memory: stream memory operations store only into the calling device's", uint64(dst), r.owner))
	}
	return d.streamOp(call, s, op{kind: opWriteValue, dst: dst, word: v, bytes: 4})
}

// PeerValueWrites reports whether WriteValue32 stores into peers' memory
// (SetPeerValueWrites).
func (d *Device) PeerValueWrites() bool {
	d.p.mu.Lock()
	defer d.p.mu.Unlock()
	return !d.p.noPeerWrites
}

// WaitValue32 holds the stream's later operations until the 4-byte word
// at dst reaches v ((int32)(*dst - v) >= 0). The fake runs operations when
// they are called, so the call itself waits (see SetWaitLimit).
func (d *Device) WaitValue32(dst gpu.DevicePtr, v uint32, s gpu.Stream) error {
	if dst%4 != 0 {
		return fail("cuStreamWaitValue32_v2", codeInvalidValue, fmt.Sprintf("%#x is not 4-byte aligned", uint64(dst)))
	}
	return d.streamOp("cuStreamWaitValue32_v2", s, op{kind: opWaitValue, dst: dst, word: v, bytes: 4})
}

// Synchronize waits for the device: nothing is pending, but it is illegal
// during capture.
func (d *Device) Synchronize() error {
	const call = "cuCtxSynchronize"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	// Synchronizing a context would wait for its capturing streams, in any
	// mode: CUDA refuses and breaks those captures (on an H100 the driver
	// crashed instead, for two ranks sharing the GPU).
	for _, st := range p.streams {
		if st.dev == d.ord && st.capture == gpu.CaptureActive {
			p.invalidate(st)
			return fail(call, codeStreamCaptureUnsupported, "a stream of this device is capturing")
		}
	}
	return p.captureGuard(call)
}

// NewStream returns a new stream of the device.
func (d *Device) NewStream() (gpu.Stream, error) {
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	h := gpu.Stream(p.newHandle())
	p.streams[h] = &stream{dev: d.ord}
	return h, nil
}

// DestroyStream destroys a stream; a stream in capture cannot be destroyed.
func (d *Device) DestroyStream(s gpu.Stream) error {
	const call = "cuStreamDestroy_v2"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == 0 {
		return fail(call, codeInvalidHandle, "the legacy stream cannot be destroyed")
	}
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return err
	}
	if st.capture != gpu.CaptureNone {
		return fail(call, codeIllegalState, "the stream is capturing; end the capture first")
	}
	delete(p.streams, s)
	return nil
}

// StreamSynchronize waits for s; on a capturing stream it fails and
// invalidates the capture.
func (d *Device) StreamSynchronize(s gpu.Stream) error {
	const call = "cuStreamSynchronize"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return err
	}
	return p.hostWait(call, st)
}

// hostWait is what a host wait on st (call) does to its capture: on a
// capturing stream it fails and invalidates the capture; on one whose
// capture was invalidated it fails.
func (p *Platform) hostWait(call string, st *stream) error {
	switch st.capture {
	case gpu.CaptureActive:
		p.invalidate(st)
		return fail(call, codeStreamCaptureUnsupported, "the stream is capturing")
	case gpu.CaptureInvalidated:
		return fail(call, codeStreamCaptureInvalidated, "the stream's capture was invalidated; end it")
	}
	return nil
}

// StreamQuery reports whether s has finished its work: the fake runs an
// operation when it is enqueued, so s is done unless another goroutine's
// call on it still runs (a WaitValue32 waiting for its word, a launch's
// OnLaunch hook). On a capturing stream it fails and invalidates the
// capture, as StreamSynchronize does; while any stream captures in a
// strict mode it fails and invalidates those captures, whatever stream it
// asks about (as cuStreamQuery did on an H100 with driver 580).
func (d *Device) StreamQuery(s gpu.Stream) (bool, error) {
	const call = "cuStreamQuery"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return false, err
	}
	if err := p.hostWait(call, st); err != nil {
		return false, err
	}
	if err := p.captureGuard(call); err != nil {
		return false, err
	}
	return st.running == 0, nil
}

// NewEvent returns an event; only timing events can be measured.
func (d *Device) NewEvent(timing bool) (gpu.Event, error) {
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	h := gpu.Event(p.newHandle())
	p.events[h] = &event{dev: d.ord, timing: timing}
	return h, nil
}

// DestroyEvent destroys an event.
func (d *Device) DestroyEvent(e gpu.Event) error {
	const call = "cuEventDestroy_v2"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := lookup(call, "event", p.events, d.ord, e); err != nil {
		return err
	}
	delete(p.events, e)
	return nil
}

// RecordEvent stamps e with the fake clock, which advances by a microsecond
// for every operation that runs.
func (d *Device) RecordEvent(e gpu.Event, s gpu.Stream) error {
	const call = "cuEventRecord"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	ev, err := lookup(call, "event", p.events, d.ord, e)
	if err != nil {
		return err
	}
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return err
	}
	o := op{kind: opEvent, event: e}
	captured, err := p.enqueue(call, st, o)
	if err != nil {
		return err
	}
	if captured {
		ev.captured, ev.from, ev.fromOps = true, st, st.ops
		return nil
	}
	ev.from = nil
	return p.runOne(d.ord, o, s, 0)
}

// WaitEvent holds s's later operations until e's work is done. The fake has
// run that work already, so eagerly it only checks the handles; under
// capture it follows CUDA: a stream that waits for an event recorded in a
// capture joins that capture (a fork: its operations go into the graph),
// a capture's stream that waits for an event recorded on a joined stream
// takes that stream's work up to the record (a join), and EndCapture fails
// while a joined stream holds work no stream of the capture waited for.
func (d *Device) WaitEvent(s gpu.Stream, e gpu.Event) error {
	const call = "cuStreamWaitEvent"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return err
	}
	ev, ok := p.events[e]
	if !ok {
		return fail(call, codeInvalidHandle, fmt.Sprintf("unknown event %#x", uintptr(e)))
	}
	if st.capture == gpu.CaptureInvalidated {
		return fail(call, codeStreamCaptureInvalidated, "the stream's capture was invalidated; end it")
	}
	if !ev.captured || ev.from == nil {
		return nil
	}
	src := ev.from.root()
	switch {
	case src.capture != gpu.CaptureActive:
		return fail(call, codeIllegalState, "the event was recorded in a capture that has ended")
	case st.capture == gpu.CaptureNone:
		if s == 0 {
			return fail(call, codeStreamCaptureUnsupported, "the legacy stream cannot join a capture")
		}
		st.capture, st.origin, st.ops, st.unjoined = gpu.CaptureActive, src, 0, false
		return nil
	case st.root() != src:
		p.invalidate(st)
		p.invalidate(src)
		return fail(call, codeStreamCaptureIsolation, "the stream waits for an event of another capture")
	}
	if f := ev.from; f.origin == src && f.ops == ev.fromOps {
		f.unjoined = false
	}
	return nil
}

// SynchronizeEvent waits for e; on an event recorded during a capture it
// fails and invalidates the capture.
func (d *Device) SynchronizeEvent(e gpu.Event) error {
	const call = "cuEventSynchronize"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	ev, err := lookup(call, "event", p.events, d.ord, e)
	if err != nil {
		return err
	}
	if ev.captured && p.capturing > 0 {
		p.invalidateAll()
		return fail(call, codeStreamCaptureUnsupported, "the event was recorded during a capture")
	}
	return nil
}

// Elapsed returns the fake time between two recorded timing events.
func (d *Device) Elapsed(start, end gpu.Event) (time.Duration, error) {
	const call = "cuEventElapsedTime"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	a, err := lookup(call, "event", p.events, d.ord, start)
	if err != nil {
		return 0, err
	}
	b, err := lookup(call, "event", p.events, d.ord, end)
	if err != nil {
		return 0, err
	}
	if !a.timing || !b.timing {
		return 0, fail(call, codeInvalidHandle, "an event was created without timing")
	}
	if !a.recorded || !b.recorded {
		return 0, fail(call, codeInvalidHandle, "an event has not been recorded")
	}
	return b.at - a.at, nil
}

// LoadModule loads an image registered with AddModule, allocating and
// initialising its globals on the device.
func (d *Device) LoadModule(image []byte) (gpu.Module, error) {
	const call = "cuModuleLoadData"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	// Loading allocates; CUDA refuses it (lazy loading included) in global capture.
	if err := p.captureGuard(call); err != nil {
		return 0, err
	}
	def, ok := p.defs[string(image)]
	if !ok {
		return 0, fail(call, codeInvalidImage, fmt.Sprintf("image of %d bytes was not registered with AddModule", len(image)))
	}
	m := &module{dev: d.ord, def: def, globals: map[string]*region{}}
	for name, init := range def.globals {
		if len(init) == 0 {
			init = []byte{0} // a variable has at least one byte
		}
		r := &region{base: p.next[d.ord], buf: append([]byte(nil), init...), owner: d.ord, kind: kindGlobal}
		p.next[d.ord] += gpu.DevicePtr(alignUp(int64(len(init))))
		p.insert(r)
		m.globals[name] = r
	}
	h := gpu.Module(p.newHandle())
	p.modules[h] = m
	return h, nil
}

// UnloadModule unloads a module; its functions and globals become invalid.
func (d *Device) UnloadModule(h gpu.Module) error {
	const call = "cuModuleUnload"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := lookup(call, "module", p.modules, d.ord, h)
	if err != nil {
		return err
	}
	for _, r := range m.globals {
		p.remove(r)
	}
	for fh, f := range p.functions {
		if f.mod == h {
			delete(p.functions, fh)
		}
	}
	delete(p.modules, h)
	return nil
}

// Function resolves a kernel registered with AddModule.
func (d *Device) Function(h gpu.Module, name string) (gpu.Function, error) {
	const call = "cuModuleGetFunction"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := lookup(call, "module", p.modules, d.ord, h)
	if err != nil {
		return 0, err
	}
	if !m.def.functions[name] {
		return 0, fail(call, codeNotFound, fmt.Sprintf("no function %q in the module", name))
	}
	for fh, f := range p.functions {
		if f.mod == h && f.name == name {
			return fh, nil
		}
	}
	fh := gpu.Function(p.newHandle())
	p.functions[fh] = &function{mod: h, dev: d.ord, name: name}
	return fh, nil
}

// Global returns the address and size of a global registered with AddModule.
func (d *Device) Global(h gpu.Module, name string) (gpu.DevicePtr, int64, error) {
	const call = "cuModuleGetGlobal_v2"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := lookup(call, "module", p.modules, d.ord, h)
	if err != nil {
		return 0, 0, err
	}
	r, ok := m.globals[name]
	if !ok {
		return 0, 0, fail(call, codeNotFound, fmt.Sprintf("no global %q in the module", name))
	}
	return r.base, int64(len(r.buf)), nil
}

// Launch records the launch (see Launches); outside capture it then calls the
// OnLaunch hook and returns its error.
func (d *Device) Launch(f gpu.Function, grid, block gpu.Dim3, sharedBytes uint32, s gpu.Stream, args []byte) error {
	return d.launch(false, f, grid, block, sharedBytes, s, args)
}

// LaunchDependent is Launch, recorded as a programmatic dependent
// (Launch.Dependent) when the platform does dependent launches
// (gpu.DependentLauncher).
func (d *Device) LaunchDependent(f gpu.Function, grid, block gpu.Dim3, sharedBytes uint32, s gpu.Stream, args []byte) error {
	return d.launch(true, f, grid, block, sharedBytes, s, args)
}

// DependentLaunches reports Platform.SetDependentLaunches.
func (d *Device) DependentLaunches() bool {
	d.p.mu.Lock()
	defer d.p.mu.Unlock()
	return d.p.dependent
}

var _ gpu.DependentLauncher = (*Device)(nil)

func (d *Device) launch(dependent bool, f gpu.Function, grid, block gpu.Dim3, sharedBytes uint32, s gpu.Stream, args []byte) error {
	call := "cuLaunchKernel"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	dependent = dependent && p.dependent
	if dependent {
		call = "cuLaunchKernelEx"
	}
	fn, err := lookup(call, "function", p.functions, d.ord, f)
	if err != nil {
		return err
	}
	if grid.X == 0 || grid.Y == 0 || grid.Z == 0 || block.X == 0 || block.Y == 0 || block.Z == 0 {
		return fail(call, codeInvalidValue, fmt.Sprintf("empty grid %v or block %v", grid, block))
	}
	if uint64(block.X)*uint64(block.Y)*uint64(block.Z) > 1024 {
		return fail(call, codeInvalidValue, fmt.Sprintf("block %v has more than 1024 threads", block))
	}
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return err
	}
	l := &Launch{Device: d.ord, Module: fn.mod, Function: fn.name, Grid: grid, Block: block,
		Shared: sharedBytes, Stream: s, Args: append([]byte(nil), args...), Dependent: dependent}
	o := op{kind: opLaunch, launch: l}
	captured, err := p.enqueue(call, st, o)
	if err != nil {
		return err
	}
	if captured {
		c := *l
		c.Captured = true
		return p.record(c)
	}
	st.running++
	defer func() { st.running-- }()
	return p.runOne(d.ord, o, s, 0)
}

func (d *Device) peer(call string, peer gpu.Device) (*Device, error) {
	pd, ok := peer.(*Device)
	if !ok || pd.p != d.p {
		return nil, fail(call, codeInvalidDevice, "peer is not a device of the same fake platform")
	}
	return pd, nil
}

// CanAccessPeer reports whether the topology (SetPeerTopology) lets d map
// peer's memory; a device is not its own peer.
func (d *Device) CanAccessPeer(peer gpu.Device) (bool, error) {
	pd, err := d.peer("cuDeviceCanAccessPeer", peer)
	if err != nil {
		return false, err
	}
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.canAccess(d.ord, pd.ord), nil
}

func (p *Platform) canAccess(from, to int) bool {
	if from == to {
		return false
	}
	if p.canPeer != nil {
		return p.canPeer(from, to)
	}
	return true
}

// EnablePeerAccess lets d's operations touch peer's memory; enabling it
// twice is not an error.
func (d *Device) EnablePeerAccess(peer gpu.Device) error {
	const call = "cuCtxEnablePeerAccess"
	pd, err := d.peer(call, peer)
	if err != nil {
		return err
	}
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if pd.ord == d.ord {
		return fail(call, codeInvalidDevice, "a device cannot be its own peer")
	}
	if !p.canAccess(d.ord, pd.ord) {
		return fail(call, codePeerAccessUnsupported, fmt.Sprintf("device %d cannot access device %d", d.ord, pd.ord))
	}
	d.peers[pd.ord] = true
	return nil
}

// PeerEnabled reports whether from has enabled access to to's memory.
func (p *Platform) PeerEnabled(from, to int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devs[from].peers[to]
}

var platformIDs atomic.Uint64

// ipcMagic starts every fake IPC handle.
const ipcMagic = "fakegpu\x00"

// IPCGetHandle exports the allocation containing a (as CUDA does, the handle
// names the whole allocation). The handle encodes the platform, the device
// and the allocation's base.
func (d *Device) IPCGetHandle(a gpu.DevicePtr) (gpu.IPCHandle, error) {
	const call = "cuIpcGetMemHandle"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	var h gpu.IPCHandle
	r := p.find(a)
	if r == nil || r.kind != kindDevice {
		return h, fail(call, codeInvalidValue, fmt.Sprintf("%#x is not in a live Alloc allocation", uint64(a)))
	}
	copy(h[:8], ipcMagic)
	binary.LittleEndian.PutUint64(h[8:], p.id())
	binary.LittleEndian.PutUint64(h[16:], uint64(r.owner))
	binary.LittleEndian.PutUint64(h[24:], uint64(r.base))
	binary.LittleEndian.PutUint64(h[32:], uint64(len(r.buf)))
	return h, nil
}

// IPCOpenHandle maps an exported allocation at a new address (as another
// process would see it) that d may access without enabling peer access.
func (d *Device) IPCOpenHandle(h gpu.IPCHandle) (gpu.DevicePtr, error) {
	const call = "cuIpcOpenMemHandle_v2"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if string(h[:8]) != ipcMagic || binary.LittleEndian.Uint64(h[8:]) != p.id() {
		return 0, fail(call, codeInvalidValue, "not a handle from this fake platform's IPCGetHandle")
	}
	owner := int(binary.LittleEndian.Uint64(h[16:]))
	base := gpu.DevicePtr(binary.LittleEndian.Uint64(h[24:]))
	size := int(binary.LittleEndian.Uint64(h[32:]))
	t := p.find(base)
	if t == nil || t.base != base || t.kind != kindDevice || t.owner != owner || len(t.buf) != size {
		return 0, fail(call, codeInvalidValue, fmt.Sprintf("the exported allocation at %#x was freed", uint64(base)))
	}
	r := &region{base: p.nextIPC, buf: t.buf, owner: owner, kind: kindIPC, opener: d.ord, target: t}
	p.nextIPC += gpu.DevicePtr(alignUp(int64(size)))
	p.insert(r)
	return r.base, nil
}

// IPCCloseHandle unmaps an address returned by IPCOpenHandle on d.
func (d *Device) IPCCloseHandle(a gpu.DevicePtr) error {
	const call = "cuIpcCloseMemHandle"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.find(a)
	if r == nil || r.base != a || r.kind != kindIPC || r.opener != d.ord {
		return fail(call, codeInvalidValue, fmt.Sprintf("%#x was not opened with IPCOpenHandle on device %d", uint64(a), d.ord))
	}
	p.remove(r)
	return nil
}

// id identifies the platform inside IPC handles.
func (p *Platform) id() uint64 {
	if p.ipcID == 0 {
		p.ipcID = platformIDs.Add(1)
	}
	return p.ipcID
}

// BeginCapture starts a capture on s (not the legacy stream) in mode.
func (d *Device) BeginCapture(s gpu.Stream, mode gpu.CaptureMode) error {
	const call = "cuStreamBeginCapture_v2"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == 0 {
		return fail(call, codeStreamCaptureUnsupported, "the legacy stream cannot be captured")
	}
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return err
	}
	if st.capture != gpu.CaptureNone {
		return fail(call, codeIllegalState, "the stream is already capturing")
	}
	st.capture = gpu.CaptureActive
	st.captured = nil
	st.strict = mode != gpu.CaptureRelaxed
	st.thread = 0
	if st.strict {
		p.capturing++
		st.thread = osThread()
	}
	return nil
}

// EndCapture ends the capture on s and returns the graph of its operations;
// an invalidated capture ends with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
func (d *Device) EndCapture(s gpu.Stream) (gpu.Graph, error) {
	const call = "cuStreamEndCapture"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return 0, err
	}
	if st.capture != gpu.CaptureNone && st.strict && st.thread != 0 && st.thread != osThread() {
		// Refused; the capture is left as it was.
		return 0, fail(call, codeStreamCaptureWrongThread, "a global or thread-local capture ends on the thread that began it")
	}
	switch {
	case st.capture == gpu.CaptureNone:
		return 0, fail(call, codeIllegalState, "the stream is not capturing")
	case st.origin != nil:
		return 0, fail(call, codeStreamCaptureUnmatched, "the stream joined another stream's capture; end it on that stream")
	case st.capture == gpu.CaptureInvalidated:
		st.capture = gpu.CaptureNone
		p.endJoined(st)
		return 0, fail(call, codeStreamCaptureInvalidated, "an illegal operation during the capture invalidated it")
	}
	unjoined, ops := p.endJoined(st), st.captured
	st.capture, st.captured = gpu.CaptureNone, nil
	if st.strict {
		p.capturing--
	}
	if unjoined {
		return 0, fail(call, codeStreamCaptureUnjoined, "a stream that joined the capture holds work the capturing stream never waited for; join it back (record an event on it and wait for that on the capturing stream)")
	}
	g := &graph{dev: d.ord, ops: ops}
	h := gpu.Graph(p.newHandle())
	p.graphs[h] = g
	return h, nil
}

// CaptureStatus reports s's capture state.
func (d *Device) CaptureStatus(s gpu.Stream) (gpu.CaptureStatus, error) {
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.stream("cuStreamIsCapturing", d.ord, s)
	if err != nil {
		return 0, err
	}
	return st.capture, nil
}

// Instantiate makes an executable graph of g.
func (d *Device) Instantiate(g gpu.Graph) (gpu.GraphExec, error) {
	const call = "cuGraphInstantiateWithFlags"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	gr, err := lookup(call, "graph", p.graphs, d.ord, g)
	if err != nil {
		return 0, err
	}
	h := gpu.GraphExec(p.newHandle())
	p.execs[h] = &graph{dev: d.ord, ops: append([]op(nil), gr.ops...)}
	return h, nil
}

// GraphLaunches returns the launches an executable graph replays.
func (p *Platform) GraphLaunches(g gpu.GraphExec) []Launch {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gr, ok := p.execs[g]; ok {
		return graphLaunches(gr.ops, nil)
	}
	return nil
}

// graphLaunches appends copies of the launches in ops, nested graphs included.
func graphLaunches(ops []op, out []Launch) []Launch {
	for _, o := range ops {
		switch o.kind {
		case opLaunch:
			l := *o.launch
			l.Args = append([]byte(nil), l.Args...)
			out = append(out, l)
		case opGraph:
			out = graphLaunches(o.sub, out)
		}
	}
	return out
}

// LaunchGraph replays g's operations on s: launches are recorded again (with
// Graph set) and call the hook; copies and memsets move bytes again.
func (d *Device) LaunchGraph(g gpu.GraphExec, s gpu.Stream) error {
	const call = "cuGraphLaunch"
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	gr, err := lookup(call, "executable graph", p.execs, d.ord, g)
	if err != nil {
		return err
	}
	st, err := p.stream(call, d.ord, s)
	if err != nil {
		return err
	}
	o := op{kind: opGraph, sub: gr.ops}
	captured, err := p.enqueue(call, st, o)
	if captured || err != nil {
		if captured {
			for _, c := range graphLaunches(gr.ops, nil) {
				c.Stream, c.Captured = s, true
				_ = p.record(c) // captured: no hook, no error
			}
		}
		return err
	}
	st.running++
	defer func() { st.running-- }()
	return p.run(d.ord, gr.ops, s, g)
}

// DestroyGraph destroys a graph (its executable graphs stay valid).
func (d *Device) DestroyGraph(g gpu.Graph) error {
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := lookup("cuGraphDestroy", "graph", p.graphs, d.ord, g); err != nil {
		return err
	}
	delete(p.graphs, g)
	return nil
}

// DestroyGraphExec destroys an executable graph.
func (d *Device) DestroyGraphExec(g gpu.GraphExec) error {
	p := d.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := lookup("cuGraphExecDestroy", "executable graph", p.execs, d.ord, g); err != nil {
		return err
	}
	delete(p.execs, g)
	return nil
}

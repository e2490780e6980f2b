package fakegpu

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
)

func open(t *testing.T, p *Platform, i int) gpu.Device {
	t.Helper()
	d, err := p.Open(i)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func wantCode(t *testing.T, err error, name string) {
	t.Helper()
	var ge *gpu.Error
	if !errors.As(err, &ge) {
		t.Fatalf("got %v, want *gpu.Error %s", err, name)
	}
	if ge.Name != name {
		t.Fatalf("got %s (%v), want %s", ge.Name, err, name)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestPlatformBasics(t *testing.T) {
	p := New(3)
	var _ gpu.Platform = p
	if n, _ := p.DeviceCount(); n != 3 {
		t.Fatalf("DeviceCount = %d", n)
	}
	if _, err := p.Open(3); err == nil {
		t.Fatal("Open(3) of 3 devices succeeded")
	}
	d := open(t, p, 2)
	if d.Ordinal() != 2 || d.Platform() != gpu.Platform(p) {
		t.Fatal("wrong ordinal or platform")
	}
}

func TestAllocAddresses(t *testing.T) {
	p := New(2)
	seen := map[int][]gpu.DevicePtr{}
	for dev := 0; dev < 2; dev++ {
		d := open(t, p, dev)
		for _, n := range []int64{1, 255, 256, 257, 4096} {
			a, err := d.Alloc(n, false)
			must(t, err)
			if a%256 != 0 {
				t.Fatalf("address %#x not 256-aligned", a)
			}
			if a < DeviceBase(dev) || a >= DeviceBase(dev+1) {
				t.Fatalf("address %#x outside device %d's range", a, dev)
			}
			seen[dev] = append(seen[dev], a)
		}
	}
	// Consecutive allocations of one device must not overlap.
	sizes := []int64{1, 255, 256, 257, 4096}
	for dev := 0; dev < 2; dev++ {
		for i := 1; i < len(seen[dev]); i++ {
			if seen[dev][i-1]+gpu.DevicePtr(sizes[i-1]) > seen[dev][i] {
				t.Fatalf("allocations overlap: %#x+%d > %#x", seen[dev][i-1], sizes[i-1], seen[dev][i])
			}
		}
	}
	if p.Allocated(0) != 1+255+256+257+4096 {
		t.Fatalf("Allocated(0) = %d", p.Allocated(0))
	}
	d := open(t, p, 0)
	_, err := d.Alloc(0, false)
	wantCode(t, err, "CUDA_ERROR_INVALID_VALUE")
	// Free: only bases, only once, never reused.
	a := seen[0][4]
	wantCode(t, d.Free(a+1), "CUDA_ERROR_INVALID_VALUE")
	must(t, d.Free(a))
	wantCode(t, d.Free(a), "CUDA_ERROR_INVALID_VALUE")
	b, err := d.Alloc(4096, false)
	must(t, err)
	if b == a {
		t.Fatal("freed address handed out again")
	}
	_, err = p.Read(a, 1)
	wantCode(t, err, "CUDA_ERROR_ILLEGAL_ADDRESS")
}

func TestCopiesAndMemset(t *testing.T) {
	p := New(1)
	d := open(t, p, 0)
	s, err := d.NewStream()
	must(t, err)
	a, err := d.Alloc(64, false)
	must(t, err)
	b, err := d.Alloc(64, true)
	must(t, err)
	if fine, _ := p.Fine(b); !fine {
		t.Fatal("fine not remembered")
	}
	src := make([]byte, 64)
	for i := range src {
		src[i] = byte(i + 1)
	}
	must(t, d.CopyHtoD(a, unsafe.Pointer(&src[0]), 64))
	must(t, d.CopyDtoDAsync(b, a, 64, s))
	must(t, d.MemsetD8Async(b+8, 0xAB, 4, s))
	dst := make([]byte, 64)
	must(t, d.CopyDtoH(unsafe.Pointer(&dst[0]), b, 64))
	want := append([]byte(nil), src...)
	copy(want[8:12], []byte{0xAB, 0xAB, 0xAB, 0xAB})
	if !bytes.Equal(dst, want) {
		t.Fatalf("got %v, want %v", dst, want)
	}
	h := []byte{9, 9, 9}
	must(t, d.CopyHtoDAsync(a+61, unsafe.Pointer(&h[0]), 3, 0))
	out := make([]byte, 4)
	must(t, d.CopyDtoHAsync(unsafe.Pointer(&out[0]), a+60, 4, s))
	if !bytes.Equal(out, []byte{61, 9, 9, 9}) {
		t.Fatalf("async round trip: %v", out)
	}
	// 32-bit words, little-endian; aligned only.
	must(t, d.MemsetD32Async(b+16, 0x01020304, 2, s))
	w := make([]byte, 10)
	must(t, d.CopyDtoH(unsafe.Pointer(&w[0]), b+15, 10))
	if !bytes.Equal(w, []byte{want[15], 4, 3, 2, 1, 4, 3, 2, 1, want[24]}) {
		t.Fatalf("MemsetD32Async: %v", w)
	}
	wantCode(t, d.MemsetD32Async(b+2, 0, 1, s), "CUDA_ERROR_INVALID_VALUE")
	wantCode(t, d.MemsetD32Async(a+60, 0, 2, s), "CUDA_ERROR_ILLEGAL_ADDRESS")
	// Past the end of an allocation.
	wantCode(t, d.MemsetD8Async(a+60, 0, 8, s), "CUDA_ERROR_ILLEGAL_ADDRESS")
	wantCode(t, d.CopyHtoD(0x42, unsafe.Pointer(&h[0]), 1), "CUDA_ERROR_ILLEGAL_ADDRESS")
	must(t, d.StreamSynchronize(s))
	must(t, d.Synchronize())
}

func TestStreamsBelongToTheirDevice(t *testing.T) {
	p := New(2)
	d0, d1 := open(t, p, 0), open(t, p, 1)
	s0, err := d0.NewStream()
	must(t, err)
	a, err := d1.Alloc(8, false)
	must(t, err)
	wantCode(t, d1.MemsetD8Async(a, 1, 8, s0), "CUDA_ERROR_INVALID_HANDLE")
	wantCode(t, d1.DestroyStream(s0), "CUDA_ERROR_INVALID_HANDLE")
	must(t, d0.DestroyStream(s0))
	wantCode(t, d0.StreamSynchronize(s0), "CUDA_ERROR_INVALID_HANDLE")
}

// TestHandlesBelongToTheirDevice: every kind of handle made on device 0 is
// CUDA_ERROR_INVALID_HANDLE on device 1, and once destroyed on device 0 too.
func TestHandlesBelongToTheirDevice(t *testing.T) {
	p := New(2)
	d0, d1 := open(t, p, 0), open(t, p, 1)
	one := gpu.Dim3{X: 1, Y: 1, Z: 1}
	f := loadKernel(t, p, d0, "k")
	s0, err := d0.NewStream()
	must(t, err)
	s1, err := d1.NewStream()
	must(t, err)
	must(t, d0.BeginCapture(s0, gpu.CaptureRelaxed))
	must(t, d0.Launch(f, one, one, 0, s0, nil))
	g, err := d0.EndCapture(s0)
	must(t, err)
	x, err := d0.Instantiate(g)
	must(t, err)
	e, err := d0.NewEvent(true)
	must(t, err)
	m, err := d0.LoadModule([]byte("img-k"))
	must(t, err)

	wantCode(t, d1.Launch(f, one, one, 0, s1, nil), "CUDA_ERROR_INVALID_HANDLE")
	_, err = d1.Instantiate(g)
	wantCode(t, err, "CUDA_ERROR_INVALID_HANDLE")
	wantCode(t, d1.LaunchGraph(x, s1), "CUDA_ERROR_INVALID_HANDLE")
	wantCode(t, d1.RecordEvent(e, s1), "CUDA_ERROR_INVALID_HANDLE")
	_, _, err = d1.Global(m, "x")
	wantCode(t, err, "CUDA_ERROR_INVALID_HANDLE")
	for name, destroy := range map[string]func(gpu.Device) error{
		"graph":            func(d gpu.Device) error { return d.DestroyGraph(g) },
		"executable graph": func(d gpu.Device) error { return d.DestroyGraphExec(x) },
		"event":            func(d gpu.Device) error { return d.DestroyEvent(e) },
		"module":           func(d gpu.Device) error { return d.UnloadModule(m) },
	} {
		wantCode(t, destroy(d1), "CUDA_ERROR_INVALID_HANDLE")
		if err := destroy(d0); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantCode(t, destroy(d0), "CUDA_ERROR_INVALID_HANDLE")
	}
}

func TestPeerAccess(t *testing.T) {
	p := New(3)
	d0, d1, d2 := open(t, p, 0), open(t, p, 1), open(t, p, 2)
	a1, err := d1.Alloc(16, false)
	must(t, err)
	a0, err := d0.Alloc(16, false)
	must(t, err)
	wantCode(t, d0.CopyDtoDAsync(a0, a1, 16, 0), "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED")
	if ok, _ := d0.CanAccessPeer(d0); ok {
		t.Fatal("a device is its own peer")
	}
	if ok, _ := d0.CanAccessPeer(d1); !ok {
		t.Fatal("CanAccessPeer(0,1) false by default")
	}
	must(t, d0.EnablePeerAccess(d1))
	must(t, d0.EnablePeerAccess(d1)) // twice is fine
	must(t, p.Write(a1, []byte("peer-data-123456")))
	must(t, d0.CopyDtoDAsync(a0, a1, 16, 0))
	got, _ := p.Read(a0, 16)
	if string(got) != "peer-data-123456" {
		t.Fatalf("peer copy: %q", got)
	}
	// Access is one-way.
	wantCode(t, d1.CopyDtoDAsync(a1, a0, 16, 0), "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED")
	if !p.PeerEnabled(0, 1) || p.PeerEnabled(1, 0) {
		t.Fatal("PeerEnabled wrong")
	}
	p.SetPeerTopology(func(from, to int) bool { return to != 2 })
	if ok, _ := d0.CanAccessPeer(d2); ok {
		t.Fatal("topology ignored")
	}
	wantCode(t, d0.EnablePeerAccess(d2), "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED")
	wantCode(t, d0.EnablePeerAccess(d0), "CUDA_ERROR_INVALID_DEVICE")
	if _, err := d0.CanAccessPeer(open(t, New(3), 1)); err == nil {
		t.Fatal("device of another platform accepted as peer")
	}
}

func TestIPC(t *testing.T) {
	p := New(2)
	d0, d1 := open(t, p, 0), open(t, p, 1)
	a, err := d0.Alloc(1024, false)
	must(t, err)
	must(t, p.Write(a, []byte("shared")))
	h, err := d0.IPCGetHandle(a + 100) // interior pointer names the whole allocation
	must(t, err)
	m, err := d1.IPCOpenHandle(h)
	must(t, err)
	if m == a {
		t.Fatal("IPC mapping has the exporter's address")
	}
	// d1 reaches the memory through the mapping without peer access.
	out := make([]byte, 6)
	must(t, d1.CopyDtoH(unsafe.Pointer(&out[0]), m, 6))
	if string(out) != "shared" {
		t.Fatalf("through IPC: %q", out)
	}
	must(t, d1.MemsetD8Async(m+1023, 7, 1, 0))
	if b, _ := p.Read(a+1023, 1); b[0] != 7 {
		t.Fatal("write through IPC mapping not seen by owner")
	}
	// but not d0's direct address.
	wantCode(t, d1.MemsetD8Async(a, 0, 1, 0), "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED")
	wantCode(t, d0.IPCCloseHandle(m), "CUDA_ERROR_INVALID_VALUE")
	must(t, d1.IPCCloseHandle(m))
	wantCode(t, d1.IPCCloseHandle(m), "CUDA_ERROR_INVALID_VALUE")
	// Handles of freed allocations or other platforms do not open.
	must(t, d0.Free(a))
	_, err = d1.IPCOpenHandle(h)
	wantCode(t, err, "CUDA_ERROR_INVALID_VALUE")
	q := New(2)
	qa, _ := open(t, q, 0).Alloc(8, false)
	qh, _ := open(t, q, 0).IPCGetHandle(qa)
	_, err = d1.IPCOpenHandle(qh)
	wantCode(t, err, "CUDA_ERROR_INVALID_VALUE")
	_, err = d0.IPCGetHandle(0x1234)
	wantCode(t, err, "CUDA_ERROR_INVALID_VALUE")
}

func TestHostMapped(t *testing.T) {
	p := New(2)
	d0, d1 := open(t, p, 0), open(t, p, 1)
	host, dev, err := d0.AllocHostMapped(32)
	must(t, err)
	hb := unsafe.Slice((*byte)(host), 32)
	hb[0] = 5
	if b, _ := p.Read(dev, 1); b[0] != 5 {
		t.Fatal("host write not visible at the device alias")
	}
	// Any device may write it (portable), and the host sees it without a copy.
	must(t, d1.MemsetD8Async(dev+4, 0xCC, 4, 0))
	if hb[4] != 0xCC || hb[7] != 0xCC {
		t.Fatal("device write not visible on the host")
	}
	must(t, d0.FreeHost(host))
	wantCode(t, d0.FreeHost(host), "CUDA_ERROR_INVALID_VALUE")
	_, err = p.Read(dev, 1)
	wantCode(t, err, "CUDA_ERROR_ILLEGAL_ADDRESS")
}

func TestAllocFailures(t *testing.T) {
	p := New(2)
	d0, d1 := open(t, p, 0), open(t, p, 1)
	p.SetMemoryLimit(0, 1000)
	_, err := d0.Alloc(600, false)
	must(t, err)
	_, err = d0.Alloc(600, false)
	wantCode(t, err, "CUDA_ERROR_OUT_OF_MEMORY")
	_, err = d1.Alloc(600, false) // other device unaffected
	must(t, err)
	n := 0
	p.SetAllocHook(func(dev int, b int64) error {
		n++
		if n == 2 {
			return OutOfMemory()
		}
		return nil
	})
	_, err = d1.Alloc(8, false)
	must(t, err)
	_, err = d1.Alloc(8, false)
	wantCode(t, err, "CUDA_ERROR_OUT_OF_MEMORY")
	p.SetAllocHook(nil)
	_, err = d1.Alloc(8, false)
	must(t, err)
}

func TestModules(t *testing.T) {
	p := New(2)
	d0, d1 := open(t, p, 0), open(t, p, 1)
	img := []byte("module-image")
	p.AddModule(img, []string{"k"}, map[string][]byte{"hash": []byte("abc\x00")})
	_, err := d0.LoadModule([]byte("other"))
	wantCode(t, err, "CUDA_ERROR_INVALID_IMAGE")
	m, err := d0.LoadModule(img)
	must(t, err)
	f, err := d0.Function(m, "k")
	must(t, err)
	if f2, _ := d0.Function(m, "k"); f2 != f {
		t.Fatal("Function not stable")
	}
	_, err = d0.Function(m, "nope")
	wantCode(t, err, "CUDA_ERROR_NOT_FOUND")
	_, err = d1.Function(m, "k")
	wantCode(t, err, "CUDA_ERROR_INVALID_HANDLE")
	g, n, err := d0.Global(m, "hash")
	must(t, err)
	if n != 4 || g < DeviceBase(0) || g >= DeviceBase(1) {
		t.Fatalf("global at %#x size %d", g, n)
	}
	b := make([]byte, 4)
	must(t, d0.CopyDtoH(unsafe.Pointer(&b[0]), g, 4))
	if string(b) != "abc\x00" {
		t.Fatalf("global %q", b)
	}
	_, _, err = d0.Global(m, "nope")
	wantCode(t, err, "CUDA_ERROR_NOT_FOUND")
	before := p.LiveRegions()
	must(t, d0.UnloadModule(m))
	if p.LiveRegions() != before-1 {
		t.Fatal("globals not freed at unload")
	}
	wantCode(t, d0.Launch(f, gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 1, Y: 1, Z: 1}, 0, 0, nil), "CUDA_ERROR_INVALID_HANDLE")
}

func loadKernel(t *testing.T, p *Platform, d gpu.Device, name string) gpu.Function {
	t.Helper()
	img := []byte("img-" + name)
	p.AddModule(img, []string{name}, nil)
	m, err := d.LoadModule(img)
	must(t, err)
	f, err := d.Function(m, name)
	must(t, err)
	return f
}

func TestLaunchRecordsAndHook(t *testing.T) {
	p := New(1)
	d := open(t, p, 0)
	f := loadKernel(t, p, d, "fill")
	s, _ := d.NewStream()
	buf, _ := d.Alloc(16, false)
	// The hook simulates the kernel: it fills the buffer named in the args.
	p.OnLaunch(func(l Launch) error {
		if l.Function != "fill" {
			return fmt.Errorf("unexpected %s", l.Function)
		}
		var ptr gpu.DevicePtr
		for i := 7; i >= 0; i-- {
			ptr = ptr<<8 | gpu.DevicePtr(l.Args[i])
		}
		return p.Write(ptr, bytes.Repeat([]byte{l.Args[8]}, 16))
	})
	args := make([]byte, 9)
	for i := 0; i < 8; i++ {
		args[i] = byte(uint64(buf) >> (8 * i))
	}
	args[8] = 0x5A
	must(t, d.Launch(f, gpu.Dim3{X: 2, Y: 1, Z: 1}, gpu.Dim3{X: 128, Y: 1, Z: 1}, 64, s, args))
	args[8] = 0 // the recorded copy must not change
	ls := p.Launches()
	if len(ls) != 1 {
		t.Fatalf("%d launches", len(ls))
	}
	l := ls[0]
	if l.Device != 0 || l.Function != "fill" || l.Grid != (gpu.Dim3{X: 2, Y: 1, Z: 1}) || l.Block != (gpu.Dim3{X: 128, Y: 1, Z: 1}) ||
		l.Shared != 64 || l.Stream != s || l.Args[8] != 0x5A || l.Captured || l.Graph != 0 {
		t.Fatalf("recorded %+v", l)
	}
	if b, _ := p.Read(buf+15, 1); b[0] != 0x5A {
		t.Fatal("hook's effect missing")
	}
	boom := errors.New("boom")
	p.OnLaunch(func(Launch) error { return boom })
	if err := d.Launch(f, gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 1, Y: 1, Z: 1}, 0, s, args); !errors.Is(err, boom) {
		t.Fatalf("hook error not returned: %v", err)
	}
	p.OnLaunch(nil)
	wantCode(t, d.Launch(f, gpu.Dim3{X: 0, Y: 1, Z: 1}, gpu.Dim3{X: 1, Y: 1, Z: 1}, 0, s, nil), "CUDA_ERROR_INVALID_VALUE")
	wantCode(t, d.Launch(f, gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 1025, Y: 1, Z: 1}, 0, s, nil), "CUDA_ERROR_INVALID_VALUE")
	p.ClearLaunches()
	if len(p.Launches()) != 0 {
		t.Fatal("ClearLaunches")
	}
}

func TestEvents(t *testing.T) {
	p := New(1)
	d := open(t, p, 0)
	f := loadKernel(t, p, d, "k")
	s, _ := d.NewStream()
	a, _ := d.NewEvent(true)
	b, _ := d.NewEvent(true)
	_, err := d.Elapsed(a, b)
	wantCode(t, err, "CUDA_ERROR_INVALID_HANDLE")
	must(t, d.RecordEvent(a, s))
	for i := 0; i < 3; i++ {
		must(t, d.Launch(f, gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 1, Y: 1, Z: 1}, 0, s, nil))
	}
	must(t, d.RecordEvent(b, s))
	must(t, d.SynchronizeEvent(b))
	el, err := d.Elapsed(a, b)
	must(t, err)
	if el <= 0 {
		t.Fatalf("elapsed %v not positive", el)
	}
	c, _ := d.NewEvent(false)
	must(t, d.RecordEvent(c, s))
	_, err = d.Elapsed(a, c)
	wantCode(t, err, "CUDA_ERROR_INVALID_HANDLE")
	must(t, d.DestroyEvent(c))
	wantCode(t, d.DestroyEvent(c), "CUDA_ERROR_INVALID_HANDLE")
}

func TestCaptureAndReplay(t *testing.T) {
	p := New(1)
	d := open(t, p, 0)
	f := loadKernel(t, p, d, "k")
	s, _ := d.NewStream()
	buf, _ := d.Alloc(8, false)
	hooked := 0
	p.OnLaunch(func(Launch) error { hooked++; return nil })

	if st, _ := d.CaptureStatus(s); st != gpu.CaptureNone {
		t.Fatal("capturing before BeginCapture")
	}
	wantCode(t, d.BeginCapture(0, gpu.CaptureGlobal), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	must(t, d.BeginCapture(s, gpu.CaptureGlobal))
	wantCode(t, d.BeginCapture(s, gpu.CaptureGlobal), "CUDA_ERROR_ILLEGAL_STATE")
	if st, _ := d.CaptureStatus(s); st != gpu.CaptureActive {
		t.Fatal("not capturing after BeginCapture")
	}
	must(t, d.MemsetD8Async(buf, 0x11, 8, s))
	must(t, d.Launch(f, gpu.Dim3{X: 4, Y: 1, Z: 1}, gpu.Dim3{X: 64, Y: 1, Z: 1}, 0, s, []byte{1, 2}))
	if b, _ := p.Read(buf, 1); b[0] != 0 {
		t.Fatal("captured memset ran")
	}
	if hooked != 0 {
		t.Fatal("captured launch ran the hook")
	}
	if ls := p.Launches(); len(ls) != 1 || !ls[0].Captured {
		t.Fatalf("captured launch not recorded as captured: %+v", ls)
	}
	g, err := d.EndCapture(s)
	must(t, err)
	if st, _ := d.CaptureStatus(s); st != gpu.CaptureNone {
		t.Fatal("still capturing after EndCapture")
	}
	_, err = d.EndCapture(s)
	wantCode(t, err, "CUDA_ERROR_ILLEGAL_STATE")
	ge, err := d.Instantiate(g)
	must(t, err)
	if gl := p.GraphLaunches(ge); len(gl) != 1 || gl[0].Function != "k" {
		t.Fatalf("GraphLaunches %+v", gl)
	}
	for i := 0; i < 2; i++ {
		must(t, p.Write(buf, make([]byte, 8)))
		must(t, d.LaunchGraph(ge, s))
		if b, _ := p.Read(buf+7, 1); b[0] != 0x11 {
			t.Fatal("replayed memset did not run")
		}
	}
	ls := p.Launches()
	if len(ls) != 3 || hooked != 2 {
		t.Fatalf("%d launches, %d hooked", len(ls), hooked)
	}
	for _, l := range ls[1:] {
		if l.Captured || l.Graph != ge || l.Stream != s || !bytes.Equal(l.Args, []byte{1, 2}) {
			t.Fatalf("replayed launch %+v", l)
		}
	}
	// A graph launched during another capture is captured, not run.
	s2, _ := d.NewStream()
	must(t, d.BeginCapture(s2, gpu.CaptureGlobal))
	must(t, d.LaunchGraph(ge, s2))
	if hooked != 2 {
		t.Fatal("graph launch during capture ran")
	}
	g2, err := d.EndCapture(s2)
	must(t, err)
	ge2, err := d.Instantiate(g2)
	must(t, err)
	must(t, d.LaunchGraph(ge2, s))
	if hooked != 3 {
		t.Fatal("nested graph did not replay the launch")
	}
	must(t, d.DestroyGraph(g))
	must(t, d.DestroyGraphExec(ge))
	wantCode(t, d.LaunchGraph(ge, s), "CUDA_ERROR_INVALID_HANDLE")
	wantCode(t, d.DestroyGraph(g), "CUDA_ERROR_INVALID_HANDLE")
}

// Every operation that is illegal under global-mode capture fails with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, even
// when called on another device (global mode is process-wide).
func TestIllegalDuringCapture(t *testing.T) {
	host := make([]byte, 8)
	hp := unsafe.Pointer(&host[0])
	cases := map[string]func(d, other gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error{
		"Alloc": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error {
			_, err := o.Alloc(8, false)
			return err
		},
		"Free": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error { return d.Free(buf) },
		"AllocHostMapped": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error {
			_, _, err := d.AllocHostMapped(8)
			return err
		},
		"CopyHtoD": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error {
			return d.CopyHtoD(buf, hp, 8)
		},
		"CopyDtoH": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error {
			return d.CopyDtoH(hp, buf, 8)
		},
		"Synchronize": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error { return o.Synchronize() },
		"StreamSynchronize": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error {
			return d.StreamSynchronize(s)
		},
		"StreamQuery": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error {
			_, err := d.StreamQuery(s)
			return err
		},
		"LoadModule": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error {
			_, err := d.LoadModule([]byte("x"))
			return err
		},
		"SynchronizeEvent": func(d, o gpu.Device, p *Platform, s gpu.Stream, buf gpu.DevicePtr) error {
			e, _ := d.NewEvent(false)
			if err := d.RecordEvent(e, s); err != nil {
				return err
			}
			return d.SynchronizeEvent(e)
		},
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			p := New(2)
			d, o := open(t, p, 0), open(t, p, 1)
			s, _ := d.NewStream()
			buf, _ := d.Alloc(8, false)
			must(t, d.BeginCapture(s, gpu.CaptureGlobal))
			wantCode(t, bad(d, o, p, s, buf), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
			if st, _ := d.CaptureStatus(s); st != gpu.CaptureInvalidated {
				t.Fatalf("capture status %v, want invalidated", st)
			}
			wantCode(t, d.MemsetD8Async(buf, 0, 8, s), "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
			_, err := d.EndCapture(s)
			wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
			if st, _ := d.CaptureStatus(s); st != gpu.CaptureNone {
				t.Fatal("invalidated capture not ended")
			}
			// After the capture the same operation is legal again.
			_, err = o.Alloc(8, false)
			must(t, err)
			must(t, d.StreamSynchronize(s))
		})
	}
}

// TestRelaxedCapture: a relaxed capture refuses only the sync of its own
// stream, so another rank of the process may allocate and sync meanwhile.
func TestRelaxedCapture(t *testing.T) {
	p := New(2)
	d, o := open(t, p, 0), open(t, p, 1)
	s, _ := d.NewStream()
	so, _ := o.NewStream()
	buf, _ := d.Alloc(8, false)
	must(t, d.BeginCapture(s, gpu.CaptureRelaxed))
	other, err := o.Alloc(8, false)
	must(t, err)
	must(t, o.StreamSynchronize(so))
	must(t, o.Synchronize())
	must(t, o.Free(other))
	must(t, d.MemsetD8Async(buf, 0, 8, s))
	if st, _ := d.CaptureStatus(s); st != gpu.CaptureActive {
		t.Fatalf("capture status %v after other ranks' calls, want active", st)
	}
	wantCode(t, d.StreamSynchronize(s), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	_, err = d.EndCapture(s)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
	// A global capture, unlike a relaxed one, refuses the other ranks' allocations.
	must(t, o.BeginCapture(so, gpu.CaptureGlobal))
	_, err = d.Alloc(8, false)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
}

func TestConcurrentRanks(t *testing.T) {
	const n = 4
	p := New(n)
	img := []byte("img")
	p.AddModule(img, []string{"k"}, nil)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs <- func() error {
				d, _ := p.Open(r)
				s, err := d.NewStream()
				if err != nil {
					return err
				}
				m, err := d.LoadModule(img)
				if err != nil {
					return err
				}
				f, err := d.Function(m, "k")
				if err != nil {
					return err
				}
				for i := 0; i < 50; i++ {
					a, err := d.Alloc(512, false)
					if err != nil {
						return err
					}
					if err := d.MemsetD8Async(a, byte(r), 512, s); err != nil {
						return err
					}
					if err := d.Launch(f, gpu.Dim3{X: 1, Y: 1, Z: 1}, gpu.Dim3{X: 1, Y: 1, Z: 1}, 0, s, []byte{byte(r)}); err != nil {
						return err
					}
					b, err := p.Read(a+511, 1)
					if err != nil {
						return err
					}
					if b[0] != byte(r) {
						return fmt.Errorf("rank %d read %d", r, b[0])
					}
					if err := d.Free(a); err != nil {
						return err
					}
				}
				return nil
			}()
		}(r)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	if len(p.Launches()) != n*50 {
		t.Fatalf("%d launches", len(p.Launches()))
	}
}

// A capture forks onto another stream that waits for an event recorded in
// it, and takes that stream's work back when it waits for an event
// recorded after the work; EndCapture fails while a forked stream's work
// was never waited for, and a stream cannot wait across two captures.
func TestCaptureForkJoin(t *testing.T) {
	p := New(1)
	d := open(t, p, 0)
	w := d.(gpu.EventWaiter)
	s, _ := d.NewStream()
	side, _ := d.NewStream()
	fork, _ := d.NewEvent(false)
	join, _ := d.NewEvent(false)
	buf, _ := d.Alloc(8, false)

	// Eagerly a wait only checks its handles.
	must(t, d.RecordEvent(fork, s))
	must(t, w.WaitEvent(side, fork))
	wantCode(t, w.WaitEvent(side, 0xbad), "CUDA_ERROR_INVALID_HANDLE")

	capture := func(joinBack, workAfterJoin bool) (gpu.Graph, error) {
		t.Helper()
		must(t, d.BeginCapture(s, gpu.CaptureRelaxed))
		must(t, d.RecordEvent(fork, s))
		must(t, w.WaitEvent(side, fork))
		if st, _ := d.CaptureStatus(side); st != gpu.CaptureActive {
			t.Fatal("the forked stream does not capture")
		}
		must(t, d.MemsetD8Async(buf, 0x22, 4, side))
		must(t, d.MemsetD8Async(buf+4, 0x33, 4, s))
		if joinBack {
			must(t, d.RecordEvent(join, side))
			must(t, w.WaitEvent(s, join))
		}
		if workAfterJoin {
			must(t, d.MemsetD8Async(buf, 0x44, 1, side))
		}
		_, err := d.EndCapture(side)
		wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED")
		g, err := d.EndCapture(s)
		if st, _ := d.CaptureStatus(side); st != gpu.CaptureNone {
			t.Fatal("the forked stream still captures after EndCapture")
		}
		return g, err
	}
	g, err := capture(true, false)
	must(t, err)
	if b, _ := p.Read(buf, 8); !bytes.Equal(b, make([]byte, 8)) {
		t.Fatalf("captured work ran: % x", b)
	}
	ge, err := d.Instantiate(g)
	must(t, err)
	must(t, d.LaunchGraph(ge, s))
	if b, _ := p.Read(buf, 8); !bytes.Equal(b, []byte{0x22, 0x22, 0x22, 0x22, 0x33, 0x33, 0x33, 0x33}) {
		t.Fatalf("the replay wrote % x, want both branches", b)
	}
	_, err = capture(false, false)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED")
	_, err = capture(true, true)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED")
	must(t, d.DestroyStream(side)) // no longer capturing

	// Two captures: a stream of one waits for an event of the other.
	a, _ := d.NewStream()
	b, _ := d.NewStream()
	must(t, d.BeginCapture(a, gpu.CaptureRelaxed))
	must(t, d.BeginCapture(b, gpu.CaptureRelaxed))
	must(t, d.RecordEvent(fork, a))
	wantCode(t, w.WaitEvent(b, fork), "CUDA_ERROR_STREAM_CAPTURE_ISOLATION")
	_, err = d.EndCapture(a)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
	_, err = d.EndCapture(b)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
	// An event of a capture that has ended joins nothing.
	wantCode(t, w.WaitEvent(b, fork), "CUDA_ERROR_ILLEGAL_STATE")
}

//go:build gpu

// Smoke tests of the real platform, for a machine with a GPU:
//
//	go test -tags gpu ./runtime/gpu
//
// They also check the capture rules that fakegpu imitates, so a difference
// between the double and the real driver shows up here.
package gpu_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
)

func device(t *testing.T, i int) (gpu.Platform, gpu.Device) {
	t.Helper()
	p, err := gpu.Load()
	if err != nil {
		t.Fatalf("gpu.Load: %v", err)
	}
	n, err := p.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	if i >= n {
		t.Skipf("needs %d devices, have %d", i+1, n)
	}
	d, err := p.Open(i)
	if err != nil {
		t.Fatal(err)
	}
	return p, d
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// errName returns the platform's error name, or "" for a non-*gpu.Error.
func errName(err error) string {
	var ge *gpu.Error
	if errors.As(err, &ge) {
		return ge.Name
	}
	return ""
}

// captureName maps a CUDA error name to the platform's spelling.
func captureName(p gpu.Platform, cuda string) string {
	if p.Name() != "hip" {
		return cuda
	}
	return map[string]string{
		"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED": "hipErrorStreamCaptureUnsupported",
		"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED": "hipErrorStreamCaptureInvalidated",
		"CUDA_ERROR_INVALID_VALUE":              "hipErrorInvalidValue",
	}[cuda]
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestMemoryRoundTrip(t *testing.T) {
	p, d := device(t, 0)
	const n = 1 << 20
	a, err := d.Alloc(n, false)
	must(t, err)
	defer d.Free(a)
	f, err := d.Alloc(n, true)
	must(t, err)
	defer d.Free(f)
	src := pattern(n, 3)
	must(t, d.CopyHtoD(a, unsafe.Pointer(&src[0]), n))
	s, err := d.NewStream()
	must(t, err)
	defer d.DestroyStream(s)
	must(t, d.CopyDtoDAsync(f, a, n, s))
	must(t, d.MemsetD8Async(f+100, 0xEE, 50, s))
	host, dev, err := d.AllocHostMapped(n)
	must(t, err)
	defer d.FreeHost(host)
	if dev == 0 {
		t.Fatal("AllocHostMapped: no device address")
	}
	must(t, d.CopyDtoHAsync(host, f, n, s))
	must(t, d.StreamSynchronize(s))
	want := append([]byte(nil), src...)
	for i := 100; i < 150; i++ {
		want[i] = 0xEE
	}
	if got := unsafe.Slice((*byte)(host), n); !bytes.Equal(got, want) {
		t.Fatal("round trip through device memory differs")
	}
	// A device write to mapped host memory is seen by the host without a copy.
	must(t, d.MemsetD8Async(dev, 0x5C, 16, s))
	must(t, d.StreamSynchronize(s))
	if b := unsafe.Slice((*byte)(host), 16); b[0] != 0x5C || b[15] != 0x5C {
		t.Fatalf("mapped host memory not written: %v", b)
	}
	back := make([]byte, 8)
	must(t, d.CopyDtoH(unsafe.Pointer(&back[0]), a+8, 8))
	if !bytes.Equal(back, src[8:16]) {
		t.Fatal("CopyDtoH at an offset differs")
	}
	must(t, d.Synchronize())

	// Errors carry the call and the platform's names.
	err = d.Free(gpu.DevicePtr(0x10))
	var ge *gpu.Error
	if !errors.As(err, &ge) || ge.Call == "" || ge.Name == "" || ge.Desc == "" {
		t.Fatalf("Free(bogus) = %#v", err)
	}
	t.Logf("%s: Free(bogus): %v", p.Name(), err)
}

func TestEvents(t *testing.T) {
	_, d := device(t, 0)
	s, err := d.NewStream()
	must(t, err)
	defer d.DestroyStream(s)
	a, err := d.Alloc(64<<20, false)
	must(t, err)
	defer d.Free(a)
	e0, err := d.NewEvent(true)
	must(t, err)
	e1, err := d.NewEvent(true)
	must(t, err)
	must(t, d.RecordEvent(e0, s))
	must(t, d.MemsetD8Async(a, 1, 64<<20, s))
	must(t, d.RecordEvent(e1, s))
	must(t, d.SynchronizeEvent(e1))
	el, err := d.Elapsed(e0, e1)
	must(t, err)
	if el <= 0 || el > 10*time.Second {
		t.Fatalf("elapsed %v", el)
	}
	t.Logf("64 MiB memset: %v", el)
	nt, err := d.NewEvent(false)
	must(t, err)
	must(t, d.RecordEvent(nt, s))
	must(t, d.SynchronizeEvent(nt))
	if _, err := d.Elapsed(e0, nt); err == nil {
		t.Error("Elapsed with a non-timing event succeeded")
	}
	for _, e := range []gpu.Event{e0, e1, nt} {
		must(t, d.DestroyEvent(e))
	}
}

func TestPeerAccess(t *testing.T) {
	_, d1 := device(t, 1)
	_, d0 := device(t, 0)
	ok, err := d0.CanAccessPeer(d1)
	must(t, err)
	if !ok {
		t.Skip("devices 0 and 1 cannot access each other")
	}
	must(t, d0.EnablePeerAccess(d1))
	must(t, d0.EnablePeerAccess(d1)) // already enabled is not an error
	must(t, d1.EnablePeerAccess(d0))
	const n = 4096
	b1, err := d1.Alloc(n, true)
	must(t, err)
	defer d1.Free(b1)
	b0, err := d0.Alloc(n, true)
	must(t, err)
	defer d0.Free(b0)
	src := pattern(n, 9)
	must(t, d1.CopyHtoD(b1, unsafe.Pointer(&src[0]), n))
	must(t, d0.CopyDtoDAsync(b0, b1, n, 0))
	must(t, d0.Synchronize())
	got := make([]byte, n)
	must(t, d0.CopyDtoH(unsafe.Pointer(&got[0]), b0, n))
	if !bytes.Equal(got, src) {
		t.Fatal("peer copy differs")
	}
}

// Ranks run on goroutines: calls on different devices from many goroutines
// must each reach their own device.
func TestConcurrentDevices(t *testing.T) {
	p, _ := device(t, 0)
	n, _ := p.DeviceCount()
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for g := 0; g < 4*n; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			d, err := p.Open(g % n)
			if err != nil {
				errs <- err
				return
			}
			for i := 0; i < 50; i++ {
				a, err := d.Alloc(4096, false)
				if err != nil {
					errs <- err
					return
				}
				src := pattern(4096, byte(g+i))
				got := make([]byte, 4096)
				if err := d.CopyHtoD(a, unsafe.Pointer(&src[0]), 4096); err != nil {
					errs <- err
					return
				}
				if err := d.CopyDtoH(unsafe.Pointer(&got[0]), a, 4096); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, src) {
					errs <- errors.New("concurrent round trip differs")
					return
				}
				if err := d.Free(a); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// The child half of TestIPC: open the handle, read, print.
func TestIPCChild(t *testing.T) {
	hx := os.Getenv("IRISGEN_IPC_HANDLE")
	if hx == "" {
		t.Skip("run by TestIPC")
	}
	_, d := device(t, 0)
	raw, err := hex.DecodeString(hx)
	must(t, err)
	var h gpu.IPCHandle
	copy(h[:], raw)
	ptr, err := d.IPCOpenHandle(h)
	must(t, err)
	got := make([]byte, 64)
	must(t, d.CopyDtoH(unsafe.Pointer(&got[0]), ptr, 64))
	// A word written through the mapping, as a rank tells a peer process
	// that it refused a launch (irisrt's control blocks).
	s, err := d.NewStream()
	must(t, err)
	must(t, d.MemsetD32Async(ptr+64, 0xC0FFEE01, 2, s))
	must(t, d.StreamSynchronize(s))
	must(t, d.DestroyStream(s))
	must(t, d.IPCCloseHandle(ptr))
	os.Stdout.WriteString("IPC-DATA:" + hex.EncodeToString(got) + "\n")
}

func TestIPC(t *testing.T) {
	p, d := device(t, 0)
	a, err := d.Alloc(1<<20, false)
	must(t, err)
	defer d.Free(a)
	src := pattern(64, 42)
	must(t, d.CopyHtoD(a, unsafe.Pointer(&src[0]), 64))
	h, err := d.IPCGetHandle(a)
	must(t, err)
	if h == (gpu.IPCHandle{}) {
		t.Fatal("empty IPC handle")
	}
	// Opening in the exporting process is refused by CUDA; just report it.
	if m, err := d.IPCOpenHandle(h); err == nil {
		t.Logf("%s: IPC open in the same process worked", p.Name())
		must(t, d.IPCCloseHandle(m))
	} else {
		t.Logf("%s: IPC open in the same process: %v", p.Name(), err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIPCChild$", "-test.v")
	cmd.Env = append(os.Environ(), "IRISGEN_IPC_HANDLE="+hex.EncodeToString(h[:]))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	want := "IPC-DATA:" + hex.EncodeToString(src)
	if !strings.Contains(string(out), want) {
		t.Fatalf("child did not read the exported memory:\n%s", out)
	}
	words := make([]byte, 12)
	must(t, d.CopyDtoH(unsafe.Pointer(&words[0]), a+64, 12))
	if got := hex.EncodeToString(words); got != "01eeffc001eeffc000000000" {
		t.Fatalf("the child's MemsetD32Async through the IPC mapping wrote %s, want 01eeffc001eeffc000000000", got)
	}
}

// TestMemsetD32Peer: MemsetD32Async on a stream of its own writes a peer
// GPU's memory (peer access enabled) while another stream of the device
// captures in global mode, without breaking the capture: how irisrt tells
// the peers that a rank refused a launch, at capture time too.
func TestMemsetD32Peer(t *testing.T) {
	p, d0 := device(t, 0)
	d1 := d0
	if n, _ := p.DeviceCount(); n > 1 {
		_, d1 = device(t, 1)
		ok, err := d0.CanAccessPeer(d1)
		must(t, err)
		if !ok {
			t.Skip("devices 0 and 1 cannot access each other")
		}
		must(t, d0.EnablePeerAccess(d1))
	}
	buf, err := d1.Alloc(64, true)
	must(t, err)
	defer d1.Free(buf)
	must(t, d1.MemsetD8Async(buf, 0, 64, 0))
	must(t, d1.Synchronize())
	capturing, err := d0.NewStream()
	must(t, err)
	defer d0.DestroyStream(capturing)
	side, err := d0.NewStream()
	must(t, err)
	defer d0.DestroyStream(side)
	scratch, err := d0.Alloc(8, false)
	must(t, err)
	defer d0.Free(scratch)
	defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
	must(t, d0.BeginCapture(capturing, gpu.CaptureGlobal))
	must(t, d0.MemsetD8Async(scratch, 1, 8, capturing))
	setErr := d0.MemsetD32Async(buf+8, 7, 1, side)
	if setErr == nil {
		setErr = d0.MemsetD32Async(buf+12, 0xAABBCCDD, 1, side)
	}
	st, _ := d0.CaptureStatus(capturing)
	g, endErr := d0.EndCapture(capturing)
	if endErr == nil {
		d0.DestroyGraph(g)
	}
	must(t, setErr)
	must(t, endErr)
	if st != gpu.CaptureActive {
		t.Fatalf("capture status after the memsets: %v, want active", st)
	}
	must(t, d0.StreamSynchronize(side))
	got := make([]byte, 16)
	must(t, d1.CopyDtoH(unsafe.Pointer(&got[0]), buf, 16))
	if h := hex.EncodeToString(got); h != "000000000000000007000000ddccbbaa" {
		t.Fatalf("peer memory holds %s after the memsets", h)
	}
}

func TestCaptureMemset(t *testing.T) {
	_, d := device(t, 0)
	s, err := d.NewStream()
	must(t, err)
	defer d.DestroyStream(s)
	const n = 4096
	a, err := d.Alloc(n, false)
	must(t, err)
	defer d.Free(a)
	must(t, d.MemsetD8Async(a, 0, n, s))
	must(t, d.StreamSynchronize(s))

	defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
	must(t, d.BeginCapture(s, gpu.CaptureGlobal))
	st, err := d.CaptureStatus(s)
	must(t, err)
	if st != gpu.CaptureActive {
		t.Fatalf("status %v during capture", st)
	}
	must(t, d.MemsetD8Async(a, 7, n, s))
	g, err := d.EndCapture(s)
	must(t, err)
	if st, _ := d.CaptureStatus(s); st != gpu.CaptureNone {
		t.Fatalf("status %v after capture", st)
	}
	got := make([]byte, n)
	must(t, d.CopyDtoH(unsafe.Pointer(&got[0]), a, n))
	if got[0] != 0 {
		t.Fatal("captured memset ran during capture")
	}
	ge, err := d.Instantiate(g)
	must(t, err)
	for i := 0; i < 2; i++ {
		must(t, d.LaunchGraph(ge, s))
	}
	must(t, d.StreamSynchronize(s))
	must(t, d.CopyDtoH(unsafe.Pointer(&got[0]), a, n))
	if got[0] != 7 || got[n-1] != 7 {
		t.Fatal("graph replay did not memset")
	}
	must(t, d.DestroyGraphExec(ge))
	must(t, d.DestroyGraph(g))
}

// The capture rules fakegpu imitates: under global-mode capture these calls
// fail with STREAM_CAPTURE_UNSUPPORTED and invalidate the capture. The
// synchronous copies are only reported: on an H200 (driver 580) CUDA allowed
// a synchronous copy while a non-blocking stream captured, where fakegpu
// (on purpose, since launch paths must not copy) refuses it.
func TestCaptureRules(t *testing.T) {
	p, d := device(t, 0)
	host := make([]byte, 8)
	cases := []struct {
		name   string
		strict bool
		bad    func(s gpu.Stream, buf gpu.DevicePtr) error
	}{
		{"Alloc", true, func(gpu.Stream, gpu.DevicePtr) error {
			a, err := d.Alloc(8, false)
			if err == nil {
				d.Free(a)
			}
			return err
		}},
		{"Synchronize", true, func(gpu.Stream, gpu.DevicePtr) error { return d.Synchronize() }},
		{"StreamSynchronize", true, func(s gpu.Stream, _ gpu.DevicePtr) error { return d.StreamSynchronize(s) }},
		{"StreamQuery", true, func(s gpu.Stream, _ gpu.DevicePtr) error { _, err := d.StreamQuery(s); return err }},
		{"CopyHtoD", false, func(_ gpu.Stream, b gpu.DevicePtr) error { return d.CopyHtoD(b, unsafe.Pointer(&host[0]), 8) }},
		{"CopyDtoH", false, func(_ gpu.Stream, b gpu.DevicePtr) error { return d.CopyDtoH(unsafe.Pointer(&host[0]), b, 8) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := d.NewStream()
			must(t, err)
			defer d.DestroyStream(s)
			buf, err := d.Alloc(8, false)
			must(t, err)
			defer d.Free(buf)
			defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
			must(t, d.BeginCapture(s, gpu.CaptureGlobal))
			callErr := c.bad(s, buf)
			st, _ := d.CaptureStatus(s)
			g, endErr := d.EndCapture(s)
			if endErr == nil {
				d.DestroyGraph(g)
			}
			t.Logf("%s: %s during capture: %v; status then %v; EndCapture: %v", p.Name(), c.name, callErr, st, endErr)
			if !c.strict {
				return
			}
			if got, want := errName(callErr), captureName(p, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"); got != want {
				t.Errorf("%s during capture: %v, want %s", c.name, callErr, want)
			}
			if st != gpu.CaptureInvalidated {
				t.Errorf("status after %s: %v, want invalidated", c.name, st)
			}
			if got, want := errName(endErr), captureName(p, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"); got != want {
				t.Errorf("EndCapture after %s: %v, want %s", c.name, endErr, want)
			}
		})
	}
}

// TestStreamQuery: a stream held by a WaitValue32 on a word nobody wrote
// is not done (no error), and done once the word is written. While another
// stream captures, a query of a stream that does not capture answers in
// relaxed mode; in global mode it fails and invalidates the capture (so on
// an H100 with driver 580, and so fakegpu does): a world fault's release
// of copy-engine launches makes no query while its rank captures in
// global mode.
func TestStreamQuery(t *testing.T) {
	p, d := device(t, 0)
	s, err := d.NewStream()
	must(t, err)
	defer d.DestroyStream(s)
	word, err := d.Alloc(4, false)
	must(t, err)
	defer d.Free(word)
	zero, one := []byte{0, 0, 0, 0}, []byte{1, 0, 0, 0}
	must(t, d.CopyHtoD(word, unsafe.Pointer(&zero[0]), 4))
	done, err := d.StreamQuery(s)
	must(t, err)
	if !done {
		t.Fatal("a stream with nothing enqueued is not done")
	}
	must(t, d.WaitValue32(word, 1, s))
	time.Sleep(10 * time.Millisecond)
	if done, err := d.StreamQuery(s); err != nil || done {
		t.Fatalf("a stream waiting for a word nobody wrote: done %v, %v", done, err)
	}
	must(t, d.CopyHtoD(word, unsafe.Pointer(&one[0]), 4))
	deadline := time.Now().Add(5 * time.Second)
	for {
		done, err := d.StreamQuery(s)
		must(t, err)
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the word was written, but the stream is not done after 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	capturing, err := d.NewStream()
	must(t, err)
	defer d.DestroyStream(capturing)
	defer gpu.PinCaptureThread(gpu.CaptureGlobal)()
	for _, mode := range []gpu.CaptureMode{gpu.CaptureRelaxed, gpu.CaptureGlobal} {
		must(t, d.BeginCapture(capturing, mode))
		done, qerr := d.StreamQuery(s)
		st, _ := d.CaptureStatus(capturing)
		g, err := d.EndCapture(capturing)
		if err == nil {
			d.DestroyGraph(g)
		}
		t.Logf("capture mode %d: a query of another stream: done %v, %v; capture %v, EndCapture %v", mode, done, qerr, st, err)
		switch {
		case mode == gpu.CaptureRelaxed && (qerr != nil || !done || st != gpu.CaptureActive || err != nil):
			t.Errorf("relaxed capture: a query of another stream failed or broke the capture")
		case mode == gpu.CaptureGlobal && (errName(qerr) != captureName(p, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED") || st != gpu.CaptureInvalidated):
			t.Errorf("global capture: a query of another stream did not fail as the fake's does")
		}
	}
}

// fillSrc is TestModuleLaunch's module.
const fillSrc = `
struct fill_args { unsigned long long p; int v; int n; };
extern "C" __device__ int answer = 42;
extern "C" __global__ void fill(const fill_args a) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < a.n) ((int *)a.p)[i] = a.v + i + answer;
}
`

// compileModule builds a tiny module from src with the platform's
// compiler, or skips.
func compileModule(t *testing.T, p gpu.Platform, src string) []byte {
	t.Helper()
	dir := t.TempDir()
	cu := filepath.Join(dir, "fill.cu")
	must(t, os.WriteFile(cu, []byte(src), 0o644))
	out := filepath.Join(dir, "fill.bin")
	var cmd *exec.Cmd
	switch p.Name() {
	case "cuda":
		if _, err := exec.LookPath("nvcc"); err != nil {
			t.Skip("nvcc not found: module test skipped")
		}
		cmd = exec.Command("nvcc", "-cubin", "-arch=native", "-o", out, cu)
	case "hip":
		if _, err := exec.LookPath("hipcc"); err != nil {
			t.Skip("hipcc not found: module test skipped")
		}
		cmd = exec.Command("hipcc", "--genco", "-x", "hip", "-o", out, cu)
	default:
		t.Skipf("no compiler for %s", p.Name())
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("compiling the test module failed (%v): %s", err, b)
	}
	img, err := os.ReadFile(out)
	must(t, err)
	return img
}

func TestModuleLaunch(t *testing.T) {
	p, d := device(t, 0)
	img := compileModule(t, p, fillSrc)
	m, err := d.LoadModule(img)
	must(t, err)
	defer d.UnloadModule(m)
	f, err := d.Function(m, "fill")
	must(t, err)
	if _, err := d.Function(m, "nope"); err == nil {
		t.Error("Function(nope) succeeded")
	}
	g, size, err := d.Global(m, "answer")
	must(t, err)
	if size != 4 {
		t.Fatalf("answer has %d bytes", size)
	}
	var ans int32
	must(t, d.CopyDtoH(unsafe.Pointer(&ans), g, 4))
	if ans != 42 {
		t.Fatalf("answer = %d", ans)
	}
	const n = 1000
	buf, err := d.Alloc(4*n, false)
	must(t, err)
	defer d.Free(buf)
	args := make([]byte, 16)
	put64 := func(b []byte, v uint64) {
		for i := 0; i < 8; i++ {
			b[i] = byte(v >> (8 * i))
		}
	}
	put32 := func(b []byte, v uint32) {
		for i := 0; i < 4; i++ {
			b[i] = byte(v >> (8 * i))
		}
	}
	put64(args[0:], uint64(buf))
	put32(args[8:], 5)
	put32(args[12:], n)
	s, err := d.NewStream()
	must(t, err)
	defer d.DestroyStream(s)
	grid, block := gpu.Dim3{X: (n + 255) / 256, Y: 1, Z: 1}, gpu.Dim3{X: 256, Y: 1, Z: 1}
	must(t, d.Launch(f, grid, block, 0, s, args))
	must(t, d.StreamSynchronize(s))
	got := make([]int32, n)
	check := func(v int32) {
		t.Helper()
		must(t, d.CopyDtoH(unsafe.Pointer(&got[0]), buf, 4*n))
		for i, x := range got {
			if x != v+int32(i)+42 {
				t.Fatalf("element %d = %d, want %d", i, x, v+int32(i)+42)
			}
		}
	}
	check(5)

	// The same launch under capture, replayed: the args are taken at capture.
	put32(args[8:], 100)
	defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
	must(t, d.BeginCapture(s, gpu.CaptureGlobal))
	must(t, d.Launch(f, grid, block, 0, s, args))
	put32(args[8:], -1&0x7fffffff) // changing the Go bytes now must not matter
	gr, err := d.EndCapture(s)
	must(t, err)
	check(5)
	ge, err := d.Instantiate(gr)
	must(t, err)
	must(t, d.LaunchGraph(ge, s))
	must(t, d.StreamSynchronize(s))
	check(100)
	must(t, d.DestroyGraphExec(ge))
	must(t, d.DestroyGraph(gr))
}

// pdlSrc: first signals its dependents at once, spins 200 us, then stores 42
// into b[0] and its end time into b[1]; second notes its start time, waits
// for first (griddepcontrol.wait) and copies b[0] into b[3], its start time
// into b[2].
const pdlSrc = `
struct pdl_args { unsigned long long b; };
__device__ unsigned long long now() {
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}
extern "C" __global__ void first(const pdl_args a) {
	unsigned long long* b = (unsigned long long*)a.b;
	asm volatile("griddepcontrol.launch_dependents;");
	const unsigned long long t0 = now();
	while (now() - t0 < 200000) {
	}
	b[0] = 42;
	b[1] = now();
}
extern "C" __global__ void second(const pdl_args a) {
	unsigned long long* b = (unsigned long long*)a.b;
	const unsigned long long t = now();
	asm volatile("griddepcontrol.wait;" ::: "memory");
	b[2] = t;
	b[3] = b[0];
}
`

// TestDependentLaunch checks Programmatic Dependent Launch where the device
// does it (sm_90+, CUDA 12.3+, IRISGEN_PDL not 0): a kernel launched with
// gpu.LaunchDependent after one that signals at once starts before that one
// ends, and its griddepcontrol.wait still sees every write of it; replayed
// from a captured graph the same (the programmatic edge is captured). A
// plain Launch of the same pair does not overlap, so the timing check
// means something.
func TestDependentLaunch(t *testing.T) {
	p, d := device(t, 0)
	if dl, ok := d.(gpu.DependentLauncher); !ok || !dl.DependentLaunches() {
		t.Skipf("%s device 0 does not launch programmatic dependents (sm_90+, CUDA 12.3+ driver, %s=%q)", p.Name(), gpu.EnvPDL, os.Getenv(gpu.EnvPDL))
	}
	m, err := d.LoadModule(compileModule(t, p, pdlSrc))
	must(t, err)
	defer d.UnloadModule(m)
	first, err := d.Function(m, "first")
	must(t, err)
	second, err := d.Function(m, "second")
	must(t, err)
	buf, err := d.Alloc(32, false)
	must(t, err)
	defer d.Free(buf)
	s, err := d.NewStream()
	must(t, err)
	defer d.DestroyStream(s)
	args := make([]byte, 8)
	for i := range 8 {
		args[i] = byte(uint64(buf) >> (8 * i))
	}
	one := gpu.Dim3{X: 1, Y: 1, Z: 1}
	pair := func(dependent bool) {
		must(t, d.Launch(first, one, one, 0, s, args))
		if dependent {
			must(t, gpu.LaunchDependent(d, second, one, one, 0, s, args))
		} else {
			must(t, d.Launch(second, one, one, 0, s, args))
		}
	}
	// check runs launch on a zeroed buffer and returns whether second
	// started before first ended; second must have seen first's 42.
	check := func(what string, launch func()) bool {
		t.Helper()
		must(t, d.MemsetD8Async(buf, 0, 32, s))
		launch()
		must(t, d.StreamSynchronize(s))
		var b [4]uint64
		must(t, d.CopyDtoH(unsafe.Pointer(&b[0]), buf, 32))
		if b[3] != 42 {
			t.Fatalf("%s: second read %d after griddepcontrol.wait, want first's 42", what, b[3])
		}
		return b[2] < b[1]
	}
	if check("plain launches", func() { pair(false) }) {
		t.Fatal("plain launches: second started before first ended")
	}
	if !check("dependent launch", func() { pair(true) }) {
		t.Fatal("dependent launch: second started only after first ended (no programmatic launch)")
	}
	defer gpu.PinCaptureThread(gpu.CaptureGlobal)() // a global capture ends on the thread that began it
	must(t, d.BeginCapture(s, gpu.CaptureGlobal))
	pair(true)
	g, err := d.EndCapture(s)
	must(t, err)
	defer d.DestroyGraph(g)
	ge, err := d.Instantiate(g)
	must(t, err)
	defer d.DestroyGraphExec(ge)
	for range 3 {
		if !check("replayed graph", func() { must(t, d.LaunchGraph(ge, s)) }) {
			t.Fatal("replayed graph: second started only after first ended (the capture lost the programmatic edge)")
		}
	}
}

//go:build linux

package fakegpu

import (
	"runtime"
	"testing"

	"github.com/irisgen/irisgen/runtime/gpu"
)

// TestCaptureEndsOnItsThread: a global or thread-local capture ends only
// on the OS thread that began it (as CUDA's
// CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD); a relaxed one anywhere; and
// gpu.PinCaptureThread keeps a goroutine on its thread across a capture
// that blocks.
func TestCaptureEndsOnItsThread(t *testing.T) {
	p := New(1)
	d := open(t, p, 0)
	s, _ := d.NewStream()
	// on runs f on a goroutine of its own, locked to an OS thread of its own
	// (two locked goroutines never share a thread).
	on := func(f func()) {
		done := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			f()
			close(done)
		}()
		<-done
	}
	for _, mode := range []gpu.CaptureMode{gpu.CaptureGlobal, gpu.CaptureThreadLocal, gpu.CaptureRelaxed} {
		began := make(chan struct{})
		release := make(chan struct{})
		finished := make(chan error)
		go func() { // the capturing thread, kept while the other one tries
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			must(t, d.BeginCapture(s, mode))
			close(began)
			<-release
			_, err := d.EndCapture(s)
			finished <- err
		}()
		<-began
		var other error
		on(func() { _, other = d.EndCapture(s) })
		close(release)
		mine := <-finished
		if mode == gpu.CaptureRelaxed {
			must(t, other) // ended there; the capturing thread finds none left
			wantCode(t, mine, "CUDA_ERROR_ILLEGAL_STATE")
			continue
		}
		wantCode(t, other, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD")
		must(t, mine)
	}
	// A capture that blocks in between ends where it began once pinned.
	for range 20 {
		func() {
			defer gpu.PinCaptureThread(gpu.CaptureGlobal)()
			must(t, d.BeginCapture(s, gpu.CaptureGlobal))
			for range 3 {
				ch := make(chan struct{})
				go func() { close(ch) }()
				<-ch
				runtime.Gosched()
			}
			_, err := d.EndCapture(s)
			must(t, err)
		}()
	}
}

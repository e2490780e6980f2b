package fakegpu

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/irisgen/irisgen/runtime/gpu"
)

// TestStreamQuery: a stream is done once the operations enqueued on it
// have run, which in the fake is when their calls return; while another
// goroutine's WaitValue32 on it still waits for its word, it is not ready
// (done false, no error), and done again once the word came. Another
// stream answers meanwhile; an unknown stream is an invalid handle. During
// a relaxed capture the other streams answer; a global capture refuses the
// query of any stream, as CUDA does.
func TestStreamQuery(t *testing.T) {
	p := New(2)
	p.SetWaitLimit(10 * time.Second)
	d := open(t, p, 0)
	s, err := d.NewStream()
	must(t, err)
	other, err := d.NewStream()
	must(t, err)
	word, err := d.Alloc(4, false)
	must(t, err)
	query := func(s gpu.Stream) bool {
		t.Helper()
		done, err := d.StreamQuery(s)
		must(t, err)
		return done
	}
	if !query(s) || !query(0) {
		t.Fatal("a stream with nothing enqueued is not done")
	}
	must(t, d.MemsetD32Async(word, 0, 1, s))
	if !query(s) {
		t.Fatal("a memset has run, but the stream is not done")
	}
	waited := make(chan error, 1)
	go func() { waited <- d.WaitValue32(word, 1, s) }()
	deadline := time.Now().Add(5 * time.Second)
	for query(s) {
		if time.Now().After(deadline) {
			t.Fatal("a stream whose WaitValue32 waits for its word is done")
		}
		time.Sleep(time.Millisecond)
	}
	if !query(other) {
		t.Fatal("another stream is not done")
	}
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, 1)
	must(t, p.Write(word, b))
	must(t, <-waited)
	if !query(s) {
		t.Fatal("the word came and the wait returned, but the stream is not done")
	}
	must(t, d.DestroyStream(other))
	_, err = d.StreamQuery(other)
	wantCode(t, err, "CUDA_ERROR_INVALID_HANDLE")
	// A relaxed capture on s leaves the query of another stream legal.
	so, err := d.NewStream()
	must(t, err)
	must(t, d.BeginCapture(s, gpu.CaptureRelaxed))
	if !query(so) {
		t.Fatal("another stream during a relaxed capture is not done")
	}
	if st, _ := d.CaptureStatus(s); st != gpu.CaptureActive {
		t.Fatalf("capture status %v after another stream's query, want active", st)
	}
	_, err = d.StreamQuery(s)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	_, err = d.EndCapture(s)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
	// A global capture refuses the query of any stream, and is invalidated
	// (TestIllegalDuringCapture has the query of the capturing stream).
	must(t, d.BeginCapture(s, gpu.CaptureGlobal))
	_, err = d.StreamQuery(so)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED")
	if st, _ := d.CaptureStatus(s); st != gpu.CaptureInvalidated {
		t.Fatalf("capture status %v after another stream's query, want invalidated", st)
	}
	_, err = d.EndCapture(s)
	wantCode(t, err, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")
}

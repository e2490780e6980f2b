package gpu

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// noPlatform asserts that err is a *NoPlatformError wrapping ErrNoPlatform
// and returns it. When a platform did load (a GPU machine) it skips.
func noPlatform(t *testing.T, p Platform, err error) *NoPlatformError {
	t.Helper()
	if err == nil {
		t.Skipf("platform %s loaded: this machine has a GPU", p.Name())
	}
	var np *NoPlatformError
	if !errors.As(err, &np) {
		t.Fatalf("error %T %v, want *NoPlatformError", err, err)
	}
	if !errors.Is(err, ErrNoPlatform) {
		t.Fatalf("errors.Is(%v, ErrNoPlatform) is false", err)
	}
	for _, why := range np.Tried {
		// A library that opens must have every symbol irisgen needs.
		if strings.Contains(why.Error(), "missing symbol") {
			t.Errorf("library lacks a symbol: %s", why)
		}
	}
	return np
}

func TestLoadCUDAWithoutDriver(t *testing.T) {
	p, err := load("cuda")
	np := noPlatform(t, p, err)
	if len(np.Tried) != 1 || !strings.HasPrefix(np.Tried[0].Error(), "libcuda.so.1: ") {
		t.Fatalf("Tried = %q, want one libcuda.so.1 entry", np.Tried)
	}
	msg := err.Error()
	for _, want := range []string{"no GPU platform", "libcuda.so.1", "IRISGEN_PLATFORM"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "libamdhip64") {
		t.Errorf("IRISGEN_PLATFORM=cuda also tried HIP: %q", msg)
	}
}

func TestLoadHIPWithoutGPU(t *testing.T) {
	p, err := load("hip")
	np := noPlatform(t, p, err)
	if len(np.Tried) == 0 || !strings.HasPrefix(np.Tried[0].Error(), "libamdhip64.so") {
		t.Fatalf("Tried = %q, want libamdhip64 entries", np.Tried)
	}
	t.Logf("%v", err)
}

func TestLoadAutoTriesBoth(t *testing.T) {
	p, err := load("")
	np := noPlatform(t, p, err)
	msg := np.Error()
	ci, hi := strings.Index(msg, "libcuda.so.1"), strings.Index(msg, "libamdhip64.so")
	if ci < 0 || hi < 0 || ci > hi {
		t.Fatalf("want CUDA tried, then HIP: %q", msg)
	}
}

func TestLoadBadChoice(t *testing.T) {
	_, err := load("rocm")
	if err == nil {
		t.Fatal("IRISGEN_PLATFORM=rocm accepted")
	}
	if errors.Is(err, ErrNoPlatform) {
		t.Errorf("a bad setting reads as no platform: %v", err)
	}
	for _, want := range []string{"IRISGEN_PLATFORM", `"rocm"`, "cuda", "hip"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

// Load reads IRISGEN_PLATFORM once; check it in a child process, where the
// cache is fresh.
func TestLoadReadsEnvironment(t *testing.T) {
	if v := os.Getenv("IRISGEN_LOAD_CHILD"); v != "" {
		_, err1 := Load()
		_, err2 := Load()
		if err1 == nil || err2 == nil {
			os.Stdout.WriteString("LOADED\n")
			return
		}
		if err1 != err2 {
			t.Fatal("Load not cached")
		}
		os.Stdout.WriteString("ERR:" + err1.Error() + "\n")
		return
	}
	for choice, want := range map[string]string{
		"bogus": `IRISGEN_PLATFORM="bogus" is not a GPU platform`,
		"cuda":  "libcuda.so.1",
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLoadReadsEnvironment$")
		cmd.Env = append(os.Environ(), "IRISGEN_LOAD_CHILD=1", "IRISGEN_PLATFORM="+choice)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "LOADED") {
			t.Skip("a platform loaded: this machine has a GPU")
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("IRISGEN_PLATFORM=%s: output %q lacks %q", choice, out, want)
		}
	}
}

func TestHelpers(t *testing.T) {
	if d := msToDuration(1.5); d != 1500*time.Microsecond {
		t.Errorf("msToDuration(1.5) = %v", d)
	}
	if d := msToDuration(0.0005); d != 500*time.Nanosecond {
		t.Errorf("msToDuration(0.0005) = %v", d)
	}
	for v, want := range map[int]CaptureStatus{0: CaptureNone, 1: CaptureActive, 2: CaptureInvalidated} {
		if got, err := captureStatus(v); err != nil || got != want {
			t.Errorf("captureStatus(%d) = %v, %v", v, got, err)
		}
	}
	if _, err := captureStatus(3); err == nil {
		t.Error("captureStatus(3) accepted")
	}
}

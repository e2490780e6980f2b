package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lines as nvidia-smi wrote them on 4 H100s (2026-11-26), with a GPU that
// reads N/A, a clock-event reason and a message among them.
const clockLines = `0, 2026/11/26 23:17:22.881, 1980 MHz, 2619 MHz, 156.53 W, 44, 0x0000000000000000
1, 2026/11/26 23:17:22.890, 1980 MHz, 2619 MHz, 166.77 W, 39, 0x0000000000000000
2, 2026/11/26 23:17:22.895, 1755 MHz, 2619 MHz, 309.46 W, 52, 0x0000000000000004
3, 2026/11/26 23:17:22.899, [N/A], 2619 MHz, [N/A], 41, 0x0000000000000000
Failed to initialize NVML: Unknown Error

2, 2026/11/26 23:17:22.945, 1980 MHz, 2619 MHz, 147.99 W, 42, 0x0000000000000004
`

func TestParseClocks(t *testing.T) {
	s, err := ParseClocks(strings.NewReader(clockLines))
	require.NoError(t, err)
	assert.Equal(t, ClockSummary{Samples: 4, Unread: 2, GPUs: 3, SMMinMHz: 1755, SMMaxMHz: 1980, PowerMaxW: 309.46, TempMaxC: 52, Reasons: []string{"0x4 (software power cap)"}}, s)
	md := s.Markdown()
	for _, want := range []string{"4 samples of 3 GPUs", "SM clock 1755-1980 MHz (busy)", "at most 309 W and 52 C", "clock-event reasons other than idle: 0x4 (software power cap) (a power"} {
		assert.Contains(t, md, want)
	}

	steady, err := ParseClocks(strings.NewReader("0, t, 1980 MHz, 2619 MHz, 156.53 W, 44, 0x0000000000000000\n"))
	require.NoError(t, err)
	assert.Contains(t, steady.Markdown(), "clock-event reasons other than idle: none.")

	// Idle samples (two GPUs a world of 2 did not use, on 4 H100s,
	// 2026-11-27) are left out of the SM clock's range and counted; an
	// idle GPU under a power cap still shows the cap.
	idle := "0, t, 1980 MHz, 2619 MHz, 150.00 W, 40, 0x0000000000000000\n" +
		"2, t, 345 MHz, 2619 MHz, 70.00 W, 30, 0x0000000000000001\n" +
		"3, t, 345 MHz, 2619 MHz, 70.00 W, 30, 0x0000000000000005\n"
	s, err = ParseClocks(strings.NewReader(idle))
	require.NoError(t, err)
	assert.Equal(t, ClockSummary{Samples: 3, Idle: 2, GPUs: 3, SMMinMHz: 1980, SMMaxMHz: 1980, PowerMaxW: 150, TempMaxC: 40, Reasons: []string{"0x4 (software power cap)"}}, s)
	assert.Contains(t, s.Markdown(), "SM clock 1980-1980 MHz (busy; 2 idle samples left out)")
	s, err = ParseClocks(strings.NewReader("2, t, 345 MHz, 2619 MHz, 70.00 W, 30, 0x0000000000000001\n"))
	require.NoError(t, err)
	assert.Contains(t, s.Markdown(), "SM clock 345-345 MHz (every sample idle)")
	assert.Contains(t, s.Markdown(), "reasons other than idle: none.")
	assert.Empty(t, ClockSummary{}.Markdown(), "nothing sampled, nothing reported")
}

// TestReasonName names every bit NVML defines, several at once, and bits
// it does not.
func TestReasonName(t *testing.T) {
	for mask, want := range map[uint64]string{
		0x1:     "0x1 (idle)",
		0x5:     "0x5 (idle, software power cap)",
		0x1fe:   "0x1fe (application clocks setting, software power cap, hardware slowdown, sync boost, software thermal slowdown, hardware thermal slowdown, hardware power brake, display clock setting)",
		0x10008: "0x10008 (hardware slowdown, unknown 0x10000)",
	} {
		assert.Equal(t, want, reasonName(mask))
	}
}

// TestVisibleGPUs: the sampler follows CUDA_VISIBLE_DEVICES where
// nvidia-smi -i can, and samples every GPU where it cannot.
func TestVisibleGPUs(t *testing.T) {
	for v, want := range map[string]string{
		"":               "",
		"0,1":            "0,1",
		" 2, 3 ":         "2,3",
		"GPU-cd23b31e,1": "GPU-cd23b31e,1",
		"MIG-1234":       "",
		"0,MIG-1234":     "",
		"-1":             "",
		"0,":             "",
	} {
		assert.Equal(t, want, visibleGPUs(v), "CUDA_VISIBLE_DEVICES=%q", v)
	}
}

// TestClockLog runs the sampler on an nvidia-smi stand-in that prints a
// line every 10 ms until it is interrupted (asked for the GPUs that
// CUDA_VISIBLE_DEVICES leaves), and on none at all.
func TestClockLog(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a shell script stands in for nvidia-smi")
	}
	dir := t.TempDir()
	t.Setenv("CUDA_VISIBLE_DEVICES", "2,3")
	smi := "#!/bin/sh\n" +
		`case "$*" in *clocks_event_reasons.active*-lms\ 50\ -i\ 2,3) ;; *) echo "unexpected arguments: $*"; exit 2 ;; esac` + "\n" +
		"while :; do echo '0, t, 1980 MHz, 2619 MHz, 100.00 W, 40, 0x0000000000000000'; sleep 0.01; done\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(smi), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH")) // the stand-in first; sleep after it
	l, err := StartClockLog(filepath.Join(dir, "clocks.csv"))
	require.NoError(t, err)
	require.NotNil(t, l)
	time.Sleep(200 * time.Millisecond)
	s, err := l.Stop()
	require.NoError(t, err)
	assert.Positive(t, s.Samples)
	assert.Equal(t, 1980, s.SMMaxMHz)

	// One that stops by itself: what it logged, and an error that says so.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("#!/bin/sh\necho 'NVIDIA-SMI has failed'\nexit 9\n"), 0o755))
	l, err = StartClockLog(filepath.Join(dir, "clocks.csv"))
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	s, err = l.Stop()
	require.ErrorContains(t, err, "nvidia-smi stopped sampling before the run ended")
	assert.Equal(t, 1, s.Unread)

	t.Setenv("PATH", t.TempDir())
	l, err = StartClockLog(filepath.Join(dir, "none.csv"))
	require.NoError(t, err)
	assert.Nil(t, l, "no nvidia-smi: no log")
	s, err = l.Stop()
	require.NoError(t, err)
	assert.Zero(t, s.Samples)
}

// TestClockLogDiesWithBench: a bench that exits without Stop (stopped by a
// signal) leaves no sampler behind (Linux).
func TestClockLogDiesWithBench(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	dir := t.TempDir()
	if os.Getenv("IRISGEN_CLOCK_HELPER") != "" { // the bench: start, then exit
		if _, err := StartClockLog(filepath.Join(os.Getenv("IRISGEN_CLOCK_HELPER"), "clocks.csv")); err != nil {
			os.Exit(3)
		}
		time.Sleep(100 * time.Millisecond)
		os.Exit(0)
	}
	pidFile := filepath.Join(dir, "pid")
	smi := "#!/bin/sh\necho $$ > " + pidFile + "\nwhile :; do echo '0, t, 1980 MHz, 2619 MHz, 100.00 W, 40, 0x0'; sleep 0.01; done\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(smi), 0o755))
	cmd := exec.Command(os.Args[0], "-test.run=^TestClockLogDiesWithBench$")
	cmd.Env = append(os.Environ(), "IRISGEN_CLOCK_HELPER="+dir, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the stand-in never started")
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the sampler (pid %d) outlived the bench", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

package launch

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary doubles as the rank program: with IRISGEN_LAUNCH_HELPER
// set, TestMain behaves as the mode it names instead of running tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv("IRISGEN_LAUNCH_HELPER"); mode != "" {
		os.Exit(helper(mode))
	}
	os.Exit(m.Run())
}

func helper(mode string) int {
	rank := os.Getenv("RANK")
	switch mode {
	case "env":
		fmt.Printf("rank=%s world=%s local=%s addr=%s port=%s extra=%s\n", rank, os.Getenv("WORLD_SIZE"),
			os.Getenv("LOCAL_RANK"), os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"), os.Getenv("NCCL_NVLS_ENABLE"))
		fmt.Fprintf(os.Stderr, "to stderr\nno newline at the end")
		return 0
	case "fail1":
		if rank == "1" {
			fmt.Println("failing")
			return 3
		}
		time.Sleep(time.Minute) // must be stopped by Run
		return 0
	case "hang1": // rank 1 never exits, the others exit 0
		if rank == "1" {
			time.Sleep(time.Minute)
		}
		return 0
	case "stubborn1": // rank 1 ignores SIGTERM and never exits
		if rank == "1" {
			signal.Ignore(syscall.SIGTERM)
			fmt.Println("ignoring SIGTERM")
			time.Sleep(time.Minute)
		}
		return 0
	case "child", "childfail": // a background child that holds the output pipes
		c := exec.Command("sleep", "120")
		c.Stdout, c.Stderr = os.Stdout, os.Stderr
		if err := c.Start(); err != nil {
			fmt.Println(err)
			return 98
		}
		fmt.Printf("child %d\n", c.Process.Pid)
		ready := filepath.Join(os.Getenv("IRISGEN_LAUNCH_SYNC"), "ready"+rank)
		if err := os.WriteFile(ready, nil, 0o644); err != nil {
			fmt.Println(err)
			return 97
		}
		if mode == "childfail" && rank == "0" {
			// Fail only once rank 1 has started its child too, so that the
			// run has two children to end whatever the scheduling.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(os.Getenv("IRISGEN_LAUNCH_SYNC"), "ready1")); err == nil {
					break
				}
			}
			return 4
		}
		return 0
	case "escape": // a child in a session of its own holds the output pipe
		c := exec.Command("sleep", "5")
		c.Stdout = os.Stdout
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			return 98
		}
		fmt.Printf("child %d\n", c.Process.Pid)
		return 0
	}
	return 99
}

// safeBuffer is a bytes.Buffer safe for the copiers' goroutines.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n")
	sort.Strings(l)
	return l
}

func TestRunSuccessEnvAndPrefix(t *testing.T) {
	t.Setenv("IRISGEN_LAUNCH_HELPER", "env")
	t.Setenv("NCCL_NVLS_ENABLE", "0")
	var out, errOut safeBuffer
	require.NoError(t, Run(3, []string{os.Args[0]}, &out, &errOut, Options{MasterPort: 29517}))
	assert.Equal(t, []string{
		"[rank 0] rank=0 world=3 local=0 addr=127.0.0.1 port=29517 extra=0",
		"[rank 1] rank=1 world=3 local=1 addr=127.0.0.1 port=29517 extra=0",
		"[rank 2] rank=2 world=3 local=2 addr=127.0.0.1 port=29517 extra=0",
	}, out.lines())
	assert.Equal(t, []string{
		"[rank 0] no newline at the end", "[rank 0] to stderr",
		"[rank 1] no newline at the end", "[rank 1] to stderr",
		"[rank 2] no newline at the end", "[rank 2] to stderr",
	}, errOut.lines())
}

func TestRunPicksFreePort(t *testing.T) {
	t.Setenv("IRISGEN_LAUNCH_HELPER", "env")
	var out safeBuffer
	require.NoError(t, Run(2, []string{os.Args[0]}, &out, &safeBuffer{}, Options{}))
	l := out.lines()
	require.Len(t, l, 2)
	port := l[0][strings.Index(l[0], "port="):strings.Index(l[0], " extra")]
	assert.NotEqual(t, "port=0", port)
	assert.Contains(t, l[1], port, "every rank gets the same port")
}

func TestRunOneRankFails(t *testing.T) {
	t.Setenv("IRISGEN_LAUNCH_HELPER", "fail1")
	var out safeBuffer
	start := time.Now()
	err := Run(3, []string{os.Args[0]}, &out, &safeBuffer{}, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "run: rank 1 exited with status 3; ")
	for _, k := range []int{0, 2} {
		assert.Contains(t, err.Error(), fmt.Sprintf("rank %d was killed by signal terminated (stopped by the launcher)", k))
	}
	assert.Less(t, time.Since(start), 30*time.Second, "the other ranks must be stopped, not waited for")
	assert.Equal(t, []string{"[rank 1] failing"}, out.lines())
}

func TestRunRankOutlivesTheOthers(t *testing.T) {
	t.Setenv("IRISGEN_LAUNCH_HELPER", "hang1")
	start := time.Now()
	err := Run(3, []string{os.Args[0]}, &safeBuffer{}, &safeBuffer{}, Options{ExitGrace: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Regexp(t, `^run: rank [02] exited with status 0, but rank 1 did not exit within 300ms of it; `, err.Error())
	assert.Contains(t, err.Error(), "rank 1 was killed by signal terminated (stopped by the launcher)")
	assert.Less(t, time.Since(start), 20*time.Second)
}

func TestRunKillsWhatIgnoresSIGTERM(t *testing.T) {
	t.Setenv("IRISGEN_LAUNCH_HELPER", "stubborn1")
	start := time.Now()
	err := Run(2, []string{os.Args[0]}, &safeBuffer{}, &safeBuffer{}, Options{ExitGrace: 200 * time.Millisecond, KillGrace: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rank 1 was killed by signal killed (stopped by the launcher)")
	assert.Less(t, time.Since(start), 20*time.Second)
}

// TestRunEndsBackgroundChildren: a rank's background child holds the
// output pipes; neither a failed nor a successful run waits for it, and it
// does not outlive the run.
func TestRunEndsBackgroundChildren(t *testing.T) {
	for _, mode := range []string{"childfail", "child"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv("IRISGEN_LAUNCH_HELPER", mode)
			t.Setenv("IRISGEN_LAUNCH_SYNC", t.TempDir())
			var out safeBuffer
			start := time.Now()
			err := Run(2, []string{os.Args[0]}, &out, &safeBuffer{}, Options{})
			took := time.Since(start)
			if mode == "childfail" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "rank 0 exited with status 4")
			} else {
				require.NoError(t, err)
			}
			assert.Less(t, took, 20*time.Second, "the children sleep 120s")
			pids := childPids(t, out.lines())
			require.Len(t, pids, 2)
			for _, pid := range pids {
				assertGone(t, pid)
			}
		})
	}
}

// TestRunDoesNotWaitForEscapedChildren: a child that left its rank's
// process group (a new session) still holds stdout; the run ends anyway.
func TestRunDoesNotWaitForEscapedChildren(t *testing.T) {
	t.Setenv("IRISGEN_LAUNCH_HELPER", "escape")
	var out safeBuffer
	start := time.Now()
	require.NoError(t, Run(1, []string{os.Args[0]}, &out, &safeBuffer{}, Options{}))
	assert.Less(t, time.Since(start), drainGrace+3*time.Second)
	for _, pid := range childPids(t, out.lines()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

var childLine = regexp.MustCompile(`^\[rank \d\] child (\d+)$`)

func childPids(t *testing.T, lines []string) []int {
	var pids []int
	for _, l := range lines {
		if m := childLine.FindStringSubmatch(l); m != nil {
			pid, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			pids = append(pids, pid)
		}
	}
	return pids
}

// assertGone waits a little for pid to be dead (gone, or a zombie its new
// parent has not reaped yet).
func assertGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return // gone
		}
		// pid (comm) state ...: the state follows the last ')'.
		if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			return
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("background child %d outlived the run: %s", pid, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunBadProgram(t *testing.T) {
	err := Run(2, []string{"/nonexistent/irisgen-no-such-program"}, &safeBuffer{}, &safeBuffer{}, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "starting rank 0")
	assert.Error(t, Run(0, []string{os.Args[0]}, nil, nil, Options{}))
	assert.Error(t, Run(1, nil, nil, nil, Options{}))
}

func TestPrefixLinesLongLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	var out bytes.Buffer
	prefixLines(strings.NewReader(long+"\nshort\n"), &out, &sync.Mutex{}, "[rank 5] ")
	assert.Equal(t, "[rank 5] "+long+"\n[rank 5] short\n", out.String())
}

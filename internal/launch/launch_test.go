package launch

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
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
	require.NoError(t, Run(3, 29517, []string{os.Args[0]}, &out, &errOut))
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
	require.NoError(t, Run(2, 0, []string{os.Args[0]}, &out, &safeBuffer{}))
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
	err := Run(3, 0, []string{os.Args[0]}, &out, &safeBuffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rank 1 exited with status 3")
	assert.Less(t, time.Since(start), 30*time.Second, "the other ranks must be stopped, not waited for")
	assert.Equal(t, []string{"[rank 1] failing"}, out.lines())
}

func TestRunBadProgram(t *testing.T) {
	err := Run(2, 0, []string{"/nonexistent/irisgen-no-such-program"}, &safeBuffer{}, &safeBuffer{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "starting rank 0")
	assert.Error(t, Run(0, 0, []string{os.Args[0]}, nil, nil))
	assert.Error(t, Run(1, 0, nil, nil, nil))
}

func TestPrefixLinesLongLine(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	var out bytes.Buffer
	prefixLines(strings.NewReader(long+"\nshort\n"), &out, &sync.Mutex{}, "[rank 5] ")
	assert.Equal(t, "[rank 5] "+long+"\n[rank 5] short\n", out.String())
}

// Package launch starts the ranks of a multi-process world on this machine,
// the way torchrun does: `irisgen run -n N -- prog args` runs N copies of
// prog with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set, prefixes their output with the rank, and stops them all
// when one fails.
package launch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// KillGrace is how long the other ranks get to exit after SIGTERM when one
// rank has failed, before they are killed.
var KillGrace = 5 * time.Second

// Run starts n copies of argv (argv[0] is the program) and waits for them.
// Each gets the parent's environment plus RANK=k, WORLD_SIZE=n,
// LOCAL_RANK=k, LOCAL_WORLD_SIZE=n, MASTER_ADDR=127.0.0.1 and MASTER_PORT
// (masterPort, or a free port when 0). Every line a rank writes to stdout or
// stderr is copied to stdout or stderr with the prefix "[rank k] ". When a
// rank exits non-zero the others are stopped and the error names that rank
// and its exit status. SIGINT and SIGTERM received by this process are
// forwarded to every rank.
func Run(n int, masterPort int, argv []string, stdout, stderr io.Writer) error {
	if n < 1 {
		return fmt.Errorf("run: -n %d: need at least one rank", n)
	}
	if len(argv) == 0 {
		return errors.New("run: no program given (usage: irisgen run -n N -- prog args)")
	}
	if masterPort == 0 {
		p, err := freePort()
		if err != nil {
			return fmt.Errorf("run: finding a free port for MASTER_PORT: %w", err)
		}
		masterPort = p
	}
	outMu, errMu := &sync.Mutex{}, &sync.Mutex{}
	type result struct {
		rank int
		err  error
	}
	done := make(chan result, n)
	cmds := make([]*exec.Cmd, 0, n)
	var copies sync.WaitGroup
	exited := make([]bool, n) // reaped ranks are not signalled (their pid may be reused)
	kill := func(sig syscall.Signal) {
		for k, c := range cmds {
			if c.Process != nil && !exited[k] {
				// The rank runs in its own process group: signal all of it.
				_ = syscall.Kill(-c.Process.Pid, sig)
			}
		}
	}
	// abort stops the ranks started so far when a later one cannot start.
	abort := func(err error) error {
		kill(syscall.SIGKILL)
		for _, c := range cmds {
			_ = c.Wait()
		}
		copies.Wait()
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	for k := 0; k < n; k++ {
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = append(os.Environ(),
			"RANK="+strconv.Itoa(k),
			"WORLD_SIZE="+strconv.Itoa(n),
			"LOCAL_RANK="+strconv.Itoa(k),
			"LOCAL_WORLD_SIZE="+strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1",
			"MASTER_PORT="+strconv.Itoa(masterPort),
		)
		// Own process group: a terminal's Ctrl-C reaches the ranks once,
		// through us, and a failed world can be torn down whole.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		prefix := fmt.Sprintf("[rank %d] ", k)
		// Our own pipes (not StdoutPipe): Wait must not close them while
		// the copiers still drain them.
		or, ow, err := os.Pipe()
		if err != nil {
			return abort(err)
		}
		er, ew, err := os.Pipe()
		if err != nil {
			or.Close()
			ow.Close()
			return abort(err)
		}
		c.Stdout, c.Stderr = ow, ew
		err = c.Start()
		ow.Close() // the child has its copies
		ew.Close()
		if err != nil {
			or.Close()
			er.Close()
			return abort(fmt.Errorf("run: starting rank %d (%s): %w", k, argv[0], err))
		}
		cmds = append(cmds, c)
		copies.Add(2)
		go func() { defer copies.Done(); defer or.Close(); prefixLines(or, stdout, outMu, prefix) }()
		go func() { defer copies.Done(); defer er.Close(); prefixLines(er, stderr, errMu, prefix) }()
	}
	var waits sync.WaitGroup
	for k, c := range cmds {
		waits.Add(1)
		go func() {
			defer waits.Done()
			done <- result{k, c.Wait()}
		}()
	}

	var first error
	var timer <-chan time.Time
	for left := n; left > 0; {
		select {
		case r := <-done:
			left--
			exited[r.rank] = true
			if r.err != nil && first == nil {
				first = describe(r.rank, r.err)
				kill(syscall.SIGTERM)
				timer = time.After(KillGrace)
			}
		case s := <-sigs:
			kill(s.(syscall.Signal))
			if first == nil {
				first = fmt.Errorf("run: interrupted (%v)", s)
			}
			timer = time.After(KillGrace)
		case <-timer:
			kill(syscall.SIGKILL)
			timer = nil
		}
	}
	waits.Wait()
	copies.Wait()
	return first
}

func describe(rank int, err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("run: rank %d was killed by signal %v", rank, ws.Signal())
		}
		return fmt.Errorf("run: rank %d exited with status %d", rank, ee.ExitCode())
	}
	return fmt.Errorf("run: rank %d: %w", rank, err)
}

// prefixLines copies r to w line by line with prefix, one whole line per
// write so ranks' lines never interleave mid-line.
func prefixLines(r io.Reader, w io.Writer, mu *sync.Mutex, prefix string) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line bytes.Buffer
	for {
		chunk, err := br.ReadSlice('\n')
		line.Write(chunk)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // a long line: keep collecting
		}
		if line.Len() > 0 {
			if line.Bytes()[line.Len()-1] != '\n' {
				line.WriteByte('\n') // the last line had no newline
			}
			mu.Lock()
			_, _ = io.WriteString(w, prefix)
			_, _ = w.Write(line.Bytes())
			mu.Unlock()
			line.Reset()
		}
		if err != nil {
			return
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Package launch starts the ranks of a multi-process world on this machine,
// the way torchrun does: `irisgen run -n N -- prog args` runs N copies of
// prog with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
// MASTER_PORT set, prefixes their output with the rank, and ends them all
// when one fails or outlives the others.
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
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of Options.
const (
	// DefaultExitGrace is how long the other ranks may run on after one
	// rank has exited with status 0.
	DefaultExitGrace = 60 * time.Second
	// DefaultKillGrace is how long ranks get between SIGTERM and SIGKILL.
	DefaultKillGrace = 5 * time.Second
	// drainGrace bounds the wait for the ranks' output once every process
	// group has been killed (a process that left its group may hold a pipe).
	drainGrace = 2 * time.Second
)

// Options tune Run; the zero value gives the defaults.
type Options struct {
	MasterPort int           // MASTER_PORT; 0: a free port
	ExitGrace  time.Duration // 0: DefaultExitGrace
	KillGrace  time.Duration // 0: DefaultKillGrace
}

// Run starts n copies of argv (argv[0] is the program) and waits for them.
// Each gets the parent's environment plus RANK=k, WORLD_SIZE=n,
// LOCAL_RANK=k, LOCAL_WORLD_SIZE=n, MASTER_ADDR=127.0.0.1 and MASTER_PORT,
// and runs in a process group of its own. Every line a rank writes to
// stdout or stderr is copied to stdout or stderr with the prefix
// "[rank k] ".
//
// Run ends every rank's whole process group (SIGTERM, then SIGKILL after
// the kill grace) when a rank fails (exits non-zero or is killed), when one
// rank has exited with status 0 and the others have not followed within
// the exit grace, or when this process gets SIGINT or SIGTERM. Whatever
// happens, no process of a rank's group outlives Run: background children
// left behind are killed at the end. The error names the rank that failed
// first and says what became of every other rank.
func Run(n int, argv []string, stdout, stderr io.Writer, o Options) error {
	if n < 1 {
		return fmt.Errorf("run: -n %d: need at least one rank", n)
	}
	if len(argv) == 0 {
		return errors.New("run: no program given (usage: irisgen run -n N -- prog args)")
	}
	if o.ExitGrace <= 0 {
		o.ExitGrace = DefaultExitGrace
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.MasterPort == 0 {
		p, err := freePort()
		if err != nil {
			return fmt.Errorf("run: finding a free port for MASTER_PORT: %w", err)
		}
		o.MasterPort = p
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	w := &world{ranks: make([]*rank, 0, n), done: make(chan exit, n)}
	defer w.finish()
	for k := 0; k < n; k++ {
		if err := w.start(k, n, o.MasterPort, argv, stdout, stderr); err != nil {
			w.signal(syscall.SIGKILL)
			for range w.ranks {
				<-w.done
			}
			return err
		}
	}
	return w.supervise(sigs, o)
}

// world is the launcher's view of the ranks.
type world struct {
	ranks  []*rank
	done   chan exit // one per rank, when it has exited (not yet reaped)
	copies sync.WaitGroup
	pipes  []*os.File // read ends of the ranks' output
	outMu  sync.Mutex // one whole line at a time on stdout
	errMu  sync.Mutex // and on stderr
}

type rank struct {
	k       int
	cmd     *exec.Cmd
	exited  bool
	status  string // "exited with status 3", "was killed by signal ..."
	ok      bool
	stopped bool // the launcher signalled it while it ran
}

type exit struct {
	k      int
	ok     bool
	status string
}

// start runs rank k.
func (w *world) start(k, n, port int, argv []string, stdout, stderr io.Writer) error {
	c := exec.Command(argv[0], argv[1:]...)
	c.Env = append(os.Environ(),
		"RANK="+strconv.Itoa(k),
		"WORLD_SIZE="+strconv.Itoa(n),
		"LOCAL_RANK="+strconv.Itoa(k),
		"LOCAL_WORLD_SIZE="+strconv.Itoa(n),
		"MASTER_ADDR=127.0.0.1",
		"MASTER_PORT="+strconv.Itoa(port),
	)
	// Own process group: a terminal's Ctrl-C reaches the ranks once,
	// through us, and a rank can be ended with everything it started.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	prefix := fmt.Sprintf("[rank %d] ", k)
	// Our own pipes (not StdoutPipe): Wait must not close them while the
	// copiers still drain them.
	var ends [4]*os.File // out read, out write, err read, err write
	var err error
	if ends[0], ends[1], err = os.Pipe(); err == nil {
		ends[2], ends[3], err = os.Pipe()
	}
	if err != nil {
		for _, f := range ends {
			if f != nil {
				f.Close()
			}
		}
		return fmt.Errorf("run: rank %d: %w", k, err)
	}
	c.Stdout, c.Stderr = ends[1], ends[3]
	err = c.Start()
	ends[1].Close() // the child has its copies
	ends[3].Close()
	if err != nil {
		ends[0].Close()
		ends[2].Close()
		return fmt.Errorf("run: starting rank %d (%s): %w", k, argv[0], err)
	}
	r := &rank{k: k, cmd: c}
	w.ranks = append(w.ranks, r)
	w.pipes = append(w.pipes, ends[0], ends[2])
	w.copies.Add(2)
	go func() { defer w.copies.Done(); prefixLines(ends[0], stdout, &w.outMu, prefix) }()
	go func() { defer w.copies.Done(); prefixLines(ends[2], stderr, &w.errMu, prefix) }()
	go func() {
		ok, status := waitExit(c.Process.Pid)
		w.done <- exit{k, ok, status}
	}()
	return nil
}

// supervise waits for every rank to exit and decides when to end them.
func (w *world) supervise(sigs chan os.Signal, o Options) error {
	var cause string // the first failure, once there is one
	var grace, kill <-chan time.Time
	firstOK := -1
	stop := func(why string) {
		cause = why
		w.signal(syscall.SIGTERM)
		kill = time.After(o.KillGrace)
		grace = nil
	}
	for left := len(w.ranks); left > 0; {
		select {
		case e := <-w.done:
			left--
			r := w.ranks[e.k]
			r.exited, r.ok, r.status = true, e.ok, e.status
			switch {
			case cause != "":
			case !e.ok:
				stop(fmt.Sprintf("rank %d %s", e.k, e.status))
			case left > 0 && grace == nil:
				firstOK = e.k
				grace = time.After(o.ExitGrace)
			}
		case <-grace:
			stop(fmt.Sprintf("rank %d exited with status 0, but %s did not exit within %v of it", firstOK, w.running(), o.ExitGrace))
		case s := <-sigs:
			if cause == "" {
				cause = fmt.Sprintf("interrupted (%v)", s)
				kill = time.After(o.KillGrace)
				grace = nil
			}
			w.signal(s.(syscall.Signal))
		case <-kill:
			w.signal(syscall.SIGKILL)
			kill = nil
		}
	}
	if cause == "" {
		return nil
	}
	var rest []string
	for _, r := range w.ranks {
		if strings.HasPrefix(cause, fmt.Sprintf("rank %d ", r.k)) {
			continue
		}
		s := fmt.Sprintf("rank %d %s", r.k, r.status)
		if r.stopped {
			s += " (stopped by the launcher)"
		}
		rest = append(rest, s)
	}
	if len(rest) == 0 {
		return fmt.Errorf("run: %s", cause)
	}
	return fmt.Errorf("run: %s; %s", cause, strings.Join(rest, ", "))
}

// running lists the ranks that have not exited.
func (w *world) running() string {
	var ks []string
	for _, r := range w.ranks {
		if !r.exited {
			ks = append(ks, strconv.Itoa(r.k))
		}
	}
	if len(ks) == 1 {
		return "rank " + ks[0]
	}
	return "ranks " + strings.Join(ks, ", ")
}

// signal sends sig to every rank's process group, including the groups of
// ranks that have exited (their background children). Every rank stays
// unreaped until finish, so no group id can have been reused.
func (w *world) signal(sig syscall.Signal) {
	for _, r := range w.ranks {
		if !r.exited {
			r.stopped = true
		}
		_ = syscall.Kill(-r.cmd.Process.Pid, sig)
	}
}

// finish kills whatever is left of every rank's process group, reaps the
// ranks and drains their output (for a bounded time: a process that left
// its group may hold a pipe open).
func (w *world) finish() {
	for _, r := range w.ranks {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		_ = r.cmd.Wait()
	}
	drained := make(chan struct{})
	go func() { w.copies.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainGrace):
		for _, f := range w.pipes {
			f.Close() // ends the copier's read
		}
		<-drained
	}
	for _, f := range w.pipes {
		f.Close()
	}
}

// exitedWith and killedBy say how a rank ended.
func exitedWith(code int) (bool, string) {
	return code == 0, fmt.Sprintf("exited with status %d", code)
}
func killedBy(sig syscall.Signal) (bool, string) {
	return false, fmt.Sprintf("was killed by signal %v", sig)
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

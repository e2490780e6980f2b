package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A clock log samples the GPUs' SM and memory clocks, power, temperature
// and clock-event reasons (nvidia-smi, every 50 ms) while a scenario runs,
// so that a slowdown the scenario measures can be told from a clock or
// power effect: on 4 H100s the compute kernel's slowdown beside the copy
// engines came with the SM clock at its maximum throughout, which ruled
// the clocks out.

// clockQuery is what the log samples, one CSV line a GPU a sample.
const clockQuery = "index,timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"

// ClockLog is a running sampler; Stop ends it.
type ClockLog struct {
	cmd     *exec.Cmd
	file    *os.File
	done    chan error
	stopped bool
	sum     ClockSummary
	err     error
}

// StartClockLog starts sampling into the CSV file path. Without nvidia-smi
// on PATH it returns nil and no error: there is nothing to sample with (an
// AMD machine, a machine without GPUs).
func StartClockLog(path string) (*ClockLog, error) {
	smi, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	args := []string{"--query-gpu=" + clockQuery, "--format=csv,noheader", "-lms", "50"}
	if ids := visibleGPUs(os.Getenv("CUDA_VISIBLE_DEVICES")); ids != "" {
		args = append(args, "-i", ids)
	}
	cmd := exec.Command(smi, args...)
	cmd.Stdout, cmd.Stderr = f, f
	dieWithParent(cmd) // a bench killed before Stop takes its sampler with it
	l := &ClockLog{cmd: cmd, file: f, done: make(chan error, 1)}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal follows the thread that started the
		// child, so that thread stays this goroutine's until the child ends.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		l.done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", smi, err)
	}
	return l, nil
}

// Stop ends the sampling and summarises what was logged; again, it returns
// the same. A nil log (no nvidia-smi) has nothing: an empty summary.
func (l *ClockLog) Stop() (ClockSummary, error) {
	if l == nil {
		return ClockSummary{}, nil
	}
	if !l.stopped {
		l.sum, l.err = l.stop()
		l.stopped = true
	}
	return l.sum, l.err
}

func (l *ClockLog) stop() (ClockSummary, error) {
	var early error
	select {
	case err := <-l.done: // it ended on its own: an nvidia-smi that failed
		if err == nil {
			err = errors.New("it exited")
		}
		early = fmt.Errorf("nvidia-smi stopped sampling before the run ended (%w; its output is in %s)", err, l.file.Name())
	default:
		_ = l.cmd.Process.Signal(os.Interrupt)
		select {
		case <-l.done:
		case <-time.After(2 * time.Second):
			_ = l.cmd.Process.Kill()
			<-l.done
		}
	}
	cerr := l.file.Close()
	s, err := readClocks(l.file.Name())
	return s, errors.Join(early, cerr, err)
}

// visibleGPUs is the -i argument of nvidia-smi for the GPUs that
// CUDA_VISIBLE_DEVICES leaves the run (v), so that GPUs the run does not
// use (idle, their clocks low) stay out of its summary: v itself when every
// entry is an index or a GPU UUID, which nvidia-smi takes as they are
// (indices in PCI bus order, as CUDA numbers identical GPUs); "" (every
// GPU) when v is unset or names what nvidia-smi -i does not take (MIG
// instances).
func visibleGPUs(v string) string {
	v = strings.TrimSpace(v)
	if v == "" {
		return ""
	}
	for _, id := range strings.Split(v, ",") {
		id = strings.TrimSpace(id)
		if _, err := strconv.ParseUint(id, 10, 32); err != nil && !strings.HasPrefix(id, "GPU-") {
			return ""
		}
	}
	return strings.ReplaceAll(v, " ", "")
}

// idleBit is NVML's clock-event reason of a GPU without work.
const idleBit = 0x1

// reasonBits names NVML's clock-event reason bits (nvmlClocksEventReason*).
var reasonBits = []struct {
	bit  uint64
	name string
}{
	{0x1, "idle"},
	{0x2, "application clocks setting"},
	{0x4, "software power cap"},
	{0x8, "hardware slowdown"},
	{0x10, "sync boost"},
	{0x20, "software thermal slowdown"},
	{0x40, "hardware thermal slowdown"},
	{0x80, "hardware power brake"},
	{0x100, "display clock setting"},
}

// reasonName is a clock-event reason mask with the names of its bits, e.g.
// "0x5 (idle, software power cap)".
func reasonName(mask uint64) string {
	var names []string
	rest := mask
	for _, b := range reasonBits {
		if mask&b.bit != 0 {
			names = append(names, b.name)
		}
		rest &^= b.bit
	}
	if rest != 0 {
		names = append(names, fmt.Sprintf("unknown %#x", rest))
	}
	return fmt.Sprintf("%#x (%s)", mask, strings.Join(names, ", "))
}

func readClocks(path string) (ClockSummary, error) {
	f, err := os.Open(path)
	if err != nil {
		return ClockSummary{}, err
	}
	defer f.Close()
	return ParseClocks(f)
}

// ClockSummary is what a clock log saw over every GPU and sample.
type ClockSummary struct {
	Samples            int      // lines read
	Idle               int      // samples of a GPU without work (reason bit 0x1), left out of the SM clock's range
	Unread             int      // lines without a value to read (N/A, a message)
	GPUs               int      // distinct GPU indices
	SMMinMHz, SMMaxMHz int      // the SM clock's range while busy (of every sample when all were idle)
	PowerMaxW          float64  // the most any GPU drew
	TempMaxC           int      // the hottest any GPU ran
	Reasons            []string // the clock-event reason masks seen other than none (0x0), with their bits' names
}

// ParseClocks reads a clock log's CSV (clockQuery's fields, no header).
func ParseClocks(r io.Reader) (ClockSummary, error) {
	var s ClockSummary
	var busy, idle clockRange
	gpus := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		for i := range f {
			f[i] = strings.TrimSpace(f[i])
		}
		if len(f) != 7 {
			s.Unread++
			continue
		}
		sm, err1 := strconv.Atoi(strings.TrimSuffix(f[2], " MHz"))
		power, err2 := strconv.ParseFloat(strings.TrimSuffix(f[4], " W"), 64)
		temp, err3 := strconv.Atoi(f[5])
		reason, err4 := strconv.ParseUint(strings.TrimPrefix(f[6], "0x"), 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			s.Unread++
			continue
		}
		// An idle GPU's clock drops on its own: its samples say nothing of
		// what a run's load did to the clock.
		if reason&idleBit != 0 {
			idle.add(sm)
		} else {
			busy.add(sm)
		}
		s.PowerMaxW = max(s.PowerMaxW, power)
		s.TempMaxC = max(s.TempMaxC, temp)
		if other := reason &^ idleBit; other != 0 {
			if r := reasonName(other); !slices.Contains(s.Reasons, r) {
				s.Reasons = append(s.Reasons, r)
			}
		}
		gpus[f[0]] = true
		s.Samples++
	}
	s.GPUs, s.Idle = len(gpus), idle.n
	shown := busy // the busy samples' range, the idle ones' when all were idle
	if busy.n == 0 {
		shown = idle
	}
	s.SMMinMHz, s.SMMaxMHz = shown.lo, shown.hi
	return s, sc.Err()
}

// clockRange is the range of n clock samples (0, 0 for none).
type clockRange struct{ lo, hi, n int }

func (c *clockRange) add(v int) {
	if c.n == 0 || v < c.lo {
		c.lo = v
	}
	c.hi = max(c.hi, v)
	c.n++
}

// Markdown is the summary as a short section of the report: nothing when
// nothing was sampled.
func (s ClockSummary) Markdown() string {
	if s.Samples == 0 {
		return ""
	}
	reasons := "none"
	if len(s.Reasons) > 0 {
		reasons = strings.Join(s.Reasons, "; ") + " (a power, thermal, slowdown or sync-boost reason lowers the clock under load)"
	}
	busy := "busy"
	switch {
	case s.Idle == s.Samples:
		busy = "every sample idle"
	case s.Idle > 0:
		busy = fmt.Sprintf("busy; %d idle samples left out", s.Idle)
	}
	return fmt.Sprintf("### Clocks during the run (clocks.csv)\n\n"+
		"%d samples of %d GPUs, every 50 ms: SM clock %d-%d MHz (%s), at most %.0f W and %d C; clock-event reasons other than idle: %s.\n\n",
		s.Samples, s.GPUs, s.SMMinMHz, s.SMMaxMHz, busy, s.PowerMaxW, s.TempMaxC, reasons)
}

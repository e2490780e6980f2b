//go:build gpu

package gpu_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/irisgen/irisgen/internal/launch"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// The fault tests (issue 13 item 6): a timeout, then Close and a new world
// with correct all_reduces; a rank killed mid-collective; faults raised
// under graph replay; graphs holding their plans and tensors. Each runs in
// the in-process world and in the multi-process world (this test binary
// started once per rank, like `irisgen run`), at every world size.

// faultLimit is the device time limit of the fault tests' worlds.
const faultLimit = time.Second

func faultOpts() irisrt.Options {
	o := defaultOpts()
	o.Timeout, o.HeapBytes = faultLimit, 1<<30
	return o
}

// bothWorlds runs a test in the in-process world (inProcess gets the world
// size) and in the multi-process world: the parent starts this test binary
// once per rank running only the test `name`, in which RANK is set and
// rank runs as one process's part (it joins the world itself).
func bothWorlds(t *testing.T, name string, inProcess func(t *testing.T, n int), rank func(t *testing.T)) {
	if os.Getenv("RANK") != "" {
		rank(t)
		return
	}
	for _, n := range worldSizes(t) {
		t.Run(fmt.Sprintf("in-process/world%d", n), func(t *testing.T) { inProcess(t, n) })
		t.Run(fmt.Sprintf("multi-process/world%d", n), func(t *testing.T) {
			args := []string{os.Args[0], "-test.run", "^" + name + "$", "-test.v", "-test.count=1"}
			if err := launch.Run(n, args, os.Stdout, os.Stderr, launch.Options{}); err != nil {
				t.Fatalf("%d ranks: %v", n, err)
			}
		})
	}
}

// inBothWorlds runs body on every rank of a world made with opts, in both
// kinds of world (see bothWorlds); a run of body checks perRun cases on
// each rank.
func inBothWorlds(t *testing.T, name string, opts irisrt.Options, perRun int, body func(r *irisrt.Rank) error) {
	cases := countCases(t)
	bothWorlds(t, name, func(t *testing.T, n int) {
		w, err := irisrt.NewLocalWorld(n, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.Run(body); err != nil {
			t.Fatal(err)
		}
		cases.add(perRun)
	}, func(t *testing.T) {
		r, err := irisrt.JoinProcessWorld(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := body(r); err != nil {
			t.Fatal(err)
		}
		cases.add(perRun)
	})
}

// catalogueCase is the suite's row of a variant.
func catalogueCase(coll, variant string) *variantCase {
	// every variant: a lookup by name
	for i := range catalogue {
		if vc := &catalogue[i]; vc.coll == coll && vc.variant == variant {
			return vc
		}
	}
	panic("no catalogue row " + coll + "/" + variant)
}

// TestFaultTimeoutRecovery: a device barrier times out (no peer joins it),
// the fault is sticky and reported everywhere, the world closes cleanly,
// and a new world in the same process runs every all_reduce variant
// correctly.
func TestFaultTimeoutRecovery(t *testing.T) {
	cases := countCases(t)
	bothWorlds(t, "TestFaultTimeoutRecovery", func(t *testing.T, n int) {
		w, err := irisrt.NewLocalWorld(n, faultOpts())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Run(timeoutRank); err != nil {
			w.Close()
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("closing the failed world: %v", err)
		}
		if w, err = irisrt.NewLocalWorld(n, faultOpts()); err != nil {
			t.Fatalf("a new world after the fault: %v", err)
		}
		defer w.Close()
		if err := w.Run(correctAllReduce); err != nil {
			t.Fatal(err)
		}
		cases.add(1)
	}, func(t *testing.T) {
		r, err := irisrt.JoinProcessWorld(faultOpts())
		if err != nil {
			t.Fatal(err)
		}
		if err := timeoutRank(r); err != nil {
			r.Close()
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("closing the failed world: %v", err)
		}
		if r, err = irisrt.JoinProcessWorld(faultOpts()); err != nil {
			t.Fatalf("a new world after the fault: %v", err)
		}
		defer r.Close()
		if err := correctAllReduce(r); err != nil {
			t.Fatal(err)
		}
		cases.add(1)
	})
}

// timeoutRank: only rank 0 launches device barriers, 1 + 50 back to back,
// which no peer joins. The first times out within the limit and the others
// give up at once (the header's spin sees the world fault) instead of
// waiting the limit each. The fault is then sticky: a launch and Check
// return it, and the host barrier reports it on rank 0 and names rank 0 on
// the others.
func timeoutRank(r *irisrt.Rank) error {
	p, err := newBarrier(r)
	if err != nil {
		return err
	}
	defer p.Close()
	s := r.Stream()
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if r.Rank() == 0 {
		start := time.Now()
		launched := 0
		for ; launched < 51; launched++ {
			if err := p.Launch(s, irismodel.BarrierDevice); err != nil {
				if !errors.Is(err, irisrt.ErrBarrierTimeout) {
					return err
				}
				break // the first kernel has timed out already
			}
		}
		err := syncCheck(r, s)
		took := time.Since(start)
		var te *irisrt.BarrierTimeoutError
		if !errors.As(err, &te) || te.Rank != 0 || te.Peer == 0 {
			return fmt.Errorf("rank 0: got %v, want a *BarrierTimeoutError of rank 0 naming a peer", err)
		}
		if took > 2*faultLimit+5*time.Second {
			return fmt.Errorf("%d barriers took %v to fail with a %v limit: every spin after the first timeout must give up at once", launched, took, faultLimit)
		}
		start = time.Now()
		if err := p.Launch(s, irismodel.BarrierDevice); !errors.Is(err, irisrt.ErrBarrierTimeout) {
			return fmt.Errorf("a launch after the fault: got %v, want the sticky timeout", err)
		}
		if err := r.Check(); !errors.Is(err, irisrt.ErrBarrierTimeout) {
			return fmt.Errorf("Check after the fault: got %v, want the sticky timeout", err)
		}
		fmt.Printf("rank 0: %d barriers failed in %v: %v\n", launched, took, te)
	}
	err = r.HostBarrier(s)
	want := irisrt.ErrWorld
	if r.Rank() == 0 {
		want = irisrt.ErrBarrierTimeout
	}
	if !errors.Is(err, want) {
		return fmt.Errorf("rank %d: host barrier after the fault: got %v, want %v", r.Rank(), err, want)
	}
	return nil
}

// correctAllReduce checks every all_reduce variant (bf16 sum, 4099
// elements, every barrier mode).
func correctAllReduce(r *irisrt.Rank) error {
	// every variant: all_reduce's, as the fault tests choose
	for i := range catalogue {
		vc := &catalogue[i]
		if vc.coll != "all_reduce" {
			continue
		}
		if err := checkCase(r, vc, irismodel.BF16, "sum", 4096+3, placement{true, true}, allModes); err != nil {
			return fmt.Errorf("%s in the new world: %w", vc.name(), err)
		}
	}
	return nil
}

// TestFaultKilledRank: in the multi-process world, rank 1 kills itself
// with SIGKILL while every rank has all_reduce launches in flight; every
// other rank must get an error within the time limit and exit non-zero.
// The ranks are started directly (irisgen run would stop the others as
// soon as rank 1 dies, which is not what is tested here).
func TestFaultKilledRank(t *testing.T) {
	if os.Getenv("RANK") != "" {
		killedRank(t)
		return
	}
	cases := countCases(t)
	for _, n := range worldSizes(t) {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			killRankWorld(t, n)
			if !t.Failed() {
				cases.add(1)
			}
		})
	}
}

// killRankWorld starts n ranks of TestFaultKilledRank and checks how they end.
func killRankWorld(t *testing.T, n int) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	type end struct {
		err error
		at  time.Time
	}
	outs, cmds := make([]bytes.Buffer, n), make([]*exec.Cmd, n)
	ends := make(chan struct{}, n)
	res := make([]end, n)
	var mu sync.Mutex
	for k := 0; k < n; k++ {
		c := exec.Command(os.Args[0], "-test.run", "^TestFaultKilledRank$", "-test.v", "-test.count=1")
		c.Env = append(os.Environ(), "RANK="+strconv.Itoa(k), "WORLD_SIZE="+strconv.Itoa(n), "LOCAL_RANK="+strconv.Itoa(k),
			"LOCAL_WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
		c.Stdout, c.Stderr = &outs[k], &outs[k]
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[k] = c
		defer syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		go func() {
			err := c.Wait()
			mu.Lock()
			res[k] = end{err, time.Now()}
			mu.Unlock()
			ends <- struct{}{}
		}()
	}
	deadline := time.After(3 * time.Minute)
	for range n {
		select {
		case <-ends:
		case <-deadline:
			for k := range cmds {
				t.Logf("rank %d output:\n%s", k, outs[k].String())
			}
			t.Fatal("the ranks did not all end within 3 minutes")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var ee *exec.ExitError
	if !errors.As(res[1].err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("rank 1: %v, want killed by SIGKILL\n%s", res[1].err, outs[1].String())
	}
	for k := 0; k < n; k++ {
		if k == 1 {
			continue
		}
		out := outs[k].String()
		line := ""
		if i := strings.Index(out, "RESULT "); i >= 0 {
			line, _, _ = strings.Cut(out[i:], "\n")
		}
		switch {
		case !errors.As(res[k].err, &ee) || ee.Sys().(syscall.WaitStatus).Signaled() || ee.ExitCode() == 0:
			t.Errorf("rank %d: %v, want a non-zero exit of its own\n%s", k, res[k].err, out)
		case line == "" || strings.Contains(line, "<nil>") || strings.Contains(line, "too slow"):
			t.Errorf("rank %d: %q, want an error within the limit\n%s", k, line, out)
		case res[k].at.Sub(res[1].at) > 2*faultLimit+30*time.Second:
			t.Errorf("rank %d ended %v after rank 1 died", k, res[k].at.Sub(res[1].at))
		default:
			t.Logf("rank %d: %s; exit %d, %v after rank 1 died", k, line, ee.ExitCode(), res[k].at.Sub(res[1].at).Round(time.Millisecond))
		}
	}
}

// killedRank is one rank of TestFaultKilledRank: 2000 one_shot all_reduce
// launches back to back; rank 1 dies after 20.
func killedRank(t *testing.T) {
	r, err := irisrt.JoinProcessWorld(faultOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	vc := catalogueCase("all_reduce", "one_shot")
	const n = 1 << 16
	p, err := vc.newPlan(r, irismodel.BF16, "sum", n)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in, _, err := tensor(r, irismodel.BF16, n, true)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := tensor(r, irismodel.BF16, n, true)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Stream()
	if err := r.HostBarrier(s); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < 2000; i++ {
		if r.Rank() == 1 && i == 20 {
			fmt.Println("rank 1: killing itself with 20 launches in flight")
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Hour)
		}
		if err := p.Launch(s, in, out, irismodel.BarrierDevice); err != nil {
			break // refused: the first timeout is in
		}
	}
	err = syncCheck(r, s)
	took := time.Since(start)
	slow := ""
	if took > 2*faultLimit+10*time.Second {
		slow = " (too slow)"
	}
	fmt.Printf("RESULT rank %d: %v after %v%s\n", r.Rank(), err, took.Round(time.Millisecond), slow)
	if err == nil {
		t.Fatalf("rank %d: no error although rank 1 was killed", r.Rank())
	}
	t.Fatalf("rank %d failed as it should: %v", r.Rank(), err) // the non-zero exit the parent expects
}

// TestFaultReplay: faults raised under graph replay come back from
// Graph.Replay. A bad MoE expert id fails that replay on its rank only,
// and the next replays are correct; a barrier replayed by rank 0 alone
// times out, and the next replay is refused at once.
func TestFaultReplay(t *testing.T) {
	inBothWorlds(t, "TestFaultReplay", faultOpts(), 4, replayFaultRank) // three MoE replays, the barrier's
}

func replayFaultRank(r *irisrt.Rank) error {
	w, me, s := r.World(), r.Rank(), r.Stream()
	c := moeCase{t: 64, h: 128, k: 2, e: 4 * int64(w), routing: "random", dt: irismodel.BF16}
	g, err := newMoeRig(r, c)
	if err != nil {
		return err
	}
	defer g.close()
	graph, err := r.Capture(s, func() error { return g.launch(r, s, irismodel.BarrierDevice) })
	if err != nil {
		return err
	}
	defer graph.Destroy()
	for round := uint64(0); round < 3; round++ {
		all := make([]moeInput, w)
		for src := range all {
			all[src] = moeInputs(c, w, src, 500+round)
		}
		bad := round == 1
		if bad {
			all[1].ids[5] = c.e + 3
		}
		if err := g.upload(r, all[me]); err != nil {
			return err
		}
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		err := graph.Replay(s)
		var de *irisrt.DeviceFaultError
		switch {
		case bad && me == 1:
			if !errors.As(err, &de) || de.World || de.Info != uint64(c.e+3) {
				return fmt.Errorf("rank 1: replay with a bad expert id: got %v, want its call fault naming expert %d", err, c.e+3)
			}
		case err != nil:
			return fmt.Errorf("replay %d: %w", round, err)
		case !bad:
			if err := g.check(r, all); err != nil {
				return fmt.Errorf("replay %d: %w", round, err)
			}
		}
		if err := r.HostBarrier(s); err != nil {
			return fmt.Errorf("after replay %d: %w", round, err)
		}
	}
	b, err := newBarrier(r)
	if err != nil {
		return err
	}
	defer b.Close()
	bg, err := r.Capture(s, func() error { return b.Launch(s, irismodel.BarrierDevice) })
	if err != nil {
		return err
	}
	defer bg.Destroy()
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if me == 0 {
		start := time.Now()
		if err := bg.Replay(s); !errors.Is(err, irisrt.ErrBarrierTimeout) {
			return fmt.Errorf("a barrier replayed by rank 0 alone: got %v, want a timeout", err)
		}
		if took := time.Since(start); took > 2*faultLimit+5*time.Second {
			return fmt.Errorf("the replay took %v to time out with a %v limit", took, faultLimit)
		}
		for _, gr := range []*irisrt.Graph{bg, graph} {
			if err := gr.Launch(s); !errors.Is(err, irisrt.ErrBarrierTimeout) {
				return fmt.Errorf("a replay after the fault: got %v, want the sticky timeout", err)
			}
		}
	}
	want := irisrt.ErrWorld
	if me == 0 {
		want = irisrt.ErrBarrierTimeout
	}
	if err := r.HostBarrier(s); !errors.Is(err, want) {
		return fmt.Errorf("rank %d: host barrier after the fault: got %v, want %v", me, err, want)
	}
	return nil
}

// TestGraphUseGuard: while a graph captured through Rank.Capture lives,
// its plan cannot be closed nor its heap tensors freed (*InUseError, on
// every rank), the graph still replays correctly, and after Destroy all of
// it can be closed and freed.
func TestGraphUseGuard(t *testing.T) {
	inBothWorlds(t, "TestGraphUseGuard", faultOpts(), 1, guardRank)
}

func guardRank(r *irisrt.Rank) error {
	const n = 4096 + 3
	vc := catalogueCase("all_gather", "push")
	w, me, s, h := r.World(), r.Rank(), r.Stream(), r.Heap()
	p, err := vc.newPlan(r, irismodel.BF16, "", n)
	if err != nil {
		return err
	}
	in, err := h.Alloc(irismodel.BF16, n)
	if err != nil {
		return err
	}
	out, err := h.Alloc(irismodel.BF16, int64(w)*n)
	if err != nil {
		return err
	}
	all := inputs(irismodel.BF16, n, 0x6a4d, 0)
	if err := upload(r, in, encode(irismodel.BF16, all(me))); err != nil {
		return err
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	graph, err := r.Capture(s, func() error { return p.Launch(s, in, out, irismodel.BarrierDevice) })
	if err != nil {
		return err
	}
	for what, err := range map[string]error{"closing the plan": p.Close(), "freeing the input": h.Free(in), "freeing the output": h.Free(out)} {
		if !errors.Is(err, irisrt.ErrInUse) {
			return fmt.Errorf("%s while a graph uses it: got %v, want an *irisrt.InUseError", what, err)
		}
	}
	if err := graph.Replay(s); err != nil {
		return err
	}
	b, err := download(r, out)
	if err != nil {
		return err
	}
	if err := vc.checkResult(decode(irismodel.BF16, b), irismodel.BF16, "", w, me, n, all); err != nil {
		return fmt.Errorf("replay after the refusals: %w", err)
	}
	if err := r.HostBarrier(s); err != nil {
		return err
	}
	if err := graph.Destroy(); err != nil {
		return err
	}
	return errors.Join(p.Close(), h.Free(in), h.Free(out), r.HostBarrier(s))
}

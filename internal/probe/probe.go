// Package probe proves graph capture on real GPUs: for every variant and
// barrier mode of any generated package (irisgen's catalogue, or a
// downstream repository's) it captures a launch, checks that the stream
// really was capturing, and replays the graph with fresh input between
// replays, comparing each replay with an eager launch on the same input. A
// mode the generator derived as capturable must pass; one derived as not
// capturable must be refused with a *irisrt.CaptureError. A collective
// with launch parameters is probed twice: a graph replays the parameters
// it captured, so one capture with the first values (root 0, say) must
// replay their results, and a second capture with other values (root 1)
// theirs; the ranks that do not use a tensor pass the zero Tensor for it.
// Everything it does to a variant comes from its table; what a comparison
// with an eager launch cannot check is a scenario (scenarios: MoE dispatch
// and combine as a pair against a CPU reference). The ranks stay in step
// through every failure (step.go).
package probe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Result is one line of the probe's table.
type Result struct {
	Collective, Variant string
	Mode                irismodel.Barrier
	Params              string // the launch parameters captured, e.g. "root=1"; "" for none
	Claimed             bool   // the generator's derived claim
	Captured            bool   // the launch was captured into a graph
	Replays             int    // replays validated
	Reason              string
	Failed              bool // the claim did not hold
}

// Config says what to probe.
type Config struct {
	// Entries are the variants to probe: the catalogue of one or more
	// generated packages (irisimpl.Table.Entries).
	Entries     []irisimpl.Entry
	N           int64 // elements of the last size parameter
	Replays     int
	Collectives []string // empty: all
}

// Options are the world options the probe uses.
func Options() irisrt.Options { return irisrt.Options{Timeout: 20 * time.Second} }

// Run probes every selected variant and mode in the in-process world w
// (captures in relaxed mode). It stops early, with the results so far and
// an error wrapping ErrOutOfStep, when its ranks cannot be kept in step.
func Run(w *irisrt.World, cfg Config) ([]Result, error) {
	steppers := make([]*stepper, w.Size())
	for i := range steppers {
		steppers[i] = &stepper{r: w.Rank(i)}
	}
	var out []Result
	for _, c := range cases(cfg, w.Size()) {
		res := make([]Result, w.Size())
		err := w.Run(func(r *irisrt.Rank) error {
			var err error
			res[r.Rank()], err = probe(steppers[r.Rank()], c, cfg)
			return err
		})
		if err != nil {
			return out, stopped(c, err)
		}
		out = append(out, merge(res))
	}
	return out, nil
}

// RunRank probes every selected variant and mode as rank r of a
// multi-process world (irisrt.JoinProcessWorld, captures in global mode):
// every rank of the world calls it with the same cfg, and every rank gets
// the same results, merged like Run's (the worst rank's). It stops early
// like Run.
func RunRank(r *irisrt.Rank, cfg Config) ([]Result, error) {
	st := &stepper{r: r}
	var out []Result
	for _, c := range cases(cfg, r.World()) {
		res, err := probe(st, c, cfg)
		if err == nil {
			res, err = st.shareResult(res)
		}
		if err != nil {
			return out, stopped(c, err)
		}
		out = append(out, res)
	}
	return out, nil
}

// stopped says where the probe stopped.
func stopped(c probeCase, err error) error {
	return fmt.Errorf("probe stopped at %s %s %s%s: %w", c.e.Collective, c.e.Variant, c.mode, map[bool]string{true: " " + paramText(c.e, c.params)}[len(c.params) > 0], err)
}

type probeCase struct {
	e      irisimpl.Entry
	mode   irismodel.Barrier
	params []irismodel.Param
	// scenario, when set, probes the case instead of the comparison with
	// an eager launch.
	scenario *scenario
}

// cases lists the selected variants and modes in table order, a variant
// with parameters once for each of paramSets.
func cases(cfg Config, world int) []probeCase {
	var out []probeCase
	scs := applicable(cfg.Entries)
	for _, e := range cfg.Entries {
		if len(cfg.Collectives) > 0 && !slices.Contains(cfg.Collectives, e.Collective) {
			continue
		}
		var sc *scenario
		for i := range scs {
			if slices.Contains(scs[i].owns, e.Collective) {
				sc = &scs[i]
			}
		}
		for _, mode := range e.Barriers {
			for _, ps := range paramSets(e, world) {
				out = append(out, probeCase{e, mode, ps, sc})
			}
		}
	}
	return out
}

// paramSets are the two sets of parameter values a variant with
// parameters is captured with (Entry.SampleParams 0 and 1), one empty set
// for a variant without parameters.
func paramSets(e irisimpl.Entry, world int) [][]irismodel.Param {
	if len(e.Params) == 0 {
		return [][]irismodel.Param{nil}
	}
	return [][]irismodel.Param{e.SampleParams(world, 0), e.SampleParams(world, 1)}
}

// paramText names the values of ps, e.g. "src=0 dst=1".
func paramText(e irisimpl.Entry, ps []irismodel.Param) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = e.Params[i].Name + "=" + p.String()
	}
	return strings.Join(parts, " ")
}

// merge keeps the worst rank's result.
func merge(rs []Result) Result {
	m := rs[0]
	for _, r := range rs[1:] {
		if r.Failed && !m.Failed {
			m = r
		}
		m.Replays = min(m.Replays, r.Replays)
	}
	return m
}

// verdict turns the outcome of a step (agree's answer) into the case's
// end: done is false when the case goes on. A rank that did fine leaves
// the case as it stands when a peer failed; a fatal error stops the probe.
func verdict(res Result, err error, format string, a ...any) (_ Result, done bool, fatal error) {
	var fe *fatalError
	switch {
	case err == nil:
		return res, false, nil
	case errors.As(err, &fe):
		res.Failed, res.Reason = true, fmt.Sprintf(format, a...)+": "+err.Error()
		return res, true, err
	case errors.Is(err, errPeerFailed):
		return res, true, nil
	}
	res.Failed, res.Reason = true, fmt.Sprintf(format, a...)+": "+err.Error()
	return res, true, nil
}

// agreeCapture ends the capture step (capture's answer res, ok): the
// ranks agree on whether any failed; done when the case ends there (a
// failure anywhere, or the refusal the generator derived).
func agreeCapture(st *stepper, res Result, ok bool) (_ Result, done bool, fatal error) {
	var failed error
	if res.Failed {
		failed = errors.New(res.Reason)
	}
	out, done, fatal := verdict(res, st.agree(failed), "capture")
	if res.Failed {
		out = res // the reason as capture gave it
	}
	return out, done || !ok, fatal
}

// probe probes one case on one rank. Every rank leaves it at the same
// step; an error says the probe cannot go on.
func probe(st *stepper, c probeCase, cfg Config) (Result, error) {
	r, e, mode, ps := st.r, c.e, c.mode, c.params
	res := Result{Collective: e.Collective, Variant: e.Variant, Mode: mode, Params: paramText(e, ps), Claimed: slices.Contains(e.Capturable, mode)}
	dt := irismodel.BF16
	if len(e.DTypes) > 0 && !slices.Contains(e.DTypes, dt) {
		dt = e.DTypes[0]
	}
	if c.scenario != nil {
		return c.scenario.probe(st, res, mode, dt, cfg)
	}
	op := ""
	if len(e.Ops) > 0 {
		op = e.Ops[0]
	}
	sizes := probeSizes(len(e.Sizes), cfg.N)
	var p irisimpl.AnyPlan
	err := st.step(func() (err error) { p, err = e.New(r, dt, op, sizes); return err })
	if res, done, fatal := verdict(res, err, "making the plan"); done {
		if p != nil {
			p.Close()
		}
		return res, fatal
	}
	defer p.Close()
	dev, s := r.Device(), r.Stream()
	var ts []irisrt.Tensor
	var free func()
	err = st.step(func() (err error) { ts, free, err = e.Alloc(r, dt, sizes); return err })
	if free != nil {
		defer free()
	}
	if res, done, fatal := verdict(res, err, "allocating the tensors"); done {
		return res, fatal
	}
	passed := e.TensorsFor(r.Rank(), ts, ps)
	launch := func() error { return p.LaunchParams(s, passed, ps, mode) }
	exec, res, ok := capture(r, res, launch)
	if exec != 0 {
		defer dev.DestroyGraphExec(exec)
	}
	if res, done, fatal := agreeCapture(st, res, ok); done {
		return res, fatal
	}
	rng := rand.New(rand.NewPCG(uint64(r.Rank())+1, 0x5eed))
	for k := 0; k < cfg.Replays; k++ {
		got, want, err := round(st, e, ts, launch, exec, rng)
		if err == nil {
			if i := firstDiff(got, want); i >= 0 {
				err = fmt.Errorf("output byte %d differs from an eager launch on the same input (stale or wrong result)", i)
			}
			err = st.agree(err)
		}
		if res, done, fatal := verdict(res, err, "replay %d", k); done {
			return res, fatal
		}
		res.Replays++
	}
	return res, nil
}

// probeSizes are the values of k size parameters: the last is n, the
// others rowsOf, so that a tensor [tokens, hidden] (all_reduce_rmsnorm's)
// holds a few rows of n elements rather than n^2 elements.
func probeSizes(k int, n int64) []int64 {
	sizes := make([]int64, k)
	for i := range sizes {
		sizes[i] = rowsOf
	}
	if k > 0 {
		sizes[k-1] = n
	}
	return sizes
}

// rowsOf is every size but the last: odd, and below 8, so that at world 8
// a two_shot split by rows leaves a rank without any.
const rowsOf = 7

// capture records launch on r's stream (in the rank's capture mode:
// relaxed in an in-process world, where the other ranks of the process keep
// working meanwhile, global in a process of its own) and checks the result
// against the derived claim. ok is false when res is final: a failure, or a refusal
// that the generator derived (the capture left intact).
func capture(r *irisrt.Rank, res Result, launch func() error) (exec gpu.GraphExec, _ Result, ok bool) {
	fail := func(format string, a ...any) (gpu.GraphExec, Result, bool) {
		res.Failed, res.Reason = true, fmt.Sprintf(format, a...)
		return 0, res, false
	}
	dev, s := r.Device(), r.Stream()
	defer gpu.PinCaptureThread(r.CaptureMode())()
	if err := dev.BeginCapture(s, r.CaptureMode()); err != nil {
		return fail("BeginCapture: %v", err)
	}
	capturing, cerr := r.Capturing(s)
	lerr := launch()
	g, eerr := dev.EndCapture(s)
	if eerr == nil {
		defer dev.DestroyGraph(g)
	}
	var ce *irisrt.CaptureError
	switch {
	case cerr != nil:
		return fail("capture status: %v", cerr)
	case !capturing:
		return fail("the stream was not capturing")
	case errors.As(lerr, &ce) && !res.Claimed:
		res.Reason = ce.What
		if eerr != nil {
			return fail("the refused launch broke the capture: %v", eerr)
		}
		return 0, res, false // refused as derived, the capture intact
	case lerr != nil:
		return fail("launch while capturing: %v", lerr)
	case eerr != nil:
		return fail("EndCapture: %v", eerr)
	case !res.Claimed:
		return fail("captured although the generator derived it as not capturable")
	}
	res.Captured = true
	exec, err := dev.Instantiate(g)
	if err != nil {
		return fail("instantiating the graph: %v", err)
	}
	return exec, res, true
}

// round writes fresh input, launches eagerly and keeps the output, poisons
// the output, writes the same input again, replays the graph and returns
// both outputs, the ranks agreeing after every step. Inputs are multiples
// of 1/8 in [-1, 1], so every sum is exact in every dtype and any order:
// equal outputs are required.
func round(st *stepper, e irisimpl.Entry, ts []irisrt.Tensor, launch func() error,
	exec gpu.GraphExec, rng *rand.Rand) (got, want []byte, err error) {
	r := st.r
	s := r.Stream()
	inputs := map[int][]byte{}
	for i, ti := range e.Tensors {
		if ti.Dir != "out" {
			inputs[i] = eighths(ts[i].DType, ts[i].Len, rng)
		}
	}
	write := func() error {
		for i, b := range inputs {
			if err := put(r, ts[i], b); err != nil {
				return err
			}
		}
		for i, ti := range e.Tensors { // poison the outputs
			if ti.Dir != "in" {
				if err := r.Device().MemsetD8Async(ts[i].Ptr, 0xA5, ts[i].Bytes(), s); err != nil {
					return err
				}
			}
		}
		return nil
	}
	outputs := func() (all []byte, err error) {
		for i, ti := range e.Tensors {
			if ti.Dir == "in" {
				continue
			}
			b, err := get(r, ts[i])
			if err != nil {
				return nil, err
			}
			all = append(all, b...)
		}
		return all, nil
	}
	barrier := func() error { return r.HostBarrier(s) } // every rank's inputs written (mode none needs it), error record read
	run := func(launch func() error) (out []byte, err error) {
		for _, f := range []func() error{write, barrier, launch, barrier, func() error { out, err = outputs(); return err }} {
			if err := st.step(f); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	if want, err = run(launch); err != nil {
		return nil, nil, wrapStep("eager launch", err)
	}
	if got, err = run(func() error { return r.Device().LaunchGraph(exec, s) }); err != nil {
		return nil, nil, wrapStep("graph replay", err)
	}
	return got, want, nil
}

// wrapStep names the step an error of agree came from, keeping its kind.
func wrapStep(what string, err error) error {
	if errors.Is(err, errPeerFailed) {
		return err
	}
	var fe *fatalError
	if errors.As(err, &fe) {
		return &fatalError{fmt.Errorf("%s: %w", what, fe.err)}
	}
	return fmt.Errorf("%s: %w", what, err)
}

func put(r *irisrt.Rank, t irisrt.Tensor, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return r.Device().CopyHtoD(t.Ptr, unsafe.Pointer(&b[0]), int64(len(b)))
}

func get(r *irisrt.Rank, t irisrt.Tensor) ([]byte, error) {
	b := make([]byte, t.Bytes())
	if len(b) == 0 {
		return b, nil
	}
	return b, r.Device().CopyDtoH(unsafe.Pointer(&b[0]), t.Ptr, t.Bytes())
}

// eighths returns n random multiples of 1/8 in [-1, 1] encoded as dt.
func eighths(dt irismodel.DType, n int64, rng *rand.Rand) []byte {
	b := make([]byte, n*dt.Size())
	for i := int64(0); i < n; i++ {
		f := float32(rng.IntN(17)-8) / 8
		bits := math.Float32bits(f)
		switch dt {
		case irismodel.F32:
			binary.LittleEndian.PutUint32(b[i*4:], bits)
		case irismodel.BF16:
			binary.LittleEndian.PutUint16(b[i*2:], uint16(bits>>16))
		case irismodel.F16:
			binary.LittleEndian.PutUint16(b[i*2:], irismodel.F32ToF16(f)) // exact: multiples of 1/8
		default: // index types: small non-negative integers (b is zeroed)
			b[i*dt.Size()] = byte(rng.IntN(4))
		}
	}
	return b
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Package probe proves graph capture on real GPUs: for every variant and
// barrier mode of the generated catalogue it captures a launch, checks that
// the stream really was capturing, and replays the graph with fresh input
// between replays, comparing each replay with an eager launch on the same
// input (moe_dispatch and moe_combine: as a pair against a CPU reference,
// see probeMoE). A mode the generator derived as capturable must pass; one
// derived as not capturable must be refused with a *irisrt.CaptureError.
// A collective with launch parameters is probed twice: a graph replays
// the parameters it captured, so one capture with the first values (root
// 0, say) must replay their results, and a second capture with other
// values (root 1) theirs; the ranks that do not use a tensor pass the zero
// Tensor for it.
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

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// Result is one line of the probe's table.
type Result struct {
	Collective, Variant string
	Mode                irisrt.Barrier
	Params              string // the launch parameters captured, e.g. "root=1"; "" for none
	Claimed             bool   // the generator's derived claim
	Captured            bool   // the launch was captured into a graph
	Replays             int    // replays validated
	Reason              string
	Failed              bool // the claim did not hold
}

// Config says what to probe.
type Config struct {
	World       int
	N           int64 // elements per size parameter
	Replays     int
	Collectives []string // empty: all
}

// Options are the world options the probe uses.
func Options() irisrt.Options { return irisrt.Options{Timeout: 20 * time.Second} }

// Run probes every selected variant and mode in an in-process world of
// cfg.World GPUs (captures in relaxed mode).
func Run(cfg Config) ([]Result, error) {
	w, err := irisrt.NewLocalWorld(cfg.World, Options())
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var out []Result
	for _, c := range cases(cfg, w.Size()) {
		res := make([]Result, w.Size())
		err := w.Run(func(r *irisrt.Rank) error {
			res[r.Rank()] = probe(r, c, cfg)
			return nil
		})
		if err != nil {
			return out, err
		}
		out = append(out, merge(res))
	}
	return out, nil
}

// RunRank probes every selected variant and mode as rank r of a
// multi-process world (irisrt.JoinProcessWorld, captures in global mode):
// every rank of the world calls it with the same cfg (cfg.World is
// ignored), and every rank gets the same results, merged like Run's (the
// worst rank's).
func RunRank(r *irisrt.Rank, cfg Config) ([]Result, error) {
	var out []Result
	for _, c := range cases(cfg, r.World()) {
		res, err := shareResult(r, probe(r, c, cfg))
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	return out, nil
}

// shareResult merges one case's result over the ranks of r's world.
func shareResult(r *irisrt.Rank, res Result) (Result, error) {
	msg := []byte{0, 0}
	if res.Failed {
		msg[0] = 1
	}
	if res.Captured {
		msg[1] = 1
	}
	msg = binary.LittleEndian.AppendUint32(msg, uint32(res.Replays))
	parts, err := r.Group().AllGather(append(msg, res.Reason...))
	if err != nil {
		return res, err
	}
	all := make([]Result, len(parts))
	for i, b := range parts {
		if len(b) < 6 {
			return res, fmt.Errorf("probe: rank %d sent a malformed result", i)
		}
		all[i] = res
		all[i].Failed, all[i].Captured = b[0] == 1, b[1] == 1
		all[i].Replays, all[i].Reason = int(binary.LittleEndian.Uint32(b[2:])), string(b[6:])
	}
	return merge(all), nil
}

type probeCase struct {
	e      collectives.Entry
	mode   irisrt.Barrier
	params []irisrt.Param
}

// cases lists the selected variants and modes in catalogue order, a
// variant with parameters once for each of paramSets.
func cases(cfg Config, world int) []probeCase {
	var out []probeCase
	for _, e := range collectives.Catalogue {
		if len(cfg.Collectives) > 0 && !slices.Contains(cfg.Collectives, e.Collective) {
			continue
		}
		for _, mode := range e.Barriers {
			for _, ps := range paramSets(e, world) {
				out = append(out, probeCase{e, mode, ps})
			}
		}
	}
	return out
}

// paramSets are the two sets of parameter values a variant with
// parameters is captured with (Entry.SampleParams 0 and 1), one empty set
// for a variant without parameters.
func paramSets(e collectives.Entry, world int) [][]irisrt.Param {
	if len(e.Params) == 0 {
		return [][]irisrt.Param{nil}
	}
	return [][]irisrt.Param{e.SampleParams(world, 0), e.SampleParams(world, 1)}
}

// paramText names the values of ps, e.g. "src=0 dst=1".
func paramText(e collectives.Entry, ps []irisrt.Param) string {
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

func probe(r *irisrt.Rank, c probeCase, cfg Config) Result {
	e, mode, ps := c.e, c.mode, c.params
	res := Result{Collective: e.Collective, Variant: e.Variant, Mode: mode, Params: paramText(e, ps), Claimed: slices.Contains(e.Capturable, mode)}
	fail := func(format string, a ...any) Result {
		res.Failed, res.Reason = true, fmt.Sprintf(format, a...)
		return res
	}
	dt := irisrt.BF16
	if len(e.DTypes) > 0 && !slices.Contains(e.DTypes, dt) {
		dt = e.DTypes[0]
	}
	if e.Collective == "moe_dispatch" || e.Collective == "moe_combine" {
		return probeMoE(r, res, mode, dt, cfg)
	}
	op := ""
	if len(e.Ops) > 0 {
		op = e.Ops[0]
	}
	p, err := e.New(r, dt, op, probeSizes(len(e.Sizes), cfg.N))
	if err != nil {
		return fail("making the plan: %v", err)
	}
	defer p.Close()
	dev, s := r.Device(), r.Stream()
	ts, free, err := e.Alloc(r, dt, probeSizes(len(e.Sizes), cfg.N))
	if err != nil {
		return fail("%v", err)
	}
	defer free()
	passed := e.TensorsFor(r.Rank(), ts, ps)
	launch := func() error { return p.LaunchParams(s, passed, ps, mode) }
	exec, res, ok := capture(r, res, launch)
	if !ok {
		return res
	}
	defer dev.DestroyGraphExec(exec)
	rng := rand.New(rand.NewPCG(uint64(r.Rank())+1, 0x5eed))
	for k := 0; k < cfg.Replays; k++ {
		got, want, err := round(r, e, ts, launch, exec, rng)
		if err != nil {
			return fail("replay %d: %v", k, err)
		}
		if i := firstDiff(got, want); i >= 0 {
			return fail("replay %d: output byte %d differs from an eager launch on the same input (stale or wrong result)", k, i)
		}
		res.Replays++
	}
	return res
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
// both outputs. Inputs are multiples of 1/8 in [-1, 1], so every sum is
// exact in every dtype and any order: equal outputs are required.
func round(r *irisrt.Rank, e collectives.Entry, ts []irisrt.Tensor, launch func() error,
	exec gpu.GraphExec, rng *rand.Rand) (got, want []byte, err error) {
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
		return nil
	}
	outputs := func() ([]byte, error) {
		var all []byte
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
	poison := func() error {
		for i, ti := range e.Tensors {
			if ti.Dir != "in" {
				if err := r.Device().MemsetD8Async(ts[i].Ptr, 0xA5, ts[i].Bytes(), s); err != nil {
					return err
				}
			}
		}
		return nil
	}
	step := func(launch func() error) ([]byte, error) {
		if err := write(); err != nil {
			return nil, err
		}
		if err := poison(); err != nil {
			return nil, err
		}
		if err := r.HostBarrier(s); err != nil { // every rank's inputs written (mode none needs it), error record read
			return nil, err
		}
		if err := launch(); err != nil {
			return nil, err
		}
		if err := r.HostBarrier(s); err != nil { // the call done everywhere, error record read
			return nil, err
		}
		return outputs()
	}
	if want, err = step(launch); err != nil {
		return nil, nil, fmt.Errorf("eager launch: %w", err)
	}
	if got, err = step(func() error { return r.Device().LaunchGraph(exec, s) }); err != nil {
		return nil, nil, fmt.Errorf("graph replay: %w", err)
	}
	return got, want, nil
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
func eighths(dt irisrt.DType, n int64, rng *rand.Rand) []byte {
	b := make([]byte, n*dt.Size())
	for i := int64(0); i < n; i++ {
		f := float32(rng.IntN(17)-8) / 8
		bits := math.Float32bits(f)
		switch dt {
		case irisrt.F32:
			binary.LittleEndian.PutUint32(b[i*4:], bits)
		case irisrt.BF16:
			binary.LittleEndian.PutUint16(b[i*2:], uint16(bits>>16))
		case irisrt.F16:
			binary.LittleEndian.PutUint16(b[i*2:], irisrt.F32ToF16(f)) // exact: multiples of 1/8
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

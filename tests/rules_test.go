package tests

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/internal/probe"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu/fakekernels"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// fakeKernels teaches p a code object for every collective of the
// generated package, with every kernel its variants name and its spec hash,
// served from the returned file system (Options.Kernels).
func fakeKernels(p *fakegpu.Platform) fstest.MapFS {
	fsys, err := fakekernels.For(p, irisimpl.Registered("github.com/irisgen/irisgen/generated/collectives"))
	if err != nil {
		panic(err) // one table: no conflict
	}
	return fsys
}

func fakeWorld(t *testing.T, n int, p gpu.Platform, kernels fs.FS) *irisrt.World {
	t.Helper()
	w, err := irisrt.NewLocalWorld(n, irisrt.Options{Platform: p, Kernels: kernels, HeapBytes: 64 << 20, RendezvousTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// entrySizes are small sizes of e: every size 4, moe_dispatch's capacity
// (last) larger.
func entrySizes(e collectives.Entry) []int64 {
	sizes := make([]int64, len(e.Sizes))
	for i := range sizes {
		sizes[i] = 4
	}
	return sizes
}

// entryParams are e's parameters for a launch: rank parameters 0 (so rank
// 0 owns every tensor only one rank uses), int parameters their least
// value (at least 1), f32 ones 1.
func entryParams(e collectives.Entry) []irismodel.Param {
	ps := make([]irismodel.Param, len(e.Params))
	for i, d := range e.Params {
		switch d.Kind {
		case irismodel.ParamRank:
			ps[i] = irismodel.IntParam(0)
		case irismodel.ParamInt:
			ps[i] = irismodel.IntParam(min(max(1, d.Min), d.Max))
		default:
			ps[i] = irismodel.F32Param(1)
		}
	}
	return ps
}

// otherDType is a dtype a tensor of ti may not have.
func otherDType(ti collectives.TensorInfo, dt irismodel.DType) irismodel.DType {
	for _, d := range []irismodel.DType{irismodel.F16, irismodel.U64, irismodel.F32} {
		if d != ti.ElemType(dt) && !slices.Contains(ti.Index, d) {
			return d
		}
	}
	panic("no other dtype")
}

// TestGeneratedRules runs every variant of the generated catalogue on the
// fake platform and enumerates its launch rules as the table gives them:
// the kernel it names, each parameter out of range, a wrong dtype, length
// or nil pointer for each tensor, each tensor peers write off the heap,
// each imported tensor off the heap (staged, refused in mode none), each
// aliased pair, each unsupported mode and each mode that cannot be
// captured. Every refusal launches nothing. A tensor only one rank uses
// (rank 0, the parameters' rank) is refused on rank 0 and ignored on rank
// 1, whose kernel gets a null pointer for it.
func TestGeneratedRules(t *testing.T) {
	p := fakegpu.New(2)
	w := fakeWorld(t, 2, p, fakeKernels(p))
	cases := 0
	for _, e := range collectives.Catalogue {
		if e.Descriptor().Engine == irismodel.EngineCopy {
			continue // no kernel to name: TestCopyVariantsOnFake checks their launches
		}
		t.Run(e.Collective+"/"+e.Variant, func(t *testing.T) {
			err := w.Run(func(r *irisrt.Rank) error {
				n, err := checkEntry(r, p, e)
				if r.Rank() == 0 {
					cases += n
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Logf("%d refusals and launches checked on each rank", cases)
}

func checkEntry(r *irisrt.Rank, fake *fakegpu.Platform, e collectives.Entry) (int, error) {
	dt, op := irismodel.DType(0), ""
	if len(e.DTypes) > 0 {
		dt = e.DTypes[len(e.DTypes)-1]
	}
	if len(e.Ops) > 0 {
		op = e.Ops[0]
	}
	sizes := entrySizes(e)
	p, err := e.New(r, dt, op, sizes)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	ts, free, err := e.Alloc(r, dt, sizes)
	if err != nil {
		return 0, err
	}
	defer free()
	s := r.Stream()
	v := e.Descriptor()
	ps := entryParams(e)
	count := 0
	// launched counts this rank's launches (the other rank may launch
	// meanwhile: where it does not use a tensor, its launches go ahead).
	launched := func() int {
		n := 0
		for _, l := range fake.Launches() {
			if l.Device == r.Device().Ordinal() {
				n++
			}
		}
		return n
	}
	mine := func(ti collectives.TensorInfo) bool { return ti.Owner == "" || r.Rank() == 0 }
	// launchedArgs are the arguments of this rank's first launch since before.
	launchedArgs := func(what string, before int) ([]byte, error) {
		seen := 0
		for _, l := range fake.Launches() {
			if l.Device != r.Device().Ordinal() {
				continue
			}
			if seen++; seen > before {
				if want := v.Kernel(dt, op); l.Function != want {
					return nil, fmt.Errorf("%s launched %s, want %s", what, l.Function, want)
				}
				return l.Args, nil
			}
		}
		return nil, fmt.Errorf("%s: nothing launched", what)
	}
	// refusedWith checks that a launch with ts2 and ps2 in mode fails with
	// target's type and launches nothing.
	refusedWith := func(what string, ts2 []irisrt.Tensor, ps2 []irismodel.Param, mode irismodel.Barrier, target any) error {
		count++
		before := launched()
		err := p.LaunchParams(s, ts2, ps2, mode)
		if err == nil || !errors.As(err, target) {
			return fmt.Errorf("%s: got %v, want %T", what, err, target)
		}
		if launched() != before {
			return fmt.Errorf("%s: refused, but launched", what)
		}
		return nil
	}
	refused := func(what string, ts2 []irisrt.Tensor, mode irismodel.Barrier, target any) error {
		return refusedWith(what, ts2, ps, mode, target)
	}
	// ignored checks, on a rank that does not use tensor i, that the launch
	// goes ahead and the kernel gets a null pointer for it.
	ignored := func(what string, i int, ts2 []irisrt.Tensor) error {
		count++
		before := launched()
		if err := p.LaunchParams(s, ts2, ps, e.Barriers[0]); err != nil {
			return fmt.Errorf("%s, on a rank that does not use it: %w", what, err)
		}
		args, err := launchedArgs(what, before)
		if err == nil && binary.LittleEndian.Uint64(args[irisimpl.CtxBytes+8*i:]) != 0 {
			err = fmt.Errorf("%s: the kernel of a rank that does not use it got a pointer", what)
		}
		return err
	}
	with := func(i int, x irisrt.Tensor) []irisrt.Tensor {
		c := slices.Clone(ts)
		c[i] = x
		return c
	}
	offHeap := func(x irisrt.Tensor) (irisrt.Tensor, func(), error) {
		ptr, err := r.Device().Alloc(max(x.Bytes(), 1), false)
		return irisrt.Tensor{Ptr: ptr, DType: x.DType, Len: x.Len}, func() { r.Device().Free(ptr) }, err
	}

	// Every rank launches the same plan in step: a host barrier before each
	// passing launch keeps the fake's launches of the ranks apart.
	ok := func(what string, ts2 []irisrt.Tensor, mode irismodel.Barrier) ([]byte, error) {
		count++
		if err := r.HostBarrier(s); err != nil {
			return nil, err
		}
		before := launched()
		if err := p.LaunchParams(s, ts2, ps, mode); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := r.HostBarrier(s); err != nil {
			return nil, err
		}
		return launchedArgs(what, before)
	}
	args, err := ok("all on the heap", ts, e.Barriers[0])
	if err != nil {
		return count, err
	}
	// After the tensors, sizes, parameters and index widths, the address
	// slots of every tensor only one rank uses: given where peers touch it.
	slot := irisimpl.CtxBytes + 8*(len(v.Uses)+len(e.Sizes)+len(e.Params))
	for _, ti := range e.Tensors {
		if len(ti.Index) > 0 {
			slot += 8
		}
	}
	for _, ti := range e.Tensors {
		if ti.Owner == "" {
			continue
		}
		if got := binary.LittleEndian.Uint64(args[slot:]); (got != 0) != ti.Remote {
			return count, fmt.Errorf("%s: address slots %#x, but peers touch it: %v", ti.Name, got, ti.Remote)
		}
		slot += 8
	}
	var (
		de *irisrt.DTypeError
		se *irisrt.ShapeError
		pe *irisrt.PlacementError
		ae *irisrt.AliasError
		me *irisrt.BarrierModeError
		ce *irisrt.CaptureError
		pa *irisrt.ParamError
	)
	for i, d := range e.Params {
		var bad []int64
		switch d.Kind {
		case irismodel.ParamRank:
			bad = []int64{-1, int64(r.World())}
		case irismodel.ParamInt:
			if d.Min > math.MinInt64 {
				bad = append(bad, d.Min-1)
			}
			if d.Max < math.MaxInt64 {
				bad = append(bad, d.Max+1)
			}
		}
		for _, x := range bad {
			wrong := slices.Clone(ps)
			wrong[i] = irismodel.IntParam(x)
			if err := refusedWith(fmt.Sprintf("%s = %d", d.Name, x), ts, wrong, e.Barriers[0], &pa); err != nil {
				return count, err
			}
		}
	}
	// refusedTensor: tensor i of another dtype, shorter, nil (or left out
	// where it is optional).
	refusedTensor := func(i int, ti collectives.TensorInfo) error {
		x := ts[i]
		if err := refused(ti.Name+" of another dtype", with(i, irisrt.Tensor{Ptr: x.Ptr, DType: otherDType(ti, dt), Len: x.Len}), e.Barriers[0], &de); err != nil {
			return err
		}
		if err := refused(ti.Name+" shorter", with(i, irisrt.Tensor{Ptr: x.Ptr, DType: x.DType, Len: x.Len - 1}), e.Barriers[0], &se); err != nil {
			return err
		}
		if !ti.Optional {
			return refused(ti.Name+" nil", with(i, irisrt.Tensor{DType: x.DType, Len: x.Len}), e.Barriers[0], &se)
		}
		return nil
	}
	for i, ti := range e.Tensors {
		x := ts[i]
		if !mine(ti) {
			if err := ignored(ti.Name+" of another dtype and length", i, with(i, irisrt.Tensor{Ptr: x.Ptr, DType: otherDType(ti, dt), Len: x.Len + 1})); err != nil {
				return count, err
			}
			if err := ignored(ti.Name+" left out", i, with(i, irisrt.Tensor{})); err != nil {
				return count, err
			}
		}
		if mine(ti) {
			if err := refusedTensor(i, ti); err != nil {
				return count, err
			}
		}
		if ti.Optional {
			if _, err := ok(ti.Name+" left out", with(i, irisrt.Tensor{}), e.Barriers[0]); err != nil {
				return count, err
			}
		}
		if !ti.Remote {
			continue
		}
		off, release, err := offHeap(x)
		if err != nil {
			return count, err
		}
		switch {
		case !mine(ti):
		case ti.Heap:
			err = refused(ti.Name+" off the heap", with(i, off), e.Barriers[0], &pe)
		case slices.Contains(e.Barriers, irismodel.BarrierNone):
			if err = refused(ti.Name+" imported in mode none", with(i, off), irismodel.BarrierNone, &pe); err == nil && !pe.Unordered {
				err = fmt.Errorf("%s imported in mode none: %v is not the unordered placement error", ti.Name, pe)
			}
		}
		if err == nil && !ti.Heap {
			var args []byte
			args, err = ok(ti.Name+" staged", with(i, off), e.Barriers[0])
			// Staged: the kernel gets the plan's staging buffer on the heap,
			// not the tensor off it (0 on a rank that does not use it).
			if err == nil {
				got := gpu.DevicePtr(binary.LittleEndian.Uint64(args[irisimpl.CtxBytes+8*i:]))
				staged := got != off.Ptr && r.Heap().Contains(got, off.Bytes())
				if mine(ti) && !staged || !mine(ti) && got != 0 {
					err = fmt.Errorf("%s staged: the kernel got %#x (the tensor off the heap is at %#x)", ti.Name, got, off.Ptr)
				}
			}
		}
		release()
		if err != nil {
			return count, err
		}
	}
	pos := func(name string) int {
		return slices.IndexFunc(e.Tensors, func(ti collectives.TensorInfo) bool { return ti.Name == name })
	}
	for _, pr := range v.AliasPairs() {
		a, b := pos(pr.A), pos(pr.B)
		if !mine(e.Tensors[a]) || !mine(e.Tensors[b]) {
			continue // checked on the rank that uses both
		}
		// b over a part of a's memory, with b's dtype and length: a
		// tensor long enough for both, on the heap.
		big, err := r.Heap().Alloc(irismodel.U64, (ts[a].Bytes()+ts[b].Bytes())/8+2)
		if err != nil {
			return count, err
		}
		at := irisrt.Tensor{Ptr: big.Ptr, DType: ts[a].DType, Len: ts[a].Len}
		bt := irisrt.Tensor{Ptr: big.Ptr + gpu.DevicePtr(ts[b].DType.Size()), DType: ts[b].DType, Len: ts[b].Len}
		c := with(a, at)
		c[b] = bt
		err = refused(pr.A+" overlapping "+pr.B, c, e.Barriers[0], &ae)
		if err == nil && ae.InPlace != pr.InPlace {
			err = fmt.Errorf("%s/%s overlap: InPlace %v, the pair's rule %v", pr.A, pr.B, ae.InPlace, pr.InPlace)
		}
		r.Heap().Free(big)
		if err != nil {
			return count, err
		}
	}
	for _, mode := range []irismodel.Barrier{irismodel.BarrierDevice, irismodel.BarrierHost, irismodel.BarrierNone} {
		if !slices.Contains(e.Barriers, mode) {
			if err := refused("mode "+mode.String(), ts, mode, &me); err != nil {
				return count, err
			}
			continue
		}
		if slices.Contains(e.Capturable, mode) {
			continue
		}
		if err := r.Device().BeginCapture(s, gpu.CaptureRelaxed); err != nil {
			return count, err
		}
		err := refused("mode "+mode.String()+" while capturing", ts, mode, &ce)
		if _, eerr := r.Device().EndCapture(s); eerr != nil {
			return count, eerr
		}
		if err != nil {
			return count, err
		}
	}
	return count, r.HostBarrier(s)
}

// TestMissingKernelsNameTheCommand: with no code object anywhere (the
// package embeds only its placeholder until `make kernels` has run), a plan
// fails with a *KernelError that says where it looked and names this
// repository's command.
func TestMissingKernelsNameTheCommand(t *testing.T) {
	t.Setenv("IRISGEN_KERNELS", "")
	w := fakeWorld(t, 1, fakegpu.New(1), nil)
	_, err := collectives.NewAllGatherPushPlan(w.Rank(0), irismodel.BF16, 16)
	var ke *irisrt.KernelError
	if !errors.As(err, &ke) {
		t.Fatalf("got %v, want a *irisrt.KernelError", err)
	}
	for _, want := range []string{
		`kernel module "all_gather" of github.com/irisgen/irisgen/generated/collectives not found`,
		"(looked in kernels/all_gather.fake embedded in github.com/irisgen/irisgen/generated/collectives)",
		"run `make kernels` and rebuild the program",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

// TestProbeOnFake runs the capture probe's plumbing for the collectives
// with parameters on the fake platform (which runs no kernel: outputs stay
// poisoned, so eager and replay agree): every capture with both sets of
// parameters, the ranks that do not use a tensor passing the zero Tensor,
// is made and replayed without an error.
func TestProbeOnFake(t *testing.T) {
	p := fakegpu.New(2)
	w := fakeWorld(t, 2, p, fakeKernels(p))
	results := make([][]probe.Result, 2)
	err := w.Run(func(r *irisrt.Rank) error {
		var err error
		results[r.Rank()], err = probe.RunRank(r, probe.Config{Entries: collectives.Catalogue, N: 7, Replays: 2,
			Collectives: []string{"broadcast", "reduce", "gather", "scatter", "send_recv", "shift"}})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]bool{}
	for _, res := range results[0] {
		if res.Failed || (res.Claimed && res.Replays != 2) {
			t.Errorf("%s/%s %s %s: %+v", res.Collective, res.Variant, res.Params, res.Mode, res)
		}
		params[res.Collective+" "+res.Params] = true
	}
	for _, want := range []string{"broadcast root=0", "broadcast root=1", "send_recv src=0 dst=1", "send_recv src=1 dst=0", "shift offset=1", "shift offset=-1"} {
		if !params[want] {
			t.Errorf("no probe of %s", want)
		}
	}
	modes := 0 // every variant's modes (the copy-engine variants that stage always have no mode none)
	for _, e := range collectives.Catalogue {
		if slices.Contains([]string{"broadcast", "reduce", "gather", "scatter", "send_recv", "shift"}, e.Collective) {
			modes += len(e.Barriers)
		}
	}
	if len(results[0]) != 2*modes {
		t.Errorf("%d results, want %d (every variant's modes, 2 sets of parameters)", len(results[0]), 2*modes)
	}
}

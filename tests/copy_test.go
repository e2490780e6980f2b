package tests

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// copyRef is what rank r's output holds after a launch of collective c on
// world ranks, from the inputs in[rank] (the whole tensor's bytes) and the
// parameters ps, written from the collectives' definitions
// (docs/collectives.md), not from any schedule: nil where r passes no
// output.
func copyRef(c string, world, r int, in [][]byte, ps []irismodel.Param) []byte {
	mod := func(x int64) int { w := int64(world); return int(((x % w) + w) % w) }
	block := func(b []byte, i int) []byte { n := len(b) / world; return b[i*n : (i+1)*n] }
	var out []byte
	switch c {
	case "all_gather":
		for p := range world {
			out = append(out, in[p]...)
		}
	case "all_to_all":
		for p := range world {
			out = append(out, block(in[p], r)...)
		}
	case "broadcast":
		out = slices.Clone(in[ps[0].Int()])
	case "send_recv":
		if int64(r) != ps[1].Int() {
			return nil
		}
		out = slices.Clone(in[ps[0].Int()])
	case "gather":
		if int64(r) != ps[0].Int() {
			return nil
		}
		for p := range world {
			out = append(out, in[p]...)
		}
	case "scatter":
		out = slices.Clone(block(in[ps[0].Int()], r))
	case "shift":
		out = slices.Clone(in[mod(int64(r)-ps[0].Int())])
	default:
		panic("no reference for " + c)
	}
	return out
}

// TestCopyVariantsOnFake runs every copy-engine variant of the catalogue
// through its generated wrapper on the fake platform, whose copies and
// stream memory operations really move bytes and wait: on 2 and 3 ranks,
// 5 elements (not a multiple of any vector), both parameter samples,
// every mode the variant supports, eagerly and captured then replayed with
// fresh inputs; each output against copyRef, byte for byte. In mode device
// it checks the order of every rank's operations (the enter barrier, the
// copies, the done barrier) and that no rank copies before every peer has
// entered, nor leaves before every peer's copies are done.
func TestCopyVariantsOnFake(t *testing.T) {
	var entries []collectives.Entry
	for _, e := range collectives.Catalogue {
		if e.Descriptor().Engine == irismodel.EngineCopy {
			entries = append(entries, e)
		}
	}
	want := []string{"all_gather/copy_push", "all_to_all/copy_push", "broadcast/copy_push", "gather/copy_push",
		"scatter/copy_push", "send_recv/copy_push", "shift/copy_push"}
	var got []string
	for _, e := range entries {
		got = append(got, e.Collective+"/"+e.Variant)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("copy-engine variants %v, want %v", got, want)
	}
	// lanes: the streams a launch spreads its copies over (the default:
	// as many as ranks; IRISGEN_COPY_STREAMS=1: one; 4 in a world of 2,
	// with 3 Mi elements, more streams than copies: the copies stay whole).
	// noPeerWrites: the platform refuses stream memory operations into a
	// peer's memory (CUDA 13.1 and later), so the barriers copy their flags.
	for _, c := range []struct {
		world, lanes int
		n            int64
		noPeerWrites bool
	}{{2, 2, 5, false}, {3, 3, 5, false}, {3, 1, 5, false}, {2, 4, 3 << 20, false}, {2, 2, 5, true}, {3, 3, 5, true}} {
		t.Run(fmt.Sprintf("w%d/streams%d/n%d/peerwrites=%v", c.world, c.lanes, c.n, !c.noPeerWrites), func(t *testing.T) {
			if c.lanes != c.world {
				t.Setenv("IRISGEN_COPY_STREAMS", fmt.Sprint(c.lanes))
			}
			p := fakegpu.New(c.world)
			p.SetPeerValueWrites(!c.noPeerWrites)
			w := fakeWorld(t, c.world, p, fakeKernels(p))
			for _, e := range entries {
				t.Run(e.Collective+"/"+e.Variant, func(t *testing.T) {
					checks := make([]int, c.world)
					err := w.Run(func(r *irisrt.Rank) error {
						n, err := checkCopyEntry(r, p, e, c.lanes, c.n)
						checks[r.Rank()] = n
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
					if checks[0] == 0 {
						t.Fatal("nothing checked")
					}
				})
			}
		})
	}
}

// checkCopyEntry is TestCopyVariantsOnFake on one rank, n elements, whose
// launches spread their copies over lanes streams; it returns the outputs
// it checked.
func checkCopyEntry(r *irisrt.Rank, fake *fakegpu.Platform, e collectives.Entry, lanes int, n int64) (int, error) {
	world, me := r.World(), r.Rank()
	dt := irismodel.BF16
	sizes := []int64{n}
	plan, err := e.New(r, dt, "", sizes)
	if err != nil {
		return 0, err
	}
	defer plan.Close()
	ts, free, err := e.Alloc(r, dt, sizes)
	if err != nil {
		return 0, err
	}
	defer free()
	in, out := 0, 1 // every catalogue copy-engine collective: input, output
	s := r.Stream()
	checked := 0
	// fill writes every rank's input (each rank fills its own; all know
	// all, for the reference) for round k.
	inputs := func(k int) [][]byte {
		all := make([][]byte, world)
		for q := range world {
			b := make([]byte, ts[in].Bytes())
			for i := range b {
				b[i] = byte(1 + q*37 + i*3 + k*101)
			}
			all[q] = b
		}
		return all
	}
	// fill writes the inputs of a round and poisons the output o, so a
	// copy that did not happen shows; verify compares o with copyRef.
	fill := func(all [][]byte, o irisrt.Tensor) error {
		if err := fake.Write(ts[in].Ptr, all[me]); err != nil {
			return err
		}
		return fake.Write(o.Ptr, slices.Repeat([]byte{0xEE}, int(o.Bytes())))
	}
	verify := func(what string, o irisrt.Tensor, all [][]byte, ps []irismodel.Param) error {
		got, err := fake.Read(o.Ptr, o.Bytes())
		if err != nil {
			return err
		}
		ref := copyRef(e.Collective, world, me, all, ps)
		if ref == nil {
			ref = slices.Repeat([]byte{0xEE}, int(o.Bytes())) // not this rank's output: untouched
		}
		if !slices.Equal(got, ref) {
			return fmt.Errorf("%s: rank %d's output % x, want % x", what, me, got, ref)
		}
		checked++
		return nil
	}
	// clearOps forgets the operations recorded so far, once every rank is
	// done with what came before and before any starts what follows.
	clearOps := func() error {
		if err := r.HostBarrier(s); err != nil {
			return err
		}
		if me == 0 {
			fake.ClearMemOps()
		}
		return r.HostBarrier(s)
	}
	dev := r.Device().Ordinal()
	for sample := range 2 {
		ps := e.SampleParams(world, sample)
		mine := e.TensorsFor(me, ts, ps)
		for k, mode := range e.Barriers {
			what := fmt.Sprintf("%s mode %s, sample %d", e.Variant, mode, sample)
			all := inputs(10*sample + k)
			if err := fill(all, ts[out]); err != nil {
				return checked, err
			}
			if err := clearOps(); err != nil {
				return checked, err
			}
			if err := plan.LaunchParams(s, mine, ps, mode); err != nil {
				return checked, fmt.Errorf("%s: %w", what, err)
			}
			if err := r.HostBarrier(s); err != nil {
				return checked, err
			}
			if err := verify(what, ts[out], all, ps); err != nil {
				return checked, err
			}
			if mode == irismodel.BarrierDevice {
				if err := checkCopyOrder(fake.MemOps(), dev, world, lanes, gpu.PeerValueWrites(r.Device())); err != nil {
					return checked, fmt.Errorf("%s: %w", what, err)
				}
			}
			if err := r.HostBarrier(s); err != nil {
				return checked, err
			}
		}
		// Captured once, replayed twice with fresh inputs.
		for _, mode := range e.Capturable {
			what := fmt.Sprintf("%s captured in mode %s, sample %d", e.Variant, mode, sample)
			g, err := r.Capture(s, func() error { return plan.LaunchParams(s, mine, ps, mode) })
			if err != nil {
				return checked, fmt.Errorf("%s: %w", what, err)
			}
			for rep := range 2 {
				all := inputs(50 + 10*sample + rep)
				if err := fill(all, ts[out]); err != nil {
					return checked, err
				}
				if err := r.HostBarrier(s); err != nil {
					return checked, err
				}
				if err := g.Replay(s); err != nil {
					return checked, fmt.Errorf("%s, replay %d: %w", what, rep, err)
				}
				if err := r.HostBarrier(s); err != nil {
					return checked, err
				}
				if err := verify(fmt.Sprintf("%s, replay %d", what, rep), ts[out], all, ps); err != nil {
					return checked, err
				}
				if err := r.HostBarrier(s); err != nil {
					return checked, err
				}
			}
			if err := g.Destroy(); err != nil {
				return checked, err
			}
		}
	}
	// In place (aliasing: own_block): the input as this rank's own block of
	// the output comes out right, and the launch copies nothing onto
	// itself; the input at another rank's block is refused on every rank
	// (mode none: nothing waits for the refusals).
	if slices.ContainsFunc(e.Descriptor().AliasPairs(), func(p irisimpl.AliasPair) bool { return p.OwnBlock }) {
		ps := e.SampleParams(world, 0)
		n := ts[in].Len
		all := inputs(70)
		own := ts[out].Slice(int64(me)*n, n)
		if err := fake.Write(ts[out].Ptr, slices.Repeat([]byte{0xEE}, int(ts[out].Bytes()))); err != nil {
			return checked, err
		}
		if err := fake.Write(own.Ptr, all[me]); err != nil {
			return checked, err
		}
		inPlace := slices.Clone(ts)
		inPlace[in] = own
		if err := clearOps(); err != nil {
			return checked, err
		}
		if err := plan.LaunchParams(s, e.TensorsFor(me, inPlace, ps), ps, irismodel.BarrierDevice); err != nil {
			return checked, fmt.Errorf("in place: %w", err)
		}
		if err := r.HostBarrier(s); err != nil {
			return checked, err
		}
		if err := verify("in place", ts[out], all, ps); err != nil {
			return checked, err
		}
		for _, o := range fake.MemOps() {
			if o.Device == dev && o.Kind == fakegpu.MemOpCopy && o.Src == o.Dst {
				return checked, fmt.Errorf("in place: device %d copied %d bytes at %#x onto themselves", dev, o.Bytes, uint64(o.Src))
			}
		}
		if err := r.HostBarrier(s); err != nil {
			return checked, err
		}
		inPlace[in] = ts[out].Slice(int64((me+1)%world)*n, n)
		var ae *irisrt.AliasError
		if err := plan.LaunchParams(s, e.TensorsFor(me, inPlace, ps), ps, irismodel.BarrierNone); world > 1 && (!errors.As(err, &ae) || !ae.OwnBlock) {
			return checked, fmt.Errorf("input at rank %d's block: got %v, want an *irisrt.AliasError (own block)", (me+1)%world, err)
		}
		checked++
	}
	// A tensor only one rank passes that peers write goes through that
	// rank's staging buffer: anywhere in device memory it comes out right.
	for i, ti := range e.Tensors {
		if !ti.Remote || ti.Heap || ti.Owner == "" || ti.Dir != irismodel.Out {
			continue
		}
		off, err := r.Device().Alloc(ts[i].Bytes(), false)
		if err != nil {
			return checked, err
		}
		ps := e.SampleParams(world, 1)
		moved := slices.Clone(ts)
		moved[i] = irisrt.Tensor{Ptr: off, DType: ts[i].DType, Len: ts[i].Len}
		all := inputs(90)
		err = fill(all, moved[i])
		if err == nil {
			err = plan.LaunchParams(s, e.TensorsFor(me, moved, ps), ps, irismodel.BarrierDevice)
		}
		if err == nil {
			err = r.HostBarrier(s)
		}
		if err == nil {
			err = verify(ti.Name+" off the heap", moved[i], all, ps)
		}
		r.Device().Free(off)
		if err != nil {
			return checked, fmt.Errorf("%s off the heap: %w", ti.Name, err)
		}
	}
	// Peers write the output of a push variant: off the heap it is refused
	// on every rank that passes it, before anything is enqueued.
	for i, ti := range e.Tensors {
		if !ti.Heap || ti.Owner != "" {
			continue
		}
		off, err := r.Device().Alloc(ts[i].Bytes(), false)
		if err != nil {
			return checked, err
		}
		bad := slices.Clone(ts)
		bad[i] = irisrt.Tensor{Ptr: off, DType: ts[i].DType, Len: ts[i].Len}
		before := len(fake.MemOps())
		var pe *irisrt.PlacementError
		err = plan.LaunchParams(s, e.TensorsFor(me, bad, e.SampleParams(world, 0)), e.SampleParams(world, 0), irismodel.BarrierHost)
		r.Device().Free(off)
		if !errors.As(err, &pe) {
			return checked, fmt.Errorf("%s off the heap: got %v, want a *irisrt.PlacementError", ti.Name, err)
		}
		if len(fake.MemOps()) != before {
			return checked, fmt.Errorf("%s off the heap: refused, but enqueued operations", ti.Name)
		}
		checked++
	}
	return checked, r.HostBarrier(s)
}

// checkCopyOrder checks one launch in mode device from the operations of
// every device: device dev signals every peer (a write, or with
// peerWrites false a copy), waits for each and resets its word, copies,
// and does the same on the done row, then copies its staged outputs out of
// their staging buffers; its first copy runs after every peer's enter
// signal, and its last done wait after every peer's last copy before that
// peer's own last wait.
func checkCopyOrder(ops []fakegpu.MemOp, dev, world, lanes int, peerWrites bool) error {
	raise := "write"
	if !peerWrites {
		raise = "copy"
	}
	var kinds []string
	var mine []int // dev's operations' indexes in ops
	lastWait := -1
	for i, o := range ops {
		if o.Device != dev {
			continue
		}
		kinds = append(kinds, o.Kind.String())
		mine = append(mine, i)
		if o.Kind == fakegpu.MemOpWait {
			lastWait = i
		}
	}
	barrier := func() []string {
		var b []string
		for range world - 1 {
			b = append(b, raise)
		}
		for range world - 1 {
			b = append(b, "wait", "write")
		}
		return b
	}
	enter, done := barrier(), barrier()
	firstCopy := -1 // the first operation after the enter barrier
	if len(mine) > len(enter) {
		firstCopy = mine[len(enter)]
	}
	for len(kinds) > 0 && kinds[len(kinds)-1] == "copy" {
		kinds = kinds[:len(kinds)-1] // staged outputs, after the done barrier
	}
	if len(kinds) < len(enter)+len(done) || !slices.Equal(kinds[:len(enter)], enter) || !slices.Equal(kinds[len(kinds)-len(done):], done) {
		return fmt.Errorf("device %d ran %v: want the enter barrier %v, the copies, the done barrier %v", dev, kinds, enter, done)
	}
	for _, k := range kinds[len(enter) : len(kinds)-len(done)] {
		if k != "copy" {
			return fmt.Errorf("device %d ran %v: only copies between the barriers", dev, kinds)
		}
	}
	// The first copy is the seen copy, on the launch's stream; the others
	// go round the lanes, as many as they fill.
	// No copy is cut: none starts where another ends at both ends.
	var streams []gpu.Stream
	var copies []fakegpu.MemOp
	for _, o := range ops[firstCopy:] {
		if o.Device == dev && o.Kind == fakegpu.MemOpCopy && len(streams) < len(kinds)-len(enter)-len(done) {
			for _, c := range copies {
				if c.Dst+gpu.DevicePtr(c.Bytes) == o.Dst && c.Src+gpu.DevicePtr(c.Bytes) == o.Src {
					return fmt.Errorf("device %d copied %v then %v: one copy cut in two", dev, c, o)
				}
			}
			copies = append(copies, o)
			streams = append(streams, o.Stream)
		}
	}
	distinct := map[gpu.Stream]bool{}
	for _, s := range streams[1:] {
		distinct[s] = true
	}
	if want := min(len(streams)-1, lanes); len(distinct) != want || (want > 0 && !distinct[streams[0]]) {
		return fmt.Errorf("device %d made %d copies on %d streams (%v after the seen copy's %v), want %d streams, the launch's among them",
			dev, len(streams)-1, len(distinct), streams[1:], streams[0], want)
	}
	for q := range world {
		if q == dev {
			continue
		}
		// q's operations up to its last wait end with its done barrier's
		// signals and all its waits and resets but the last reset; what
		// comes before them are its copies. With peerWrites false the
		// signals are copies too, and one into a third rank may well come
		// after dev has left.
		var theirs []int
		for i, o := range ops {
			if o.Device == q {
				theirs = append(theirs, i)
			}
		}
		for len(theirs) > 0 && ops[theirs[len(theirs)-1]].Kind != fakegpu.MemOpWait {
			theirs = theirs[:len(theirs)-1]
		}
		enterSignal, peerLastCopy := -1, -1
		if len(theirs) > 0 {
			enterSignal = theirs[0] // its first: the enter barrier's first signal
		}
		if doneOps := len(done) - 1; len(theirs) > doneOps {
			for _, i := range theirs[:len(theirs)-doneOps] {
				if ops[i].Kind == fakegpu.MemOpCopy {
					peerLastCopy = i
				}
			}
		}
		if firstCopy >= 0 && enterSignal > firstCopy {
			return fmt.Errorf("device %d copied (op %d) before device %d entered (op %d)", dev, firstCopy, q, enterSignal)
		}
		if peerLastCopy > lastWait {
			return fmt.Errorf("device %d left (op %d) before device %d's copies were done (op %d)", dev, lastWait, q, peerLastCopy)
		}
	}
	return nil
}

// TestMaxIssued enumerates the catalogue's copy schedules on worlds of 1
// to 8, every issuing rank and every parameter value from -world to
// world: no rank ever issues more copies than irismodel.MaxIssued (which
// sizes a plan's streams), and some rank issues that many.
func TestMaxIssued(t *testing.T) {
	for _, e := range collectives.Catalogue {
		d := e.Descriptor()
		if d.Engine != irismodel.EngineCopy {
			continue
		}
		for world := 1; world <= 8; world++ {
			bound, most := irismodel.MaxIssued(d.Copies, world), 0
			params := make([]int64, len(e.Params))
			var each func(i int)
			each = func(i int) {
				if i < len(params) {
					for v := -world; v <= world; v++ {
						params[i] = int64(v)
						each(i + 1)
					}
					return
				}
				for issuer := range world {
					most = max(most, len(irismodel.ExpandCopies(nil, d.Copies, world, issuer, params)))
				}
			}
			each(0)
			if most != bound {
				t.Errorf("%s/%s world %d: a rank issues at most %d copies, MaxIssued says %d", e.Collective, e.Variant, world, most, bound)
			}
		}
	}
}

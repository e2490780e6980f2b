package bench

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"

	"github.com/irisgen/irisgen/internal/nccl"
	"github.com/irisgen/irisgen/runtime/gpu"
)

// ncclBuffers are the ways RunNCCL runs a cell: plain device memory;
// ncclMemAlloc memory registered as symmetric windows (NCCL's low-latency
// symmetric kernels, 2.27 and later); and symmetric windows of a
// communicator made with NCCL_CTA_POLICY_ZERO, on which NCCL runs its
// copy-engine collectives, no kernel (ncclZeroCTA; 2.28.3 and later, the
// collectives whose ncclCall has copyEngine).
var ncclBuffers = []string{"plain", "sym", ncclZeroCTA}

const ncclZeroCTA = "cta0"

// ncclHas reports whether this NCCL runs collective c with buffers buf.
func ncclHas(c, buf string) bool {
	switch buf {
	case "sym":
		return nccl.Has(nccl.SymmetricWindows)
	case ncclZeroCTA:
		return knownCollectives[c].nccl.copyEngine && nccl.Has(nccl.CopyEngineCollectives)
	}
	return true
}

// NCCLVersion loads NCCL (lib first when given) and returns the path it
// loaded and its version, e.g. "2.28.9".
func NCCLVersion(lib string) (path, version string, err error) {
	var extra []string
	if lib != "" {
		extra = append(extra, lib)
	}
	// NVLink multicast stays off: on a shared machine it can put the host's
	// GPUs out of service for others. NCCL reads it when a communicator is
	// made.
	if err := os.Setenv("NCCL_NVLS_ENABLE", "0"); err != nil {
		return "", "", err
	}
	if path, err = nccl.Open(extra...); err != nil {
		return "", "", err
	}
	v, err := nccl.Version()
	if err != nil {
		return path, "", err
	}
	return path, nccl.VersionString(v), nil
}

// ncclSelected lists the collectives cfg times that have an NCCL
// baseline (knownCollectives).
func ncclSelected(cfg Config) []string {
	var out []string
	for _, c := range cfg.selectedNames() {
		if knownCollectives[c].nccl != nil {
			out = append(out, c)
		}
	}
	return out
}

// ncclCell is one measurement: every rank runs the same cells in the same
// order (NCCL's calls and window registrations are collective).
type ncclCell struct {
	coll, dtype, mode, buffers string
	bytes                      int64
	inPlace                    bool
}

// ncclCells lists the cells of a run with the buffer kinds bufs (where
// this NCCL has them), out of place and, with inPlace, in place too where
// the call runs so; the zero-CTA ones last: NCCL's newest path, should it
// fail, leaves the rows of the others (a failed rank stops the run).
func ncclCells(cfg Config, colls, bufs []string, inPlace bool) []ncclCell {
	var cells, zero []ncclCell
	for _, c := range colls {
		for _, dt := range cfg.DTypes {
			for _, size := range cfg.Sizes {
				for _, mode := range cfg.Modes {
					for _, buf := range bufs {
						if !ncclHas(c, buf) {
							continue
						}
						for _, in := range []bool{false, true} {
							if in && !(inPlace && knownCollectives[c].nccl.inPlace) {
								continue
							}
							cell := ncclCell{coll: c, dtype: dt, mode: mode, buffers: buf, bytes: size, inPlace: in}
							if buf == ncclZeroCTA {
								zero = append(zero, cell)
							} else {
								cells = append(cells, cell)
							}
						}
					}
				}
			}
		}
	}
	return append(cells, zero...)
}

func ncclType(dt string) (nccl.DataType, int64, error) {
	switch dt {
	case "f32":
		return nccl.Float32, 4, nil
	case "f16":
		return nccl.Float16, 2, nil
	case "bf16":
		return nccl.BFloat16, 2, nil
	}
	return 0, 0, fmt.Errorf("nccl: no dtype %q (want f32, f16 or bf16)", dt)
}

// RunNCCL times NCCL through its own C API on cfg.World GPUs of this
// process, as nccl-tests does with one thread per GPU: one goroutine locked
// to its OS thread per GPU, each with its own communicator and stream,
// eager (k back-to-back calls) and graph (one replay of a graph of k calls),
// timed with the same events, barriers and repeats as irisgen. Every cell
// runs with plain buffers, with symmetric windows and, for the collectives
// NCCL runs on copy engines, with symmetric windows of a zero-CTA
// communicator (where NCCL has them), out of place and in place; a row per
// buffer kind keeps the faster placement (its note says which). Rows have
// Impl "nccl" and Variant "plain", "sym" or "cta0"; the reports show the
// best as NCCL.
func RunNCCL(cfg Config, device, date string) ([]Row, error) {
	colls := ncclSelected(cfg)
	if len(colls) == 0 {
		return nil, nil
	}
	p, err := gpu.Load()
	if err != nil {
		return nil, err
	}
	devs := make([]gpu.Device, cfg.World)
	for i := range devs {
		if devs[i], err = p.Open(i); err != nil {
			return nil, err
		}
	}
	cells := ncclCells(cfg, colls, ncclBuffers, true)
	ids, err := newNCCLIDs(cells)
	if err != nil {
		return nil, err
	}
	times := make([][][]float64, len(cells)) // cell -> rank -> per-call us of each batch
	for i := range times {
		times[i] = make([][]float64, cfg.World)
	}
	bar := newHostBarrier(cfg.World)
	errs := make(chan error, cfg.World)
	for rank := range cfg.World {
		go func() {
			err := ncclRank(cfg, devs[rank], rank, ids, cells, times, bar)
			if err != nil {
				bar.abort()
				err = fmt.Errorf("NCCL rank %d: %w", rank, err)
			}
			errs <- err
		}()
	}
	var first error
	for range cfg.World {
		if err := <-errs; err != nil {
			first = err
			break // a failed rank can leave the others inside NCCL for good
		}
	}
	return ncclRows(cfg, cells, times, device, date), first
}

// ncclRows turns the cells' times into rows: one per (cell without its
// placement), the faster placement's.
func ncclRows(cfg Config, cells []ncclCell, times [][][]float64, device, date string) []Row {
	var rows []Row
	idx := map[ncclCell]int{}
	for i, c := range cells {
		st := Summarize(slowestBatches(times[i]))
		if st.N == 0 {
			continue // not reached: a rank failed before
		}
		key := c
		key.inPlace = false
		place := "out of place"
		if c.inPlace {
			place = "in place"
		}
		row := Row{Impl: "nccl", Collective: c.coll, Variant: c.buffers, DType: c.dtype, World: cfg.World, Bytes: c.bytes,
			Mode: c.mode, Device: device, Date: date, Note: place}
		st.set(&row)
		row.SetBandwidth()
		if j, ok := idx[key]; ok {
			if row.TimeUS < rows[j].TimeUS {
				rows[j] = row
			}
			continue
		}
		idx[key] = len(rows)
		rows = append(rows, row)
	}
	for _, r := range rows {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "nccl    %-14s %-9s %-4s %10d %-5s %10.2f us (%s)\n", r.Collective, r.Variant, r.DType, r.Bytes, r.Mode, r.TimeUS, r.Note)
		}
	}
	return rows
}

// ncclIDs are the unique ids of a run's communicators: NCCL's default
// configuration, and a zero-CTA one where a cell needs it (zero nil).
type ncclIDs struct {
	plain nccl.ID
	zero  *nccl.ID
}

func newNCCLIDs(cells []ncclCell) (ncclIDs, error) {
	var ids ncclIDs
	var err error
	if ids.plain, err = nccl.NewID(); err != nil {
		return ids, err
	}
	for _, c := range cells {
		if c.buffers == ncclZeroCTA {
			id, err := nccl.NewID()
			ids.zero = &id
			return ids, err
		}
	}
	return ids, nil
}

// ncclComms are one rank's communicators, as ncclIDs.
type ncclComms struct{ plain, zero *nccl.Comm }

// of is the communicator that runs cell c.
func (cs ncclComms) of(c ncclCell) *nccl.Comm {
	if c.buffers == ncclZeroCTA {
		return cs.zero
	}
	return cs.plain
}

// withNCCLRank runs body on a thread locked to dev (NCCL's calls go to
// the thread's current device) with rank's communicators of a world of
// world ranks and a stream of its own, and frees them after.
func withNCCLRank(dev gpu.Device, world, rank int, ids ncclIDs, body func(comms ncclComms, s gpu.Stream) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b, ok := dev.(gpu.ThreadBinder)
	if !ok {
		return fmt.Errorf("the %s platform cannot make a device current on a thread", dev.Platform().Name())
	}
	if err := b.BindThread(); err != nil {
		return err
	}
	var comms ncclComms
	var err error
	if comms.plain, err = nccl.InitRank(world, ids.plain, rank); err != nil {
		return err
	}
	defer comms.plain.Destroy()
	if ids.zero != nil {
		if comms.zero, err = nccl.InitRankPolicy(world, *ids.zero, rank, nccl.CTAPolicyZero); err != nil {
			return err
		}
		defer comms.zero.Destroy()
	}
	s, err := dev.NewStream()
	if err != nil {
		return err
	}
	defer dev.DestroyStream(s)
	return body(comms, s)
}

// ncclRank is one GPU's goroutine: it times every cell on its rank.
func ncclRank(cfg Config, dev gpu.Device, rank int, ids ncclIDs, cells []ncclCell, times [][][]float64, bar *hostBarrier) error {
	return withNCCLRank(dev, cfg.World, rank, ids, func(comms ncclComms, s gpu.Stream) error {
		for i, c := range cells {
			us, err := ncclCellTimes(cfg, dev, s, comms.of(c), c, bar)
			if err != nil {
				return fmt.Errorf("%s %s %s %d bytes %s %s: %w", c.coll, c.buffers, c.dtype, c.bytes, c.mode, map[bool]string{false: "out of place", true: "in place"}[c.inPlace], err)
			}
			times[i][rank] = us
		}
		return nil
	})
}

// ncclBufs are one cell's buffers on one rank.
type ncclBufs struct {
	send, recv gpu.DevicePtr
	free       []func() error
}

func (b *ncclBufs) release() error {
	var errs []error
	for i := len(b.free) - 1; i >= 0; i-- {
		errs = append(errs, b.free[i]())
	}
	return errors.Join(errs...)
}

// ncclAlloc allocates bytes on dev: plain, or (sym, cta0) from ncclMemAlloc
// and registered as a symmetric window of comm (collective: every rank does
// the same).
func ncclAlloc(dev gpu.Device, s gpu.Stream, comm *nccl.Comm, kind string, bytes int64, b *ncclBufs) (gpu.DevicePtr, error) {
	if kind == "plain" {
		p, err := dev.Alloc(bytes, false)
		if err != nil {
			return 0, err
		}
		b.free = append(b.free, func() error { return dev.Free(p) })
		return p, dev.MemsetD8Async(p, 0, bytes, s)
	}
	p, err := nccl.MemAlloc(bytes)
	if err != nil {
		return 0, err
	}
	b.free = append(b.free, func() error { return nccl.MemFree(p) })
	w, err := comm.RegisterWindow(p, bytes, nccl.WinCollSymmetric)
	if err != nil {
		return 0, err
	}
	b.free = append(b.free, func() error { return comm.DeregisterWindow(w) })
	return p, dev.MemsetD8Async(p, 0, bytes, s)
}

// ncclCellCall allocates one cell's buffers on dev and returns one call
// of the cell's collective on s and what frees the buffers; a nil call
// when the size is below one element per rank (no measurement, on every
// rank alike).
func ncclCellCall(dev gpu.Device, s gpu.Stream, comm *nccl.Comm, c ncclCell) (call func() error, free func() error, err error) {
	dt, es, err := ncclType(c.dtype)
	if err != nil {
		return nil, nil, err
	}
	base := knownCollectives[c.coll].nccl
	w := int64(comm.World())
	rank := comm.Rank()
	per := c.bytes / es / w // elements of one rank's share
	if per < 1 {
		return nil, func() error { return nil }, nil
	}
	// send and recv bytes of the cell.
	sendB, recvB := c.bytes, c.bytes
	if base.sendPerRank {
		sendB = per * es
	}
	if base.recvPerRank {
		recvB = per * es
	}
	b := &ncclBufs{}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.release())
		}
	}()
	if c.inPlace {
		p, err := ncclAlloc(dev, s, comm, c.buffers, max(sendB, recvB), b)
		if err != nil {
			return nil, nil, err
		}
		b.send, b.recv = p, p
		at := p + gpu.DevicePtr(int64(rank)*per*es) // the rank's share in place
		if base.sendPerRank {
			b.send = at
		}
		if base.recvPerRank {
			b.recv = at
		}
	} else {
		if b.send, err = ncclAlloc(dev, s, comm, c.buffers, sendB, b); err != nil {
			return nil, nil, err
		}
		if b.recv, err = ncclAlloc(dev, s, comm, c.buffers, recvB, b); err != nil {
			return nil, nil, err
		}
	}
	args := ncclArgs{send: b.send, recv: b.recv, count: c.bytes / es, per: per, dt: dt, es: es, s: s}
	return func() error { return base.run(comm, args) }, b.release, nil
}

// ncclCapture captures on the calling thread (NCCL's calls cannot be
// captured through a Rank).
func ncclCapture(dev gpu.Device) capturer {
	return func(s gpu.Stream, batch func() error) (func() error, func(), error) {
		if err := dev.BeginCapture(s, gpu.CaptureThreadLocal); err != nil {
			return nil, nil, err
		}
		berr := batch()
		g, eerr := dev.EndCapture(s)
		if err := errors.Join(berr, eerr); err != nil {
			return nil, nil, err
		}
		exec, err := dev.Instantiate(g)
		_ = dev.DestroyGraph(g)
		if err != nil {
			return nil, nil, err
		}
		return func() error { return dev.LaunchGraph(exec, s) }, func() { _ = dev.DestroyGraphExec(exec) }, nil
	}
}

// ncclWarm makes warmup calls (at least one) and waits for them: NCCL
// connects a communicator's peers lazily, on the first call of each
// collective and buffer kind, and cannot do so inside a stream capture
// ("operation not permitted when stream is capturing"), so a cell runs
// eagerly on every rank before it is captured, as nccl-tests does.
func ncclWarm(dev gpu.Device, s gpu.Stream, warmup int, call func() error) error {
	for range max(warmup, 1) {
		if err := call(); err != nil {
			return err
		}
	}
	return dev.StreamSynchronize(s)
}

// ncclCellTimes allocates one cell's buffers, times it and frees them.
func ncclCellTimes(cfg Config, dev gpu.Device, s gpu.Stream, comm *nccl.Comm, c ncclCell, bar *hostBarrier) (_ []float64, err error) {
	call, free, err := ncclCellCall(dev, s, comm, c)
	if err != nil || call == nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, free()) }()
	sync := func() error { return dev.StreamSynchronize(s) }
	if c.mode == "graph" {
		if err := ncclWarm(dev, s, cfg.Warmup, call); err != nil {
			return nil, err
		}
	}
	l, lfree, err := newLane(s, c.mode, Iterations(c.bytes), call, ncclCapture(dev))
	if err != nil {
		return nil, err
	}
	defer lfree()
	barrier := func() error {
		if err := sync(); err != nil {
			return err
		}
		return bar.wait()
	}
	warm := func() error { return ncclWarm(dev, s, cfg.Warmup, call) }
	us, err := timeBatches(dev, []lane{l}, cfg.repeats(), barrier, warm, sync)
	if err != nil {
		return nil, err
	}
	return us[0], nil
}

// hostBarrier is a reusable rendezvous of n goroutines that a failing one
// can break, so that the others return instead of waiting for ever.
type hostBarrier struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n, seen int
	gen     uint64
	broken  bool
}

func newHostBarrier(n int) *hostBarrier {
	b := &hostBarrier{n: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

var errBarrierBroken = errors.New("another rank failed")

func (b *hostBarrier) wait() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.broken {
		return errBarrierBroken
	}
	gen := b.gen
	b.seen++
	if b.seen == b.n {
		b.seen, b.gen = 0, b.gen+1
		b.cond.Broadcast()
		return nil
	}
	for gen == b.gen && !b.broken {
		b.cond.Wait()
	}
	if b.broken {
		return errBarrierBroken
	}
	return nil
}

func (b *hostBarrier) abort() {
	b.mu.Lock()
	b.broken = true
	b.mu.Unlock()
	b.cond.Broadcast()
}

// BestNCCL returns rows with the nccl rows of each cell folded into the
// faster one, labelled "nccl best" (its note names the buffers and
// placement): the reports compare with NCCL at its best, the CSV keeps both.
func BestNCCL(rows []Row) []Row {
	out := make([]Row, 0, len(rows))
	best := map[string]int{}
	for _, r := range rows {
		if r.Impl != "nccl" {
			out = append(out, r)
			continue
		}
		key := fmt.Sprintf("%s|%s|%d|%d|%s|%s", r.Collective, r.DType, r.World, r.Bytes, r.Mode, r.Beside)
		r.Note = r.Variant + ", " + r.Note
		r.Variant = "best"
		j, ok := best[key]
		switch {
		case !ok:
			best[key] = len(out)
			out = append(out, r)
		case math.IsNaN(out[j].TimeUS) || r.TimeUS < out[j].TimeUS:
			out[j] = r
		}
	}
	return slices.Clip(out)
}

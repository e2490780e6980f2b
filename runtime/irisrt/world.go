package irisrt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
)

// MaxWorld is the largest world the kernel ABI supports (IRISGEN_MAX_WORLD).
const MaxWorld = core.MaxWorld

// Defaults of Options.
const (
	defaultHeapBytes         int64 = 1 << 30
	defaultTimeout                 = 10 * time.Second
	defaultRendezvousTimeout       = 5 * time.Minute
)

// MaxTimeout is the largest Options.Timeout: the kernels get it in 32 bits
// of microseconds (irisgen_ctx.timeout_us).
const MaxTimeout = (1<<32 - 1) * time.Microsecond

// timeoutMicros is d in whole microseconds, rounded up (resolve keeps it
// within MaxTimeout).
func timeoutMicros(d time.Duration) uint32 {
	return uint32((d + time.Microsecond - 1) / time.Microsecond)
}

// Options configure a world. The zero value is usable: every field has a
// default, and for HeapBytes, Timeout and RendezvousTimeout an environment
// variable is consulted when the field is zero.
type Options struct {
	// HeapBytes is the size of every rank's symmetric heap; it must be the
	// same on every rank. Zero: $IRISGEN_HEAP_BYTES (a byte count, or with
	// a suffix such as 512MiB, 4GiB, 2G), else 1 GiB.
	HeapBytes int64
	// Kernels holds compiled code objects (<collective>.fatbin for cuda,
	// <collective>.hsaco for hip), used before anything else. Nil:
	// $IRISGEN_KERNELS when set; then the code objects the generated
	// package embeds.
	Kernels fs.FS
	// Timeout limits every device-side spin (barrier waits), to the
	// microsecond (at most MaxTimeout). Zero: $IRISGEN_TIMEOUT (a Go
	// duration such as 30s, or seconds), else 10s.
	Timeout time.Duration
	// RendezvousTimeout limits joining a world and every host rendezvous
	// (host barriers, plan creation). Zero: $IRISGEN_RENDEZVOUS_TIMEOUT,
	// else 5 minutes.
	RendezvousTimeout time.Duration
	// Platform is the GPU library; nil loads one with gpu.Load.
	Platform gpu.Platform
	// ShareGPUs lets ranks share GPUs, for testing on a machine with fewer
	// GPUs than ranks: rank i (LOCAL_RANK i in a multi-process world) runs
	// on GPU i mod the device count. The ranks' kernels then run side by
	// side on one GPU, so the collectives' results are checked as in a
	// world of separate GPUs, but their timings mean nothing, and a launch
	// that needs every block of every rank resident at once can only wait
	// for its barrier timeout when the ranks' kernels together do not fit.
	// Groups must then hold whole GPUs (see SharedGPUGroupError).
	// False: $IRISGEN_SHARE_GPUS (1 or true).
	ShareGPUs bool
	// CopyStreams is how many streams a copy-engine launch spreads its
	// copies over: its own and up to CopyStreams-1 more of the plan's,
	// forked from it and joined back with events (a fork and join in a
	// captured graph), so that the copies to different peers run at once
	// instead of one after another; a copy is never cut, so a launch uses
	// at most as many streams as it has copies. 1: every copy on the
	// launch's stream.
	// Zero: $IRISGEN_COPY_STREAMS, else the world size. A platform that
	// cannot make a stream wait for an event (gpu.EventWaiter) uses one.
	CopyStreams int
}

// resolve fills in defaults from the environment.
func (o Options) resolve() (Options, error) {
	if o.HeapBytes < 0 {
		return o, fmt.Errorf("Options.HeapBytes = %d: must not be negative", o.HeapBytes)
	}
	if o.HeapBytes == 0 {
		o.HeapBytes = defaultHeapBytes
		if v := os.Getenv("IRISGEN_HEAP_BYTES"); v != "" {
			n, err := ParseBytes(v)
			if err != nil || n <= 0 {
				return o, fmt.Errorf("IRISGEN_HEAP_BYTES=%q: want a positive byte count such as 1073741824, 512MiB or 4GiB", v)
			}
			o.HeapBytes = n
		}
	}
	if o.HeapBytes < core.ControlBytes+heapAlign {
		return o, fmt.Errorf("heap size %d bytes is too small (at least %d)", o.HeapBytes, core.ControlBytes+heapAlign)
	}
	o.HeapBytes &^= heapAlign - 1
	var err error
	if o.Timeout, err = durationOpt(o.Timeout, "IRISGEN_TIMEOUT", defaultTimeout); err != nil {
		return o, err
	}
	if o.Timeout > MaxTimeout {
		return o, fmt.Errorf("device timeout %v is longer than the kernels can count (%v): lower Options.Timeout / IRISGEN_TIMEOUT", o.Timeout, MaxTimeout)
	}
	if o.RendezvousTimeout, err = durationOpt(o.RendezvousTimeout, "IRISGEN_RENDEZVOUS_TIMEOUT", defaultRendezvousTimeout); err != nil {
		return o, err
	}
	if !o.ShareGPUs {
		if o.ShareGPUs, err = ShareGPUsEnv(); err != nil {
			return o, err
		}
	}
	if o.CopyStreams < 0 || o.CopyStreams > MaxWorld {
		return o, fmt.Errorf("Options.CopyStreams = %d: want 1 to %d, or 0 for the default", o.CopyStreams, MaxWorld)
	}
	if v := os.Getenv("IRISGEN_COPY_STREAMS"); o.CopyStreams == 0 && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxWorld {
			return o, fmt.Errorf("IRISGEN_COPY_STREAMS=%q: want 1 (every copy of a copy-engine launch on its stream) to %d", v, MaxWorld)
		}
		o.CopyStreams = n
	}
	return o, nil
}

// ShareGPUsEnv reports whether $IRISGEN_SHARE_GPUS asks ranks to share GPUs
// (see Options.ShareGPUs).
func ShareGPUsEnv() (bool, error) {
	switch v := os.Getenv("IRISGEN_SHARE_GPUS"); strings.ToLower(v) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	default:
		return false, fmt.Errorf("IRISGEN_SHARE_GPUS=%q: want 1 or true (ranks share GPUs), 0 or false", v)
	}
}

// loadPlatform fills in Options.Platform with gpu.Load when it is nil.
func (o *Options) loadPlatform() error {
	if o.Platform != nil {
		return nil
	}
	p, err := gpu.Load()
	if err != nil {
		return err
	}
	o.Platform = p
	return nil
}

func durationOpt(v time.Duration, env string, def time.Duration) (time.Duration, error) {
	if v < 0 {
		return 0, fmt.Errorf("negative duration %v for %s", v, env)
	}
	if v > 0 {
		return v, nil
	}
	s := os.Getenv(env)
	if s == "" {
		return def, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
		return time.Duration(f * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("%s=%q: want a positive duration such as 30s, or a number of seconds", env, s)
}

// ParseBytes parses a byte count: a plain integer, or one with a suffix
// K, M, G, T (powers of 1024, with or without "i" and "B": 4G = 4GiB = 4GB).
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsDigit(r) })
	num, unit := s, ""
	if i >= 0 {
		num, unit = s[:i], strings.ToUpper(strings.TrimSpace(s[i:]))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad byte count %q", s)
	}
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "B"), "I")
	shift := map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}
	sh, ok := shift[unit]
	if !ok || n > (1<<62)>>sh {
		return 0, fmt.Errorf("bad byte count %q", s)
	}
	return n << sh, nil
}

// World is an in-process world: one process drives n GPUs, one goroutine
// per rank (see Run), with peer access between every pair.
type World struct {
	ranks []*Rank
	group *localGroup

	groupsMu sync.Mutex
	groups   map[string]*localGroup // rendezvous of the groups (Rank.NewGroup)

	mu      sync.Mutex
	running bool
	closed  bool

	refused refusals // the ranks' latest refusals (launch.go)
}

// NewLocalWorld opens devices 0..n-1 of the platform, enables peer access
// between every pair, and gives every rank a heap, a stream and an error
// record. Every rank's table of heap bases is built here, once.
func NewLocalWorld(n int, opts Options) (*World, error) {
	if n < 1 || n > MaxWorld {
		return nil, fmt.Errorf("NewLocalWorld(%d): a world has 1 to %d ranks", n, MaxWorld)
	}
	opts, err := opts.resolve()
	if err == nil {
		err = opts.loadPlatform()
	}
	if err != nil {
		return nil, err
	}
	p := opts.Platform
	count, err := p.DeviceCount()
	if err != nil {
		return nil, platformErr("counting GPUs", err)
	}
	if count < 1 || (count < n && !opts.ShareGPUs) {
		return nil, fmt.Errorf("NewLocalWorld(%d): the %s platform has only %d GPU(s); "+
			"to test a larger world on fewer GPUs, let ranks share them (Options.ShareGPUs, or IRISGEN_SHARE_GPUS=1)", n, p.Name(), count)
	}
	devs := make([]gpu.Device, n)
	for i := range devs {
		if devs[i], err = p.Open(i % count); err != nil {
			return nil, platformErr(fmt.Sprintf("opening GPU %d", i%count), err)
		}
	}
	for _, a := range devs {
		for _, b := range devs {
			if a.Ordinal() == b.Ordinal() {
				continue // ranks sharing a GPU reach each other's heaps directly
			}
			ok, err := a.CanAccessPeer(b)
			if err != nil {
				return nil, platformErr(fmt.Sprintf("asking whether GPU %d can access GPU %d", a.Ordinal(), b.Ordinal()), err)
			}
			if !ok {
				return nil, fmt.Errorf("GPU %d cannot access GPU %d's memory directly (no peer access between them): "+
					"an in-process world needs peer access between every pair of its GPUs; pick GPUs that are linked (see `nvidia-smi topo -m`)", a.Ordinal(), b.Ordinal())
			}
			if err := a.EnablePeerAccess(b); err != nil {
				return nil, platformErr(fmt.Sprintf("enabling peer access from GPU %d to GPU %d", a.Ordinal(), b.Ordinal()), err)
			}
		}
	}
	w := &World{group: newLocalGroup(n, opts.RendezvousTimeout)}
	for i, d := range devs {
		r, err := newRank(i, n, d, opts)
		if err != nil {
			w.Close()
			return nil, err
		}
		r.group = w.group.endpoint(i)
		r.local = w
		w.ranks = append(w.ranks, r)
	}
	for _, r := range w.ranks {
		r.perGPU = ranksPerGPU(n, count)
	}
	// In one process every device sees every heap at its own (unified) address.
	bases := make([]gpu.DevicePtr, n)
	for i, r := range w.ranks {
		bases[i] = r.heap.base
	}
	for _, r := range w.ranks {
		r.setBases(bases)
	}
	return w, nil
}

// Size is the number of ranks.
func (w *World) Size() int { return len(w.ranks) }

// SharesGPUs reports whether two ranks run on one GPU (Options.ShareGPUs):
// then the world's results are real but its timings are not.
func (w *World) SharesGPUs() bool { return w.ranks[0].perGPU > 1 }

// ranksPerGPU is the most ranks on one GPU when world ranks take count GPUs
// in turn (rank i on GPU i mod count).
func ranksPerGPU(world, count int) int { return (world + count - 1) / count }

// Ranks returns the ranks, indexed by rank.
func (w *World) Ranks() []*Rank { return append([]*Rank(nil), w.ranks...) }

// Rank returns rank i.
func (w *World) Rank(i int) *Rank { return w.ranks[i] }

// Run calls fn once per rank, each on its own goroutine, and waits for all.
// When one rank fails (returns an error or panics), the group is aborted, so
// the other ranks' host barriers and plan creations return a *WorldError
// instead of waiting for it. The result joins the ranks' errors, the failing
// rank's first. Run may be called again after a failure, but a failure
// inside a device barrier leaves the device state undefined (see Rank.Check).
func (w *World) Run(fn func(r *Rank) error) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return &ClosedError{Op: "World.Run", What: "the world"}
	}
	if w.running {
		w.mu.Unlock()
		return errors.New("World.Run: the world is already running: call Run from one goroutine at a time")
	}
	w.running = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()
	w.eachGroup((*localGroup).reset)
	errs := make([]error, len(w.ranks))
	var wg sync.WaitGroup
	for i, r := range w.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[i] = fmt.Errorf("rank %d panicked: %v", i, p)
					w.abort(i, "panicked", nil)
				}
			}()
			if err := fn(r); err != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, err)
				w.abort(i, "failed", err)
			}
		}()
	}
	wg.Wait()
	// Root causes first: a rank that only saw another rank fail comes last.
	idx := make([]int, 0, len(errs))
	for i, e := range errs {
		if e != nil {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return !errors.Is(errs[idx[a]], ErrWorld) && errors.Is(errs[idx[b]], ErrWorld)
	})
	var out []error
	for _, i := range idx {
		out = append(out, errs[i])
	}
	return errors.Join(out...)
}

// Close frees every rank's resources. Call it when no Run is in progress.
func (w *World) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	var errs []error
	for _, r := range w.ranks {
		errs = append(errs, r.release())
	}
	w.abort(-1, "world closed", nil)
	return errors.Join(errs...)
}

// subgroup is the rendezvous of the group named key, made on first use.
func (w *World) subgroup(key string, n int) *localGroup {
	w.groupsMu.Lock()
	defer w.groupsMu.Unlock()
	if w.groups == nil {
		w.groups = map[string]*localGroup{}
	}
	g, ok := w.groups[key]
	if !ok {
		g = newLocalGroup(n, w.group.timeout)
		w.groups[key] = g
	}
	return g
}

// dropGroup forgets a closed group's rendezvous.
func (w *World) dropGroup(key string) {
	w.groupsMu.Lock()
	defer w.groupsMu.Unlock()
	delete(w.groups, key)
}

// eachGroup applies f to the world's rendezvous and every group's.
func (w *World) eachGroup(f func(*localGroup)) {
	f(w.group)
	w.groupsMu.Lock()
	defer w.groupsMu.Unlock()
	for _, g := range w.groups {
		f(g)
	}
}

// abort fails the world's rendezvous (peer: the failing world rank) and
// every group's, so no rank waits for one that is gone.
func (w *World) abort(peer int, msg string, err error) {
	w.group.abort(peer, msg, err)
	w.groupsMu.Lock()
	defer w.groupsMu.Unlock()
	if peer >= 0 {
		msg = fmt.Sprintf("world rank %d %s", peer, msg)
	}
	for _, g := range w.groups {
		g.abort(-1, msg, err)
	}
}

// ProcessConfig describes one process of a multi-process world, as torchrun
// and `irisgen run` pass it in the environment.
type ProcessConfig struct {
	Rank, WorldSize int
	LocalRank       int // the GPU ordinal this process drives
	MasterAddr      string
	MasterPort      int
}

// ProcessConfigFromEnv reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
// MASTER_PORT.
func ProcessConfigFromEnv() (ProcessConfig, error) {
	var cfg ProcessConfig
	ints := []struct {
		name string
		dst  *int
	}{{"RANK", &cfg.Rank}, {"WORLD_SIZE", &cfg.WorldSize}, {"LOCAL_RANK", &cfg.LocalRank}, {"MASTER_PORT", &cfg.MasterPort}}
	hint := "; start the ranks with `irisgen run -n N -- prog args` (or torchrun), which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT"
	for _, v := range ints {
		s, ok := os.LookupEnv(v.name)
		if !ok || s == "" {
			return cfg, fmt.Errorf("multi-process world: environment variable %s is not set%s", v.name, hint)
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return cfg, fmt.Errorf("multi-process world: %s=%q is not an integer%s", v.name, s, hint)
		}
		*v.dst = n
	}
	cfg.MasterAddr = os.Getenv("MASTER_ADDR")
	if cfg.MasterAddr == "" {
		return cfg, fmt.Errorf("multi-process world: environment variable MASTER_ADDR is not set%s", hint)
	}
	return cfg, nil
}

// JoinProcessWorld joins the multi-process world described by the
// environment (see ProcessConfigFromEnv). It is JoinProcessWorldConfig
// over ProcessConfigFromEnv.
func JoinProcessWorld(opts Options) (*Rank, error) {
	cfg, err := ProcessConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return JoinProcessWorldConfig(cfg, opts)
}

// JoinProcessWorldConfig joins a multi-process world as cfg.Rank, driving GPU
// cfg.LocalRank: it forms the TCP rendezvous (rank 0 listens on
// MASTER_ADDR:MASTER_PORT), allocates this rank's heap, exchanges IPC handles
// of the heaps and opens the peers'. Every rank fails with a *WorldError when
// one cannot join or fails on the way. Close the rank with Rank.Close.
func JoinProcessWorldConfig(cfg ProcessConfig, opts Options) (*Rank, error) {
	switch {
	case cfg.WorldSize < 1 || cfg.WorldSize > MaxWorld:
		return nil, fmt.Errorf("multi-process world: WORLD_SIZE=%d, want 1 to %d", cfg.WorldSize, MaxWorld)
	case cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize:
		return nil, fmt.Errorf("multi-process world: RANK=%d outside 0..%d", cfg.Rank, cfg.WorldSize-1)
	case cfg.LocalRank < 0:
		return nil, fmt.Errorf("multi-process world: LOCAL_RANK=%d is negative", cfg.LocalRank)
	case cfg.WorldSize > 1 && (cfg.MasterPort < 1 || cfg.MasterPort > 65535):
		return nil, fmt.Errorf("multi-process world: MASTER_PORT=%d, want 1 to 65535", cfg.MasterPort)
	}
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	var group Group
	if cfg.WorldSize == 1 {
		group = newLocalGroup(1, opts.RendezvousTimeout).endpoint(0)
	} else if group, err = dialGroup(cfg, opts.RendezvousTimeout, opts.RendezvousTimeout); err != nil {
		return nil, err
	}
	// Local set-up errors travel through the rendezvous so every rank fails
	// together instead of waiting for this one.
	var r *Rank
	var dev gpu.Device
	perGPU := 1
	if err = opts.loadPlatform(); err == nil {
		ord := cfg.LocalRank
		if opts.ShareGPUs {
			var count int
			if count, err = opts.Platform.DeviceCount(); err == nil && count > 0 {
				ord %= count
				perGPU = ranksPerGPU(cfg.WorldSize, count) // every rank computes the same
			}
		}
		if err == nil {
			if dev, err = opts.Platform.Open(ord); err != nil {
				err = platformErr(fmt.Sprintf("rank %d opening GPU %d (LOCAL_RANK %d)", cfg.Rank, ord, cfg.LocalRank), err)
			}
		}
	}
	if err == nil {
		if r, err = newRank(cfg.Rank, cfg.WorldSize, dev, opts); err == nil {
			r.perGPU = perGPU
		}
	}
	var handle gpu.IPCHandle
	if err == nil {
		r.group = group
		if handle, err = dev.IPCGetHandle(r.heap.base); err != nil {
			err = platformErr("exporting the heap's IPC handle", err)
		}
	}
	msg := []byte{1}
	if err != nil {
		msg = append([]byte{0}, err.Error()...)
	} else {
		msg = append(msg, handle[:]...)
		msg = binaryAppendI64(msg, r.heap.size)
	}
	parts, gerr := group.AllGather(msg)
	fail := func(e error) (*Rank, error) {
		if r != nil {
			r.release()
		}
		group.Close()
		return nil, e
	}
	if gerr != nil {
		if err != nil {
			return fail(err)
		}
		return fail(gerr)
	}
	if err != nil {
		return fail(err)
	}
	bases := make([]gpu.DevicePtr, cfg.WorldSize)
	bases[cfg.Rank] = r.heap.base
	for p, b := range parts {
		if len(b) == 0 || b[0] == 0 {
			return fail(&WorldError{Rank: cfg.Rank, Op: "join", Peer: p, Msg: "failed to set up: " + string(b[min(1, len(b)):])})
		}
		if len(b) != 1+len(handle)+8 {
			return fail(&WorldError{Rank: cfg.Rank, Op: "join", Peer: p, Msg: "sent a malformed heap handle"})
		}
		if size := binaryI64(b[1+len(handle):]); size != r.heap.size {
			return fail(&WorldError{Rank: cfg.Rank, Op: "join", Peer: p, Msg: fmt.Sprintf(
				"has a %d-byte heap, this rank %d bytes: set Options.HeapBytes / IRISGEN_HEAP_BYTES the same on every rank", size, r.heap.size)})
		}
	}
	var openErr error
	for p, b := range parts {
		if p == cfg.Rank {
			continue
		}
		var h gpu.IPCHandle
		copy(h[:], b[1:])
		base, err := dev.IPCOpenHandle(h)
		if err != nil {
			openErr = platformErr(fmt.Sprintf("rank %d opening rank %d's heap (IPC handle)", cfg.Rank, p), err)
			break
		}
		r.opened = append(r.opened, base)
		bases[p] = base
	}
	if err := r.syncRanks("open peers' heaps", openErr, nil); err != nil {
		return fail(err)
	}
	r.setBases(bases)
	return r, nil
}

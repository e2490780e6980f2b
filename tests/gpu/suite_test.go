//go:build gpu

// Package gpu_test is irisgen's GPU suite: it drives the generated collectives
// on real GPUs through the runtime and compares every result with a CPU
// reference. It runs in the in-process world (one goroutine a GPU) and, via
// `irisgen run`-style launching of this same test binary, in the
// multi-process world. Build and run it with `make test-gpu`.
//
// Environment:
//
//	IRISGEN_TEST_WORLDS    comma-separated world sizes (default: 2, and the device count when it is larger)
//	IRISGEN_TEST_QUICK     when set, the largest sizes are left out
//	IRISGEN_TEST_VARIANTS  a regular expression: the matrix tests (in both worlds) check only
//	                       the variants whose "collective/variant" it matches
//	IRISGEN_TEST_SKIP_VARIANTS  a regular expression: the matrix tests leave out the variants
//	                       whose "collective/variant" it matches
//	IRISGEN_TEST_DTYPES    comma-separated dtypes (f32, f16, bf16): the matrix tests check only
//	                       those (default: all; run.sh's initcheck shards: f32,bf16)
//	IRISGEN_TEST_PARTS     comma-separated parts of TestProcessWorld's ranks (default: all;
//	                       see processParts)
//	IRISGEN_TEST_ROUNDS    at least 2: caps the rounds of each back-to-back and replay case
//	                       (run.sh's initcheck shards: 10)
//	IRISGEN_TEST_TRACE     when set, the ranks print where they are (tracef) to stderr, so
//	                       the log of a run that hangs shows which case each rank was in
//	IRISGEN_SHARE_GPUS     1: ranks share GPUs (rank i on GPU i mod the count), so a
//	                       world of 2 or 4 can be checked on one GPU
//
// Every test prints the cases it checked on each rank as a line
// "IRISGEN_CASES <n> <test>" (rank 0 alone in a multi-process world), which
// tests/gpu/run.sh sums into its result line.
package gpu_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

const heapBytes = 3 << 30

// worldSizes lists the world sizes the suite runs at on this machine.
func worldSizes(t *testing.T) []int {
	t.Helper()
	if v := os.Getenv("IRISGEN_TEST_WORLDS"); v != "" {
		var out []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("IRISGEN_TEST_WORLDS=%q: want a comma-separated list of positive integers", v)
			}
			out = append(out, n)
		}
		return out
	}
	p, err := gpu.Load()
	if err != nil {
		t.Fatalf("GPU suite needs a GPU platform: %v", err)
	}
	n, err := p.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Skipf("GPU suite needs at least 2 GPUs, found %d (to check larger worlds on one GPU, set IRISGEN_TEST_WORLDS and IRISGEN_SHARE_GPUS=1)", n)
	}
	out := []int{2}
	if n > 2 {
		out = append(out, n)
	}
	return out
}

// caseCount counts the cases a test checked on each rank.
type caseCount struct{ n atomic.Int64 }

func (c *caseCount) add(n int) { c.n.Add(int64(n)) }

// countCases returns the counter of t's cases, printed when t ends in the
// line run.sh sums ("IRISGEN_CASES <n> <test>"), except by the ranks other
// than 0 of a multi-process world (each rank of which counts the same).
func countCases(t *testing.T) *caseCount {
	c := &caseCount{}
	t.Cleanup(func() {
		if rank := os.Getenv("RANK"); rank == "" || rank == "0" {
			fmt.Printf("IRISGEN_CASES %d %s\n", c.n.Load(), t.Name())
		}
	})
	return c
}

// tracef prints a line of rank r's progress to stderr when
// $IRISGEN_TEST_TRACE is set: a hang (a copy-engine wait has no time
// limit) then shows which case each rank was in.
func tracef(r *irisrt.Rank, format string, args ...any) {
	if traceOn {
		fmt.Fprintf(os.Stderr, "[trace rank %d] %s\n", r.Rank(), fmt.Sprintf(format, args...))
	}
}

var traceOn = os.Getenv("IRISGEN_TEST_TRACE") != ""

// variantSelected reports whether $IRISGEN_TEST_VARIANTS (a regular
// expression on "collective/variant"; empty: every variant) selects name
// and $IRISGEN_TEST_SKIP_VARIANTS (empty: none) does not leave it out.
// run.sh splits the matrix tests into shards with them.
func variantSelected(name string) bool {
	variantFilter.once.Do(func() {
		variantFilter.only = envRegexp("IRISGEN_TEST_VARIANTS")
		variantFilter.skip = envRegexp("IRISGEN_TEST_SKIP_VARIANTS")
	})
	return (variantFilter.only == nil || variantFilter.only.MatchString(name)) &&
		(variantFilter.skip == nil || !variantFilter.skip.MatchString(name))
}

var variantFilter struct {
	once       sync.Once
	only, skip *regexp.Regexp
}

// envRegexp compiles the regular expression in the environment variable
// name (nil when it is empty); a bad one stops the suite, naming it.
func envRegexp(name string) *regexp.Regexp {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	re, err := regexp.Compile(v)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", name, err))
	}
	return re
}

// rounds is def, the launches of a back-to-back or replay case, capped at
// $IRISGEN_TEST_ROUNDS (at least 2: a round after the first reuses the
// launch's flags). run.sh caps them in the initcheck shards, where every
// launch runs about six times slower than under racecheck.
func rounds(def int) int {
	roundCap.once.Do(func() {
		if v := os.Getenv("IRISGEN_TEST_ROUNDS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 {
				roundCap.err = fmt.Errorf("IRISGEN_TEST_ROUNDS=%q: want an integer of at least 2", v)
			}
			roundCap.n = n
		}
	})
	if roundCap.err != nil {
		panic(roundCap.err.Error())
	}
	if roundCap.n > 0 {
		return min(def, roundCap.n)
	}
	return def
}

var roundCap struct {
	once sync.Once
	n    int
	err  error
}

// catalogueHeap is the heap a rank needs for the catalogue's largest case
// in a world of n: all_to_all lamport's n slices of a 64 Mi f32 block
// (256 MiB each) in and out beside its workspace of 3 x n more, with room
// to spare.
func catalogueHeap(n int) int64 { return int64(5*n+4) << 28 }

// eachWorld runs fn in a fresh in-process world of every size, with at
// least catalogueHeap of heap a rank.
func eachWorld(t *testing.T, opts irisrt.Options, fn func(t *testing.T, w *irisrt.World)) {
	for _, n := range worldSizes(t) {
		t.Run(fmt.Sprintf("world%d", n), func(t *testing.T) {
			o := opts
			o.HeapBytes = max(o.HeapBytes, catalogueHeap(n))
			w, err := irisrt.NewLocalWorld(n, o)
			if err != nil {
				t.Fatalf("NewLocalWorld(%d): %v", n, err)
			}
			defer w.Close()
			fn(t, w)
		})
	}
}

// eachVariantCase runs one subtest per case of cases (named by caseName) in every world: run
// (a matrix runner such as runMatrix, given a filter that keeps only that
// case) checks it on every rank and counts the cases it checked, and the log
// line says how many passed, with what(case, world) describing the matrix.
func eachVariantCase[C any](t *testing.T, cases []C, caseName func(*C) string,
	run func(r *irisrt.Rank, only func(*C) bool, count *int) error, what func(c *C, world int) string) {
	total := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		for i := range cases {
			c := &cases[i]
			name := caseName(c)
			if !variantSelected(name) {
				continue
			}
			t.Run(name, func(t *testing.T) {
				counts := make([]int, w.Size())
				err := w.Run(func(r *irisrt.Rank) error {
					return run(r, func(x *C) bool { return x == c }, &counts[r.Rank()])
				})
				if err != nil {
					t.Fatal(err)
				}
				total.add(counts[0])
				t.Logf("%s: %d cases passed on each of %d ranks (%s)", name, counts[0], w.Size(), what(c, w.Size()))
			})
		}
	})
}

func defaultOpts() irisrt.Options {
	return irisrt.Options{HeapBytes: heapBytes, Timeout: 20 * time.Second}
}

// upload copies host bytes into t.
func upload(r *irisrt.Rank, t irisrt.Tensor, b []byte) error {
	if int64(len(b)) != t.Bytes() {
		return fmt.Errorf("upload: %d bytes into a %d-byte tensor", len(b), t.Bytes())
	}
	if len(b) == 0 {
		return nil
	}
	return r.Device().CopyHtoD(t.Ptr, unsafe.Pointer(&b[0]), t.Bytes())
}

// download copies t to the host.
func download(r *irisrt.Rank, t irisrt.Tensor) ([]byte, error) {
	b := make([]byte, t.Bytes())
	if len(b) == 0 {
		return b, nil
	}
	err := r.Device().CopyDtoH(unsafe.Pointer(&b[0]), t.Ptr, t.Bytes())
	return b, err
}

// randomBytes returns n reproducible random bytes for (seed, rank, round).
func randomBytes(n int64, seed, rank, round uint64) []byte {
	rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(rank), byte(round), byte(round >> 8), byte(round >> 16)})
	b := make([]byte, n)
	_, _ = rng.Read(b)
	return b
}

// firstDiff describes where two byte slices differ, in elements of size es.
func firstDiff(got, want []byte, es int) string {
	for i := range want {
		if got[i] != want[i] {
			e := i / es
			return fmt.Sprintf("element %d: got % x, want % x", e, got[e*es:(e+1)*es], want[e*es:(e+1)*es])
		}
	}
	return "lengths differ"
}

// syncCheck waits for the rank's stream and returns any error record the
// kernels left.
func syncCheck(r *irisrt.Rank, s gpu.Stream) error {
	if err := r.Device().StreamSynchronize(s); err != nil {
		return err
	}
	return r.Check()
}

// TestHeapTranslation checks that every rank sees its peers' heap objects at
// base[peer] + offset, at a small and at a large (> 1 GiB) offset.
func TestHeapTranslation(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		err := w.Run(func(r *irisrt.Rank) error {
			h := r.Heap()
			small, err := h.Alloc(irismodel.U64, 4096+3)
			if err != nil {
				return err
			}
			pad, err := h.Alloc(irismodel.F32, (1<<30)/4) // push the next object past 1 GiB
			if err != nil {
				return err
			}
			big, err := h.Alloc(irismodel.U64, 1024)
			if err != nil {
				return err
			}
			if off := int64(big.Ptr - h.Base(r.Rank())); off < 1<<30 {
				return fmt.Errorf("rank %d: large object at offset %d, want > 1 GiB", r.Rank(), off)
			}
			for _, obj := range []irisrt.Tensor{small, big} {
				if err := upload(r, obj, randomBytes(obj.Bytes(), 1, uint64(r.Rank()), uint64(obj.Len))); err != nil {
					return err
				}
			}
			if err := r.HostBarrier(r.Stream()); err != nil {
				return err
			}
			for peer := 0; peer < r.World(); peer++ {
				for _, obj := range []irisrt.Tensor{small, big} {
					remote := obj
					remote.Ptr = h.Base(peer) + (obj.Ptr - h.Base(r.Rank()))
					got, err := download(r, remote)
					if err != nil {
						return fmt.Errorf("rank %d reading peer %d: %w", r.Rank(), peer, err)
					}
					if want := randomBytes(obj.Bytes(), 1, uint64(peer), uint64(obj.Len)); !bytes.Equal(got, want) {
						return fmt.Errorf("rank %d: peer %d object at offset %d: %s", r.Rank(), peer, obj.Ptr-h.Base(r.Rank()), firstDiff(got, want, 8))
					}
				}
			}
			if err := r.HostBarrier(r.Stream()); err != nil {
				return err
			}
			for _, obj := range []irisrt.Tensor{big, pad, small} {
				if err := h.Free(obj); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		cases.add(2 * w.Size()) // two objects of every rank
	})
}

// TestHostBarrier runs many host barriers.
func TestHostBarrier(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		if err := w.Run(func(r *irisrt.Rank) error { return hostBarrierRounds(r, 200) }); err != nil {
			t.Fatal(err)
		}
		cases.add(200)
	})
}

func hostBarrierRounds(r *irisrt.Rank, rounds int) error {
	for i := 0; i < rounds; i++ {
		if err := r.HostBarrier(r.Stream()); err != nil {
			return fmt.Errorf("rank %d host barrier %d: %w", r.Rank(), i, err)
		}
	}
	return nil
}

// TestBarrierTimeout launches a kernel on rank 0 that rank 1 never joins:
// rank 0 must get a *BarrierTimeoutError naming rank 1 within the limit, and
// the world must close cleanly. Two kernels: the device barrier (a per-block
// sync) and moe_dispatch in barrier mode none, whose every block meets the
// others in grid_sync before the last one to arrive meets the peers (the
// early blocks' own wait must not be the record that comes back).
func TestBarrierTimeout(t *testing.T) {
	const limit = 500 * time.Millisecond
	// setup runs on both ranks (plans are made by every rank together) and
	// returns the launch that only rank 0 makes.
	kernels := []struct {
		name  string
		setup func(r *irisrt.Rank) (launch func() error, done func(), err error)
	}{
		{"barrier", func(r *irisrt.Rank) (func() error, func(), error) {
			p, err := newBarrier(r)
			if err != nil {
				return nil, nil, err
			}
			return func() error { return p.Launch(r.Stream(), irismodel.BarrierDevice) }, func() { p.Close() }, nil
		}},
		{"grid_sync", func(r *irisrt.Rank) (func() error, func(), error) {
			c := moeCase{t: 4096, h: 128, k: 2, e: 8, routing: "random", dt: irismodel.BF16}
			g, err := newMoeRig(r, c)
			if err != nil {
				return nil, nil, err
			}
			if err := g.upload(r, moeInputs(c, r.World(), r.Rank(), 0)); err != nil {
				return nil, g.close, err
			}
			return func() error {
				return g.launchDispatch(r.Stream(), irismodel.BarrierNone)
			}, g.close, nil
		}},
	}
	cases := countCases(t)
	for _, k := range kernels {
		t.Run(k.name, func(t *testing.T) {
			opts := defaultOpts()
			opts.Timeout = limit
			w, err := irisrt.NewLocalWorld(2, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			start := time.Now()
			errs := make([]error, 2)
			err = w.Run(func(r *irisrt.Rank) error {
				launch, done, err := k.setup(r)
				if done != nil {
					defer done()
				}
				if err != nil || r.Rank() == 1 {
					return err // rank 1 never arrives
				}
				if err := launch(); err != nil {
					return err
				}
				errs[r.Rank()] = syncCheck(r, r.Stream())
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			var te *irisrt.BarrierTimeoutError
			if !errors.As(errs[0], &te) || !errors.Is(errs[0], irisrt.ErrBarrierTimeout) {
				t.Fatalf("rank 0: got %v, want a *BarrierTimeoutError", errs[0])
			}
			if te.Rank != 0 || te.Peer != 1 {
				t.Fatalf("timeout record names rank %d peer %d, want rank 0 peer 1: %v", te.Rank, te.Peer, te)
			}
			if took > 2*limit+10*time.Second {
				t.Fatalf("timeout took %v with a %v limit", took, limit)
			}
			cases.add(1)
			t.Logf("rank 0 got %q after %v", errs[0], took)
		})
	}
}

// TestDeviceBarrier runs 10,000 device barriers back to back on every rank.
func TestDeviceBarrier(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		const rounds = 10000
		took := make([]time.Duration, w.Size())
		err := w.Run(func(r *irisrt.Rank) error {
			d, err := deviceBarrierRounds(r, rounds)
			took[r.Rank()] = d
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		cases.add(rounds)
		t.Logf("%d device barriers, per barrier per rank: %v (correctness run, not a benchmark)", rounds, slowest(took)/rounds)
	})
}

func deviceBarrierRounds(r *irisrt.Rank, rounds int) (time.Duration, error) {
	p, err := newBarrier(r)
	if err != nil {
		return 0, err
	}
	s := r.Stream()
	start := time.Now()
	for i := 0; i < rounds; i++ {
		if err := p.Launch(s, irismodel.BarrierDevice); err != nil {
			return 0, fmt.Errorf("rank %d barrier %d: %w", r.Rank(), i, err)
		}
	}
	if err := syncCheck(r, s); err != nil {
		return 0, fmt.Errorf("rank %d after %d barriers: %w", r.Rank(), rounds, err)
	}
	return time.Since(start), nil
}

func slowest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// ownTests are the tests of the variants outside the suite's matrices.
var ownTests = map[string]string{
	"barrier/device":    "TestDeviceBarrier",
	"moe_dispatch/push": "TestMoE",
	"moe_combine/push":  "TestMoE",
}

// TestSuiteCoversEveryVariant checks that every variant of the catalogue has
// a case in one of the suite's matrices (catalogue, paramCatalogue,
// normCatalogue) or a test of its own: a variant missing from them passes
// the suite untested (broadcast scatter_gather did until 2026-11-26). It
// needs no GPU; `make test` runs it.
func TestSuiteCoversEveryVariant(t *testing.T) {
	covered := map[string]string{}
	// every variant: what the matrices hold, not what a shard runs
	for i := range catalogue {
		covered[catalogue[i].name()] = "catalogue"
	}
	// every variant: as above
	for i := range paramCatalogue {
		covered[paramCatalogue[i].name()] = "paramCatalogue"
	}
	// every variant: as above
	for i := range normCatalogue {
		covered[normCatalogue[i].name()] = "normCatalogue"
	}
	for name, test := range ownTests {
		covered[name] = test
	}
	for _, e := range collectives.Catalogue {
		name := e.Collective + "/" + e.Variant
		if covered[name] == "" {
			t.Errorf("%s has no case in the GPU suite: add one to catalogue (catalogue_test.go), paramCatalogue (params_test.go, for a variant with launch parameters) or normCatalogue (rmsnorm_test.go)", name)
		}
		delete(covered, name)
	}
	for name, where := range covered {
		t.Errorf("%s in %s is no variant of the catalogue: remove it", name, where)
	}
}

// caseRules is what the generated table's rules make of a variant's user
// tensors, for the tests to expect: the spec says it once, through the
// table (tests/table_test.go checks the table against the spec's IR), and
// no case restates it.
type caseRules struct {
	importIn   bool   // peers read the input: staged when it is off the heap
	heapOut    bool   // peers write the output: it must be on the heap
	aliasAllow bool   // input and output may be the same tensor (in place)
	inOwner    string // the rank parameter whose rank alone passes the input ("" every rank)
	outOwner   string // the same for the output
	// noNone: the variant has no mode none (a copy-engine variant whose
	// peers write a tensor only one rank passes: its staging buffer, copied
	// into the tensor at every launch).
	noNone bool
}

// tableRules holds every variant's caseRules, read from the table once
// (ranks of an in-process world ask for them at once).
var tableRules = sync.OnceValue(func() map[string]caseRules {
	rules := map[string]caseRules{}
	for _, e := range collectives.Catalogue {
		var r caseRules
		for _, t := range e.Tensors {
			switch t.Name {
			case "input":
				r.importIn, r.inOwner = t.Remote && !t.Heap, t.Owner
			case "output":
				r.heapOut, r.outOwner = t.Heap, t.Owner
			}
		}
		for _, p := range e.Descriptor().AliasPairs() {
			if p.InPlace && (p.A == "input" && p.B == "output" || p.A == "output" && p.B == "input") {
				r.aliasAllow = true
			}
		}
		r.noNone = !slices.Contains(e.Barriers, irismodel.BarrierNone)
		rules[e.Collective+"/"+e.Variant] = r
	}
	return rules
})

// rulesOf is the rules of coll/variant; a name the table lacks is the
// suite's bug (a case renamed or made up), which would otherwise expect the
// zero rules of no variant, so it stops the run.
func rulesOf(coll, variant string) caseRules {
	r, ok := tableRules()[coll+"/"+variant]
	if !ok {
		panic(fmt.Sprintf("tests/gpu: %s/%s is no variant of the generated table", coll, variant))
	}
	return r
}

func (vc *variantCase) importIn() bool   { return rulesOf(vc.coll, vc.variant).importIn }
func (vc *variantCase) heapOut() bool    { return rulesOf(vc.coll, vc.variant).heapOut }
func (vc *variantCase) aliasAllow() bool { return rulesOf(vc.coll, vc.variant).aliasAllow }
func (pc *paramCase) importIn() bool     { return rulesOf(pc.coll, pc.variant).importIn }
func (pc *paramCase) heapOut() bool      { return rulesOf(pc.coll, pc.variant).heapOut }
func (pc *paramCase) inOwner() string    { return rulesOf(pc.coll, pc.variant).inOwner }
func (pc *paramCase) outOwner() string   { return rulesOf(pc.coll, pc.variant).outOwner }
func (pc *paramCase) noNone() bool       { return rulesOf(pc.coll, pc.variant).noNone }
func (nc *normCase) importIn() bool      { return rulesOf(nc.coll, nc.variant).importIn }
func (nc *normCase) heapOut() bool       { return rulesOf(nc.coll, nc.variant).heapOut }
func (nc *normCase) aliasAllow() bool    { return rulesOf(nc.coll, nc.variant).aliasAllow }

package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu/fakekernels"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// TestEighthsInHalf: the probe's values, multiples of 1/8 in [-1, 1], are
// exact halves.
func TestEighthsInHalf(t *testing.T) {
	for k, want := range map[int]uint16{8: 0x3c00, 1: 0x3000, -8: 0xbc00, 0: 0, 3: 0x3600, -5: 0xb900} {
		require.Equal(t, want, irismodel.F32ToF16(float32(k)/8), "k=%d", k)
		require.Equal(t, float32(k)/8, irismodel.F16ToF32(want), "k=%d", k)
	}
}

func TestEighths(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := eighths(irismodel.BF16, 1000, rng)
	require.Len(t, b, 2000)
	for i := 0; i < 1000; i++ {
		h := binary.LittleEndian.Uint16(b[2*i:])
		// bf16 of k/8, |k| <= 8: exponent at most that of 1.0, 3 mantissa bits at most.
		require.LessOrEqual(t, h&0x7fff, uint16(0x3f80), "element %d = %#x", i, h)
		require.Zero(t, h&0x0f, "element %d = %#x is not a multiple of 1/8", i, h)
	}
}

func TestMergeKeepsFailure(t *testing.T) {
	m := merge([]Result{{Replays: 20}, {Replays: 3, Failed: true, Reason: "x"}})
	require.True(t, m.Failed)
	require.Equal(t, "x", m.Reason)
	require.Equal(t, 3, m.Replays)
}

func TestFirstDiff(t *testing.T) {
	require.Equal(t, -1, firstDiff([]byte{1, 2}, []byte{1, 2}))
	require.Equal(t, 1, firstDiff([]byte{1, 2}, []byte{1, 3}))
	require.Equal(t, 2, firstDiff([]byte{1, 2}, []byte{1, 2, 3}))
}

func TestMoEReference(t *testing.T) {
	for _, dt := range []irismodel.DType{irismodel.F32, irismodel.F16, irismodel.BF16} {
		rng := rand.New(rand.NewPCG(3, 4))
		x := eighths(dt, moeTokens*moeHidden, rng)
		wts := eighths(irismodel.F32, moeTokens*moeK, rng)
		// The exact product, encoded like the GPU would round it.
		out := make([]byte, len(x))
		es := int(dt.Size())
		for i := range len(x) / es {
			tok := i / moeHidden
			var sum float32
			for j := range moeK {
				sum += decode(irismodel.F32, wts[4*(tok*moeK+j):])
			}
			encode(t, dt, out[i*es:], decode(dt, x[i*es:])*sum)
		}
		require.Equal(t, -1, moeMismatch(dt, out, x, wts), "%s: the reference accepts the exact result", dt)
		out[es*moeHidden+1] ^= 0x40 // token 1
		require.Equal(t, moeHidden, moeMismatch(dt, out, x, wts), "%s: a corrupted element is found", dt)
	}
}

// encode writes v (exactly representable in dt) as dt.
func encode(t *testing.T, dt irismodel.DType, b []byte, v float32) {
	bits := math.Float32bits(v)
	switch dt {
	case irismodel.F32:
		binary.LittleEndian.PutUint32(b, bits)
	case irismodel.BF16:
		require.Zero(t, bits&0xffff, "%g is not exact in bf16", v)
		binary.LittleEndian.PutUint16(b, uint16(bits>>16))
	case irismodel.F16:
		binary.LittleEndian.PutUint16(b, irismodel.F32ToF16(v))
		require.Equal(t, v, decode(irismodel.F16, b), "%g is not exact in f16", v)
	}
}

// fakeWorld is an in-process world of n fake GPUs on platform p (the fake
// fp, or a wrapper of it) serving the catalogue's kernels.
func fakeWorld(t *testing.T, n int, fp *fakegpu.Platform, p gpu.Platform) *irisrt.World {
	t.Helper()
	kernels, err := fakekernels.For(fp, irisimpl.Registered("github.com/irisgen/irisgen/generated/collectives"))
	require.NoError(t, err)
	if p == nil {
		p = fp
	}
	w, err := irisrt.NewLocalWorld(n, irisrt.Options{Platform: p, Kernels: kernels, HeapBytes: 64 << 20, RendezvousTimeout: 20 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return w
}

// TestShareResultMerges: every rank of a world gets the worst rank's
// result of a case (RunRank in a multi-process world), a reason of any
// length arriving bounded.
func TestShareResultMerges(t *testing.T) {
	w := fakeWorld(t, 3, fakegpu.New(3), nil)
	got := make([]Result, 3)
	long := strings.Repeat("nested: ", 1<<17) // a megabyte
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		st := &stepper{r: r}
		res := Result{Collective: "all_gather", Variant: "push", Captured: true, Replays: 10 + r.Rank()}
		if r.Rank() == 1 {
			res.Failed, res.Reason, res.Replays = true, "replay 4: output byte 3 differs", 4
		}
		var err error
		if got[r.Rank()], err = st.shareResult(res); err != nil {
			return err
		}
		res.Failed, res.Reason = r.Rank() == 2, long
		got[r.Rank()], err = st.shareResult(res)
		return err
	}))
	for k, res := range got {
		assert.True(t, res.Failed, "rank %d", k)
		assert.True(t, strings.HasPrefix(res.Reason, "nested: nested: "), "rank %d", k)
		assert.Less(t, len(res.Reason), maxText+100, "rank %d", k)
	}
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		res := Result{Collective: "all_gather", Variant: "push", Captured: true, Replays: 10 + r.Rank()}
		if r.Rank() == 1 {
			res.Failed, res.Reason, res.Replays = true, "replay 4: output byte 3 differs", 4
		}
		var err error
		got[r.Rank()], err = (&stepper{r: r}).shareResult(res)
		return err
	}))
	for k, res := range got {
		assert.Equal(t, Result{Collective: "all_gather", Variant: "push", Captured: true, Replays: 4, Failed: true, Reason: "replay 4: output byte 3 differs"}, res, "rank %d", k)
	}
}

// faultPlatform wraps the fake so that one device's calls fail where a
// test says.
type faultPlatform struct {
	*fakegpu.Platform
	fail func(dev int, call string) error
}

type faultDevice struct {
	gpu.Device
	p *faultPlatform
}

func (p *faultPlatform) Open(i int) (gpu.Device, error) {
	d, err := p.Platform.Open(i)
	return &faultDevice{Device: d, p: p}, err
}

func unwrap(d gpu.Device) gpu.Device {
	if f, ok := d.(*faultDevice); ok {
		return f.Device
	}
	return d
}

func (d *faultDevice) CanAccessPeer(peer gpu.Device) (bool, error) {
	return d.Device.CanAccessPeer(unwrap(peer))
}

func (d *faultDevice) EnablePeerAccess(peer gpu.Device) error {
	return d.Device.EnablePeerAccess(unwrap(peer))
}

func (d *faultDevice) EndCapture(s gpu.Stream) (gpu.Graph, error) {
	g, err := d.Device.EndCapture(s)
	if ferr := d.p.fail(d.Ordinal(), "EndCapture"); ferr != nil && err == nil {
		d.Device.DestroyGraph(g)
		return 0, ferr
	}
	return g, err
}

func (d *faultDevice) CopyDtoH(dst unsafe.Pointer, src gpu.DevicePtr, bytes int64) error {
	if err := d.p.fail(d.Ordinal(), "CopyDtoH"); err != nil {
		return err
	}
	return d.Device.CopyDtoH(dst, src, bytes)
}

// TestOneRankFailsTheRestGoOn: in a world of 4 processes' ranks, a capture
// that fails on one rank alone, and a replay whose output copy fails on
// another, fail their own case only: the ranks leave each case at the
// same step, so every later case passes, and every rank gets the failing
// rank's reason, bounded.
func TestOneRankFailsTheRestGoOn(t *testing.T) {
	var mu sync.Mutex
	count := map[string]int{}
	fp := fakegpu.New(4)
	p := &faultPlatform{Platform: fp, fail: func(dev int, call string) error {
		mu.Lock()
		defer mu.Unlock()
		k := fmt.Sprint(dev, call)
		count[k]++
		switch {
		case dev == 1 && call == "EndCapture" && count[k] == 1:
			return errors.New("CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: " + strings.Repeat("x", 1<<16))
		case dev == 2 && call == "CopyDtoH" && count[k] == 7:
			return errors.New("CUDA_ERROR_ILLEGAL_ADDRESS")
		}
		return nil
	}}
	w := fakeWorld(t, 4, fp, p)
	results := make([][]Result, 4)
	cfg := Config{Entries: catalogueEntries(), N: 9, Replays: 3, Collectives: []string{"all_gather"}}
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		var err error
		results[r.Rank()], err = RunRank(r, cfg)
		return err
	}))
	for k := range results {
		assert.Equal(t, results[0], results[k], "rank %d: the same merged results", k)
	}
	var failed []string
	for i, res := range results[0] {
		if res.Failed {
			failed = append(failed, fmt.Sprintf("%d %s", i, res.Reason[:min(len(res.Reason), 60)]))
			assert.Less(t, len(res.Reason), maxText+100)
		} else if res.Claimed {
			assert.Equal(t, 3, res.Replays, "case %d", i)
		}
	}
	require.Len(t, results[0], 15, "5 variants x 3 modes")
	require.Equal(t, []string{
		"0 EndCapture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: xxxxxxxxx",
		"2 replay 2: graph replay: CUDA_ERROR_ILLEGAL_ADDRESS", // rank 2's 7th copy to the host

	}, failed)
}

// TestOutOfStepStops: a rank that makes one collective call its peers do
// not stops the probe on every rank at once, with ErrOutOfStep (or the
// world's failure that followed it), in errors of bounded length.
func TestOutOfStepStops(t *testing.T) {
	fp := fakegpu.New(3)
	w := fakeWorld(t, 3, fp, nil)
	errs := make([]error, 3)
	results := make([][]Result, 3)
	_ = w.Run(func(r *irisrt.Rank) error {
		if r.Rank() == 2 {
			_ = r.HostBarrier(r.Stream()) // one call more than its peers
		}
		results[r.Rank()], errs[r.Rank()] = RunRank(r, Config{Entries: catalogueEntries(), N: 9, Replays: 2, Collectives: []string{"all_gather", "all_reduce"}})
		return errs[r.Rank()]
	})
	outOfStep := 0
	for k, err := range errs {
		require.Error(t, err, "rank %d", k)
		assert.Less(t, len(err.Error()), 3*maxText, "rank %d: %s", k, err)
		assert.Contains(t, err.Error(), "probe stopped at all_gather push device", "rank %d", k)
		if errors.Is(err, ErrOutOfStep) {
			outOfStep++
		}
		assert.Empty(t, results[k], "rank %d", k)
	}
	assert.GreaterOrEqual(t, outOfStep, 1)
}

// catalogueEntries are the catalogue's variants.
func catalogueEntries() []irisimpl.Entry { return collectives.Catalogue }

// TestParamSets: a variant with parameters is captured with two sets of
// values, each rank parameter a different rank in each, an int its least
// value from 1 then from -1 within its range, an f32 1 then 0.5; a variant
// without parameters once.
func TestParamSets(t *testing.T) {
	entry := func(coll string) irisimpl.Entry {
		e, ok := collectives.Lookup(coll, "push")
		require.True(t, ok, coll)
		return e
	}
	text := func(e irisimpl.Entry, world int) []string {
		var out []string
		for _, ps := range paramSets(e, world) {
			out = append(out, paramText(e, ps))
		}
		return out
	}
	require.Equal(t, []string{"root=0", "root=1"}, text(entry("broadcast"), 2))
	require.Equal(t, []string{"src=0 dst=1", "src=1 dst=0"}, text(entry("send_recv"), 2))
	require.Equal(t, []string{"src=0 dst=1", "src=1 dst=2"}, text(entry("send_recv"), 4))
	require.Equal(t, []string{"offset=1", "offset=-1"}, text(entry("shift"), 2))
	require.Equal(t, []string{""}, text(entry("all_gather"), 2))
	bounded := irisimpl.Entry{Params: []irismodel.ParamDesc{{Name: "k", Kind: irismodel.ParamInt, Min: 2, Max: 8}, {Name: "eps", Kind: irismodel.ParamF32}}}
	require.Equal(t, []string{"k=2 eps=1", "k=2 eps=0.5"}, text(bounded, 2))
}

// TestProbeSizes: the last size parameter is N, the others a few rows.
func TestProbeSizes(t *testing.T) {
	require.Empty(t, probeSizes(0, 9))
	require.Equal(t, []int64{9}, probeSizes(1, 9))
	require.Equal(t, []int64{rowsOf, 9}, probeSizes(2, 9))
	require.Equal(t, []int64{rowsOf, rowsOf, 9}, probeSizes(3, 9))
}

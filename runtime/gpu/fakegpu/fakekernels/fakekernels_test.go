package fakekernels

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu/fakegpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// table is a one-collective table with the given spec hash.
func table(path, hash string) *irisimpl.Table {
	return &irisimpl.Table{ImportPath: path, Collectives: []irisimpl.Collective{{
		Name: "copy", SpecHash: hash, DTypes: []irismodel.DType{irismodel.F32},
		Sizes:   []irisimpl.SizeParam{{Name: "n", From: 0}},
		Tensors: []irismodel.TensorDesc{{Name: "input", Dir: irismodel.In, Shape: irismodel.Shape{irismodel.DimSize(0)}}},
		Variants: []irisimpl.Variant{{Name: "local", Uses: []irisimpl.Use{irisimpl.UseLocal}, Barriers: []irismodel.Barrier{irismodel.BarrierNone},
			Capturable: []irismodel.Barrier{irismodel.BarrierNone}, Threads: 64, MaxBlocks: 1, VectorBytes: 16}},
	}}}
}

// TestFor: every variant of the catalogue, in every dtype and op, makes a
// plan on the fake with the code objects For serves; two tables may share
// a collective's name only with its spec.
func TestFor(t *testing.T) {
	p := fakegpu.New(2)
	cat := irisimpl.Registered("github.com/irisgen/irisgen/generated/collectives")
	require.NotNil(t, cat)
	kernels, err := For(p, cat, table("example.com/a", collectives.AllGatherSpecHash))
	require.NoError(t, err)
	w, err := irisrt.NewLocalWorld(2, irisrt.Options{Platform: p, Kernels: kernels, HeapBytes: 64 << 20})
	require.NoError(t, err)
	defer w.Close()
	plans := 0
	require.NoError(t, w.Run(func(r *irisrt.Rank) error {
		for _, e := range collectives.Catalogue {
			sizes := make([]int64, len(e.Sizes))
			for i := range sizes {
				sizes[i] = 8
			}
			dts := append([]irismodel.DType{0}, e.DTypes...)[min(1, len(e.DTypes)):]
			for _, dt := range dts {
				for _, op := range append([]string{""}, e.Ops...)[min(1, len(e.Ops)):] {
					p, err := e.New(r, dt, op, sizes)
					if err != nil {
						return err
					}
					if err := p.Close(); err != nil {
						return err
					}
					if r.Rank() == 0 {
						plans++
					}
				}
			}
		}
		return nil
	}))
	require.Greater(t, plans, 100)

	_, err = For(fakegpu.New(1), table("example.com/b", "h1"), table("example.com/c", "h2"))
	require.ErrorContains(t, err, `two tables hold a collective "copy" of different specs`)
	_, err = For(fakegpu.New(1), table("example.com/b", "h1"), table("example.com/c", "h1"))
	require.NoError(t, err, "the same spec in two packages: one code object serves both")
}

package tests

import (
	"io/fs"
	"reflect"
	"slices"
	"testing"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// catalogueIR compiles the specs of the catalogue built into irisgen, and
// returns them with its templates.
func catalogueIR(t *testing.T) ([]*ir.Collective, fs.FS) {
	t.Helper()
	specs, err := fs.Sub(irisgen.Specs, "specs")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := fs.Sub(irisgen.Templates, "templates")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := ir.CompileAll(specs, tmpl, "specs")
	if err != nil {
		t.Fatalf("the catalogue does not compile:\n%v", err)
	}
	return cs, tmpl
}

// TestTableMatchesIR checks the descriptor table that generated/collectives
// registers against the IR of the catalogue, variant by variant: what the
// runtime computes from the table (every kernel name, the alias pairs) is
// what the IR says, and every fact it copies (placements, barrier modes,
// capture, launch shape, shapes, dtypes, sizes, hashes) is the IR's.
func TestTableMatchesIR(t *testing.T) {
	tab := irisimpl.Registered("github.com/irisgen/irisgen/generated/collectives")
	if tab == nil {
		t.Fatal("generated/collectives registered no table under its import path")
	}
	if len(collectives.Catalogue) == 0 {
		t.Fatal("the catalogue is empty: the table is unusable")
	}
	cs, _ := catalogueIR(t)
	if len(tab.Collectives) != len(cs) {
		t.Fatalf("%d collectives in the table, %d specs", len(tab.Collectives), len(cs))
	}
	kernels := 0
	for _, c := range cs {
		var tc *irisimpl.Collective
		for i := range tab.Collectives {
			if tab.Collectives[i].Name == c.Name {
				tc = &tab.Collectives[i]
			}
		}
		if tc == nil {
			t.Errorf("%s is not in the table", c.Name)
			continue
		}
		if tc.SpecHash != c.SpecHash {
			t.Errorf("%s: spec hash %s, IR %s", c.Name, tc.SpecHash, c.SpecHash)
		}
		var ops, sizes []string
		for _, o := range c.Ops {
			ops = append(ops, string(o))
		}
		for _, s := range tc.Sizes {
			sizes = append(sizes, s.Name)
		}
		if !slices.Equal(tc.DTypes, c.DTypes) || !slices.Equal(tc.Ops, ops) || !slices.Equal(sizes, c.Symbols) {
			t.Errorf("%s: dtypes %v ops %v sizes %v; IR %v %v %v", c.Name, tc.DTypes, tc.Ops, sizes, c.DTypes, c.Ops, c.Symbols)
		}
		if len(tc.Tensors) != len(c.Tensors) {
			t.Fatalf("%s: %d tensors, IR %d", c.Name, len(tc.Tensors), len(c.Tensors))
		}
		// The table's tensors are the IR's descriptors (one model, irismodel).
		for i, it := range c.Tensors {
			if tt := tc.Tensors[i]; !reflect.DeepEqual(tt, it.TensorDesc) {
				t.Errorf("%s: tensor %d is %+v, IR %+v", c.Name, i, tt, it.TensorDesc)
			}
		}
		for _, v := range c.Variants {
			tv := tc.Variant(v.Name)
			if tv == nil {
				t.Errorf("%s/%s is not in the table", c.Name, v.Name)
				continue
			}
			// Kernel names: the runtime's, for every dtype x op, are the IR's.
			var names []string
			for _, k := range v.Kernels {
				names = append(names, k.Name)
				got := tv.Kernel(k.DType, string(k.Op))
				if got != k.Name || got != irismodel.KernelName(c.Name, v.Name, k.DType, string(k.Op)) {
					t.Errorf("%s/%s %s %s: the runtime names the kernel %s, the IR %s", c.Name, v.Name, k.DType, k.Op, got, k.Name)
				}
				kernels++
			}
			want := max(len(c.DTypes), 1) * max(len(c.Ops), 1)
			if v.Engine == irismodel.EngineCopy {
				want = 0 // no kernel: its launches enqueue copies
			}
			if len(names) != want {
				t.Errorf("%s/%s: %d kernels, want %d", c.Name, v.Name, len(names), want)
			}
			// Placements, as uses.
			for i, u := range v.Uses {
				// A workspace the plan owns (PlacePlan) needs no check: UseLocal.
				want := map[ir.Placement]irisimpl.Use{ir.PlaceAny: irisimpl.UseLocal, ir.PlacePlan: irisimpl.UseLocal, ir.PlaceImport: irisimpl.UseImport, ir.PlaceHeap: irisimpl.UseHeap}[u.Placement]
				if c.Tensors[i].Dir == irismodel.Workspace && u.Access == 0 {
					want = irisimpl.Unused
				}
				if tv.Uses[i] != want {
					t.Errorf("%s/%s: tensor %s used %d, IR placement %s (access %s)", c.Name, v.Name, c.Tensors[i].Name, tv.Uses[i], u.Placement, u.Access)
				}
			}
			// Aliasing: the runtime's pairs are the IR's, with its rule.
			var pairs []irisimpl.AliasPair
			for _, p := range v.AliasPairs() {
				pairs = append(pairs, irisimpl.AliasPair{A: p[0].Name, B: p[1].Name, InPlace: v.InPlace(p[0], p[1]), OwnBlock: v.OwnBlock(p[0], p[1]) || v.OwnBlock(p[1], p[0])})
			}
			if got := tv.AliasPairs(); !slices.Equal(got, pairs) {
				t.Errorf("%s/%s: alias pairs %v, IR %v", c.Name, v.Name, got, pairs)
			}
			// Barrier modes and capture.
			var capt []irismodel.Barrier
			for _, cp := range v.Capture {
				if cp.Capturable {
					capt = append(capt, cp.Mode)
				}
			}
			if !slices.Equal(tv.Barriers, v.Barriers) || !slices.Equal(tv.Capturable, capt) {
				t.Errorf("%s/%s: modes %v capturable %v; IR %v %v", c.Name, v.Name, tv.Barriers, tv.Capturable, v.Barriers, capt)
			}
			// MinBlocks is written only above 1 (0 and 1 mean the same).
			if tv.Threads != v.Launch.Threads || tv.MaxBlocks != v.Launch.MaxBlocks || max(tv.MinBlocks, 1) != v.Launch.MinBlocks || tv.VectorBytes != v.Launch.VectorBytes {
				t.Errorf("%s/%s: launch %d/%d/%d/%d, IR %+v", c.Name, v.Name, tv.Threads, tv.MaxBlocks, tv.MinBlocks, tv.VectorBytes, v.Launch)
			}
		}
		// The auto table holds the IR's rules, in order: both choose with
		// irismodel.Choose, so the same rules choose alike.
		if (c.Auto == nil) != (len(tc.Auto) == 0) {
			t.Errorf("%s: auto table %v, IR %v", c.Name, tc.Auto, c.Auto)
			continue
		}
		if c.Auto != nil && !slices.Equal(tc.Auto, c.Auto.ModelRules()) {
			t.Errorf("%s: auto table %v, IR %v", c.Name, tc.Auto, c.Auto.ModelRules())
		}
	}
	t.Logf("%d kernel names of %d collectives agree with irismodel.KernelName", kernels, len(cs))
}

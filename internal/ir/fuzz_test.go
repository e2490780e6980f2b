package ir

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// FuzzCompile checks that no input makes Compile panic or stall, and that
// every result is either a consistent Collective (the rule table applied,
// names and symbols that build) or a non-empty, positioned diag.List.
// Seeds: the error tables (copy-engine refusals too), the derivation spec,
// the catalogue (copy-engine variants too), plus
// testdata/fuzz/FuzzCompile (every_key uses every key of the language).
func FuzzCompile(f *testing.F) {
	for _, tc := range errorCases {
		f.Add([]byte(tc.src))
	}
	for _, tc := range copyErrorCases {
		f.Add([]byte(tc.src))
	}
	f.Add([]byte(reduceSpec))
	specs, _ := filepath.Glob("../../specs/*.yaml")
	for _, name := range specs {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(src)
		}
	}
	templates := testTemplates()
	f.Fuzz(func(t *testing.T, src []byte) {
		var c *Collective
		err := within(t, len(src), func() (err error) { c, err = Compile("spec.yaml", src, templates); return err })
		if err != nil {
			checkPositioned(t, err, "spec.yaml")
			if c != nil {
				t.Fatal("a Collective together with errors")
			}
			return
		}
		checkCollective(t, c)
	})
}

// FuzzTuning checks ParseTuning the same way on tables for a collective
// with two variants: no panic, no stall, positioned errors, or a table
// whose every rule names a variant, whose last rule matches every launch,
// and which FormatTuning writes back to the same table. Seeds: the error
// table, the catalogue's tables (renamed), testdata/fuzz/FuzzTuning.
func FuzzTuning(f *testing.F) {
	for _, tc := range tuningErrorCases {
		f.Add([]byte(tc.table))
	}
	tables, _ := filepath.Glob("../../specs/tuning/*.yaml")
	for _, name := range tables {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(src)
		}
	}
	c, err := Compile("ar.yaml", []byte(tuneSpec), testTemplates())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		var a *Auto
		err := within(t, len(src), func() error {
			var errs diag.List
			a, errs = ParseTuning("t.yaml", src, c)
			return errs.Err()
		})
		if err != nil {
			checkPositioned(t, err, "t.yaml")
			if a != nil {
				t.Fatal("a table together with errors")
			}
			return
		}
		if len(a.Rules) == 0 {
			t.Fatal("a table without rules")
		}
		for _, r := range a.Rules {
			if c.Variant(r.Variant) == nil || r.World < 0 || r.MaxBytes < 0 {
				t.Fatalf("bad rule %+v", r)
			}
		}
		if last := a.Rules[len(a.Rules)-1]; last.World != 0 || last.MaxBytes != 0 {
			t.Fatalf("last rule %+v does not match every launch", last)
		}
		back, errs := ParseTuning("t.yaml", FormatTuning(c.Name, a), c)
		if len(errs) > 0 || len(back.Rules) != len(a.Rules) || back.Measured != a.Measured {
			t.Fatalf("FormatTuning does not read back: %v\n%s", errs, FormatTuning(c.Name, a))
		}
		for i := range a.Rules {
			if back.Rules[i].World != a.Rules[i].World || back.Rules[i].MaxBytes != a.Rules[i].MaxBytes || back.Rules[i].Variant != a.Rules[i].Variant {
				t.Fatalf("rule %d reads back as %+v, was %+v", i, back.Rules[i], a.Rules[i])
			}
		}
	})
}

// checkPositioned: a non-empty diag.List, every error and note positioned
// in file, at most diag.MaxErrors of them.
func checkPositioned(t *testing.T, err error, file string) {
	t.Helper()
	var list diag.List
	if !errors.As(err, &list) || len(list) == 0 {
		t.Fatalf("error is not a non-empty diag.List: %#v", err)
	}
	if len(list) > diag.MaxErrors {
		t.Fatalf("%d errors, more than the cap", len(list))
	}
	ranged := func(p diag.Pos) bool {
		l, c := p.End()
		return l > p.Line || l == p.Line && c >= p.Col
	}
	for _, e := range list {
		if e.Pos.File != file || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" || !ranged(e.Pos) {
			t.Fatalf("badly positioned error: %v (%+v)", e, e.Pos)
		}
		if !slices.Contains(diag.Codes, e.Code) {
			t.Fatalf("error without a known code (%q): %v", e.Code, e)
		}
		for _, n := range e.Notes {
			if n.Pos.File != file || n.Pos.Line < 1 || n.Pos.Col < 1 || n.Msg == "" || !ranged(n.Pos) {
				t.Fatalf("badly positioned note: %v", e)
			}
		}
	}
}

// checkCollective checks the invariants of an accepted spec.
func checkCollective(t *testing.T, c *Collective) {
	t.Helper()
	if c.Name == "" || len(c.SpecHash) != 16 || len(c.Variants) == 0 || goFileProblem(c.Name) != "" ||
		len(c.Tensors) > MaxTensors || len(c.Symbols) > MaxSizes || len(c.Params) > MaxParams || len(c.Variants) > MaxVariants {
		t.Fatalf("incomplete or oversized collective: %+v", c)
	}
	// Parameters: distinct names, none a size or tensor; a range only on an
	// int, never empty; every tensor's ranks a rank parameter.
	names := map[string]bool{irismodel.WorldSymbol: true, irismodel.BlocksSymbol: true}
	for _, s := range c.Symbols {
		names[s] = true
	}
	for _, p := range c.Params {
		if names[p.Name] || (p.Kind != irismodel.ParamInt && (p.Min != math.MinInt64 || p.Max != math.MaxInt64)) ||
			p.Min > p.Max {
			t.Fatalf("bad parameter %+v", p)
		}
		names[p.Name] = true
	}
	for _, tn := range c.Tensors {
		if names[tn.Name] {
			t.Fatalf("tensor %q has the name of a size or parameter", tn.Name)
		}
		if p := c.Param(tn.Owner); tn.Owner != "" && (p == nil || p.Kind != irismodel.ParamRank || tn.Optional || tn.Dir == irismodel.Workspace) {
			t.Fatalf("tensor %q: bad ranks %q", tn.Name, tn.Owner)
		}
	}
	symbols := map[string]bool{ArgsStructName(c.Name): true, irismodel.SpecHashSymbol(c.Name): true}
	claim := func(s string) {
		if symbols[s] {
			t.Fatalf("HIP symbol %s generated twice", s)
		}
		symbols[s] = true
	}
	for _, v := range c.Variants {
		if len(v.Uses) != len(c.Tensors) || len(v.Barriers) == 0 ||
			len(v.Capture) != len(v.Barriers) || len(v.Kernels) == 0 {
			t.Fatalf("inconsistent variant %q: %+v", v.Name, v)
		}
		// The launch shape is within the limits, 1 <= MinBlocks <= MaxBlocks.
		if l := v.Launch; l.Threads < minThreads || l.Threads > maxThreads || l.Threads%threadStep != 0 ||
			l.MinBlocks < minBlocks || l.MinBlocks > l.MaxBlocks || l.MaxBlocks > maxBlocksLimit ||
			(l.VectorBytes != 4 && l.VectorBytes != 8 && l.VectorBytes != 16) {
			t.Fatalf("variant %q: launch shape %+v", v.Name, l)
		}
		claim(PreludeNamespace(c.Name, v.Name))
		for _, k := range v.Kernels {
			claim(k.Name)
		}
		for i, u := range v.Uses {
			if u.Tensor != c.Tensors[i] || u.Rule != Classify(RoleOf(u.Tensor), u.Access) || u.Placement != u.Rule.Placement || u.Rule.Refused != NotRefused {
				t.Fatalf("variant %q: bad use %d: %+v", v.Name, i, u)
			}
			if (u.Owned != nil) != (u.Tensor.Owner != "") || u.Owned != nil && (u.Owned != ClassifyOwned(RoleOf(u.Tensor), u.Access) ||
				u.Owned.Refused != OwnedOK || u.Exchanged() != u.Access.Remote()) {
				t.Fatalf("variant %q: bad owned use %d: %+v", v.Name, i, u)
			}
		}
		for _, pr := range v.AliasPairs() {
			if v.InPlace(pr[0], pr[1]) && (!v.Use(pr[0].Name).Rule.InPlace || !v.Use(pr[1].Name).Rule.InPlace) {
				t.Fatalf("variant %q: in-place pair %s/%s holds a tensor peers touch", v.Name, pr[0].Name, pr[1].Name)
			}
		}
	}
}

// fuzzTimeLimit bounds one call: the fuzzer reports a slow input as a
// failure instead of stalling on it.
const fuzzTimeLimit = 5 * time.Second

func within(t *testing.T, size int, run func() error) error {
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case <-time.After(fuzzTimeLimit):
		t.Fatalf("took more than %v on a %d-byte input", fuzzTimeLimit, size)
		return nil
	}
}

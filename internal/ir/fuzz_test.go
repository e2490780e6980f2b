package ir

import (
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/irisgen/irisgen/internal/diag"
)

// FuzzCompile checks that no input makes Compile panic, and that every
// result is either a consistent Collective or a non-empty, positioned
// diag.List. Seeds: the error table, the derivation spec and the catalogue,
// plus testdata/fuzz/FuzzCompile.
func FuzzCompile(f *testing.F) {
	for _, tc := range errorCases {
		f.Add([]byte(tc.src))
	}
	f.Add([]byte(reduceSpec))
	for _, name := range []string{"../../specs/all_gather.yaml", "../../specs/barrier.yaml"} {
		if src, err := os.ReadFile(name); err == nil {
			f.Add(src)
		}
	}
	templates := testTemplates()
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := compileWithin(t, src, templates)
		if err != nil {
			var list diag.List
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error is not a non-empty diag.List: %#v", err)
			}
			if c != nil {
				t.Fatal("a Collective together with errors")
			}
			for _, e := range list {
				if e.Pos.File != "spec.yaml" || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" {
					t.Fatalf("badly positioned error: %v", e)
				}
			}
			return
		}
		if c.Name == "" || len(c.SpecHash) != 16 || len(c.Variants) == 0 {
			t.Fatalf("incomplete collective: %+v", c)
		}
		for _, v := range c.Variants {
			if len(v.Uses) != len(c.Tensors) || len(v.Barriers) == 0 ||
				len(v.Capture) != len(v.Barriers) || len(v.Kernels) == 0 {
				t.Fatalf("inconsistent variant %q: %+v", v.Name, v)
			}
			for i, u := range v.Uses {
				if u.Tensor != c.Tensors[i] || u.Rule != Classify(RoleOf(u.Tensor), u.Access) || u.Placement != u.Rule.Placement || u.Rule.Refused != NotRefused {
					t.Fatalf("variant %q: bad use %d: %+v", v.Name, i, u)
				}
			}
		}
	})
}

// fuzzTimeLimit bounds one Compile: the fuzzer reports a slow input as a
// failure instead of stalling on it.
const fuzzTimeLimit = 5 * time.Second

func compileWithin(t *testing.T, src []byte, templates fs.FS) (*Collective, error) {
	type result struct {
		c   *Collective
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := Compile("spec.yaml", src, templates)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err
	case <-time.After(fuzzTimeLimit):
		t.Fatalf("Compile took more than %v on a %d-byte spec", fuzzTimeLimit, len(src))
		return nil, nil
	}
}

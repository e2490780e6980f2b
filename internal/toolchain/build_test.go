package toolchain

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestCompileReplacesOrRemoves enumerates what a compile leaves at dst: a
// success replaces the old code object, a failure (of the compiler, or of
// the AMD check of its output) removes it, and neither leaves a temporary
// file behind.
func TestCompileReplacesOrRemoves(t *testing.T) {
	dir := t.TempDir()
	// A stand-in compiler: writes "object of <source>" to its -o argument
	// unless the source says "error", and then fails as a compiler does.
	cc := filepath.Join(dir, "cc")
	script := `#!/bin/sh
out=; src=
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift;; *) src=$1;; esac; shift; done
if grep -q error "$src"; then echo "$src:1:1: error: it says error" >&2; exit 1; fi
printf 'object of %s' "$(cat "$src")" > "$out"
`
	if err := os.WriteFile(cc, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		kind     Kind
		platform string
		source   string
		old      bool // a code object from an earlier compile is there
		want     string
		fails    bool
	}{
		{"success, none before", Nvcc, CUDA, "good", false, "object of good", false},
		{"success replaces", Nvcc, CUDA, "good", true, "object of good", false},
		{"compile error removes", Nvcc, CUDA, "error", true, "", true},
		{"compile error, none before", Nvcc, CUDA, "error", false, "", true},
		// The compiler succeeds but its output is no offload bundle.
		{"AMD check fails and removes", Clang, HIP, "good", true, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			src := filepath.Join(out, "x.hip")
			dst := filepath.Join(out, "x.obj")
			if err := os.WriteFile(src, []byte(c.source), 0o644); err != nil {
				t.Fatal(err)
			}
			if c.old {
				if err := os.WriteFile(dst, []byte("object of an older source"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			comp := &Compiler{Kind: c.kind, Path: cc, Platform: c.platform, Targets: []string{"gfx90a"}}
			if c.kind == Nvcc {
				comp.Targets = []string{"90"}
			}
			b, err := comp.Prepare(ctx, fstest.MapFS{"irisgen.h": {Data: []byte("// header\n")}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			msg, err := b.Compile(ctx, src, dst, "irisgen_spec_hash_x")
			if c.fails != (err != nil) {
				t.Fatalf("Compile: %v (%s), want failure %v", err, msg, c.fails)
			}
			got, rerr := os.ReadFile(dst)
			switch {
			case c.want == "" && !os.IsNotExist(rerr):
				t.Errorf("dst after a failed compile: %q, %v; want it removed", got, rerr)
			case c.want != "" && string(got) != c.want:
				t.Errorf("dst = %q, %v; want %q", got, rerr, c.want)
			}
			if _, err := os.Stat(dst + ".tmp"); !os.IsNotExist(err) {
				t.Errorf("temporary file left: %v", err)
			}
		})
	}
}

// Package tests holds irisgen's end-to-end tests: golden cases under
// testdata/golden/<case>/ and checks of the real catalogue. Run `go test ./tests
// -update` to rewrite the expected files after an intended change, and review
// the diff.
package tests

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/emit/goemit"
	"github.com/irisgen/irisgen/internal/emit/hipemit"
	"github.com/irisgen/irisgen/internal/ir"
)

var update = flag.Bool("update", false, "rewrite the expected files of tests/testdata/golden/*")

// A golden case is a directory testdata/golden/<case>/ with:
//   - spec.yaml, compiled with specPath "spec.yaml";
//   - optional *.hip.tmpl, laid over the real templates/;
//   - either errors.golden (the exact error list, one per line) or the
//     expected outputs <collective>.hip and <collective>.go.
//
// Cases named err-* must expect errors, ok-* must expect outputs.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "spec.yaml")); err != nil {
			continue
		}
		n++
		t.Run(filepath.Base(dir), func(t *testing.T) { runCase(t, dir) })
	}
	if n == 0 {
		t.Fatal("no golden cases found under tests/testdata/golden")
	}
}

// caseTemplates is the real templates with the case's *.hip.tmpl on top.
func caseTemplates(t *testing.T, dir string) fs.FS {
	t.Helper()
	m := fstest.MapFS{}
	real, err := fs.Sub(irisgen.Templates, "templates")
	if err != nil {
		t.Fatal(err)
	}
	err = fs.WalkDir(real, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(real, p)
		m[p] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	local, err := filepath.Glob(filepath.Join(dir, "*"+ir.TemplateExt))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range local {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(p)] = &fstest.MapFile{Data: b, Mode: 0o644}
	}
	return m
}

// generate runs the whole pipeline on one spec, as `irisgen generate` does.
// It returns the outputs keyed by base name, or the error list as text.
func generate(t *testing.T, specPath string, src []byte, tmpl fs.FS) (map[string][]byte, string) {
	t.Helper()
	c, err := ir.Compile(specPath, src, tmpl)
	if err != nil {
		return nil, errorText(t, err)
	}
	files, err := emit.Run(&emit.Request{Collectives: []*ir.Collective{c}, Templates: tmpl, Package: "collectives"}, hipemit.Emit, goemit.Emit)
	if err != nil {
		return nil, errorText(t, err)
	}
	out := map[string][]byte{}
	for k, v := range files {
		out[path.Base(k)] = v
	}
	return out, ""
}

// errorText renders a user error list, one error a line; anything but a
// diag.List is a failure of the generator itself.
func errorText(t *testing.T, err error) string {
	t.Helper()
	var l diag.List
	if !errors.As(err, &l) {
		t.Fatalf("want positioned errors (diag.List), got %T: %v", err, err)
	}
	return l.Error() + "\n"
}

func runCase(t *testing.T, dir string) {
	src, err := os.ReadFile(filepath.Join(dir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, errs := generate(t, "spec.yaml", src, caseTemplates(t, dir))
	name := filepath.Base(dir)
	errFile := filepath.Join(dir, "errors.golden")
	_, statErr := os.Stat(errFile)
	wantErrors := statErr == nil || strings.HasPrefix(name, "err-")
	if wantErrors {
		if errs == "" {
			t.Fatalf("spec compiled, but the case expects errors (%s)", errFile)
		}
		if *update {
			writeFile(t, errFile, []byte(errs))
			return
		}
		want, err := os.ReadFile(errFile)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if string(want) != errs {
			t.Errorf("errors differ:\n--- want (%s)\n%s--- got\n%s", errFile, want, errs)
		}
		return
	}
	if errs != "" {
		t.Fatalf("unexpected errors:\n%s", errs)
	}
	// The case checks the collective's own files and the descriptor table
	// (catalogue.go); doc.go, kernels.go and kernels/README.txt are the same
	// for every package and checked by the catalogue tests.
	for k, v := range out {
		if k == "doc.go" || k == "kernels.go" || k == "README.txt" {
			continue
		}
		p := filepath.Join(dir, k)
		if *update {
			writeFile(t, p, v)
			continue
		}
		want, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%v (run with -update to create it)", err)
			continue
		}
		if !bytes.Equal(want, v) {
			t.Errorf("%s differs from the generated output (run `go test ./tests -update` and review the diff):\n%s", p, firstDiff(string(want), string(v)))
		}
	}
	// Expected files that are no longer generated are stale.
	exp, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	hips, _ := filepath.Glob(filepath.Join(dir, "*.hip"))
	for _, p := range append(exp, hips...) {
		if _, ok := out[filepath.Base(p)]; !ok {
			if *update {
				os.Remove(p)
				continue
			}
			t.Errorf("%s is expected but no longer generated", p)
		}
	}
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstDiff shows the first differing line with a little context.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return "(no line differs)"
}

// catalogue generates the embedded catalogue in memory.
func catalogue(t *testing.T) map[string][]byte {
	t.Helper()
	cs, tmpl := catalogueIR(t)
	out, err := emit.Run(&emit.Request{Collectives: cs, Templates: tmpl, Package: "collectives",
		ImportPath: "github.com/irisgen/irisgen/generated/collectives", KernelsCommand: "make kernels"}, hipemit.Emit, goemit.Emit)
	if err != nil {
		t.Fatal(err)
	}

	return out
}

// TestCatalogueDeterministic generates the catalogue twice: byte-identical.
func TestCatalogueDeterministic(t *testing.T) {
	a, b := catalogue(t), catalogue(t)
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for k := range a {
		if !bytes.Equal(a[k], b[k]) {
			t.Errorf("%s differs between two runs", k)
		}
		if !bytes.HasPrefix(a[k], []byte("// Code generated by irisgen from ")) {
			t.Errorf("%s lacks the generated header", k)
		}
	}
}

// TestCatalogueMatchesGenerated compares the checked-in generated/ with the
// catalogue, as `irisgen check` does (the CLI's own tests cover its output).
func TestCatalogueMatchesGenerated(t *testing.T) {
	var stale []string
	files := catalogue(t)
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b, err := os.ReadFile(filepath.Join("..", "generated", filepath.FromSlash(k)))
		if err != nil || !bytes.Equal(b, files[k]) {
			stale = append(stale, k)
		}
	}
	if len(stale) > 0 {
		t.Errorf("generated/ is stale (%s): run `go generate ./...` or `irisgen generate`", strings.Join(stale, ", "))
	}
}

// TestGeneratedGoBuilds compiles and vets the checked-in generated package
// against the real runtime.
func TestGeneratedGoBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	cmd := exec.Command("go", "vet", "./generated/...")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet ./generated/...: %v\n%s", err, out)
	}
}

// Package tests holds irisgen's end-to-end tests: golden cases under
// testdata/golden/<case>/ and checks of the real catalogue. Run `go test ./tests
// -update` to rewrite the expected files after an intended change, and review
// the diff.
package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/driver"
	"github.com/irisgen/irisgen/internal/ir"
)

var update = flag.Bool("update", false, "rewrite the expected files of tests/testdata/golden/*")

// TestGolden runs every case under testdata/golden. A case is one of:
//
//   - a spec case: spec.yaml, compiled as "spec.yaml", optional *.hip.tmpl
//     laid over the real templates/, and either errors.golden (the exact
//     error list) with errors.json (the same as `-error-format json` prints
//     it: codes and ranges) or the expected <collective>.hip and
//     <collective>.go;
//   - a repository case: a small downstream repository with go.mod and
//     irisgen.yaml (its specs, templates and checked-in output where the
//     config puts them), exec.json ({"args": [...], "exit": N}; default:
//     generate, exit 0), stdout.golden and stderr.golden (absent: empty).
//     The irisgen command runs in a copy of the case (for generate, one
//     whose generated files were deleted); its output and exit code, and the
//     whole output directory afterwards, must equal the case's.
//
// Cases named err-* must fail, ok-* must succeed; the Go package of every
// ok-* case is compiled against the real runtime (TestGoldenOutputsBuild).
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dir := range dirs {
		switch {
		case exists(filepath.Join(dir, config.FileName)):
			n++
			t.Run(filepath.Base(dir), func(t *testing.T) { runRepoCase(t, dir) })
		case exists(filepath.Join(dir, "spec.yaml")):
			n++
			t.Run(filepath.Base(dir), func(t *testing.T) { runSpecCase(t, dir) })
		}
	}
	if n == 0 {
		t.Fatal("no golden cases found under tests/testdata/golden")
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
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

// specProject is the driver project of a spec case: spec.yaml alone, the
// case's templates over the real ones, package collectives.
func specProject(t *testing.T, dir string) *driver.Project {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return &driver.Project{
		Specs:     fstest.MapFS{"spec.yaml": {Data: src, Mode: 0o644}},
		Templates: caseTemplates(t, dir),
		Package:   "collectives",
	}
}

// errorText renders a user error list, one error a line, and as JSON
// Lines (diag.WriteJSON); anything but a diag.List is a failure of the
// generator itself.
func errorText(t *testing.T, err error) (text, jsonl string) {
	t.Helper()
	var l diag.List
	if !errors.As(err, &l) {
		t.Fatalf("want positioned errors (diag.List), got %T: %v", err, err)
	}
	var b bytes.Buffer
	if err := diag.WriteJSON(&b, l); err != nil {
		t.Fatal(err)
	}
	for _, e := range l {
		if !slices.Contains(diag.Codes, e.Code) {
			t.Errorf("error without a known code (%q): %v", e.Code, e)
		}
	}
	return l.Error() + "\n", b.String()
}

func runSpecCase(t *testing.T, dir string) {
	files, _, err := specProject(t, dir).Generate()
	var errs, jsonl string
	if err != nil {
		errs, jsonl = errorText(t, err)
	}
	name := filepath.Base(dir)
	errFile := filepath.Join(dir, "errors.golden")
	if exists(errFile) || strings.HasPrefix(name, "err-") {
		if errs == "" {
			t.Fatalf("spec compiled, but the case expects errors (%s)", errFile)
		}
		for file, got := range map[string]string{errFile: errs, filepath.Join(dir, "errors.json"): jsonl} {
			if *update {
				writeFile(t, file, []byte(got))
				continue
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if string(want) != got {
				t.Errorf("errors differ:\n--- want (%s)\n%s--- got\n%s", file, want, got)
			}
		}
		return
	}
	if errs != "" {
		t.Fatalf("unexpected errors:\n%s", errs)
	}
	out := map[string][]byte{}
	for k, v := range files {
		out[path.Base(k)] = v
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

// exec is a repository case's exec.json.
type execFile struct {
	Args []string `json:"args"`
	Exit int      `json:"exit"`
}

func readExec(t *testing.T, dir string) execFile {
	t.Helper()
	e := execFile{Args: []string{"generate"}}
	b, err := os.ReadFile(filepath.Join(dir, "exec.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return e
	}
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || len(e.Args) == 0 {
		t.Fatalf("%s: want {\"args\": [command, ...], \"exit\": code}: %v", filepath.Join(dir, "exec.json"), err)
	}
	return e
}

// caseConfig loads a repository case's config; nil when it does not load
// (an err- case about the config).
func caseConfig(t *testing.T, dir string) *config.Config {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(filepath.Join(abs, config.FileName))
	if err != nil {
		return nil
	}
	return c
}

// outputDir is the output root the case's config names, relative to the
// case ("" when the config does not load).
func outputDir(t *testing.T, dir string) string {
	t.Helper()
	c := caseConfig(t, dir)
	if c == nil {
		return ""
	}
	rel, err := filepath.Rel(c.Dir, c.Out)
	if err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("the case's output %s is outside the case", c.Out)
	}
	return rel
}

func runRepoCase(t *testing.T, dir string) {
	e := readExec(t, dir)
	work := filepath.Join(t.TempDir(), "repo")
	copyTree(t, dir, work, nil)
	out := outputDir(t, dir)
	if out != "" && e.Args[0] == "generate" {
		// generate starts from the repository without its generated files.
		removeGenerated(t, filepath.Join(work, out))
	}
	cmd := exec.Command(irisgenBinary(t), e.Args...)
	cmd.Dir = work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	name := filepath.Base(dir)
	if (code == 0) != strings.HasPrefix(name, "ok-") {
		t.Errorf("irisgen %s: exit %d in a case named %s\nstdout:\n%sstderr:\n%s", strings.Join(e.Args, " "), code, name, &stdout, &stderr)
	}
	if code != e.Exit {
		t.Errorf("irisgen %s: exit %d, want %d (exec.json)\nstderr:\n%s", strings.Join(e.Args, " "), code, e.Exit, &stderr)
	}
	golden(t, filepath.Join(dir, "stdout.golden"), stdout.Bytes())
	golden(t, filepath.Join(dir, "stderr.golden"), stderr.Bytes())
	if out != "" {
		compareTrees(t, filepath.Join(dir, out), filepath.Join(work, out))
	}
}

// golden compares got with the file p (absent: empty), or rewrites it.
func golden(t *testing.T, p string, got []byte) {
	t.Helper()
	if *update {
		if len(got) == 0 {
			os.Remove(p)
			return
		}
		writeFile(t, p, got)
		return
	}
	want, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (run `go test ./tests -update` and review the diff):\n%s", p, firstDiff(string(want), string(got)))
	}
}

// compareTrees compares every file under want and got (the case's output
// directory and the one the command left), or makes want equal to got.
func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	wantFiles, gotFiles := readTree(t, want), readTree(t, got)
	if *update {
		for k := range wantFiles {
			if _, ok := gotFiles[k]; !ok {
				os.Remove(filepath.Join(want, filepath.FromSlash(k)))
			}
		}
		for k, v := range gotFiles {
			p := filepath.Join(want, filepath.FromSlash(k))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, v)
		}
		return
	}
	for _, k := range slices.Sorted(maps.Keys(gotFiles)) {
		w, ok := wantFiles[k]
		switch {
		case !ok:
			t.Errorf("%s was written but the case does not expect it (run with -update)", path.Join(want, k))
		case !bytes.Equal(w, gotFiles[k]):
			t.Errorf("%s differs from the output (run with -update and review the diff):\n%s", path.Join(want, k), firstDiff(string(w), string(gotFiles[k])))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(wantFiles)) {
		if _, ok := gotFiles[k]; !ok {
			t.Errorf("%s is expected but was not written", path.Join(want, k))
		}
	}
}

// readTree reads every regular file under root, keyed by slash path.
func readTree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return filepath.SkipDir
		}
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func removeGenerated(t *testing.T, root string) {
	t.Helper()
	for k, b := range readTree(t, root) {
		if driver.IsGenerated(b) {
			if err := os.Remove(filepath.Join(root, filepath.FromSlash(k))); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// copyTree copies the regular files and directories of src to dst.
func copyTree(t *testing.T, src, dst string, skip func(rel string) bool) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if skip != nil && skip(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
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

// repoRoot is this repository's root.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// catalogue is this repository's own project, as irisgen.yaml describes it.
func catalogue(t *testing.T) *driver.Project {
	t.Helper()
	return project(t, config.FileName)
}

// project is the project of the config file at path, relative to the
// repository's root.
func project(t *testing.T, path string) *driver.Project {
	t.Helper()
	c, err := config.Load(filepath.Join(repoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	p, err := driver.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCatalogueDeterministic generates the catalogue twice: byte-identical,
// every file headed as generated, no machine path in any of them.
func TestCatalogueDeterministic(t *testing.T) {
	a, _, err := catalogue(t).Generate()
	if err != nil {
		t.Fatalf("the catalogue does not compile:\n%v", err)
	}
	b, _, err := catalogue(t).Generate()
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != len(b) {
		t.Fatalf("%d files, then %d", len(a), len(b))
	}
	for k := range a {
		if !bytes.Equal(a[k], b[k]) {
			t.Errorf("%s differs between two runs", k)
		}
		if !driver.IsGenerated(a[k]) {
			t.Errorf("%s lacks the generated header", k)
		}
		if bytes.Contains(a[k], []byte(repoRoot(t))) {
			t.Errorf("%s holds this machine's path %s", k, repoRoot(t))
		}
	}
}

// TestCatalogueMatchesGenerated compares the checked-in generated/ with the
// catalogue, and the bench's compute kernel's package with its spec, as
// `irisgen check` does.
func TestCatalogueMatchesGenerated(t *testing.T) {
	for _, c := range []struct{ config, out string }{
		{config.FileName, "generated/"},
		{"internal/bench/compute/irisgen.yaml", "internal/bench/compute"},
	} {
		p := project(t, c.config)
		files, _, err := p.Generate()
		if err != nil {
			t.Fatal(err)
		}
		changes, err := p.Compare(files)
		if err != nil {
			t.Fatal(err)
		}
		var stale []string
		for _, c := range driver.Stale(changes) {
			stale = append(stale, fmt.Sprintf("%s (%s)", c.Path, c.Kind))
		}
		if len(stale) > 0 {
			t.Errorf("%s is stale (%s): run `go generate ./...` or `irisgen generate -config %s`", c.out, strings.Join(stale, ", "), c.config)
		}
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

package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// irisgenBinary builds cmd/irisgen once per test run: repository cases run
// the real command, in the case's directory, as a user would.
func irisgenBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "irisgen-golden-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "irisgen")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/irisgen/irisgen/cmd/irisgen").CombinedOutput()
		if err != nil {
			binErr = &buildError{err: err, out: string(out)}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build ./cmd/irisgen: " + e.err.Error() + "\n" + e.out }

// TestGoldenOutputsBuild compiles the Go package of every ok-* case against
// the real runtime: the whole package a spec case generates, and the
// checked-in package of a repository case, each in a directory of one
// temporary module that replaces irisgen with this repository.
func TestGoldenOutputsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	dirs, err := filepath.Glob(filepath.Join("testdata", "golden", "ok-*"))
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	writeFile(t, filepath.Join(mod, "go.mod"), []byte("module goldencheck\n\ngo 1.26.8\n\nrequire github.com/irisgen/irisgen v0.0.0\n\nreplace github.com/irisgen/irisgen => "+repoRoot(t)+"\n"))
	sum, err := os.ReadFile(filepath.Join(repoRoot(t), "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(mod, "go.sum"), sum)
	n := 0
	for _, dir := range dirs {
		name := filepath.Base(dir)
		pkgDir := filepath.Join(mod, name)
		switch {
		case exists(filepath.Join(dir, "irisgen.yaml")):
			c := caseConfig(t, dir)
			if c == nil || !exists(c.PackageDir()) {
				continue // a case about the command, without a package
			}
			copyTree(t, c.PackageDir(), pkgDir, nil)
		case exists(filepath.Join(dir, "spec.yaml")):
			files, _, err := specProject(t, dir).Generate()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for k, v := range files {
				if rest, ok := strings.CutPrefix(k, "collectives/"); ok {
					p := filepath.Join(pkgDir, filepath.FromSlash(rest))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					writeFile(t, p, v)
				}
			}
		default:
			continue
		}
		n++
	}
	if n == 0 {
		t.Fatal("no ok- case with a Go package")
	}
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet of the ok- cases' packages: %v\n%s", err, out)
	}
}

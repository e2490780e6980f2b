// Package gpurun is how the generator's `irisgen bench` and `irisgen
// probe` reach the GPU commands (package gputools), which it does not
// link: a program that runs them must link the generated package they
// time, and Go links packages when it builds a program, not when it runs
// one. So:
//
//   - for irisgen's catalogue (in irisgen's repository, or anywhere
//     without an irisgen.yaml of a package of its own) it runs
//     irisgen-gpu, the catalogue's program, found beside irisgen or on
//     PATH;
//   - in a repository whose irisgen.yaml generates a package of its own,
//     it builds that program: a main of five lines that imports the
//     package and calls gputools, compiled by `go build` inside the
//     repository's module through an overlay (nothing is written into the
//     repository), then run with the same arguments.
package gpurun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/irisgen/irisgen/internal/config"
)

// CatalogueProgram is the catalogue's GPU program (cmd/irisgen-gpu).
const CatalogueProgram = "irisgen-gpu"

// cataloguePath is the import path of irisgen's catalogue package.
const cataloguePath = config.IrisgenModule + "/" + config.DefaultOut + "/" + config.DefaultPackage

// mainDir is the directory, inside the repository's module, that the
// overlay puts the built program's main in; it must not exist.
const mainDir = "_irisgen_gpu"

// Runner runs the GPU command name with args.
type Runner struct {
	// Program is the program to run (an executable), and Args its
	// arguments before the command's.
	Program string
	Args    []string
	// Build, when set, is the `go build` that makes Program first (in
	// BuildDir), and Package the generated package it links.
	Build    []string
	BuildDir string
	Package  string
	// Cleanup removes what the runner made.
	Cleanup func()
}

// For chooses how to run the GPU commands for a user in directory wd: the
// catalogue's program, or a program built for the package the irisgen.yaml
// found from wd generates.
func For(wd string) (*Runner, error) {
	file, err := config.Find(wd)
	if err != nil {
		return nil, err
	}
	if file == "" {
		return catalogue()
	}
	c, err := config.Resolve(file, wd, config.Overrides{})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if c.ImportPath == cataloguePath || c.ImportPath == "" {
		return catalogue()
	}
	return own(c)
}

func catalogue() (*Runner, error) {
	p, err := findProgram()
	if err != nil {
		return nil, err
	}
	return &Runner{Program: p, Cleanup: func() {}}, nil
}

// findProgram looks for irisgen-gpu beside this executable, then on PATH.
func findProgram() (string, error) {
	var looked []string
	if exe, err := os.Executable(); err == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			p := filepath.Join(filepath.Dir(exe), CatalogueProgram)
			if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				return p, nil
			}
			looked = append(looked, p)
		}
	}
	if p, err := exec.LookPath(CatalogueProgram); err == nil {
		return p, nil
	}
	looked = append(looked, "PATH")
	return "", fmt.Errorf("%s is not installed (looked in %v): build it with `make gpu-build` (build/%s, beside build/irisgen) "+
		"or `go install github.com/irisgen/irisgen/cmd/%s`", CatalogueProgram, looked, CatalogueProgram, CatalogueProgram)
}

// Main is the source of the program built for the generated package pkg.
func Main(pkg string) string {
	return `// The GPU commands of irisgen (bench, probe) with ` + pkg + ` linked:
// built by irisgen bench and irisgen probe through an overlay.
package main

import (
	"os"

	"github.com/irisgen/irisgen/gputools"

	_ "` + pkg + `"
)

func main() { os.Exit(gputools.Program{Name: "irisgen"}.Run(os.Args[1:])) }
`
}

// own is the runner that builds the program for c's package.
func own(c *config.Config) (*Runner, error) {
	if _, err := os.Stat(filepath.Join(c.PackageDir(), "catalogue.go")); err != nil {
		return nil, fmt.Errorf("the generated package %s (%s) is not there yet: run `go generate ./...` at the module root (or `irisgen generate`) first", c.ImportPath, c.Rel(c.PackageDir()))
	}
	dir := filepath.Join(c.Dir, mainDir)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s exists: irisgen builds its program for your package there through an overlay; move it", dir)
	}
	tmp, err := os.MkdirTemp("", "irisgen-gpu-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	src := filepath.Join(tmp, "main.go")
	overlay := filepath.Join(tmp, "overlay.json")
	ovl, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(dir, "main.go"): src}})
	if err == nil {
		err = errors.Join(os.WriteFile(src, []byte(Main(c.ImportPath)), 0o644), os.WriteFile(overlay, ovl, 0o644))
	}
	if err != nil {
		cleanup()
		return nil, err
	}
	prog := filepath.Join(tmp, "irisgen-gpu")
	return &Runner{Program: prog, Build: []string{"go", "build", "-overlay", overlay, "-o", prog, "./" + mainDir},
		BuildDir: c.Dir, Package: c.ImportPath, Cleanup: cleanup}, nil
}

// Run runs the GPU command name with args for a user in directory wd (see
// For), with the standard input and these outputs, and returns its exit
// code. The error is one of irisgen's: no program to run, or the build of
// one failed (its output is on stderr).
func Run(wd, name string, args []string, stdout, stderr io.Writer) (int, error) {
	r, err := For(wd)
	if err != nil {
		return 1, err
	}
	defer r.Cleanup()
	if r.Build != nil {
		fmt.Fprintf(stderr, "irisgen %s: building the GPU commands with %s linked (%s)\n", name, r.Package, strings.Join(r.Build, " "))
		b := exec.Command(r.Build[0], r.Build[1:]...)
		b.Dir, b.Stdout, b.Stderr = r.BuildDir, stderr, stderr
		if err := b.Run(); err != nil {
			return 1, fmt.Errorf("building the program that links %s failed (%v): see go build's errors above", r.Package, err)
		}
	}
	cmd := exec.Command(r.Program, append(append(r.Args, name), args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return max(ee.ExitCode(), 1), nil // it printed its own errors; a signal is 1
	}
	if err != nil {
		return 1, err
	}
	return 0, nil
}

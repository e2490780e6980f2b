package gpurun

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeProgram puts an irisgen-gpu that echoes its arguments on PATH.
func fakeProgram(t *testing.T) string {
	bin := t.TempDir()
	p := filepath.Join(bin, CatalogueProgram)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho \"catalogue $*\"\nexit 3\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return p
}

// module writes a module with an irisgen.yaml (its package not generated).
func module(t *testing.T, yaml string) string {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n\ngo 1.26.8\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "specs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "irisgen.yaml"), []byte(yaml), 0o644))
	return dir
}

// TestFor enumerates the choice: the catalogue's program without a config
// and in irisgen's repository; a program built for a repository's own
// package, which must be generated, and whose overlay directory must be
// free.
func TestFor(t *testing.T) {
	prog := fakeProgram(t)
	for _, wd := range []string{t.TempDir(), "../..", "."} {
		r, err := For(wd)
		require.NoError(t, err, wd)
		assert.Equal(t, prog, r.Program, wd)
		assert.Nil(t, r.Build, wd)
	}

	down, err := filepath.Abs("../../tests/downstream")
	require.NoError(t, err)
	r, err := For(filepath.Join(down, "internal", "exchange"))
	require.NoError(t, err)
	defer r.Cleanup()
	assert.Equal(t, "example.com/stencil/internal/gen/coll", r.Package)
	assert.Equal(t, down, r.BuildDir)
	assert.Equal(t, []string{"go", "build", "-overlay", filepath.Join(filepath.Dir(r.Program), "overlay.json"), "-o", r.Program, "./_irisgen_gpu"}, r.Build)
	src, err := os.ReadFile(filepath.Join(filepath.Dir(r.Program), "main.go"))
	require.NoError(t, err)
	assert.Contains(t, string(src), "\t_ \"example.com/stencil/internal/gen/coll\"\n")
	ovl, err := os.ReadFile(filepath.Join(filepath.Dir(r.Program), "overlay.json"))
	require.NoError(t, err)
	assert.Contains(t, string(ovl), filepath.Join(down, "_irisgen_gpu", "main.go"))
	r.Cleanup()
	assert.NoDirExists(t, filepath.Dir(r.Program))

	m := module(t, "version: 1\ncatalogue: [all_gather]\npackage: coll\n")
	_, err = For(m)
	require.ErrorContains(t, err, "the generated package example.com/m/generated/coll (generated/coll) is not there yet: run `go generate ./...`")
	require.NoError(t, os.MkdirAll(filepath.Join(m, "generated", "coll"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(m, "generated", "coll", "catalogue.go"), []byte("package coll\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(m, "_irisgen_gpu"), 0o755))
	_, err = For(m)
	require.ErrorContains(t, err, "_irisgen_gpu exists: irisgen builds its program for your package there")
}

// TestRunCatalogue: the catalogue's program gets the command and its
// arguments and gives its exit code.
func TestRunCatalogue(t *testing.T) {
	fakeProgram(t)
	var out bytes.Buffer
	code, err := Run(t.TempDir(), "probe", []string{"-n", "2"}, &out, &out)
	require.NoError(t, err)
	assert.Equal(t, 3, code)
	assert.Equal(t, "catalogue probe -n 2\n", out.String())
}

// TestRunOwnPackage builds the program for tests/downstream's package and
// runs commands that need no GPU: help lists the package, and a
// collective it does not have is refused with the ones it has.
func TestRunOwnPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with the go tool")
	}
	t.Setenv("GOPROXY", "off") // everything is in the module cache: the main module's tests need the same
	var out bytes.Buffer
	code, err := Run("../../tests/downstream", "bench", []string{"-collectives", "all_gather"}, &out, &out)
	require.NoError(t, err, out.String())
	assert.Equal(t, 2, code, out.String())
	assert.Contains(t, out.String(), "irisgen bench: building the GPU commands with example.com/stencil/internal/gen/coll linked (go build -overlay ")
	assert.Contains(t, out.String(), `irisgen bench: -collectives: "all_gather" is not a collective or scenario of example.com/stencil/internal/gen/coll `+
		"(it has all_reduce, halo_exchange, moe_combine, moe_dispatch, root_broadcast, moe)")
	assert.NoDirExists(t, "../../tests/downstream/_irisgen_gpu", "nothing written into the repository")
}

package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/diag"
)

// repo makes a module in a temporary directory with the given files.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			require.NoError(t, os.MkdirAll(full, 0o755))
			continue
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(body), 0o644))
	}
	return dir
}

func load(t *testing.T, dir, src string) (*Config, string) {
	t.Helper()
	p := filepath.Join(dir, FileName)
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
	c, err := Parse(p, FileName, []byte(src))
	if err != nil {
		l, ok := err.(diag.List)
		require.True(t, ok, "want positioned errors, got %T: %v", err, err)
		return nil, l.Error()
	}
	return c, ""
}

func TestFullFile(t *testing.T) {
	dir := repo(t, map[string]string{"go.mod": "module example.com/stencil\n\ngo 1.26\n\ntool github.com/irisgen/irisgen/cmd/irisgen\n", "specs/x.yaml": "", "tmpl/": ""})
	c, errs := load(t, dir, `version: 1
specs: specs
templates: tmpl
catalogue: [all_reduce, moe_dispatch]
out: internal/gen
package: coll
kernels:
  platform: hip
  hip_arch: [gfx90a, "gfx942:xnack+"]
  cuda_arch: ["90"]
`)
	require.Empty(t, errs)
	c.name, c.pos, c.raw = "", nil, nil // where the file sets what: for messages
	require.Equal(t, &Config{
		File: filepath.Join(dir, FileName), Dir: dir,
		Specs: filepath.Join(dir, "specs"), Templates: filepath.Join(dir, "tmpl"),
		Catalogue: []string{"all_reduce", "moe_dispatch"},
		Out:       filepath.Join(dir, "internal", "gen"), Package: "coll",
		ImportPath: "example.com/stencil/internal/gen/coll",
		Kernels:    Kernels{Platform: "hip", Arch: map[string][]string{"hip": {"gfx90a", "gfx942:xnack+"}, "cuda": {"90"}}, Command: "go tool irisgen kernels"},
		Module:     "example.com/stencil",
	}, c)
	require.Equal(t, filepath.Join(dir, "internal", "gen", "coll", "kernels"), c.KernelsDir())
	require.Equal(t, "specs", c.Rel(c.Specs))
}

// TestDefaults: a file with only the version means the built-in catalogue
// into generated/collectives.
func TestDefaults(t *testing.T) {
	dir := repo(t, map[string]string{"go.mod": "module example.com/m\n"})
	c, errs := load(t, dir, "version: 1\n")
	require.Empty(t, errs)
	require.Equal(t, "", c.Specs)
	require.Equal(t, "", c.Templates)
	require.Equal(t, filepath.Join(dir, "generated"), c.Out)
	require.Equal(t, "collectives", c.Package)
	require.Equal(t, "example.com/m/generated/collectives", c.ImportPath)
	require.Equal(t, "auto", c.Kernels.Platform)
	require.Equal(t, "go run github.com/irisgen/irisgen/cmd/irisgen kernels", c.Kernels.Command)
	require.Nil(t, c.Kernels.Arch)
}

// TestDerived enumerates where the import path and the kernels command come
// from.
func TestDerived(t *testing.T) {
	cases := []struct {
		name, gomod, cfg, importPath, command string
	}{
		{"no go.mod, an import path", "", "version: 1\nimport_path: example.com/x/coll\n", "example.com/x/coll", "go run github.com/irisgen/irisgen/cmd/irisgen kernels"},
		{"plain module", "module example.com/m\n", "version: 1\nout: x/y\npackage: p\n", "example.com/m/x/y/p", "go run github.com/irisgen/irisgen/cmd/irisgen kernels"},
		{"tool line", "module example.com/m\ntool github.com/irisgen/irisgen/cmd/irisgen\n", "version: 1\n", "example.com/m/generated/collectives", "go tool irisgen kernels"},
		{"tool block", "module \"example.com/m\"\ntool (\n\tgolang.org/x/tools/cmd/stringer\n\tgithub.com/irisgen/irisgen/cmd/irisgen // gen\n)\n", "version: 1\n", "example.com/m/generated/collectives", "go tool irisgen kernels"},
		{"irisgen itself", "module github.com/irisgen/irisgen\n", "version: 1\n", "github.com/irisgen/irisgen/generated/collectives", "go run ./cmd/irisgen kernels"},
		{"written in the file", "module example.com/m\n", "version: 1\nimport_path: example.com/other/coll\nkernels: {command: make kernels}\n", "example.com/other/coll", "make kernels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "repo")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			if tc.gomod != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(tc.gomod), 0o644))
			}
			c, errs := load(t, dir, tc.cfg)
			require.Empty(t, errs)
			if tc.gomod == "" && c.ImportPath != "" {
				t.Skipf("a go.mod above the temporary directory (%s) gives %s", root, c.ImportPath)
			}
			require.Equal(t, tc.importPath, c.ImportPath)
			require.Equal(t, tc.command, c.Kernels.Command)
		})
	}
}

// TestErrors enumerates the mistakes a file can hold, each with its exact
// positioned message.
func TestErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"empty", "", "irisgen.yaml:1:1: error: irisgen.yaml is empty; start it with `version: 1` (see README.md, Downstream workflow)"},
		{"only a comment", "# nothing\n", "irisgen.yaml:1:1: error: irisgen.yaml is empty"},
		{"not a mapping", "- version\n", "irisgen.yaml:1:1: error: irisgen.yaml must be a mapping with the keys version, specs, templates, catalogue, out, package, import_path, kernels; found a list"},
		{"invalid YAML", "version: 1\nout: [\n", "irisgen.yaml:3:1: error: invalid YAML: did not find expected node content"},
		{"two documents", "version: 1\n---\nversion: 1\n", "irisgen.yaml:2:1: error: the file holds one YAML document; remove this one"},
		{"no version", "out: gen\n", "irisgen.yaml:1:1: error: irisgen.yaml has no version; add `version: 1` as its first line"},
		{"version 2", "version: 2\nout: x\n", "irisgen.yaml:1:10: error: version 2 is not one this irisgen reads (it reads version 1); upgrade irisgen or write version 1"},
		{"version not a number", "version: one\n", "irisgen.yaml:1:10: error: version must be an integer, found the string \"one\""},
		{"unknown key", "version: 1\npackge: coll\n", "irisgen.yaml:2:1: error: unknown key \"packge\" at the top level of irisgen.yaml (did you mean \"package\"?)"},
		{"unknown key, no guess", "version: 1\nzz: 1\n", "irisgen.yaml:2:1: error: unknown key \"zz\" at the top level of irisgen.yaml (expected one of: version, specs, templates, catalogue, out, package, import_path, kernels)"},
		{"duplicate key", "version: 1\nout: a\nout: b\n", "irisgen.yaml:3:1: error: duplicate key \"out\" at the top level of irisgen.yaml (first at 2:1); keep only one"},
		{"duplicate version", "version: 1\nversion: 1\n", "irisgen.yaml:2:1: error: duplicate key \"version\""},
		{"specs missing", "version: 1\nspecs: nope\n", "irisgen.yaml:2:8: error: specs: nope: no such directory (paths are relative to irisgen.yaml)"},
		{"specs a file", "version: 1\nspecs: go.mod\n", "irisgen.yaml:2:8: error: specs: go.mod: not a directory (paths are relative to irisgen.yaml)"},
		{"specs empty", "version: 1\nspecs: ''\n", "irisgen.yaml:2:8: error: specs is empty; omit the key to use the specs built into irisgen"},
		{"templates a list", "version: 1\ntemplates: [a]\n", "irisgen.yaml:2:12: error: templates must be a string, found a list"},
		{"out empty", "version: 1\nout: \"\"\n", "irisgen.yaml:2:6: error: out is empty; omit the key for generated"},
		{"package empty", "version: 1\npackage: ''\n", "irisgen.yaml:2:10: error: package \"\": want the generated Go package's name, e.g. collectives"},
		{"package not an identifier", "version: 1\npackage: My-Coll\n", "irisgen.yaml:2:10: error: package \"My-Coll\": a package name is a lower-case Go identifier ([a-z][a-z0-9_]*), e.g. collectives"},
		{"package a keyword", "version: 1\npackage: func\n", "irisgen.yaml:2:10: error: package \"func\": a Go, C or C++ keyword cannot name the package"},
		{"package main", "version: 1\npackage: main\n", "irisgen.yaml:2:10: error: package \"main\": the generated package is imported: it cannot be main or end in _test"},
		{"package _test", "version: 1\npackage: coll_test\n", "irisgen.yaml:2:10: error: package \"coll_test\": the generated package is imported"},
		{"import path", "version: 1\nimport_path: /abs/x\n", "irisgen.yaml:2:14: error: import_path \"/abs/x\" is not a Go import path: an absolute path; write e.g. example.com/repo/internal/coll, or omit it to derive it from go.mod"},
		{"kernels not a mapping", "version: 1\nkernels: hip\n", "irisgen.yaml:2:10: error: kernels must be a mapping with the keys platform, cuda_arch, hip_arch, command; found the string \"hip\""},
		{"kernels unknown key", "version: 1\nkernels:\n  platfrom: hip\n", "irisgen.yaml:3:3: error: unknown key \"platfrom\" in kernels (did you mean \"platform\"?)"},
		{"platform typo", "version: 1\nkernels: {platform: cuda2}\n", "irisgen.yaml:2:21: error: kernels.platform \"cuda2\" is not a platform (did you mean \"cuda\"?)"},
		{"platform unknown", "version: 1\nkernels: {platform: metal}\n", "irisgen.yaml:2:21: error: kernels.platform \"metal\" is not a platform (want one of auto, cuda, hip)"},
		{"arch not a list", "version: 1\nkernels: {hip_arch: gfx90a}\n", "irisgen.yaml:2:21: error: kernels.hip_arch must be a list of targets, e.g. [\"gfx90a\", \"gfx942\"]; found the string \"gfx90a\""},
		{"arch bad name", "version: 1\nkernels: {cuda_arch: [\"9 0\"]}\n", "irisgen.yaml:2:23: error: kernels.cuda_arch: \"9 0\" is not a target name (e.g. gfx90a, gfx942:xnack+, 90)"},
		{"arch empty", "version: 1\nkernels: {hip_arch: []}\n", "irisgen.yaml:2:21: error: kernels.hip_arch is empty; list targets or omit the key for the compiler's defaults"},
		{"command empty", "version: 1\nkernels: {command: ' '}\n", "irisgen.yaml:2:20: error: kernels.command is empty; omit it to derive it from go.mod"},
		{"catalogue typo", "version: 1\ncatalogue: [all_reduce, moe_dispach]\n", "irisgen.yaml:2:25: error: catalogue: \"moe_dispach\" is not a collective of irisgen's catalogue (did you mean \"moe_dispatch\"?)"},
		{"catalogue unknown", "version: 1\ncatalogue: [fft]\n", "irisgen.yaml:2:13: error: catalogue: \"fft\" is not a collective of irisgen's catalogue (irisgen's catalogue has all_gather, all_reduce, "},
		{"catalogue twice", "version: 1\ncatalogue: [barrier, barrier]\n", "irisgen.yaml:2:22: error: catalogue: barrier is listed twice; list it once"},
		{"catalogue empty", "version: 1\ncatalogue: []\n", "irisgen.yaml:2:12: error: catalogue is empty; list irisgen's collectives this repository uses (e.g. [all_reduce]), or omit the key"},
		{"catalogue a string", "version: 1\ncatalogue: all_reduce\n", "irisgen.yaml:2:12: error: catalogue must be a list of irisgen's collectives, e.g. [all_reduce, moe_dispatch, moe_combine]; found the string \"all_reduce\""},
		{"several, sorted", "version: 1\npackage: ''\nout: ''\n", "irisgen.yaml:2:10: error: package \"\": want the generated Go package's name, e.g. collectives\nirisgen.yaml:3:6: error: out is empty; omit the key for generated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := repo(t, map[string]string{"go.mod": "module example.com/m\n"})
			_, errs := load(t, dir, tc.src)
			require.NotEmpty(t, errs, "no error")
			require.True(t, strings.HasPrefix(errs, tc.want), "errors:\n%s\nwant prefix:\n%s", errs, tc.want)
		})
	}
}

// TestFind: found in the directory or a parent, not above the module root.
func TestFind(t *testing.T) {
	root := repo(t, map[string]string{
		"irisgen.yaml":            "version: 1\n",
		"a/b/c/":                  "",
		"sub/go.mod":              "module example.com/sub\n",
		"sub/pkg/":                "",
		"sub2/go.mod":             "module example.com/sub2\n",
		"sub2/irisgen.yaml":       "version: 1\n",
		"sub2/deep/er/":           "",
		"sub2/deep/irisgen.yaml/": "", // a directory of that name is not skipped silently: Stat finds it
	})
	for _, tc := range []struct{ from, want string }{
		{".", "irisgen.yaml"},
		{"a/b/c", "irisgen.yaml"},
		{"sub/pkg", ""}, // stops at sub/go.mod
		{"sub2", "sub2/irisgen.yaml"},
		{"sub2/deep/er", "sub2/deep/irisgen.yaml"},
	} {
		got, err := Find(filepath.Join(root, tc.from))
		require.NoError(t, err)
		if tc.want == "" {
			require.Equal(t, "", got, tc.from)
			continue
		}
		require.Equal(t, filepath.Join(root, tc.want), got, tc.from)
	}
	// A directory found by that name is refused when read.
	_, err := Resolve("", filepath.Join(root, "sub2/deep/er"), Overrides{})
	require.ErrorContains(t, err, "not a regular file (a directory)")
}

func str(s string) *string { return &s }

// TestResolve: flags override only what they set; without a file the
// defaults apply in the working directory.
func TestResolve(t *testing.T) {
	root := repo(t, map[string]string{
		"go.mod":       "module example.com/m\n",
		"irisgen.yaml": "version: 1\nspecs: specs\nout: internal/gen\npackage: coll\nimport_path: example.com/m/fixed\nkernels: {platform: hip}\n",
		"specs/a.yaml": "",
		"other/b.yaml": "",
		"pkg/x/":       "",
	})
	wd := filepath.Join(root, "pkg", "x")
	c, err := Resolve("", wd, Overrides{})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "specs"), c.Specs)
	require.Equal(t, "coll", c.Package)
	require.Equal(t, "example.com/m/fixed", c.ImportPath)
	require.Equal(t, "hip", c.Kernels.Platform)

	c, err = Resolve("", wd, Overrides{Specs: str("../../other"), Package: str("alt")})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "other"), c.Specs, "flags are relative to the working directory")
	require.Equal(t, "alt", c.Package)
	require.Equal(t, "example.com/m/internal/gen/alt", c.ImportPath, "the import path follows an overridden package")
	require.Equal(t, filepath.Join(root, "internal", "gen"), c.Out, "out stays the file's")

	c, err = Resolve("", wd, Overrides{Specs: str("")})
	require.NoError(t, err)
	require.Equal(t, "", c.Specs, "-specs '' is the built-in catalogue")

	// A repository that uses part of the catalogue: its own specs and
	// templates, and the names; -specs '' alone is the whole catalogue
	// with its own templates, -templates still overrides.
	cat := repo(t, map[string]string{
		"go.mod":       "module example.com/cat\n",
		"irisgen.yaml": "version: 1\nspecs: specs\ntemplates: templates\ncatalogue: [moe_dispatch, all_reduce]\n",
		"specs/a.yaml": "name: a\n",
		"templates/":   "",
		"mine/b.yaml":  "name: b\n",
	})
	c, err = Resolve("", cat, Overrides{})
	require.NoError(t, err)
	require.Equal(t, []string{"moe_dispatch", "all_reduce"}, c.Catalogue)
	require.Equal(t, filepath.Join(cat, "templates"), c.Templates)
	c, err = Resolve("", cat, Overrides{Specs: str("")})
	require.NoError(t, err)
	require.Equal(t, "", c.Specs)
	require.Equal(t, "", c.Templates, "-specs '' takes the catalogue's templates with it")
	require.Nil(t, c.Catalogue, "-specs '' is the whole catalogue")
	c, err = Resolve("", cat, Overrides{Specs: str(""), Templates: str("mine")})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(cat, "mine"), c.Templates, "-templates given beside -specs ''")
	c, err = Resolve("", cat, Overrides{Specs: str("mine")})
	require.NoError(t, err)
	require.Equal(t, []string{"moe_dispatch", "all_reduce"}, c.Catalogue, "other specs keep the catalogue key")

	// -config names a file; relative to the working directory.
	c, err = Resolve("../../irisgen.yaml", wd, Overrides{})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, FileName), c.File)
	_, err = Resolve("nope.yaml", wd, Overrides{})
	require.ErrorContains(t, err, "no such file")

	// No file: the defaults, relative to the working directory.
	free := repo(t, map[string]string{"go.mod": "module example.com/free\n"})
	c, err = Resolve("", free, Overrides{Out: str("gen"), Package: str("p")})
	require.NoError(t, err)
	require.Equal(t, "", c.File)
	require.Equal(t, filepath.Join(free, "gen"), c.Out)
	require.Equal(t, "example.com/free/gen/p", c.ImportPath)
	require.Equal(t, "go run github.com/irisgen/irisgen/cmd/irisgen kernels -out gen -package p", c.Kernels.Command)

	for _, tc := range []struct {
		o    Overrides
		want string
	}{
		{Overrides{Package: str("")}, `-package "": want the generated Go package's name`},
		{Overrides{Package: str("a b")}, `-package "a b": a package name is a lower-case Go identifier`},
		{Overrides{Out: str("")}, `-out "": want the output directory`},
		{Overrides{Specs: str("nope")}, `-specs "nope": no such directory`},
		{Overrides{Templates: str("go.mod")}, `-templates "go.mod": not a directory`},
	} {
		_, err := Resolve("", free, tc.o)
		var fe *FlagError
		require.ErrorAs(t, err, &fe)
		require.ErrorContains(t, err, tc.want)
	}
}

// TestCatalogueNames: the catalogue's collectives, from the spec files
// built into irisgen.
func TestCatalogueNames(t *testing.T) {
	names := CatalogueNames()
	require.Contains(t, names, "all_reduce")
	require.Contains(t, names, "moe_combine")
	require.NotContains(t, names, "tuning")
	require.True(t, slices.IsSorted(names))
}

// TestReadFile: only regular files, up to MaxFileBytes.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	_, err := ReadFile(fifo)
	require.ErrorContains(t, err, "not a regular file (a named pipe)")
	_, err = ReadFile("/dev/zero")
	require.ErrorContains(t, err, "not a regular file (a device)")
	_, err = ReadFile(dir)
	require.ErrorContains(t, err, "(a directory)")
	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, make([]byte, MaxFileBytes+1), 0o644))
	_, err = ReadFile(big)
	require.ErrorContains(t, err, "more than irisgen reads from one file")
	ok := filepath.Join(dir, "ok.yaml")
	require.NoError(t, os.WriteFile(ok, []byte("version: 1\n"), 0o644))
	b, err := ReadFile(ok)
	require.NoError(t, err)
	require.Equal(t, "version: 1\n", string(b))
	// Through Resolve, a FIFO config is refused before it is opened (no hang).
	_, err = Resolve(fifo, dir, Overrides{})
	require.ErrorContains(t, err, "named pipe")
}

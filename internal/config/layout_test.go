package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/diag"
)

// layoutRepo is a module with a spec and a template in every directory a
// case may point specs or templates at.
func layoutRepo(t *testing.T, dirs ...string) string {
	t.Helper()
	files := map[string]string{"go.mod": "module example.com/m\n"}
	for _, d := range dirs {
		files[d+"/x.yaml"] = "name: x\n"
		files[d+"/t.hip.tmpl"] = "// t\n"
	}
	return repo(t, files)
}

// TestInputsInsideTheOutput enumerates where specs and templates can lie
// relative to the output (out gen, package coll): in an output directory
// generate writes and removes files in (gen/hip, gen/coll, below them,
// through a link) the config is refused at the input's key with the fix;
// beside them, at the output root, above it or elsewhere it is fine. The
// same through the flags blames the flag.
func TestInputsInsideTheOutput(t *testing.T) {
	cases := []struct {
		dir     string
		refused string // the output directory it lies in, "" when fine
	}{
		{"gen/hip", "gen/hip"},
		{"gen/hip/sub", "gen/hip"},
		{"gen/coll", "gen/coll"},
		{"gen/coll/kernels", "gen/coll"},
		{"gen/coll/sub/deeper", "gen/coll"},
		{"gen", ""},
		{"gen/other", ""},
		{"gen/hipx", ""},
		{".", ""},
		{"inputs", ""},
	}
	for _, key := range []string{"specs", "templates"} {
		for _, tc := range cases {
			t.Run(key+" "+tc.dir, func(t *testing.T) {
				dir := layoutRepo(t, tc.dir)
				src := fmt.Sprintf("version: 1\n%s: %s\nout: gen\npackage: coll\n", key, tc.dir)
				_, errs := load(t, dir, src)
				if tc.refused == "" {
					require.Empty(t, errs)
					return
				}
				want := fmt.Sprintf("irisgen.yaml:2:%d: error: the %s directory %s lies inside %s, where generate writes and removes files: it could overwrite or remove its own inputs; keep the %s out of gen/hip and gen/coll (move them, e.g. to %s), or generate elsewhere (out, package)",
					len(key)+3, key, tc.dir, tc.refused, key, key)
				require.Equal(t, want, errs)
				// Following the advice: moved to the directory it names.
				moved := strings.Replace(src, key+": "+tc.dir, key+": "+key, 1)
				require.NoError(t, os.MkdirAll(filepath.Join(dir, key), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, key, "x.yaml"), nil, 0o644))
				_, errs = load(t, dir, moved)
				require.Empty(t, errs, "after the advice")

				// Through the flags: the flag that makes it is blamed.
				dir = layoutRepo(t, tc.dir)
				require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte("version: 1\nout: gen\npackage: coll\n"), 0o644))
				o := Overrides{}
				if key == "specs" {
					o.Specs = str(tc.dir)
				} else {
					o.Templates = str(tc.dir)
				}
				_, err := Resolve("", dir, o)
				var fe *FlagError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, key, fe.Flag)
				require.Contains(t, fe.Msg, "lies inside "+tc.refused)
				// The file names the input, the flag the output.
				require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte(src), 0o644))
				_, err = Resolve("", dir, Overrides{Out: str(filepath.Join(dir, "elsewhere"))})
				require.NoError(t, err, "-out elsewhere frees the file's input")
				_, err = Resolve("", dir, Overrides{Package: str("coll")})
				require.ErrorAs(t, err, &fe)
				require.Equal(t, "package", fe.Flag)
				require.Contains(t, fe.Msg, "the output directory "+tc.refused+" would hold the "+key)
			})
		}
	}
	// Both inputs inside: two errors, in file order.
	dir := layoutRepo(t, "gen/hip", "gen/coll")
	_, errs := load(t, dir, "version: 1\nspecs: gen/coll\ntemplates: gen/hip\nout: gen\npackage: coll\n")
	require.Equal(t, 2, strings.Count(errs, "error:"), errs)
	require.True(t, strings.HasPrefix(errs, "irisgen.yaml:2:8: error: the specs directory gen/coll lies inside gen/coll"), errs)
	// The output root inside the templates (templates: t, out: t/gen, or
	// out: t) holds no input: fine.
	for _, out := range []string{"t/gen", "t"} {
		dir = layoutRepo(t, "t")
		_, errs = load(t, dir, "version: 1\nspecs: t\ntemplates: t\nout: "+out+"\n")
		require.Empty(t, errs, out)
	}
	// The package directory named like the templates directory.
	dir = layoutRepo(t, "gen/tmpl")
	_, errs = load(t, dir, "version: 1\ntemplates: gen/tmpl\nout: gen\npackage: tmpl\n")
	require.Contains(t, errs, "irisgen.yaml:2:12: error: the templates directory gen/tmpl lies inside gen/tmpl")
}

// TestInputsInsideTheOutputThroughLinks: a link in either direction is
// followed: templates that are a link to gen/hip, and gen/hip a link to
// the templates.
func TestInputsInsideTheOutputThroughLinks(t *testing.T) {
	dir := layoutRepo(t, "gen/hip")
	require.NoError(t, os.Symlink(filepath.Join(dir, "gen", "hip"), filepath.Join(dir, "tmpl")))
	_, errs := load(t, dir, "version: 1\ntemplates: tmpl\nout: gen\n")
	require.Contains(t, errs, "irisgen.yaml:2:12: error: the templates directory tmpl lies inside gen/hip")

	dir = layoutRepo(t, "tmpl")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "gen"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "tmpl"), filepath.Join(dir, "gen", "hip")))
	_, errs = load(t, dir, "version: 1\ntemplates: tmpl\nout: gen\n")
	require.Contains(t, errs, "irisgen.yaml:2:12: error: the templates directory tmpl lies inside gen/hip")
}

// TestOutputPlaces enumerates where out (and the package under it) can
// point: inside the config's module, at its root, absolute, through a
// link; outside it, in another module beside it or nested in it, through
// a link out of it; at a file; with no go.mod at all (an import path
// then required). Each refusal is at out's value with the fix.
func TestOutputPlaces(t *testing.T) {
	outside := t.TempDir()
	other := repo(t, map[string]string{"go.mod": "module example.com/other\n"})
	for _, tc := range []struct {
		name, out string
		setup     func(t *testing.T, dir string)
		want      string // "" when fine
	}{
		{"default", "", nil, ""},
		{"inside", "internal/gen", nil, ""},
		{"the module root", ".", nil, ""},
		{"absolute inside", "ABS/gen", nil, ""},
		{"a link inside", "link", func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "real"), 0o755))
			require.NoError(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")))
		}, ""},
		{"outside", "../elsewhere", nil, "lies outside the module example.com/m (go.mod in the directory of irisgen.yaml), where no package of the module can import it and irisgen would write outside the repository; put it inside the module (e.g. out: generated), or generate it from a config in its own module"},
		{"absolute outside", outside, nil, "lies outside the module example.com/m"},
		{"another module", other, nil, "lies in another module, example.com/other (go.mod in "},
		{"a nested module", "sub/gen", func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "go.mod"), []byte("module example.com/sub\n"), 0o644))
		}, "lies in another module, example.com/sub (go.mod in sub), not in example.com/m"},
		{"a link out of the module", "away", func(t *testing.T, dir string) {
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "away")))
		}, "lies outside the module example.com/m"},
		{"a file", "go.mod", nil, "go.mod is a file where generate needs a directory; point out at a directory (created when missing), or move the file"},
		{"hip a file", "gen", func(t *testing.T, dir string) {
			require.NoError(t, os.MkdirAll(filepath.Join(dir, "gen"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "gen", "hip"), nil, 0o644))
		}, "gen/hip is a file where generate needs a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := repo(t, map[string]string{"go.mod": "module example.com/m\n"})
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			src := "version: 1\n"
			if tc.out != "" {
				src += "out: " + strings.Replace(tc.out, "ABS", dir, 1) + "\n"
			}
			_, errs := load(t, dir, src)
			if tc.want == "" {
				require.Empty(t, errs)
				return
			}
			require.True(t, strings.HasPrefix(errs, "irisgen.yaml:2:6: error: "), errs)
			require.Contains(t, errs, tc.want)
			// The advice of the module errors: out: generated.
			if m := regexp.MustCompile(`\(e\.g\. (out: [a-z]+)\)`).FindStringSubmatch(errs); m != nil {
				_, after := load(t, dir, "version: 1\n"+m[1]+"\n")
				require.Empty(t, after, "after the advice %s", m[1])
			}
			// A flag pointing there is blamed as the flag.
			require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte("version: 1\n"), 0o644))
			_, err := Resolve("", dir, Overrides{Out: str(tc.out)})
			var fe *FlagError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "out", fe.Flag)
		})
	}
	// The package directory a file.
	dir := repo(t, map[string]string{"go.mod": "module example.com/m\n", "gen/coll": ""})
	_, errs := load(t, dir, "version: 1\nout: gen\npackage: coll\n")
	require.Contains(t, errs, "irisgen.yaml:3:10: error: gen/coll is a file where generate needs a directory")
}

// TestNoModule: without a go.mod the generated package has no import path
// (it fell back to its name, a registry key every such package shares):
// refused unless import_path gives one; without a config file only for
// the commands that write (validate and explain work anywhere).
func TestNoModule(t *testing.T) {
	dir := t.TempDir()
	if m, _ := findModule(dir); m != nil {
		t.Skipf("a go.mod above the temporary directory (%s)", m.root)
	}
	_, errs := load(t, dir, "version: 1\n")
	require.Equal(t, "irisgen.yaml:1:1: error: no go.mod above the generated package generated/collectives, so it has no import path (the key of its kernels in the runtime); run go mod init at the repository's root, or set import_path in irisgen.yaml", errs)
	c, errs := load(t, dir, "version: 1\nimport_path: example.com/x/coll\n")
	require.Empty(t, errs)
	require.Equal(t, "example.com/x/coll", c.ImportPath)

	free := t.TempDir()
	_, err := Resolve("", free, Overrides{})
	require.NoError(t, err, "validate, explain: the output is not used")
	_, err = Resolve("", free, Overrides{Output: true})
	require.EqualError(t, err, "no go.mod above the generated package generated/collectives, so it has no import path (the key of its kernels in the runtime); run go mod init here, or generate into a module (-out)")
	_, err = Resolve("", free, Overrides{Output: true, Out: str("x")})
	var fe *FlagError
	require.ErrorAs(t, err, &fe)
	// Into a module from outside any: its import path.
	mod := repo(t, map[string]string{"go.mod": "module example.com/m\n"})
	c, err = Resolve("", free, Overrides{Output: true, Out: str(filepath.Join(mod, "gen"))})
	require.NoError(t, err)
	require.Equal(t, "example.com/m/gen/collectives", c.ImportPath)
}

// TestImportPaths: import_path is a Go import path or refused.
func TestImportPaths(t *testing.T) {
	for _, ok := range []string{"example.com/m/internal/coll", "mymod/coll", "a.b/c_d-e~f+g", "x"} {
		require.NoError(t, CheckImportPath(ok), ok)
	}
	for bad, why := range map[string]string{
		"":                     "empty",
		"./internal/gen/coll":  "a relative path (an element . or ..)",
		"../x":                 "a relative path (an element . or ..)",
		"a/../b":               "a relative path (an element . or ..)",
		"/abs/x":               "an absolute path",
		"x/":                   "a trailing /",
		"a//b":                 "an empty element (//)",
		"example.com/.hidden":  `element ".hidden" starts with a dot`,
		"example.com/x.":       `element "x." ends with a dot`,
		"example.com/a b":      `' ' is not allowed`,
		"example.com/a\nb":     `'\n' is not allowed`,
		"example.com/a\\b":     `'\\' is not allowed`,
		"example.com/ünïcode":  `'ü' is not allowed`,
		"example.com/a\"b":     `'"' is not allowed`,
		"example.com/x;rm -rf": `';' is not allowed`,
	} {
		err := CheckImportPath(bad)
		require.Error(t, err, "%q", bad)
		require.Equal(t, why, err.Error(), "%q", bad)
	}
	dir := repo(t, map[string]string{"go.mod": "module example.com/m\n"})
	_, errs := load(t, dir, "version: 1\nimport_path: \"example.com/a\\nb\"\n")
	require.Equal(t, "irisgen.yaml:2:14: error: import_path \"example.com/a\\nb\" is not a Go import path: '\\n' is not allowed; write e.g. example.com/repo/internal/coll, or omit it to derive it from go.mod", errs)
}

// TestConfigFileErrorsArePositioned: a config irisgen cannot read (too
// large, a FIFO, a directory) and a specs directory without specs are
// errors at the file, not bare messages.
func TestConfigFileErrorsArePositioned(t *testing.T) {
	dir := repo(t, map[string]string{"go.mod": "module example.com/m\n", "empty/": ""})
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), make([]byte, MaxFileBytes+1), 0o644))
	_, err := Resolve("", dir, Overrides{})
	var l diag.List
	require.True(t, errors.As(err, &l), "%T %v", err, err)
	require.Equal(t, fmt.Sprintf("irisgen.yaml:1:1: error: %d bytes, more than irisgen reads from one file (%d)", MaxFileBytes+1, MaxFileBytes), l.Error())

	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte("version: 1\nspecs: empty\n"), 0o644))
	_, err = Resolve("", dir, Overrides{})
	require.EqualError(t, err, "irisgen.yaml:2:8: error: empty holds no spec (*.yaml); add one, or omit specs to generate the catalogue built into irisgen")
	_, err = Resolve("", dir, Overrides{Specs: str("empty")})
	var fe *FlagError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "specs", fe.Flag)
}

// TestOddOutputNames: the fuzzer's findings. A directory whose name no
// import path may hold (a space, a leading dot, "..0", which is no parent)
// is refused at out; a NUL byte in a path is refused at the key or flag.
func TestOddOutputNames(t *testing.T) {
	for out, want := range map[string]string{
		"' '":    `the generated package  /collectives would have the import path "example.com/m/ /collectives", which is not one: ' ' is not allowed`,
		"..0":    `the generated package ..0/collectives would have the import path "example.com/m/..0/collectives", which is not one: element "..0" starts with a dot`,
		".hid/x": `the generated package .hid/x/collectives would have the import path "example.com/m/.hid/x/collectives", which is not one: element ".hid" starts with a dot; name its directories with letters, digits and - . _ ~ +`,
	} {
		dir := repo(t, map[string]string{"go.mod": "module example.com/m\n"})
		_, errs := load(t, dir, "version: 1\nout: "+out+"\n")
		require.Contains(t, errs, "irisgen.yaml:2:6: error: "+want, out)
	}
	dir := repo(t, map[string]string{"go.mod": "module example.com/m\n", "specs/x.yaml": ""})
	_, errs := load(t, dir, "version: 1\nspecs: \"specs\\0\"\n")
	require.Equal(t, `irisgen.yaml:2:8: error: specs "specs\x00" holds a NUL byte, which no path may; write the path without it`, errs)
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte("version: 1\n"), 0o644))
	for _, o := range []Overrides{{Out: str("a\x00")}, {Specs: str("specs\x00")}, {Templates: str("\x00")}} {
		_, err := Resolve("", dir, o)
		var fe *FlagError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, "a path cannot hold a NUL byte", fe.Msg)
	}
}

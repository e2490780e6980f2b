package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/irisgen/irisgen/internal/diag"
)

// FuzzParse: no input makes the config reader panic, every error is a
// positioned one in the file, and every config it accepts is valid.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "version: 1\n", "version: 2\n", "version: 1\nspecs: specs\ntemplates: templates\nout: gen\npackage: coll\n",
		"version: 1\nkernels: {platform: hip, hip_arch: [gfx90a], cuda_arch: [\"90\"], command: make kernels}\n",
		"version: 1\nimport_path: example.com/m/coll\n", "version: 1\npackge: x\nout: a\nout: b\n",
		"- a\n", "version: &v 1\nout: *v\n", "version: 1\n---\nversion: 1\n", "version: [1]\nkernels: []\n",
		"version: 1\nkernels:\n  <<: {platform: hip}\n", "{version: 1, specs: ../..}\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	for _, d := range []string{"specs", "templates"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	// A module with a spec, so that accepted configs are common.
	for p, body := range map[string]string{"go.mod": "module example.com/m\n", "specs/x.yaml": "name: x\n"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	abs := filepath.Join(dir, FileName)
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := Parse(abs, FileName, src)
		if err != nil {
			l, ok := err.(diag.List)
			if !ok {
				t.Fatalf("%T, not positioned errors: %v", err, err)
			}
			for _, e := range l {
				if e.Pos.File != FileName || e.Pos.Line < 1 || e.Pos.Col < 1 || strings.TrimSpace(e.Msg) == "" {
					t.Fatalf("badly positioned error %q", e.Error())
				}
			}
			return
		}
		if err := CheckPackage(c.Package); err != nil {
			t.Fatalf("accepted package %q: %v", c.Package, err)
		}
		if !contains(Platforms(), c.Kernels.Platform) || c.Kernels.Command == "" {
			t.Fatalf("accepted kernels %+v", c.Kernels)
		}
		for _, p := range []string{c.Out, c.Specs, c.Templates} {
			if p != "" && !filepath.IsAbs(p) {
				t.Fatalf("relative path %q in an accepted config", p)
			}
		}
	})
}

// layoutTree is the repository FuzzLayout's configs point into: output
// directories, inputs beside and inside them, links in and out, a nested
// module, a file, a directory without specs.
func layoutTree(f *testing.F) (root, outside string) {
	root = filepath.Join(f.TempDir(), "repo")
	outside = f.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n", "afile": "x",
		"sub/go.mod": "module example.com/m/sub\n", "empty/.keep": "",
	}
	for _, d := range []string{"specs", "templates", "gen/hip", "gen/coll", "gen/coll/kernels", "gen/other", "t", "sub/specs", "gen/hip/sub"} {
		files[d+"/x.yaml"] = "name: x\n"
		files[d+"/t.hip.tmpl"] = "// t\n"
	}
	for p, body := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	for link, target := range map[string]string{"to_hip": filepath.Join(root, "gen", "hip"), "to_out": outside, "to_t": filepath.Join(root, "t"), "loop": filepath.Join(root, "loop")} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			f.Fatal(err)
		}
	}
	return root, outside
}

// FuzzLayout reads configs (and flags) that point specs, templates, out
// and package anywhere in and around a repository (layoutTree): no panic,
// every error a flag's, positioned in the file or a bare one without a
// file, and every accepted config keeps its inputs out of its output
// directories and its package inside the config's module, with a valid
// import path.
func FuzzLayout(f *testing.F) {
	for _, s := range []string{
		"version: 1\nspecs: specs\ntemplates: gen/hip\nout: gen\npackage: coll\n",
		"version: 1\nspecs: gen/coll/kernels\nout: gen\npackage: coll\n",
		"version: 1\ntemplates: to_hip\nout: gen\n", "version: 1\nout: to_out\n", "version: 1\nout: ../x\n",
		"version: 1\nout: sub/gen\n", "version: 1\nout: afile\n", "version: 1\nspecs: empty\n", "version: 1\nspecs: loop\n",
		"version: 1\ntemplates: t\nout: t\n", "version: 1\nimport_path: ./x/y\n", "version: 1\nout: .\npackage: t\ntemplates: t\n",
	} {
		f.Add([]byte(s), "", "", "", "", uint8(0))
	}
	f.Add([]byte("version: 1\nspecs: specs\n"), "", "gen/hip", "gen", "coll", uint8(0b1110))
	f.Add([]byte("version: 1\n"), "gen/coll", "", "", "", uint8(0b1001))
	f.Add([]byte("version: 1\n"), "", "", "to_out", "", uint8(0b0100))
	root, _ := layoutTree(f)
	mod := realPath(root)
	abs := filepath.Join(root, FileName)
	f.Fuzz(func(t *testing.T, src []byte, specs, templates, out, pkg string, set uint8) {
		if err := os.WriteFile(abs, src, 0o644); err != nil {
			t.Fatal(err)
		}
		o := Overrides{Output: set&0x10 == 0}
		for i, v := range []struct {
			val string
			dst **string
		}{{specs, &o.Specs}, {templates, &o.Templates}, {out, &o.Out}, {pkg, &o.Package}} {
			if set&(1<<i) != 0 {
				val := v.val
				*v.dst = &val
			}
		}
		c, err := Resolve("", root, o)
		if err != nil {
			var fe *FlagError
			var l diag.List
			switch {
			case errors.As(err, &fe):
				if set&0xf == 0 {
					t.Fatalf("a flag error without flags: %v", err)
				}
			case errors.As(err, &l):
				for _, e := range l {
					if e.Pos.File != FileName || e.Pos.Line < 1 || e.Pos.Col < 1 || strings.TrimSpace(e.Msg) == "" {
						t.Fatalf("badly positioned error %q", e.Error())
					}
				}
			default:
				t.Fatalf("%T, neither a flag's nor positioned: %v", err, err)
			}
			return
		}
		if err := CheckPackage(c.Package); err != nil {
			t.Fatalf("accepted package %q: %v", c.Package, err)
		}
		if err := CheckImportPath(c.ImportPath); err != nil {
			t.Fatalf("accepted import path %q: %v", c.ImportPath, err)
		}
		owned := []string{realPath(filepath.Join(c.Out, "hip")), realPath(c.PackageDir())}
		for _, in := range []string{c.Specs, c.Templates} {
			if in == "" {
				continue
			}
			for _, o := range owned {
				if within(realPath(in), o) {
					t.Fatalf("accepted an input %s inside the output directory %s", in, o)
				}
			}
		}
		if m, _ := findModule(realPath(c.PackageDir())); m == nil || m.root != mod {
			t.Fatalf("accepted a package %s outside the module %s", c.PackageDir(), mod)
		}
		for _, d := range []string{c.Out, filepath.Join(c.Out, "hip"), c.PackageDir()} {
			if st, err := os.Stat(d); err == nil && !st.IsDir() {
				t.Fatalf("accepted %s, a file, as an output directory", d)
			}
		}
	})
}

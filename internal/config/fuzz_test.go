package config

import (
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
		if !contains(Platforms, c.Kernels.Platform) || c.Kernels.Command == "" {
			t.Fatalf("accepted kernels %+v", c.Kernels)
		}
		for _, p := range []string{c.Out, c.Specs, c.Templates} {
			if p != "" && !filepath.IsAbs(p) {
				t.Fatalf("relative path %q in an accepted config", p)
			}
		}
	})
}

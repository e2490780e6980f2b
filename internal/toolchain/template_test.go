package toolchain_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/driver"
	"github.com/irisgen/irisgen/internal/toolchain"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// TestCompileErrorsAtTemplateLines compiles, with every real compiler of
// this machine (clang++-19, hipcc, nvcc), a kernel generated from a
// template with a C++ error in its prelude and one in its body, and
// requires the compiler to report both at the template's file and line
// (the #line directives hipemit writes), not at the generated file's.
func TestCompileErrorsAtTemplateLines(t *testing.T) {
	const tmpl = `{{- /*
A template with two mistakes a C++ compiler finds.
*/}}
{{define "prelude"}}
__device__ int helper() { return not_declared_in_prelude; }
{{end}}
  {{barrier}}
  int fine = 1;
  not_declared_in_body = fine;
`
	spec := "name: broken\nsummary: A barrier with mistakes.\nvariants:\n  device:\n    template: broken_device\n    launch: {threads: 64, max_blocks: 1}\n"
	p := &driver.Project{
		Specs:     fstest.MapFS{"broken.yaml": {Data: []byte(spec)}},
		SpecRoot:  "specs",
		Templates: fstest.MapFS{"broken_device.hip.tmpl": {Data: []byte(tmpl)}},
		// As a repository's irisgen.yaml names them.
		TemplateRoot: "templates",
		OutRoot:      "gen",
		Package:      "coll",
	}
	files, _, err := p.Generate()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "broken.hip")
	if err := os.WriteFile(src, files["hip/broken.hip"], 0o644); err != nil {
		t.Fatal(err)
	}
	include, err := fs.Sub(irisgen.Include, "runtime/include")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ran := 0
	for _, c := range []struct {
		compiler string
		opts     toolchain.Options
		at       func(line int) string // how the compiler names a template line
	}{
		{"clang++-19", toolchain.Options{Platform: toolchain.HIP, Targets: []string{"gfx90a"}, Compiler: "clang++-19"}, func(l int) string { return fmt.Sprintf("templates/broken_device.hip.tmpl:%d:", l) }},
		{"hipcc", toolchain.Options{Platform: toolchain.HIP, Targets: []string{"gfx90a"}, Compiler: "hipcc"}, func(l int) string { return fmt.Sprintf("templates/broken_device.hip.tmpl:%d:", l) }},
		{"nvcc", toolchain.Options{Platform: toolchain.CUDA, Targets: []string{"90"}, Compiler: "nvcc"}, func(l int) string { return fmt.Sprintf("templates/broken_device.hip.tmpl(%d):", l) }},
	} {
		t.Run(c.compiler, func(t *testing.T) {
			if _, err := toolchain.LookPath(c.compiler); err != nil {
				t.Skipf("%s not installed", c.compiler)
			}
			ran++
			comp, err := toolchain.Find(ctx, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := comp.Prepare(ctx, include)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			out, err := b.Compile(ctx, src, filepath.Join(t.TempDir(), comp.File("broken")), irismodel.SpecHashSymbol("broken"))
			if err == nil {
				t.Fatalf("the broken template compiled:\n%s", out)
			}
			for _, w := range []struct {
				line int
				name string
			}{{5, "not_declared_in_prelude"}, {9, "not_declared_in_body"}} {
				re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(c.at(w.line)) + `.*error.*` + w.name)
				if !re.Match(out) {
					t.Errorf("no error at the template's line %d naming %s:\n%s", w.line, w.name, out)
				}
			}
			if strings.Contains(string(out), "broken.hip:") || strings.Contains(string(out), "broken.hip(") {
				t.Errorf("an error is reported at the generated file, not the template:\n%s", out)
			}
		})
	}
	if ran == 0 {
		t.Skip("no GPU compiler installed")
	}
}

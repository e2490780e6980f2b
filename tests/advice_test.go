package tests

import (
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen/internal/driver"
)

// TestParameterInShapeAdvice: a launch parameter in a shape is refused
// with advice to make it a size; doing all it says (remove it from params,
// declare it in sizes as given, read it with {{size}}) gives a collective
// that generates, kernels and wrappers.
func TestParameterInShapeAdvice(t *testing.T) {
	spec := `name: pk
summary: s
dtypes: [f32]
sizes: [n]
params: {k: int}
tensors:
  x: {dir: in, shape: [n, k]}
  y: {dir: out, shape: [n, k]}
variants:
  v: {template: t, access: {x: local_read, y: local_write}, barriers: [none]}
`
	tmpl := `  irisgen::copy({{write "y"}}, {{read "x"}}, {{size "n"}} * {{param "k"}});`
	generate := func(spec, tmpl string) error {
		p := &driver.Project{Specs: fstest.MapFS{"pk.yaml": {Data: []byte(spec)}}, SpecRoot: "specs",
			Templates: fstest.MapFS{"t.hip.tmpl": {Data: []byte(tmpl)}}, Package: "collectives"}
		_, _, err := p.Generate()
		return err
	}
	err := generate(spec, tmpl)
	if err == nil || !strings.Contains(err.Error(), `"k" is a launch parameter`) {
		t.Fatalf("got %v", err)
	}
	sizes := regexp.MustCompile("`(sizes: \\[[^`]*\\])`").FindStringSubmatch(err.Error())
	if sizes == nil || !strings.Contains(err.Error(), "remove it from params") || !strings.Contains(err.Error(), `{{size "k"}}`) {
		t.Fatalf("no advice to follow in %v", err)
	}
	spec = strings.Replace(strings.Replace(spec, "sizes: [n]", sizes[1], 1), "params: {k: int}\n", "", 1)
	tmpl = strings.ReplaceAll(tmpl, `{{param "k"}}`, `{{size "k"}}`)
	if err := generate(spec, tmpl); err != nil {
		t.Fatalf("after the advice:\n%s\n%s\nstill: %v", spec, tmpl, err)
	}
}

package hipemit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/ir"
)

// FuzzTemplate renders any template text for the specs of hipemit_test.go
// and params_test.go (parameters and one-rank tensors): no panic, no stall,
// and either a kernel source or errors positioned in the template or the
// spec. Seeds: the test templates, the bypass cases and the catalogue's
// templates.
func FuzzTemplate(f *testing.F) {
	f.Add(good)
	f.Add(prefix)
	f.Add(rootedGood)
	names, _ := filepath.Glob("../../../templates/*.hip.tmpl")
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			f.Add(string(b))
		}
	}
	c, err := ir.Compile("ag.yaml", []byte(agSpec), fstest.MapFS{"t.hip.tmpl": {Data: []byte("x")}})
	if err != nil {
		f.Fatal(err)
	}
	rt, err := ir.Compile("rt.yaml", []byte(rootedSpec), fstest.MapFS{"t.hip.tmpl": {Data: []byte("x")}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		for _, c := range []*ir.Collective{c, rt} {
			fuzzOne(t, c, tmpl)
		}
	})
}

// fuzzOne renders tmpl for c and checks the result.
func fuzzOne(t *testing.T, c *ir.Collective, tmpl string) {
	done := make(chan error, 1)
	go func() {
		_, err := Emit(&emit.Request{Collectives: []*ir.Collective{c}, Templates: fstest.MapFS{"t.hip.tmpl": {Data: []byte(tmpl)}}})
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("Emit took more than 5s on a %d-byte template", len(tmpl))
	}
	if err == nil {
		return
	}
	var l diag.List
	if !errors.As(err, &l) || len(l) == 0 {
		t.Fatalf("not a diag.List: %v", err)
	}
	for _, e := range l {
		if (e.Pos.File != "t.hip.tmpl" && e.Pos.File != c.SpecFile) || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" {
			t.Fatalf("badly positioned: %v", e)
		}
	}
}

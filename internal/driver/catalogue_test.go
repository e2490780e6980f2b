package driver

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/ir"
)

// builtinCatalogue compiles irisgen's whole catalogue as irisgen's own
// package does.
func builtinCatalogue(t *testing.T) map[string]*ir.Collective {
	t.Helper()
	specs, err := fs.Sub(irisgen.Specs, "specs")
	require.NoError(t, err)
	templates, err := fs.Sub(irisgen.Templates, "templates")
	require.NoError(t, err)
	cs, err := ir.CompileAll(specs, templates, "specs")
	require.NoError(t, err)
	m := map[string]*ir.Collective{}
	for _, c := range cs {
		m[c.Name] = c
	}
	return m
}

// TestCatalogueNamesAreCollectives: each spec file of the catalogue is
// named after its collective, which config.CatalogueNames relies on.
func TestCatalogueNamesAreCollectives(t *testing.T) {
	all := builtinCatalogue(t)
	require.Len(t, config.CatalogueNames(), len(all))
	for _, n := range config.CatalogueNames() {
		require.Contains(t, all, n)
		require.Equal(t, "specs/"+n+".yaml", all[n].SpecFile)
	}
}

// TestCompileCatalogue: the named collectives, in the order named, with
// the spec hash, tuning table and kernels irisgen's own package has, their
// files named by irisgen's module.
func TestCompileCatalogue(t *testing.T) {
	all := builtinCatalogue(t)
	cs, err := CompileCatalogue([]string{"moe_dispatch", "all_reduce", "moe_combine"})
	require.NoError(t, err)
	require.Len(t, cs, 3)
	for i, n := range []string{"moe_dispatch", "all_reduce", "moe_combine"} {
		c := cs[i]
		require.Equal(t, n, c.Name)
		require.Equal(t, all[n].SpecHash, c.SpecHash, n)
		require.Equal(t, "github.com/irisgen/irisgen/specs/"+n+".yaml", c.SpecFile)
		require.Equal(t, len(all[n].Variants), len(c.Variants))
	}
	require.NotNil(t, cs[1].Auto, "all_reduce's tuning table comes with it")
	require.Equal(t, "github.com/irisgen/irisgen/specs/tuning/all_reduce.yaml", cs[1].Auto.File)
	_, err = CompileCatalogue([]string{"fft"})
	require.ErrorContains(t, err, `irisgen's catalogue has no collective "fft" (it has all_gather, `)
}

// TestProjectCatalogue enumerates a repository's own collectives beside
// the catalogue's it names: what is generated, from which templates, and
// the names refused.
func TestProjectCatalogue(t *testing.T) {
	all := builtinCatalogue(t)
	barrierSpec, err := fs.ReadFile(irisgen.Specs, "specs/barrier.yaml")
	require.NoError(t, err)
	own := func(name string) string {
		return strings.Replace(string(barrierSpec), "name: barrier", "name: "+name, 1)
	}
	// A template of the repository's named like the catalogue's barrier
	// template, and different: the catalogue's barrier must not use it.
	mine := "{{/* mine */}}\n  {{barrier}}\n  {{barrier}}\n"
	for _, c := range []struct {
		name      string
		module    string
		specs     map[string]string // the repository's specs (nil: no specs key)
		catalogue []string
		want      []string // collectives generated, in order
		errs      []string
	}{
		{name: "own and catalogue", module: "example.com/m", specs: map[string]string{"ring.yaml": own("ring")},
			catalogue: []string{"barrier", "broadcast"}, want: []string{"ring", "barrier", "broadcast"}},
		{name: "catalogue only", module: "example.com/m", catalogue: []string{"all_reduce"}, want: []string{"all_reduce"}},
		{name: "no catalogue key, no specs: the whole catalogue", module: "example.com/m", want: config.CatalogueNames()},
		{name: "own named like a listed one", module: "example.com/m", specs: map[string]string{"barrier.yaml": own("barrier")},
			catalogue: []string{"barrier"}, errs: []string{`specs/barrier.yaml:1:7: error: collective "barrier" is also generated here from irisgen's catalogue (catalogue: in irisgen.yaml), and a package has one collective of a name: rename this one (e.g. my_barrier), or remove barrier from catalogue:`}},
		{name: "own named like an unlisted one", module: "example.com/m", specs: map[string]string{"a.yaml": own("broadcast"), "b.yaml": own("shift"), "c.yaml": own("fine")},
			catalogue: []string{"barrier"}, errs: []string{
				`specs/a.yaml:1:7: error: collective "broadcast" is the name of a collective of irisgen's catalogue (github.com/irisgen/irisgen/specs/broadcast.yaml); a program may use both, and code objects found by collective name (Options.Kernels, $IRISGEN_KERNELS) would be taken for each other: rename this one (e.g. my_broadcast), or list broadcast under catalogue: in irisgen.yaml to use irisgen's`,
				`specs/b.yaml:1:7: error: collective "shift" is the name of a collective`}},
		{name: "own named like an unlisted one, no catalogue key", module: "example.com/m", specs: map[string]string{"a.yaml": own("barrier")},
			errs: []string{`specs/a.yaml:1:7: error: collective "barrier" is the name of a collective of irisgen's catalogue`}},
		{name: "irisgen's own repository generates the catalogue's names", module: config.IrisgenModule, specs: map[string]string{"barrier.yaml": own("barrier")},
			want: []string{"barrier"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := "version: 1\ntemplates: templates\n"
			files := map[string]string{"go.mod": "module " + c.module + "\n", "templates/barrier_device.hip.tmpl": mine}
			if c.specs != nil {
				cfg += "specs: specs\n"
				for n, b := range c.specs {
					files["specs/"+n] = b
				}
			}
			if c.catalogue != nil {
				cfg += "catalogue: [" + strings.Join(c.catalogue, ", ") + "]\n"
			}
			if c.specs == nil && c.catalogue == nil {
				cfg = "version: 1\n" // the whole catalogue with its own templates
			}
			disk(t, root, files)
			conf, err := config.Parse(filepath.Join(root, config.FileName), config.FileName, []byte(cfg))
			require.NoError(t, err)
			p, err := New(conf)
			require.NoError(t, err)
			out, cs, err := p.Generate()
			if c.errs != nil {
				var l diag.List
				require.ErrorAs(t, err, &l)
				require.Len(t, l, len(c.errs), "%v", err)
				for i, e := range c.errs {
					require.True(t, strings.HasPrefix(l[i].Error(), e), "error %d:\n%s\nwant prefix:\n%s", i, l[i], e)
				}
				return
			}
			require.NoError(t, err)
			var names []string
			for _, col := range cs {
				names = append(names, col.Name)
			}
			require.Equal(t, c.want, names)
			cat := string(out["collectives/catalogue.go"])
			for _, col := range cs {
				hip := string(out["hip/"+col.Name+".hip"])
				require.Contains(t, string(out["collectives/"+col.Name+".go"]), "// Code generated by irisgen from "+col.SpecFile+". DO NOT EDIT.")
				require.Contains(t, cat, `"`+col.Name+`"`, "one table for all")
				if col.Name == "barrier" && c.module != config.IrisgenModule {
					// The catalogue's barrier: irisgen's template, not the
					// repository's template of the same name.
					require.Equal(t, all["barrier"].SpecHash, col.SpecHash)
					require.Equal(t, 1, strings.Count(hip, "irisgen::barrier(ctx)"), "irisgen's template: one barrier")
					require.Contains(t, hip, `#line 6 "github.com/irisgen/irisgen/templates/barrier_device.hip.tmpl"`)
				}
				if col.Name == "ring" || c.module == config.IrisgenModule {
					require.Equal(t, 2, strings.Count(hip, "irisgen::barrier(ctx)"), "the repository's template: two barriers")
					require.Contains(t, hip, `#line 2 "templates/barrier_device.hip.tmpl"`)
				}
			}
		})
	}
}

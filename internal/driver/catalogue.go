package driver

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing/fstest"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/ir"
)

// How the catalogue's files are named when a repository generates some of
// its collectives (irisgen.yaml's catalogue): by their place in irisgen's
// module, which holds them, never by a path of this machine. The headers
// of the generated files, explain and the #line directives name them so.
const (
	CatalogueSpecRoot     = config.IrisgenModule + "/specs"
	CatalogueTemplateRoot = config.IrisgenModule + "/templates"
)

func catalogueTemplates() (fs.FS, error) { return fs.Sub(irisgen.Templates, "templates") }

// CompileCatalogue compiles the named collectives of irisgen's catalogue
// from its specs, tuning tables and templates, as irisgen's own package
// has them (same spec hashes), in the order of names.
func CompileCatalogue(names []string) ([]*ir.Collective, error) {
	specs, err := fs.Sub(irisgen.Specs, "specs")
	if err != nil {
		return nil, err
	}
	templates, err := catalogueTemplates()
	if err != nil {
		return nil, err
	}
	// The named specs and their tuning tables, alone.
	sub := fstest.MapFS{}
	for _, n := range names {
		for _, f := range []string{n + ".yaml", "tuning/" + n + ".yaml"} {
			b, err := fs.ReadFile(specs, f)
			switch {
			case err == nil:
				sub[f] = &fstest.MapFile{Data: b, Mode: 0o444}
			case f == n+".yaml":
				return nil, fmt.Errorf("irisgen's catalogue has no collective %q (it has %s)", n, strings.Join(config.CatalogueNames(), ", "))
			}
		}
	}
	cs, err := ir.CompileAll(sub, templates, CatalogueSpecRoot)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(cs, func(a, b *ir.Collective) int { return slices.Index(names, a.Name) - slices.Index(names, b.Name) })
	return cs, nil
}

// checkOwnNames refuses a collective of the project's own specs named like
// one of irisgen's catalogue that is generated beside it (cat), and with
// all like any of the catalogue: a program could use both, and code
// objects looked up by collective name (Options.Kernels, $IRISGEN_KERNELS)
// would be taken for each other.
func checkOwnNames(own, cat []*ir.Collective, all bool) error {
	var taken []string
	if all {
		taken = config.CatalogueNames()
	}
	for _, c := range cat {
		taken = append(taken, c.Name)
	}
	var errs diag.List
	for _, c := range own {
		if !slices.Contains(taken, c.Name) {
			continue
		}
		if slices.ContainsFunc(cat, func(x *ir.Collective) bool { return x.Name == c.Name }) {
			errs.Add(diag.Name, c.Pos, fmt.Sprintf("collective %q is also generated here from irisgen's catalogue (catalogue: in %s), and a package has one collective of a name: "+
				"rename this one (e.g. my_%s), or remove %s from catalogue:", c.Name, config.FileName, c.Name, c.Name))
			continue
		}
		errs.Add(diag.Name, c.Pos, fmt.Sprintf("collective %q is the name of a collective of irisgen's catalogue (%s); a program may use both, and code objects "+
			"found by collective name (Options.Kernels, $IRISGEN_KERNELS) would be taken for each other: rename this one (e.g. my_%s), "+
			"or list %s under catalogue: in %s to use irisgen's",
			c.Name, path.Join(CatalogueSpecRoot, c.Name+".yaml"), c.Name, c.Name, config.FileName))
	}
	if len(errs) > 0 {
		errs.Sort()
		return errs
	}
	return nil
}

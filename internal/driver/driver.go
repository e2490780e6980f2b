// Package driver is irisgen's generation pipeline as a library: specs ->
// IR -> emitters -> files, then the comparison with what is on disk and the
// writing. `irisgen generate`, `check`, `validate`, `explain` and `kernels`
// and the golden tests all go through it, so they cannot disagree.
//
// A Project says where the inputs come from and where the output goes
// (New makes one from an irisgen.yaml). Generate returns every output file
// in memory; Compare sets it against the output directory; Write applies
// the changes all at once or not at all, and only ever overwrites or
// removes files that carry irisgen's generated header.
package driver

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/emit/goemit"
	"github.com/irisgen/irisgen/internal/emit/hipemit"
	"github.com/irisgen/irisgen/internal/ir"
)

// Project is one generation job.
type Project struct {
	// Specs holds the spec files (*.yaml) and tuning tables (tuning/*.yaml).
	Specs fs.FS
	// SpecRoot is how the specs directory is named in messages and in the
	// generated headers ("specs": relative to the config, never absolute).
	SpecRoot string
	// Templates holds the HIP templates (<name>.hip.tmpl); TemplateRoot names
	// their directory in messages ("templates", relative to the config).
	Templates    fs.FS
	TemplateRoot string
	// Catalogue names collectives of irisgen's own catalogue to generate
	// into the package beside those of Specs (nil: none), each from
	// irisgen's spec, tuning table and templates: irisgen.yaml's catalogue.
	Catalogue []string
	// OwnNames refuses a collective of Specs named like one of irisgen's
	// catalogue (a repository's own specs; not irisgen's, which are the
	// catalogue).
	OwnNames bool

	// builtin holds what Compile compiled from Catalogue, which Emit
	// renders with irisgen's templates.
	builtin map[*ir.Collective]bool
	// Out is the output root on disk: Out/hip, Out/<Package>.
	Out string
	// OutRoot names Out relative to the config ("generated"), as the
	// generated HIP sources' #line directives name them; "": relative to
	// Out itself.
	OutRoot string
	// Package is the generated Go package's name.
	Package string
	// ImportPath and KernelsCommand go to the emitters (emit.Request).
	ImportPath, KernelsCommand string
}

// New makes the project a config describes: its spec and template
// directories read through InputFS, the catalogue collectives it names, or
// the whole catalogue built into irisgen when it names neither.
func New(c *config.Config) (*Project, error) {
	p := &Project{Out: c.Out, OutRoot: c.Rel(c.Out), Package: c.Package, ImportPath: c.ImportPath, KernelsCommand: c.Kernels.Command,
		SpecRoot: "specs", TemplateRoot: "templates", Catalogue: c.Catalogue}
	if c.Module != config.IrisgenModule {
		// The built-in files are irisgen's, not this repository's.
		p.SpecRoot, p.TemplateRoot = CatalogueSpecRoot, CatalogueTemplateRoot
	}
	var err error
	switch {
	case c.Specs != "":
		p.Specs, p.SpecRoot = InputFS(c.Specs), c.Rel(c.Specs)
		// irisgen's own repository generates the catalogue from its specs.
		p.OwnNames = c.Module != config.IrisgenModule
	case len(c.Catalogue) == 0:
		p.Specs, err = fs.Sub(irisgen.Specs, "specs")
	}
	if err != nil {
		return nil, err
	}
	if c.Templates == "" {
		p.Templates, err = fs.Sub(irisgen.Templates, "templates")
	} else {
		p.Templates, p.TemplateRoot = InputFS(c.Templates), c.Rel(c.Templates)
	}
	return p, err
}

// Compile parses and compiles every spec, and the catalogue collectives
// the project names. User mistakes come back as a diag.List.
func (p *Project) Compile() ([]*ir.Collective, error) {
	var cs []*ir.Collective
	if p.Specs != nil {
		own, err := ir.CompileAll(p.Specs, p.Templates, p.SpecRoot)
		if err != nil {
			return nil, err
		}
		if len(own) == 0 && len(p.Catalogue) == 0 {
			return nil, fmt.Errorf("no specs (*.yaml) in %s", p.SpecRoot)
		}
		cs = own
	}
	var cat []*ir.Collective
	if len(p.Catalogue) > 0 {
		var err error
		if cat, err = CompileCatalogue(p.Catalogue); err != nil {
			return nil, err
		}
	}
	if err := checkOwnNames(cs, cat, p.OwnNames); err != nil {
		return nil, err
	}
	p.builtin = map[*ir.Collective]bool{}
	for _, c := range cat {
		p.builtin[c] = true
	}
	return append(cs, cat...), nil
}

// Emit runs every emitter on cs, as the project's package: the HIP
// emitter on the project's collectives with its templates and on the
// catalogue's with irisgen's, the Go emitter on all of them at once.
func (p *Project) Emit(cs []*ir.Collective) (emit.Files, error) {
	req := func(cs []*ir.Collective) *emit.Request {
		return &emit.Request{
			Collectives:    cs,
			Templates:      p.Templates,
			TemplatesDir:   p.TemplateRoot,
			OutDir:         p.OutRoot,
			Package:        p.Package,
			ImportPath:     p.ImportPath,
			KernelsCommand: p.KernelsCommand,
		}
	}
	var own, cat []*ir.Collective
	for _, c := range cs {
		if p.builtin[c] {
			cat = append(cat, c)
		} else {
			own = append(own, c)
		}
	}
	builtin, err := catalogueTemplates()
	if err != nil {
		return nil, err
	}
	catReq := req(cat)
	catReq.Templates, catReq.TemplatesDir = builtin, CatalogueTemplateRoot
	files := emit.Files{}
	var errs diag.List
	for _, run := range []struct {
		r *emit.Request
		e emit.Func
	}{{req(own), hipemit.Emit}, {catReq, hipemit.Emit}, {req(cs), goemit.Emit}} {
		if len(run.r.Collectives) == 0 {
			continue
		}
		out, err := emit.Run(run.r, run.e)
		var l diag.List
		switch {
		case errors.As(err, &l):
			errs = append(errs, l...)
		case err != nil:
			return nil, err
		}
		maps.Copy(files, out)
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return files, nil
}

// Generate compiles the specs and emits every output file, keyed by its
// slash-separated path under Out ("hip/<c>.hip", "<pkg>/<c>.go").
func (p *Project) Generate() (emit.Files, []*ir.Collective, error) {
	cs, err := p.Compile()
	if err != nil {
		return nil, nil, err
	}
	files, err := p.Emit(cs)
	return files, cs, err
}

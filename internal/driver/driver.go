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
	"fmt"
	"io/fs"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/config"
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
	// Out is the output root on disk: Out/hip, Out/<Package>.
	Out string
	// Package is the generated Go package's name.
	Package string
	// ImportPath and KernelsCommand go to the emitters (emit.Request).
	ImportPath, KernelsCommand string
}

// New makes the project a config describes: its spec and template
// directories read through InputFS, or the catalogue built into irisgen.
func New(c *config.Config) (*Project, error) {
	p := &Project{Out: c.Out, Package: c.Package, ImportPath: c.ImportPath, KernelsCommand: c.Kernels.Command, SpecRoot: "specs", TemplateRoot: "templates"}
	var err error
	if c.Specs == "" {
		p.Specs, err = fs.Sub(irisgen.Specs, "specs")
	} else {
		p.Specs, p.SpecRoot = InputFS(c.Specs), c.Rel(c.Specs)
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

// Compile parses and compiles every spec. User mistakes come back as a
// diag.List.
func (p *Project) Compile() ([]*ir.Collective, error) {
	cs, err := ir.CompileAll(p.Specs, p.Templates, p.SpecRoot)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("no specs (*.yaml) in %s", p.SpecRoot)
	}
	return cs, nil
}

// Emit runs every emitter on cs, as the project's package.
func (p *Project) Emit(cs []*ir.Collective) (emit.Files, error) {
	return emit.Run(&emit.Request{
		Collectives:    cs,
		Templates:      p.Templates,
		TemplatesDir:   p.TemplateRoot,
		Package:        p.Package,
		ImportPath:     p.ImportPath,
		KernelsCommand: p.KernelsCommand,
	}, Emitters...)
}

// Emitters are the emitters every project runs, in order.
var Emitters = []emit.Func{hipemit.Emit, goemit.Emit}

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

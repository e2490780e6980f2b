// Package emit is what every emitter shares: the request it is given and the
// files it returns. An emitter is a function of one shape (Func), so the
// driver runs the HIP and the Go emitter, and any later one, the same way.
package emit

import (
	"errors"
	"io/fs"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/ir"
)

// Request is everything an emitter may use. Emitters read it and never
// touch the disk.
type Request struct {
	// Collectives are the compiled specs, in any order (emitters sort).
	Collectives []*ir.Collective
	// Templates holds the HIP templates (<name>.hip.tmpl) the variants name.
	Templates fs.FS
	// TemplatesDir is the name template files are reported under
	// (TemplatesDir/<name>.hip.tmpl:line:col), as the user would type it,
	// e.g. "templates"; empty: the bare file name.
	TemplatesDir string
	// OutDir names the output root as the user would type it, relative to
	// the config (e.g. "generated"); the #line directives of the HIP
	// sources name the generated file through it. Empty: paths relative to
	// the output root.
	OutDir string
	// Package is the generated Go package's name; its files go to
	// <Package>/ under the output root.
	Package string
	// ImportPath is the generated Go package's import path
	// ("github.com/irisgen/irisgen/generated/collectives" for the catalogue),
	// the key under which it registers its kernels with the runtime.
	ImportPath string
	// KernelsCommand is the command that compiles this package's kernels,
	// as a user of its repository types it (e.g. "go tool irisgen kernels"),
	// for the runtime's message when a code object is missing or stale.
	KernelsCommand string
}

// Files is generated output: slash-separated path under the output root ->
// contents.
type Files map[string][]byte

// Func is an emitter. Mistakes a user can fix come back as a diag.List.
type Func func(*Request) (Files, error)

// Run runs every emitter on req and merges their files. Positioned errors of
// all emitters are collected and sorted before it fails; any other error
// fails at once.
func Run(req *Request, emitters ...Func) (Files, error) {
	out := Files{}
	var errs diag.List
	for _, e := range emitters {
		files, err := e(req)
		var l diag.List
		switch {
		case errors.As(err, &l):
			errs = append(errs, l...)
			continue
		case err != nil:
			return nil, err
		}
		for k, v := range files {
			out[k] = v
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	return out, nil
}

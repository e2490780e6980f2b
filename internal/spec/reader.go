package spec

import (
	"go.yaml.in/yaml/v3"

	"github.com/irisgen/irisgen/internal/diag"
)

// Reader reads a YAML file of irisgen other than a spec (irisgen.yaml) with
// the spec parser's machinery: positions corrected for the YAML library,
// strict keys with "did you mean", no duplicate keys, aliases followed, no
// panic on any input, and every problem collected as a diag error.
type Reader struct{ p *parser }

// NewReader reads file (the name used in positions). empty is the message
// for a file with no content; mapping starts the message for a top level
// that is not a mapping ("irisgen.yaml must be a mapping with the keys ...").
func NewReader(file, empty, mapping string) *Reader {
	return &Reader{p: &parser{file: file, doc: docText{
		empty:   empty,
		mapping: mapping,
		second:  "the file holds one YAML document; remove this one",
	}}}
}

// Document decodes src and returns its top-level mapping; false when there
// is none (reported).
func (r *Reader) Document(src []byte) (*yaml.Node, bool) { return r.p.document(src) }

// Fields walks mapping m with the keys known, reporting unknown (with a
// suggestion) and duplicate keys, and calls set once for each known key.
// where ends the messages ("at the top level", "in kernels"). It returns
// the known keys that are absent but probably misspelled, so a caller does
// not also report them missing.
func (r *Reader) Fields(m *yaml.Node, where string, known []string, set func(key string, k Str, v *yaml.Node)) map[string]Pos {
	return r.p.fields(m, where, known, set)
}

// Str reads the string value v of key k; what names it in messages.
func (r *Reader) Str(k Str, v *yaml.Node, what string) Str { return r.p.str(k, v, what) }

// List reads a list of scalars; want, when set, shows an example.
func (r *Reader) List(k Str, v *yaml.Node, what, want string) List { return r.p.list(k, v, what, want) }

// Int reads an integer.
func (r *Reader) Int(k Str, v *yaml.Node, what string) Int { return r.p.integer(k, v, what) }

// Map reports whether v is a mapping, reporting "what must be want" if not.
func (r *Reader) Map(k Str, v *yaml.Node, what, want string) bool {
	n := r.p.keyed(k, v)
	return r.p.isMap(v, &n, what, want)
}

// Pos is the position of n.
func (r *Reader) Pos(n *yaml.Node) Pos { return r.p.pos(resolve(n)) }

// Errorf reports a problem at at.
func (r *Reader) Errorf(at Pos, format string, args ...any) { r.p.errorf(at, format, args...) }

// Errors returns every problem reported so far, in file order.
func (r *Reader) Errors() diag.List {
	r.p.errs.Sort()
	return r.p.errs
}

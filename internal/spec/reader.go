package spec

import (
	"go.yaml.in/yaml/v3"

	"github.com/irisgen/irisgen/internal/diag"
)

// Reader reads the other YAML files irisgen takes (tuning tables, and any
// configuration) with the spec's machinery, so that they get the same
// errors: positions on every value, one document per file, the size and
// alias limits, unknown keys with "did you mean", duplicate keys, and the
// right kind of value in every place.
//
//	r, root := spec.NewReader(file, src, spec.Kind{Name: "tuning table", Start: "`collective: <name>`", Keys: keys})
//	if root != nil {
//		r.Fields(root, "in the tuning table", keys, func(key string, k spec.Str, v *yaml.Node) { ... })
//	}
//	errs := r.Errors()
type Reader struct{ p *parser }

// NewReader decodes src. root is its top-level mapping, or nil when the file
// is empty, not YAML or not a mapping (reported in Errors).
func NewReader(file string, src []byte, kind Kind) (r *Reader, root *yaml.Node) {
	r = &Reader{p: newParser(file, src)}
	root, ok := r.p.document(src, kind)
	if !ok {
		return r, nil
	}
	return r, root
}

// Errors are the problems found so far, sorted by position.
func (r *Reader) Errors() diag.List {
	r.p.errs.Sort()
	return r.p.errs
}

// Errorf reports a problem at a position.
func (r *Reader) Errorf(code diag.Code, at Pos, format string, args ...any) {
	r.p.errorf(code, at, format, args...)
}

// Pos is the position of a node (of the anchored value for an alias).
func (r *Reader) Pos(n *yaml.Node) Pos { return r.p.pos(r.p.resolve(n)) }

// Fields walks mapping m with the keys known, reporting unknown and
// duplicate keys ("where" ends those messages, e.g. "in rule 2"), and calls
// set once for each known key present. It returns the known keys that an
// unknown key probably misspells, so that the caller need not also report
// them as missing.
func (r *Reader) Fields(m *yaml.Node, where string, known []string, set func(key string, k Str, v *yaml.Node)) (misspelled map[string]Pos) {
	return r.p.fields(r.p.resolve(m), where, known, set)
}

// Map reports whether v is a mapping; otherwise it reports "<what> must be
// <want>; found ..." and marks n bad.
func (r *Reader) Map(v *yaml.Node, n *Node, what, want string) bool {
	return r.p.isMap(v, n, what, want)
}

// MapAt is Map for the value v of key k: it reports "<what> must be
// <want>; found ..." at v.
func (r *Reader) MapAt(k Str, v *yaml.Node, what, want string) bool {
	n := r.p.keyed(k, v)
	return r.p.isMap(v, &n, what, want)
}

// Str reads a string value under key k.
func (r *Reader) Str(k Str, v *yaml.Node, what string) Str { return r.p.str(k, v, what) }

// Int reads an integer value under key k (not a float, not a quoted number).
func (r *Reader) Int(k Str, v *yaml.Node, what string) Int { return r.p.integer(k, v, what) }

// Bool reads a boolean value under key k.
func (r *Reader) Bool(k Str, v *yaml.Node, what string) Bool { return r.p.boolean(k, v, what) }

// List reads a list of names under key k; want shows the expected form.
func (r *Reader) List(k Str, v *yaml.Node, what, want string) List { return r.p.list(k, v, what, want) }

// Seq returns the items of the list v (aliases resolved), or reports
// "<what> must be <want>; found ..." and returns ok false.
func (r *Reader) Seq(v *yaml.Node, what, want string) (items []*yaml.Node, ok bool) {
	v = r.p.resolve(v)
	if v.Kind != yaml.SequenceNode {
		r.p.errorf(diag.Schema, r.p.pos(v), "%s must be %s; found %s", what, want, describe(v))
		return nil, false
	}
	items = make([]*yaml.Node, len(v.Content))
	for i, it := range v.Content {
		items[i] = r.p.resolve(it)
	}
	return items, true
}

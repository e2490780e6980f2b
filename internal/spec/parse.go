package spec

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/irisgen/irisgen/internal/diag"
)

// Keys of each mapping, in the order the docs list them; unknown keys are
// errors with a suggestion from these lists.
var (
	topKeys     = []string{"name", "summary", "dtypes", "ops", "sizes", "params", "tensors", "variants"}
	paramKeys   = []string{"type", "min", "max"}
	tensorKeys  = []string{"dir", "shape", "dtype", "optional", "ranks"}
	variantKeys = []string{"summary", "template", "engine", "copies", "access", "aliasing", "barriers", "launch"}
	copyKeys    = []string{"each", "from", "to"}
	launchKeys  = []string{"threads", "max_blocks", "min_blocks", "vector_bytes"}
)

// Parse reads one spec; file is the path used in positions. It always
// returns a File (possibly empty) and every problem it found, in file order;
// it never panics on any input, and its time is linear in the input's size
// (files over MaxFileBytes and aliases that expand past the budget are
// errors).
func Parse(file string, src []byte) (*File, diag.List) {
	p := newParser(file, src)
	p.levels = specLevels
	f := &File{Pos: p.at(1)}
	root, ok := p.document(src, specKind)
	if !ok {
		return f, p.errs
	}
	f.Pos, f.Read = p.pos(root), true
	p.top(f, root)
	return f, p.errs
}

// MaxFileBytes bounds a spec or tuning table. The catalogue's largest spec
// is 6 KB; a file a thousand times larger is a mistake (or an attack), and
// refusing it keeps every run fast.
const MaxFileBytes = 1 << 20

// Kind names a kind of YAML file in messages and says how one starts.
type Kind struct {
	Name  string // "spec", "tuning table"
	Start string // what an empty file should start with, e.g. "`name: <collective>`"
	Keys  []string
	// Empty, Mapping and Second replace the messages for an empty file, a
	// top level that is not a mapping (before "; found ...") and a second
	// document, where the defaults made from Name do not fit the file.
	Empty, Mapping, Second string
}

var specKind = Kind{Name: "spec", Start: "`name: <collective>`", Keys: topKeys}

type parser struct {
	file string
	errs diag.List
	// budget is how many more values alias expansion may visit (aliases
	// can make a small file walk as a huge one); sizes memoises the values
	// under each anchored node.
	budget    int
	sizes     map[*yaml.Node]int
	exhausted bool
	// lines is the source, split into lines of runes on first use, for the
	// ends of positions (span).
	src   []byte
	lines [][]rune
	// levels are the mappings of the file's language, for the hint that
	// an unknown key belongs to another one (specs only).
	levels []level
}

// level is a mapping of the spec language and its keys.
type level struct {
	name string
	keys []string
}

// specLevels are the spec's mappings, for "is a key of ..." hints.
var specLevels = []level{
	{"the top level", topKeys}, {"a param", paramKeys}, {"a tensor", tensorKeys},
	{"a variant", variantKeys}, {"a copy", copyKeys}, {"a variant's launch", launchKeys},
}

// aliasBudget is how many values alias expansion may add to a file's walk,
// per byte of the file, plus a floor for small files.
const aliasBudget, aliasFloor = 4, 1 << 16

func newParser(file string, src []byte) *parser {
	return &parser{file: file, budget: aliasBudget*len(src) + aliasFloor, sizes: map[*yaml.Node]int{}, src: src}
}

func (p *parser) errorf(code diag.Code, at Pos, format string, args ...any) {
	p.errs.Add(code, at, fmt.Sprintf(format, args...))
}

// at is column 1 of a line, for problems the YAML library only locates by line.
func (p *parser) at(line int) Pos { return Pos{File: p.file, Line: line, Col: 1} }

var (
	yamlLine      = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	unknownAnchor = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)
	// parserProblems are the YAML library's parser (not scanner) messages:
	// for those it prints the 0-based line of the enclosing collection.
	parserProblems = map[string]bool{
		"did not find expected ',' or ']'":       true,
		"did not find expected ',' or '}'":       true,
		"did not find expected '-' indicator":    true,
		"did not find expected <document start>": true,
		"did not find expected key":              true,
		"did not find expected node content":     true,
		"found duplicate %TAG directive":         true,
		"found duplicate %YAML directive":        true,
		"found incompatible YAML document":       true,
		"found undefined tag handle":             true,
	}
)

// syntaxError positions an error of the YAML library. The library only
// gives a line, and for parser problems the line of the collection being
// parsed, 0-based; an unknown alias has no line at all, so it is looked up.
func (p *parser) syntaxError(src []byte, err error) (Pos, string) {
	text := err.Error()
	if m := yamlLine.FindStringSubmatch(text); m != nil {
		line, _ := strconv.Atoi(m[1])
		if parserProblems[m[2]] {
			line++
		}
		return p.at(line), m[2]
	}
	if m := unknownAnchor.FindStringSubmatch(text); m != nil {
		if i := strings.Index(string(src), "*"+m[1]); i >= 0 {
			before := string(src[:i])
			line := strings.Count(before, "\n") + 1
			col := len([]rune(before[strings.LastIndex(before, "\n")+1:])) + 1
			return Pos{File: p.file, Line: line, Col: col}, fmt.Sprintf("alias *%s refers to no anchor; define &%s first", m[1], m[1])
		}
	}
	return p.at(1), strings.TrimPrefix(text, "yaml: ")
}

// document decodes the YAML and returns its top-level mapping.
func (p *parser) document(src []byte, kind Kind) (root *yaml.Node, ok bool) {
	or := func(s, def string) string {
		if s != "" {
			return s
		}
		return def
	}
	empty := or(kind.Empty, fmt.Sprintf("the %s is empty; start it with %s (see docs/spec.md)", kind.Name, kind.Start))
	if len(src) > MaxFileBytes {
		p.errorf(diag.Limit, p.at(1), "the %s is %d bytes; irisgen reads files of at most %d bytes (1 MiB): split it", kind.Name, len(src), MaxFileBytes)
		return nil, false
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(src)))
	if err := decodeSafely(dec, &doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(diag.Schema, p.at(1), "%s", empty)
			return nil, false
		}
		at, msg := p.syntaxError(src, err)
		p.errorf(diag.Syntax, at, "invalid YAML: %s", msg)
		return nil, false
	}
	// A second document would be silently ignored by the decoder.
	var extra yaml.Node
	if err := decodeSafely(dec, &extra); err == nil {
		p.errorf(diag.Schema, p.pos(&extra), "%s", or(kind.Second, "a "+kind.Name+" file holds one YAML document; move this one to its own file"))
	} else if !errors.Is(err, io.EOF) {
		at, msg := p.syntaxError(src, err)
		p.errorf(diag.Syntax, at, "invalid YAML: %s", msg)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		p.errorf(diag.Schema, p.at(1), "%s", empty)
		return nil, false
	}
	root = p.resolve(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		p.errorf(diag.Schema, p.at(1), "%s", empty)
		return nil, false
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(diag.Schema, p.pos(root), "%s; found %s", or(kind.Mapping, "a "+kind.Name+" must be a mapping with the keys "+strings.Join(kind.Keys, ", ")), describe(root))
		return nil, false
	}
	return root, true
}

// decodeSafely turns a panic of the YAML library into an error: a spec,
// however broken, must give a positioned error and not a crash.
func decodeSafely(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	return dec.Decode(n)
}

func (p *parser) top(f *File, root *yaml.Node) {
	p.readFields(root, "at the top level", topKeys, map[string]field{
		"name":    {&f.Name.Node, func(k Str, v *yaml.Node) { f.Name = p.str(k, v, "name") }},
		"summary": {&f.Summary.Node, func(k Str, v *yaml.Node) { f.Summary = p.str(k, v, "summary") }},
		"dtypes": {&f.DTypes.Node, func(k Str, v *yaml.Node) {
			f.DTypes = p.list(k, v, "dtypes", "a list of element types, e.g. [f32, f16, bf16]")
		}},
		"ops":      {&f.Ops.Node, func(k Str, v *yaml.Node) { f.Ops = p.list(k, v, "ops", "a list of reduction operators, e.g. [sum]") }},
		"sizes":    {&f.Sizes.Node, func(k Str, v *yaml.Node) { f.Sizes = p.list(k, v, "sizes", "a list of size symbols, e.g. [n]") }},
		"params":   {&f.Params.Node, func(k Str, v *yaml.Node) { f.Params = p.params(k, v) }},
		"tensors":  {&f.Tensors.Node, func(k Str, v *yaml.Node) { f.Tensors = p.tensors(k, v) }},
		"variants": {&f.Variants.Node, func(k Str, v *yaml.Node) { f.Variants = p.variants(k, v) }},
	})
}

func (p *parser) tensors(k Str, v *yaml.Node) Tensors {
	ts := Tensors{Node: p.keyed(k, v)}
	if !p.isMap(v, &ts.Node, "tensors", "a mapping from tensor names to {dir, shape}") {
		return ts
	}
	p.entries(v, func(name Str, val *yaml.Node) {
		t := &Tensor{Node: p.keyed(name, val), Name: name}
		where := fmt.Sprintf("tensor %q", name.Value)
		if p.isMap(val, &t.Node, where, "a mapping like {dir: in, shape: [n]}") {
			p.readFields(val, "in "+where, tensorKeys, map[string]field{
				"dir":   {&t.Dir.Node, func(k Str, v *yaml.Node) { t.Dir = p.str(k, v, "dir of "+where) }},
				"shape": {&t.Shape.Node, func(k Str, v *yaml.Node) { t.Shape = p.shape(k, v, where) }},
				"dtype": {&t.DType.Node, func(k Str, v *yaml.Node) {
					if p.resolve(v).Kind == yaml.SequenceNode {
						t.DTypes = p.list(k, v, "dtype of "+where, "")
					} else {
						t.DType = p.str(k, v, "dtype of "+where)
					}
				}},
				"optional": {&t.Optional.Node, func(k Str, v *yaml.Node) { t.Optional = p.boolean(k, v, "optional of "+where) }},
				"ranks": {&t.Ranks.Node, func(k Str, v *yaml.Node) {
					t.Ranks = p.str(k, v, "ranks of "+where+" (the name of a rank parameter, e.g. ranks: root)")
				}},
			})
		}
		ts.List = append(ts.List, t)
	}, func(name Str, _ *yaml.Node, first Pos) {
		p.errorf(diag.Schema, name.Pos, "duplicate tensor %q (first defined at %s); tensor names must be unique", name.Value, lineCol(first))
	})
	return ts
}

// params reads the params mapping: each parameter is a type name (root:
// rank) or a mapping {type, min, max}.
func (p *parser) params(k Str, v *yaml.Node) Params {
	ps := Params{Node: p.keyed(k, v)}
	if !p.isMap(v, &ps.Node, "params", "a mapping from parameter names to types, e.g. {root: rank, eps: f32}") {
		return ps
	}
	p.entries(v, func(name Str, val *yaml.Node) {
		pr := &Param{Node: p.keyed(name, val), Name: name}
		where := fmt.Sprintf("parameter %q", name.Value)
		switch r := p.resolve(val); {
		case r.Kind == yaml.ScalarNode && r.Tag != "!!null":
			pr.Type = p.str(name, val, "type of "+where)
		case r.Kind == yaml.MappingNode:
			p.readFields(val, "in "+where, paramKeys, map[string]field{
				"type": {&pr.Type.Node, func(k Str, v *yaml.Node) { pr.Type = p.str(k, v, "type of "+where) }},
				"min":  {&pr.Min.Node, func(k Str, v *yaml.Node) { pr.Min = p.integer(k, v, "min of "+where) }},
				"max":  {&pr.Max.Node, func(k Str, v *yaml.Node) { pr.Max = p.integer(k, v, "max of "+where) }},
			})
		default:
			pr.Bad = true
			p.errorf(diag.Schema, p.pos(r), "%s must be a type (rank, int, f32) or a mapping like {type: int, min: 0, max: 8}; found %s", where, describe(r))
		}
		ps.List = append(ps.List, pr)
	}, func(name Str, _ *yaml.Node, first Pos) {
		p.errorf(diag.Schema, name.Pos, "duplicate parameter %q (first defined at %s); parameter names must be unique", name.Value, lineCol(first))
	})
	return ps
}

func (p *parser) variants(k Str, v *yaml.Node) Variants {
	vs := Variants{Node: p.keyed(k, v)}
	if !p.isMap(v, &vs.Node, "variants", "a mapping from variant names to their settings") {
		return vs
	}
	p.entries(v, func(name Str, val *yaml.Node) {
		vr := &Variant{Node: p.keyed(name, val), Name: name}
		where := fmt.Sprintf("variant %q", name.Value)
		if p.isMap(val, &vr.Node, where, "a mapping with the keys "+strings.Join(variantKeys, ", ")) {
			p.readFields(val, "in "+where, variantKeys, map[string]field{
				"summary":  {&vr.Summary.Node, func(k Str, v *yaml.Node) { vr.Summary = p.str(k, v, "summary of "+where) }},
				"template": {&vr.Template.Node, func(k Str, v *yaml.Node) { vr.Template = p.str(k, v, "template of "+where) }},
				"access":   {&vr.Access.Node, func(k Str, v *yaml.Node) { vr.Access = p.access(k, v, where) }},
				"aliasing": {&vr.Aliasing.Node, func(k Str, v *yaml.Node) { vr.Aliasing = p.str(k, v, "aliasing of "+where) }},
				"barriers": {&vr.Barriers.Node, func(k Str, v *yaml.Node) {
					vr.Barriers = p.list(k, v, "barriers of "+where, "a list of barrier modes, e.g. [device, host, none]")
				}},
				"launch": {&vr.Launch.Node, func(k Str, v *yaml.Node) { vr.Launch = p.launch(k, v, where) }},
				"engine": {&vr.Engine.Node, func(k Str, v *yaml.Node) { vr.Engine = p.str(k, v, "engine of "+where) }},
				"copies": {&vr.Copies.Node, func(k Str, v *yaml.Node) { vr.Copies = p.copies(k, v, where) }},
			})
		}
		vs.List = append(vs.List, vr)
	}, func(name Str, _ *yaml.Node, first Pos) {
		p.errorf(diag.Schema, name.Pos, "duplicate variant %q (first defined at %s); variant names must be unique", name.Value, lineCol(first))
	})
	return vs
}

// copies reads a copy-engine variant's copies: a list of mappings
// {each, from, to}.
func (p *parser) copies(k Str, v *yaml.Node, where string) Copies {
	cs := Copies{Node: p.keyed(k, v)}
	r := p.resolve(v)
	if r.Kind != yaml.SequenceNode {
		cs.Bad = true
		p.errorf(diag.Schema, p.pos(r), "copies of %s must be a list of block copies, e.g. [{each: [r, p], from: input@r, to: \"output[r]@p\"}]; found %s", where, describe(r))
		return cs
	}
	for i, item := range r.Content {
		c := &Copy{Node: Node{Pos: p.pos(p.resolve(item)), Set: true}}
		what := fmt.Sprintf("copy %d of %s", i+1, where)
		if p.isMap(item, &c.Node, what, "a mapping like {each: [r, p], from: input@r, to: \"output[r]@p\"}") {
			p.readFields(item, "in "+what, copyKeys, map[string]field{
				"each": {&c.Each.Node, func(k Str, v *yaml.Node) {
					c.Each = p.list(k, v, "each of "+what, "a list of rank variables, e.g. [r, p]")
				}},
				"from": {&c.From.Node, func(k Str, v *yaml.Node) { c.From = p.str(k, v, "from of "+what) }},
				"to":   {&c.To.Node, func(k Str, v *yaml.Node) { c.To = p.str(k, v, "to of "+what) }},
			})
		}
		cs.List = append(cs.List, c)
	}
	return cs
}

func (p *parser) access(k Str, v *yaml.Node, where string) AccessMap {
	am := AccessMap{Node: p.keyed(k, v)}
	if !p.isMap(v, &am.Node, "access of "+where, "a mapping from tensor names to access kinds, e.g. {input: local_read}") {
		return am
	}
	p.entries(v, func(name Str, val *yaml.Node) {
		a := &Access{Tensor: name, Kinds: p.kinds(name, val, where)}
		am.List = append(am.List, a)
	}, func(name Str, val *yaml.Node, first Pos) {
		// Keep checking with the kinds of both entries, as if written in one
		// list, so that the duplicate is the only error it causes.
		for _, a := range am.List {
			if a.Tensor.Value == name.Value && !a.Kinds.Bad {
				more := p.kinds(name, val, where)
				a.Kinds.Items = append(a.Kinds.Items, more.Items...)
				a.Kinds.Bad = more.Bad
			}
		}
		p.errorf(diag.Schema, name.Pos, "duplicate access entry for tensor %q in %s (first at %s); write all its kinds in one list, e.g. %s: [local_read, remote_read]", name.Value, where, lineCol(first), name.Value)
	})
	return am
}

// kinds reads the access kinds of one tensor: one kind or a list of kinds.
func (p *parser) kinds(name Str, val *yaml.Node, where string) List {
	what := fmt.Sprintf("access of tensor %q in %s", name.Value, where)
	switch r := p.resolve(val); {
	case r.Kind == yaml.ScalarNode && r.Tag != "!!null":
		l := List{Node: p.keyed(name, val)}
		l.Items = []Str{{Node: Node{Pos: p.pos(r), Set: true}, Value: r.Value}}
		return l
	case r.Kind == yaml.SequenceNode:
		return p.list(name, val, what, "")
	default:
		p.errorf(diag.Schema, p.pos(r), "%s must be an access kind or a list of kinds (e.g. [local_read, remote_write]), found %s", what, describe(r))
		l := List{Node: p.keyed(name, val)}
		l.Bad = true
		return l
	}
}

func (p *parser) launch(k Str, v *yaml.Node, where string) Launch {
	l := Launch{Node: p.keyed(k, v)}
	if !p.isMap(v, &l.Node, "launch of "+where, "a mapping like {threads: 512, max_blocks: 16, vector_bytes: 16}") {
		return l
	}
	p.readFields(v, "in launch of "+where, launchKeys, map[string]field{
		"threads":      {&l.Threads.Node, func(k Str, v *yaml.Node) { l.Threads = p.integer(k, v, "threads of "+where) }},
		"max_blocks":   {&l.MaxBlocks.Node, func(k Str, v *yaml.Node) { l.MaxBlocks = p.integer(k, v, "max_blocks of "+where) }},
		"min_blocks":   {&l.MinBlocks.Node, func(k Str, v *yaml.Node) { l.MinBlocks = p.integer(k, v, "min_blocks of "+where) }},
		"vector_bytes": {&l.VectorBytes.Node, func(k Str, v *yaml.Node) { l.VectorBytes = p.integer(k, v, "vector_bytes of "+where) }},
	})
	return l
}

func (p *parser) shape(k Str, v *yaml.Node, where string) Shape {
	s := Shape{Node: p.keyed(k, v)}
	r := p.resolve(v)
	if r.Kind != yaml.SequenceNode {
		s.Bad = true
		p.errorf(diag.Schema, p.pos(r), "shape of %s must be a list of dimensions (size symbols or positive integers), e.g. [world, n]; found %s", where, describe(r))
		return s
	}
	for _, item := range r.Content {
		item = p.resolve(item)
		at := p.pos(item)
		switch {
		case item.Kind == yaml.ScalarNode && item.Tag == "!!int":
			var c int64
			if err := item.Decode(&c); err != nil {
				s.Bad = true
				p.errorf(diag.Value, at, "dimension %s of %s does not fit in 64 bits", item.Value, where)
				continue
			}
			s.Dims = append(s.Dims, Dim{Pos: at, Const: c})
		case item.Kind == yaml.ScalarNode && item.Tag == "!!str":
			s.Dims = append(s.Dims, Dim{Pos: at, Symbol: item.Value})
		case item.Kind == yaml.ScalarNode && item.Tag == "!!float":
			s.Bad = true
			p.errorf(diag.Value, at, "dimension %s of %s is not an integer; dimensions are size symbols or positive integers", item.Value, where)
		default:
			s.Bad = true
			p.errorf(diag.Schema, at, "a dimension of %s must be a size symbol or a positive integer, found %s", where, describe(item))
		}
	}
	return s
}

// fields walks a mapping with a fixed set of keys, reporting unknown and
// duplicate keys, and calls set once for each known key. It returns the
// known keys that are absent but that an unknown key probably misspells, so
// that the caller can mark them as present-but-bad: a typo then gives one
// error, not also a "missing key" one.
func (p *parser) fields(m *yaml.Node, where string, known []string, set func(key string, k Str, v *yaml.Node)) (misspelled map[string]Pos) {
	present := map[string]bool{}
	guessed := map[string]Pos{}
	p.entries(m, func(k Str, v *yaml.Node) {
		if !contains(known, k.Value) {
			hint := "expected one of: " + strings.Join(known, ", ")
			if s := Closest(k.Value, known); s != "" {
				hint = fmt.Sprintf("did you mean %q?", s)
				if _, seen := guessed[s]; !seen {
					guessed[s] = k.Pos
				}
			} else if l := p.levelOf(k.Value); l != "" {
				hint += fmt.Sprintf("; %s is a key of %s", k.Value, l)
			}
			p.errorf(diag.Schema, k.Pos, "unknown key %q %s (%s)", k.Value, where, hint)
			return
		}
		present[k.Value] = true
		set(k.Value, k, v)
	}, func(k Str, _ *yaml.Node, first Pos) {
		p.errorf(diag.Schema, k.Pos, "duplicate key %q %s (first at %s); keep only one", k.Value, where, lineCol(first))
	})
	for key := range guessed {
		if present[key] {
			delete(guessed, key)
		}
	}
	return guessed
}

// levelOf names the mappings of the file's language that have key, or "".
func (p *parser) levelOf(key string) string {
	var names []string
	for _, l := range p.levels {
		if contains(l.keys, key) {
			names = append(names, l.name)
		}
	}
	return strings.Join(names, " and ")
}

// field is one key of a mapping as the spec reads it: the node the key
// fills, and how its value is read into it.
type field struct {
	node *Node
	read func(k Str, v *yaml.Node)
}

// readFields reads mapping m by its table of known keys (fields reports
// unknown and duplicate keys). A key that an unknown key probably
// misspells has its node marked bad, so that later checks do not also
// report it missing.
func (p *parser) readFields(m *yaml.Node, where string, known []string, table map[string]field) {
	misspelled := p.fields(m, where, known, func(key string, k Str, v *yaml.Node) { table[key].read(k, v) })
	for key, at := range misspelled {
		*table[key].node = Node{Pos: at, KeyPos: at, Set: true, Bad: true}
	}
}

// entries walks a mapping whose keys must be plain scalars, calling each
// for the first occurrence of a key and dup for every repeat (yaml.Node
// keeps repeated keys; the spec language does not allow them).
func (p *parser) entries(m *yaml.Node, each func(k Str, v *yaml.Node), dup func(k Str, v *yaml.Node, first Pos)) {
	m = p.resolve(m)
	first := map[string]Pos{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn, v := p.resolve(m.Content[i]), m.Content[i+1]
		if kn.Kind != yaml.ScalarNode || kn.Tag == "!!null" {
			p.errorf(diag.Schema, p.pos(kn), "a key must be a plain name, found %s", describe(kn))
			continue
		}
		if kn.Tag == "!!merge" {
			p.errorf(diag.Schema, p.pos(kn), "merge keys (<<) are not supported; write the keys out")
			continue
		}
		k := Str{Node: Node{Pos: p.pos(kn), KeyPos: p.pos(kn), Set: true}, Value: kn.Value}
		if at, seen := first[k.Value]; seen {
			dup(k, v, at)
			continue
		}
		first[k.Value] = k.Pos
		each(k, v)
	}
}

func (p *parser) isMap(v *yaml.Node, n *Node, what, want string) bool {
	r := p.resolve(v)
	if r.Kind == yaml.MappingNode {
		return true
	}
	n.Bad = true
	p.errorf(diag.Schema, p.pos(r), "%s must be %s; found %s", what, want, describe(r))
	return false
}

func (p *parser) str(k Str, v *yaml.Node, what string) Str {
	s := Str{Node: p.keyed(k, v)}
	r := p.resolve(v)
	if r.Kind != yaml.ScalarNode || r.Tag == "!!null" {
		s.Bad = true
		p.errorf(diag.Schema, p.pos(r), "%s must be a string, found %s", what, describe(r))
		return s
	}
	s.Value = r.Value
	return s
}

func (p *parser) boolean(k Str, v *yaml.Node, what string) Bool {
	b := Bool{Node: p.keyed(k, v)}
	r := p.resolve(v)
	if r.Kind == yaml.ScalarNode && r.Tag == "!!bool" && r.Decode(&b.Value) == nil {
		return b
	}
	b.Bad = true
	p.errorf(diag.Schema, p.pos(r), "%s must be true or false, found %s", what, describe(r))
	return b
}

func (p *parser) integer(k Str, v *yaml.Node, what string) Int {
	n := Int{Node: p.keyed(k, v)}
	r := p.resolve(v)
	if r.Kind == yaml.ScalarNode && r.Tag == "!!int" {
		if err := r.Decode(&n.Value); err == nil {
			return n
		}
		n.Bad = true
		p.errorf(diag.Value, p.pos(r), "%s: %s does not fit in 64 bits", what, r.Value)
		return n
	}
	n.Bad = true
	p.errorf(diag.Schema, p.pos(r), "%s must be an integer, found %s", what, describe(r))
	return n
}

// list reads a list of scalars; want, when set, shows an example of the
// expected form in the error.
func (p *parser) list(k Str, v *yaml.Node, what, want string) List {
	l := List{Node: p.keyed(k, v)}
	r := p.resolve(v)
	if r.Kind != yaml.SequenceNode {
		l.Bad = true
		if want == "" {
			want = "a list"
		}
		p.errorf(diag.Schema, p.pos(r), "%s must be %s; found %s", what, want, describe(r))
		return l
	}
	l.Items = make([]Str, 0, len(r.Content)) // no regrowth: a list of an alias bomb is long
	for _, item := range r.Content {
		item = p.resolve(item)
		if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
			l.Bad = true
			p.errorf(diag.Schema, p.pos(item), "items of %s must be names, found %s", what, describe(item))
			continue
		}
		l.Items = append(l.Items, Str{Node: Node{Pos: p.pos(item), Set: true}, Value: item.Value})
	}
	return l
}

// keyed is the Node of a value v under key k.
func (p *parser) keyed(k Str, v *yaml.Node) Node {
	return Node{Pos: p.pos(p.resolve(v)), KeyPos: k.Pos, Set: true}
}

// resolve follows aliases to the anchored node, charging the values under
// it to the alias budget. Once the budget is spent it reports that once and
// resolves every further alias to nothing, so the walk stays linear in the
// file's size. The chain is bounded: the YAML library rejects anchors that
// contain themselves, and the loop cap guards against anything it lets
// through.
func (p *parser) resolve(n *yaml.Node) *yaml.Node {
	if n.Kind != yaml.AliasNode {
		return n
	}
	for i := 0; i < 64 && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		at := n
		n = n.Alias
		p.budget -= p.size(n)
		if p.budget < 0 {
			if !p.exhausted {
				p.exhausted = true
				p.errorf(diag.Limit, p.pos(at), "aliases make this file too large to read (more values than %d per byte of it); write the values out instead of repeating large anchors", aliasBudget)
			}
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: at.Line, Column: at.Column}
		}
	}
	return n
}

// size is the weight of the values under n, for the alias budget: one per
// node, and one per 16 bytes of a scalar (long values cost time in
// messages).
func (p *parser) size(n *yaml.Node) int {
	if s, ok := p.sizes[n]; ok {
		return s
	}
	p.sizes[n] = 1 // a cycle, if the library ever let one through, counts once
	s := 1 + len(n.Value)/16
	if n.Kind != yaml.AliasNode {
		for _, c := range n.Content {
			s += p.size(c)
		}
	}
	p.sizes[n] = s
	return s
}

func (p *parser) pos(n *yaml.Node) Pos {
	line, col := n.Line, n.Column
	if line < 1 || col < 1 {
		return Pos{File: p.file, Line: max(line, 1), Col: max(col, 1)}
	}
	at := Pos{File: p.file, Line: line, Col: col}
	at.EndLine, at.EndCol = p.span(n)
	return at
}

// span is where the text of n ends (the position just past it), or 0, 0
// when the parser cannot tell: for a one-line scalar (quoted ones scanned
// in the source, so escapes count as written), an alias and a flow
// collection (to its closing bracket). Block collections (an error about
// one, such as a missing key, points at its start, not at all its lines),
// block scalars (| and >) and plain scalars over several lines have no end.
func (p *parser) span(n *yaml.Node) (line, col int) {
	if n == nil || n.Line < 1 || n.Column < 1 {
		return 0, 0
	}
	if p.lines == nil {
		for _, l := range strings.Split(string(p.src), "\n") {
			p.lines = append(p.lines, []rune(strings.TrimSuffix(l, "\r")))
		}
	}
	if n.Kind == yaml.AliasNode {
		return n.Line, n.Column + 1 + utf8.RuneCountInString(n.Value)
	}
	line, col = p.value(n.Line, n.Column)
	if line == 0 {
		return 0, 0
	}
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.Style &^ yaml.TaggedStyle {
		case 0: // plain
			if strings.ContainsAny(n.Value, "\n") || n.Value == "" {
				return 0, 0
			}
			return line, col + utf8.RuneCountInString(n.Value)
		case yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
			return p.closing(line, col, n.Style&yaml.DoubleQuotedStyle != 0)
		}
	case yaml.MappingNode, yaml.SequenceNode:
		if n.Style&yaml.FlowStyle != 0 {
			return p.bracket(line, col)
		}
	}
	return 0, 0
}

// value skips the anchor (&name) and tag (!!str) that may come first in a
// node's text at line:col, to where its value starts on that line (0, 0
// when it does not).
func (p *parser) value(line, col int) (int, int) {
	if line > len(p.lines) {
		return 0, 0
	}
	l := p.lines[line-1]
	i := col - 1
	for i < len(l) && (l[i] == '&' || l[i] == '!') {
		for i < len(l) && l[i] != ' ' && l[i] != '\t' {
			i++
		}
		for i < len(l) && (l[i] == ' ' || l[i] == '\t') {
			i++
		}
	}
	if i >= len(l) {
		return 0, 0
	}
	return line, i + 1
}

// closing is the end of the quoted scalar starting at line:col, if it
// closes on that line.
func (p *parser) closing(line, col int, double bool) (int, int) {
	if line > len(p.lines) {
		return 0, 0
	}
	l := p.lines[line-1]
	if col > len(l) || (l[col-1] != '"' && l[col-1] != '\'') {
		return 0, 0 // a tag before the value, say
	}
	for i := col; i < len(l); i++ { // l[col-1] is the opening quote
		switch {
		case double && l[i] == '\\':
			i++
		case !double && l[i] == '\'' && i+1 < len(l) && l[i+1] == '\'':
			i++
		case l[i] == l[col-1]:
			return line, i + 2
		}
	}
	return 0, 0
}

// bracket is the end of the flow collection whose opening bracket is at
// line:col: just past its matching closing bracket, skipping quoted text.
func (p *parser) bracket(line, col int) (int, int) {
	if line > len(p.lines) || col > len(p.lines[line-1]) || !strings.ContainsRune("[{", p.lines[line-1][col-1]) {
		return 0, 0
	}
	depth := 0
	var quote rune
	for ln := line; ln <= len(p.lines); ln++ {
		l := p.lines[ln-1]
		start := 0
		if ln == line {
			start = col - 1
		}
		for i := start; i < len(l); i++ {
			c := l[i]
			switch {
			case quote == '"' && c == '\\':
				i++
			case quote != 0:
				if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
				i = len(l)
			case c == '[' || c == '{':
				depth++
			case c == ']' || c == '}':
				if depth--; depth == 0 {
					return ln, i + 2
				}
			}
		}
	}
	return 0, 0
}

// describe names what a node is, for "found ..." in messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing"
		case "!!int", "!!float":
			return "the number " + clip(n.Value)
		case "!!bool":
			return "the boolean " + clip(n.Value)
		case "!!str":
			return fmt.Sprintf("the string %q", clip(n.Value))
		}
		return fmt.Sprintf("%q", clip(n.Value))
	}
	return "nothing"
}

// clip shortens a value quoted in a message: a message should name it, not
// repeat a long one.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "..."
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// lineCol is a position within the file being reported on, for "first at".
func lineCol(p Pos) string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

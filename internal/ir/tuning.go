// Tuning tables of the auto variants: specs/tuning/<collective>.yaml,
// produced by `irisgen bench -tune` from a benchmark run and checked in with
// the machine and date they came from. CompileAll attaches them.
//
//	collective: all_reduce
//	measured: 2x NVIDIA H200 (nvidia-h200-x2), 2026-11-22, bf16, graph replay
//	rules:                                # first match wins
//	  - {world: 2, max_bytes: 1048576, variant: one_shot_staged}
//	  - {world: 2, variant: one_shot}
//	  - {variant: two_shot}               # the last rule matches everything
//
// max_bytes bounds the bytes of the launch's largest tensor (all_reduce: the
// buffer; all_gather: the output; the size `irisgen bench` reports).
package ir

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/irisgen/irisgen/internal/diag"
)

// TuningDir is where tuning tables live under the specs directory.
const TuningDir = "tuning"

// attachTuning reads TuningDir/<collective>.yaml under specs for every collective that
// has one and sets its Auto table. root names the specs directory in
// positions. A table for a collective no spec defines is an error.
func attachTuning(specs fs.FS, root string, cs []*Collective) error {
	names, err := fs.Glob(specs, TuningDir+"/*.yaml")
	if err != nil {
		return err
	}
	byName := map[string]*Collective{}
	for _, c := range cs {
		byName[c.Name] = c
	}
	var errs diag.List
	for _, name := range names {
		file := path.Join(root, name)
		src, err := fs.ReadFile(specs, name)
		if err != nil {
			errs.Add(diag.Pos{File: file, Line: 1, Col: 1}, "cannot read the tuning table: "+err.Error())
			continue
		}
		coll := strings.TrimSuffix(path.Base(name), ".yaml")
		c := byName[coll]
		if c == nil {
			errs.Add(diag.Pos{File: file, Line: 1, Col: 1}, fmt.Sprintf("tuning table for %q, but no spec defines that collective; remove the file or rename it after a collective", coll))
			continue
		}
		a, l := ParseTuning(file, src, c)
		errs = append(errs, l...)
		if len(l) == 0 {
			c.Auto = a
		}
	}
	if len(errs) > 0 {
		errs.Sort()
		return errs
	}
	return nil
}

// ParseTuning reads one table for c and checks it: known keys, the collective's
// name, existing variants, positive sizes and worlds, and a last rule that
// matches every launch.
func ParseTuning(file string, src []byte, c *Collective) (*Auto, diag.List) {
	var errs diag.List
	at := func(n *yaml.Node) diag.Pos { return diag.Pos{File: file, Line: n.Line, Col: n.Column} }
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		errs.Add(diag.Pos{File: file, Line: 1, Col: 1}, "invalid YAML: "+strings.TrimPrefix(err.Error(), "yaml: "))
		return nil, errs
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		errs.Add(diag.Pos{File: file, Line: 1, Col: 1}, "a tuning table is a mapping with collective, measured and rules (see docs/spec.md)")
		return nil, errs
	}
	a := &Auto{File: file}
	m := doc.Content[0]
	seen := map[string]bool{}
	var rules *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if seen[k.Value] {
			errs.Add(at(k), fmt.Sprintf("duplicate key %q; keep only one", k.Value))
			continue
		}
		seen[k.Value] = true
		switch k.Value {
		case "collective":
			if v.Value != c.Name {
				errs.Add(at(v), fmt.Sprintf("collective %q, but the file is named after %q; they must agree", v.Value, c.Name))
			}
		case "measured":
			a.Measured = v.Value
		case "rules":
			rules = v
		default:
			errs.Add(at(k), fmt.Sprintf("unknown key %q in a tuning table (keys: collective, measured, rules)", k.Value))
		}
	}
	for _, k := range []string{"collective", "measured", "rules"} {
		if !seen[k] {
			errs.Add(at(m), fmt.Sprintf("the tuning table has no %s", k))
		}
	}
	if c.Variant(AutoVariant) != nil {
		errs.Add(c.Variant(AutoVariant).Pos, fmt.Sprintf("variant %q is the name of the tuned variant, and %s has a tuning table; rename the variant", AutoVariant, file))
	}
	if rules == nil {
		return nil, errs
	}
	if rules.Kind != yaml.SequenceNode || len(rules.Content) == 0 {
		errs.Add(at(rules), "rules must be a non-empty list of {world, max_bytes, variant}")
		return nil, errs
	}
	for _, rn := range rules.Content {
		r, l := tuningRule(rn, c, at)
		errs = append(errs, l...)
		a.Rules = append(a.Rules, r)
	}
	if last := a.Rules[len(a.Rules)-1]; len(errs) == 0 && (last.World != 0 || last.MaxBytes != 0) {
		errs.Add(last.Pos, "the last rule must match every launch: give it only a variant (no world, no max_bytes)")
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return a, nil
}

func tuningRule(n *yaml.Node, c *Collective, at func(*yaml.Node) diag.Pos) (AutoRule, diag.List) {
	var errs diag.List
	r := AutoRule{Pos: at(n)}
	if n.Kind != yaml.MappingNode {
		errs.Add(at(n), "a rule is a mapping {world, max_bytes, variant}")
		return r, errs
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "world", "max_bytes":
			x, err := strconv.ParseInt(v.Value, 10, 64)
			if err != nil || x < 1 || v.Kind != yaml.ScalarNode {
				errs.Add(at(v), fmt.Sprintf("%s must be a positive integer, found %q", k.Value, v.Value))
				continue
			}
			if k.Value == "world" {
				r.World = int(x)
			} else {
				r.MaxBytes = x
			}
		case "variant":
			r.Variant = v.Value
			if c.Variant(v.Value) == nil {
				var names []string
				for _, cv := range c.Variants {
					names = append(names, cv.Name)
				}
				errs.Add(at(v), fmt.Sprintf("%s has no variant %q (variants: %s)", c.Name, v.Value, strings.Join(names, ", ")))
			}
		default:
			errs.Add(at(k), fmt.Sprintf("unknown key %q in a rule (keys: world, max_bytes, variant)", k.Value))
		}
	}
	if r.Variant == "" && len(errs) == 0 {
		errs.Add(at(n), "the rule has no variant")
	}
	return r, errs
}

// FormatTuning writes a table in the file format, with a header comment.
func FormatTuning(collective string, a *Auto) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The auto variant of %s: written by `irisgen bench -tune` from a benchmark\n", collective)
	b.WriteString("# run; the first rule that matches a launch picks its variant. Regenerate the\n")
	b.WriteString("# Go code (irisgen generate) after changing it.\n")
	var worlds []string
	seen := map[int]bool{}
	for _, r := range a.Rules {
		if r.World > 0 && !seen[r.World] {
			seen[r.World] = true
			worlds = append(worlds, strconv.Itoa(r.World))
		}
	}
	if len(worlds) > 0 {
		fmt.Fprintf(&b, "# Measured world sizes: %s; other world sizes take the rules without a world (the largest measured world's).\n", strings.Join(worlds, ", "))
	}
	fmt.Fprintf(&b, "collective: %s\nmeasured: %q\nrules:\n", collective, a.Measured)
	for _, r := range a.Rules {
		var parts []string
		if r.World > 0 {
			parts = append(parts, fmt.Sprintf("world: %d", r.World))
		}
		if r.MaxBytes > 0 {
			parts = append(parts, fmt.Sprintf("max_bytes: %d", r.MaxBytes))
		}
		parts = append(parts, "variant: "+r.Variant)
		fmt.Fprintf(&b, "  - {%s}\n", strings.Join(parts, ", "))
	}
	return b.Bytes()
}

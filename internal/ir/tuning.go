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
	"fmt"
	"io/fs"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/spec"
	"github.com/irisgen/irisgen/internal/tuning"
	"github.com/irisgen/irisgen/runtime/irismodel"
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
			errs.Add(diag.IO, diag.Pos{File: file, Line: 1, Col: 1}, "cannot read the tuning table: "+err.Error())
			continue
		}
		coll := strings.TrimSuffix(path.Base(name), ".yaml")
		c := byName[coll]
		if c == nil {
			errs.Add(diag.Undefined, diag.Pos{File: file, Line: 1, Col: 1}, fmt.Sprintf("tuning table for %q, but no spec defines that collective; remove the file or rename it after a collective", coll))
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

// Keys of a tuning table and of one of its rules.
var (
	tuningKeys = []string{"collective", "measured", "rules"}
	ruleKeys   = []string{"world", "max_bytes", "variant"}
	tuningKind = spec.Kind{Name: "tuning table", Start: "`collective: <name>`", Keys: tuningKeys}
)

// ParseTuning reads one table for c and checks it, with the spec parser's
// machinery and positions: one document, known keys, no key twice, the
// right kind of value everywhere, the collective's name, existing variants,
// positive sizes and worlds, no rule that an earlier one hides, and a last
// rule that matches every launch.
func ParseTuning(file string, src []byte, c *Collective) (*Auto, diag.List) {
	rd, root := spec.NewReader(file, src, tuningKind)
	if root == nil {
		return nil, rd.Errors()
	}
	a := &Auto{File: file}
	var collective, measured spec.Str
	var rules *yaml.Node
	miss := rd.Fields(root, "in the tuning table", tuningKeys, func(key string, k spec.Str, v *yaml.Node) {
		switch key {
		case "collective":
			collective = rd.Str(k, v, "collective")
		case "measured":
			measured = rd.Str(k, v, "measured")
		case "rules":
			rules = v
		}
	})
	top := rd.Pos(root)
	for _, k := range tuningKeys {
		if _, typo := miss[k]; typo {
			continue
		}
		set := map[string]bool{"collective": collective.Set, "measured": measured.Set, "rules": rules != nil}[k]
		if !set {
			rd.Errorf(diag.Schema, top, "the tuning table has no %s; add %s", k, map[string]string{
				"collective": "collective: " + c.Name,
				"measured":   `measured: "<machine, date, dtype, mode>"`,
				"rules":      "rules: with at least one rule, e.g. - {variant: <name>}",
			}[k])
		}
	}
	if collective.OK() && collective.Value != c.Name {
		rd.Errorf(diag.Tuning, collective.Pos, "collective %q, but the file is named after %q; they must agree", collective.Value, c.Name)
	}
	a.Measured = measured.Value
	if v := c.Variant(irismodel.AutoVariant); v != nil {
		rd.Errorf(diag.Name, v.Pos, "variant %q is the name of the tuned variant, and %s has a tuning table; rename the variant", irismodel.AutoVariant, file)
	}
	if rules != nil {
		items, ok := rd.Seq(rules, "rules", "a non-empty list of {world, max_bytes, variant}")
		if ok && len(items) == 0 {
			rd.Errorf(diag.Value, rd.Pos(rules), "rules is empty; give at least one rule, the last one matching every launch: - {variant: <name>}")
		}
		for i, rn := range items {
			if r, ok := tuningRule(rd, rn, i+1, c); ok {
				a.Rules = append(a.Rules, r)
			}
		}
		if len(rd.Errors()) == 0 && len(a.Rules) > 0 {
			checkRuleOrder(rd, a.Rules)
		}
	}
	if errs := rd.Errors(); len(errs) > 0 {
		return nil, errs.Cap()
	}
	return a, nil
}

func tuningRule(rd *spec.Reader, n *yaml.Node, num int, c *Collective) (AutoRule, bool) {
	r := AutoRule{Pos: rd.Pos(n)}
	var node spec.Node
	where := fmt.Sprintf("rule %d", num)
	if !rd.Map(n, &node, where, "a mapping {world, max_bytes, variant}") {
		return r, false
	}
	ok := true
	var variant spec.Str
	rd.Fields(n, "in "+where, ruleKeys, func(key string, k spec.Str, v *yaml.Node) {
		switch key {
		case "world", "max_bytes":
			x := rd.Int(k, v, key+" of "+where)
			switch {
			case !x.OK():
				ok = false
			case x.Value < 1 || (key == "world" && x.Value > maxTuningWorld):
				rd.Errorf(diag.Value, x.Pos, "%s of %s is %d; it must be a positive integer%s", key, where, x.Value, map[bool]string{true: fmt.Sprintf(" up to %d", maxTuningWorld)}[key == "world"])
				ok = false
			case key == "world":
				r.World = int(x.Value)
			default:
				r.MaxBytes = x.Value
			}
		case "variant":
			variant = rd.Str(k, v, "variant of "+where)
		}
	})
	switch {
	case !variant.Set:
		rd.Errorf(diag.Schema, r.Pos, "%s has no variant; add variant: <name>", where)
		return r, false
	case !variant.OK():
		return r, false
	case c.Variant(variant.Value) == nil:
		names := make([]string, len(c.Variants))
		for i, cv := range c.Variants {
			names[i] = cv.Name
		}
		rd.Errorf(diag.Undefined, variant.Pos, "%s has no variant %q%s", c.Name, variant.Value, hint(variant.Value, names, "variants: "+strings.Join(names, ", ")))
		return r, false
	}
	r.Variant = variant.Value
	return r, ok
}

// maxTuningWorld bounds a rule's world: a world has at most that many ranks.
const maxTuningWorld = irismodel.MaxWorld

// checkRuleOrder refuses a rule that an earlier one hides (it would never
// be chosen) and a last rule that does not match every launch.
func checkRuleOrder(rd *spec.Reader, rules []AutoRule) {
	for i, r := range rules {
		for j, e := range rules[:i] {
			worldCovered := e.World == 0 || e.World == r.World
			bytesCovered := e.MaxBytes == 0 || (r.MaxBytes != 0 && r.MaxBytes <= e.MaxBytes)
			if worldCovered && bytesCovered {
				rd.Errorf(diag.Tuning, r.Pos, "rule %d is never chosen: rule %d (at %s) matches every launch it matches; remove it or move it before rule %d", i+1, j+1, lineCol(e.Pos), j+1)
				break
			}
		}
	}
	if last := rules[len(rules)-1]; last.World != 0 || last.MaxBytes != 0 {
		rd.Errorf(diag.Tuning, last.Pos, "the last rule must match every launch: give it only a variant (no world, no max_bytes)")
	}
}

// FormatTuning writes a table in the file format, with a header comment
// (tuning.Format, the format's writer).
func FormatTuning(collective string, a *Auto) []byte {
	return tuning.Format(collective, tuning.Table{Measured: a.Measured, Rules: a.ModelRules()})
}

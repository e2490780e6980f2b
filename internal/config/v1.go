package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/spec"
	"github.com/irisgen/irisgen/internal/toolchain"
)

// Keys of version 1, in the order the docs list them.
var topKeys = []string{"version", "specs", "templates", "catalogue", "out", "package", "import_path", "kernels"}

// kernelKeys are the keys of kernels: platform, one <platform>_arch per
// platform toolchain knows, command.
func kernelKeys() []string {
	keys := []string{"platform"}
	for _, p := range toolchain.Platforms() {
		keys = append(keys, ArchKey(p))
	}
	return append(keys, "command")
}

// fileV1 is version 1 as written, with the position of every value.
type fileV1 struct {
	Specs, Templates, Out, Package, ImportPath spec.Str
	Platform, Command                          spec.Str
	Arch                                       map[string]spec.List // by platform
	Catalogue                                  spec.List
}

// parse reads the file and converts it into a Config with paths resolved
// against dir.
func parse(name string, src []byte, dir string) (*Config, diag.List) {
	r, root := spec.NewReader(name, src, spec.Kind{Name: FileName, Keys: topKeys,
		Empty:   FileName + " is empty; start it with `version: 1` (see README.md, Downstream workflow)",
		Mapping: FileName + " must be a mapping with the keys " + strings.Join(topKeys, ", "),
		Second:  "the file holds one YAML document; remove this one"})
	if root == nil {
		return nil, r.Errors()
	}
	// The version says how to read the rest.
	switch versionOf(r, root) {
	case 1:
		f := readV1(r, root)
		c := f.config(r, dir)
		return c, r.Errors()
	}
	return nil, r.Errors()
}

// versionOf finds the version key before anything else is read; 0 when it
// is missing or unknown (reported).
func versionOf(r *spec.Reader, root *yaml.Node) int64 {
	var version spec.Int
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "version" {
			at := r.Pos(k)
			version = r.Int(spec.Str{Node: spec.Node{Pos: at, KeyPos: at, Set: true}, Value: k.Value}, root.Content[i+1], "version")
			break // a second one is a duplicate key, reported with the others
		}
	}
	switch {
	case !version.Set:
		r.Errorf(diag.Schema, r.Pos(root), "%s has no version; add `version: 1` as its first line", FileName)
	case version.Bad:
	case version.Value != 1:
		r.Errorf(diag.Config, version.Pos, "version %d is not one this irisgen reads (it reads version 1); upgrade irisgen or write version 1", version.Value)
	default:
		return 1
	}
	return 0
}

func readV1(r *spec.Reader, root *yaml.Node) *fileV1 {
	f := &fileV1{}
	r.Fields(root, "at the top level of "+FileName, topKeys, func(key string, k spec.Str, v *yaml.Node) {
		switch key {
		case "specs":
			f.Specs = r.Str(k, v, "specs")
		case "templates":
			f.Templates = r.Str(k, v, "templates")
		case "catalogue":
			f.Catalogue = r.List(k, v, "catalogue", "a list of irisgen's collectives, e.g. [all_reduce, moe_dispatch, moe_combine]")
		case "out":
			f.Out = r.Str(k, v, "out")
		case "package":
			f.Package = r.Str(k, v, "package")
		case "import_path":
			f.ImportPath = r.Str(k, v, "import_path")
		case "kernels":
			if !r.MapAt(k, v, "kernels", "a mapping with the keys "+strings.Join(kernelKeys(), ", ")) {
				return
			}
			r.Fields(v, "in kernels", kernelKeys(), func(key string, k spec.Str, v *yaml.Node) {
				switch key {
				case "platform":
					f.Platform = r.Str(k, v, "kernels.platform")
				case "command":
					f.Command = r.Str(k, v, "kernels.command")
				default: // <platform>_arch
					p, _ := toolchain.Lookup(strings.TrimSuffix(key, "_arch"))
					if f.Arch == nil {
						f.Arch = map[string]spec.List{}
					}
					f.Arch[p.Name] = r.List(k, v, "kernels."+key, `a list of targets, e.g. ["`+strings.Join(p.DefaultTargets, `", "`)+`"]`)
				}
			})
		}
	})
	return f
}

var archName = regexp.MustCompile(`^[A-Za-z0-9_.:+-]+$`)

// config validates f and converts it; problems are reported to r.
func (f *fileV1) config(r *spec.Reader, dir string) *Config {
	c := &Config{Dir: dir, Out: filepath.Join(dir, DefaultOut), Package: DefaultPackage, Kernels: Kernels{Platform: "auto"}, pos: map[string]diag.Pos{}, raw: map[string]string{}}
	for key, s := range map[string]spec.Str{KeySpecs: f.Specs, KeyTemplates: f.Templates, KeyOut: f.Out, KeyPackage: f.Package, KeyImportPath: f.ImportPath} {
		if s.OK() {
			c.pos[key], c.raw[key] = s.Pos, s.Value
		}
	}
	path := func(s spec.Str, key, builtIn string) string {
		if !s.OK() {
			return ""
		}
		if s.Value == "" {
			r.Errorf(diag.Value, s.Pos, "%s is empty; %s", key, builtIn)
			return ""
		}
		if strings.ContainsRune(s.Value, 0) {
			r.Errorf(diag.Value, s.Pos, "%s %q holds a NUL byte, which no path may; write the path without it", key, s.Value)
			return ""
		}
		p := filepath.FromSlash(s.Value)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p
	}
	dirOf := func(s spec.Str, key string) string {
		p := path(s, key, "omit the key to use the "+key+" built into irisgen")
		if p == "" {
			return ""
		}
		if err := isDir(p); err != nil {
			r.Errorf(diag.Config, s.Pos, "%s: %s: %v (paths are relative to %s)", key, s.Value, err, FileName)
			return ""
		}
		return p
	}
	c.Specs = dirOf(f.Specs, "specs")
	c.Templates = dirOf(f.Templates, "templates")
	c.Catalogue = catalogue(r, f.Catalogue)
	if p := path(f.Out, "out", "omit the key for "+DefaultOut); p != "" {
		c.Out = p
	}
	if f.Package.OK() {
		if err := CheckPackage(f.Package.Value); err != nil {
			r.Errorf(diag.Value, f.Package.Pos, "package %q: %v", f.Package.Value, err)
		} else {
			c.Package = f.Package.Value
		}
	}
	if f.ImportPath.OK() {
		if err := CheckImportPath(f.ImportPath.Value); err != nil {
			r.Errorf(diag.Value, f.ImportPath.Pos, "import_path %q is not a Go import path: %v; write e.g. example.com/repo/internal/coll, or omit it to derive it from go.mod", f.ImportPath.Value, err)
		} else {
			c.ImportPath = f.ImportPath.Value
		}
	}
	if f.Platform.OK() {
		if !contains(Platforms(), f.Platform.Value) {
			hint := "want one of " + strings.Join(Platforms(), ", ")
			if s := spec.Closest(f.Platform.Value, Platforms()); s != "" {
				hint = fmt.Sprintf("did you mean %q?", s)
			}
			r.Errorf(diag.Value, f.Platform.Pos, "kernels.platform %q is not a platform (%s)", f.Platform.Value, hint)
		} else {
			c.Kernels.Platform = f.Platform.Value
		}
	}
	arch := func(l spec.List, key string) []string {
		var out []string
		for _, it := range l.Items {
			if !archName.MatchString(it.Value) {
				r.Errorf(diag.Value, it.Pos, "%s: %q is not a target name (e.g. gfx90a, gfx942:xnack+, 90)", key, it.Value)
				continue
			}
			out = append(out, it.Value)
		}
		if l.OK() && len(l.Items) == 0 {
			r.Errorf(diag.Value, l.Pos, "%s is empty; list targets or omit the key for the compiler's defaults", key)
		}
		return out
	}
	for p, l := range f.Arch {
		if targets := arch(l, "kernels."+ArchKey(p)); len(targets) > 0 {
			if c.Kernels.Arch == nil {
				c.Kernels.Arch = map[string][]string{}
			}
			c.Kernels.Arch[p] = targets
		}
	}
	if f.Command.OK() {
		if strings.TrimSpace(f.Command.Value) == "" {
			r.Errorf(diag.Value, f.Command.Pos, "kernels.command is empty; omit it to derive it from go.mod")
		} else {
			c.Kernels.Command = f.Command.Value
		}
	}
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// catalogue checks the names of the catalogue key: collectives of irisgen's
// catalogue, each once.
func catalogue(r *spec.Reader, l spec.List) []string {
	if !l.OK() {
		return nil
	}
	if len(l.Items) == 0 {
		r.Errorf(diag.Value, l.Pos, "catalogue is empty; list irisgen's collectives this repository uses (e.g. [all_reduce]), or omit the key")
		return nil
	}
	known := CatalogueNames()
	var out []string
	seen := map[string]bool{}
	for _, it := range l.Items {
		switch {
		case !contains(known, it.Value):
			hint := "irisgen's catalogue has " + strings.Join(known, ", ")
			if s := spec.Closest(it.Value, known); s != "" {
				hint = fmt.Sprintf("did you mean %q?", s)
			}
			r.Errorf(diag.Undefined, it.Pos, "catalogue: %q is not a collective of irisgen's catalogue (%s)", it.Value, hint)
		case seen[it.Value]:
			r.Errorf(diag.Value, it.Pos, "catalogue: %s is listed twice; list it once", it.Value)
		default:
			seen[it.Value] = true
			out = append(out, it.Value)
		}
	}
	return out
}

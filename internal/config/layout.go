package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/irisgen/irisgen/internal/diag"
)

// The layout checks: where the paths of a config point, together. An
// input of a run is never an output of it (generate removes the stale
// files of its output directories, and a template that starts with
// irisgen's header, copied from a generated file, would be one); the
// output lies in the config's module, whose go.mod gives the generated
// package its import path; the specs directory holds specs.

// problem is one mistake of the layout: keys are the config keys (or
// flags) that make it, the first one the user set is blamed; msg says
// it as that key's.
type problem struct {
	keys []string
	msg  func(key string) string
}

// check reports the layout's problems: as a *FlagError when a flag
// (flags: the ones the user set, by key) makes one, else positioned at
// the file's key, else at the file's start.
func (c *Config) check(flags map[string]string) error {
	return c.checkLayout(flags, true)
}

// checkLayout is check; without a config file and output false, the
// output's place is left alone (validate and explain of the built-in
// catalogue work in any directory).
func (c *Config) checkLayout(flags map[string]string, output bool) error {
	var errs diag.List
	for _, p := range c.layout(output || c.File != "") {
		key := p.keys[0]
		if flag := func() string {
			for _, k := range p.keys {
				if _, ok := flags[k]; ok {
					return k
				}
			}
			return ""
		}(); flag != "" {
			return &FlagError{Flag: flag, Value: flags[flag], Msg: p.msg(flag)}
		}
		at := diag.Pos{File: c.name, Line: 1, Col: 1}
		for _, k := range p.keys {
			if pos, ok := c.pos[k]; ok {
				key, at = k, pos
				break
			}
		}
		if c.File == "" {
			return errors.New(p.msg(""))
		}
		errs.Add(diag.Config, at, p.msg(key))
	}
	errs.Sort()
	return errs.Err()
}

// layout lists what is wrong with where the config's paths point.
func (c *Config) layout(output bool) []problem {
	var ps []problem
	outDirs := []struct{ dir, key string }{{c.Out, KeyOut}, {filepath.Join(c.Out, "hip"), KeyOut}, {c.PackageDir(), KeyPackage}}
	for _, d := range outDirs {
		if st, err := os.Stat(d.dir); err == nil && !st.IsDir() {
			d := d
			ps = append(ps, problem{keys: []string{d.key, KeyOut}, msg: func(string) string {
				return fmt.Sprintf("%s is a file where generate needs a directory; point out at a directory (created when missing), or move the file", c.Rel(d.dir))
			}})
		}
	}
	if c.Specs != "" && !hasSpecs(c.Specs) {
		ps = append(ps, problem{keys: []string{KeySpecs}, msg: func(string) string {
			return fmt.Sprintf("%s holds no spec (*.yaml); add one, or omit specs to generate the catalogue built into irisgen", c.Rel(c.Specs))
		}})
	}
	// Inputs inside the directories generate writes and removes files in.
	owned := []string{filepath.Join(c.Out, "hip"), c.PackageDir()}
	for _, in := range []struct{ dir, key, what string }{{c.Specs, KeySpecs, "specs"}, {c.Templates, KeyTemplates, "templates"}} {
		if in.dir == "" {
			continue
		}
		rin := realPath(in.dir)
		for _, o := range owned {
			if !within(rin, realPath(o)) {
				continue
			}
			in, o := in, o
			ps = append(ps, problem{keys: []string{in.key, KeyOut, KeyPackage}, msg: func(key string) string {
				fix := fmt.Sprintf("keep the %s out of %s and %s (move them, e.g. to %s), or generate elsewhere (out, package)", in.what, c.Rel(owned[0]), c.Rel(owned[1]), in.what)
				if key == in.key {
					return fmt.Sprintf("the %s directory %s lies inside %s, where generate writes and removes files: it could overwrite or remove its own inputs; %s", in.what, c.Rel(in.dir), c.Rel(o), fix)
				}
				return fmt.Sprintf("the output directory %s would hold the %s (%s), which generate could overwrite or remove; %s", c.Rel(o), in.what, c.Rel(in.dir), fix)
			}})
			break
		}
	}
	if !output {
		return ps
	}
	// The output in the config's module.
	pkg := realPath(c.PackageDir())
	out, _ := findModule(pkg)
	ref, _ := findModule(realPath(c.Dir))
	switch {
	case c.File != "" && ref != nil && (out == nil || out.root != ref.root):
		where := fmt.Sprintf("outside the module %s (go.mod in %s)", ref.path, c.dirName(ref.root))
		if out != nil {
			where = fmt.Sprintf("in another module, %s (go.mod in %s), not in %s (go.mod in %s)", out.path, c.dirName(out.root), ref.path, c.dirName(ref.root))
		}
		ps = append(ps, problem{keys: []string{KeyOut, KeyPackage}, msg: func(key string) string {
			return fmt.Sprintf("the generated package %s lies %s, where no package of the module can import it and irisgen would write outside the repository; put it inside the module (e.g. out: %s), or generate it from a config in its own module", c.Rel(c.PackageDir()), where, DefaultOut)
		}})
	case c.ImportPath != "" && CheckImportPath(c.ImportPath) != nil:
		err := CheckImportPath(c.ImportPath)
		ps = append(ps, problem{keys: []string{KeyOut, KeyPackage}, msg: func(key string) string {
			return fmt.Sprintf("the generated package %s would have the import path %q, which is not one: %v; name its directories with letters, digits and - . _ ~ +", c.Rel(c.PackageDir()), c.ImportPath, err)
		}})
	case out == nil && c.ImportPath == "":
		ps = append(ps, problem{keys: []string{KeyOut, KeyPackage, KeyImportPath}, msg: func(key string) string {
			fix := "run go mod init at the repository's root, or set import_path in " + FileName
			if c.File == "" {
				fix = "run go mod init here, or generate into a module (-out)"
			}
			return fmt.Sprintf("no go.mod above the generated package %s, so it has no import path (the key of its kernels in the runtime); %s", c.Rel(c.PackageDir()), fix)
		}})
	}
	return ps
}

// dirName names a directory for messages, relative to Dir.
func (c *Config) dirName(dir string) string {
	if r := c.Rel(dir); r != "." {
		return r
	}
	if c.File != "" {
		return "the directory of " + FileName
	}
	return "the working directory"
}

// hasSpecs reports whether dir holds a *.yaml file.
func hasSpecs(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return true // reported where it is read
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".yaml") {
			return true
		}
	}
	return false
}

// realPath is p with its symbolic links resolved, as far as it exists.
func realPath(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(p, rest)
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// CheckImportPath says why p is not a Go import path: slash-separated
// elements of letters, digits and - . _ ~ +, none empty, none starting
// with a dot, not absolute or relative.
func CheckImportPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty")
	case strings.HasPrefix(p, "/"):
		return errors.New("an absolute path")
	case strings.HasSuffix(p, "/"):
		return errors.New("a trailing /")
	}
	for _, el := range strings.Split(p, "/") {
		switch {
		case el == "":
			return errors.New("an empty element (//)")
		case el == "." || el == "..":
			return errors.New("a relative path (an element . or ..)")
		case el[0] == '.':
			return fmt.Errorf("element %q starts with a dot", el)
		case strings.HasSuffix(el, "."):
			return fmt.Errorf("element %q ends with a dot", el)
		}
		for _, r := range el {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~+", r)) {
				return fmt.Errorf("%q is not allowed", r)
			}
		}
	}
	return nil
}

// Package config reads irisgen.yaml, a repository's one source of truth for
// generation: where the specs and templates are, where the output goes, the
// generated package's name and import path, and how its kernels are built.
// `irisgen generate`, `check`, `validate`, `explain` and `kernels` find it
// by walking up from the working directory (as `go` finds go.mod) or take
// -config FILE, and command-line flags override it only when the user sets
// them.
//
// The file is versioned (`version: 1`); each version has an external form
// of its own that is converted into the one validated Config, so a later
// version can change the file without changing its users. Mistakes are
// reported as `irisgen.yaml:4:3: error: ...` through the spec parser's
// machinery (strict keys, "did you mean").
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/spec"
	"github.com/irisgen/irisgen/internal/toolchain"
)

// FileName is the name irisgen looks for.
const FileName = "irisgen.yaml"

// Defaults of an output without a config file or key.
const (
	DefaultOut     = "generated"
	DefaultPackage = "collectives"
)

// Platforms are the values of kernels.platform and of `irisgen kernels
// -platform`: auto, then toolchain's registered platforms.
func Platforms() []string { return append([]string{toolchain.Auto}, toolchain.Platforms()...) }

// ArchKey is the key of kernels that lists platform's targets
// (hip_arch, cuda_arch).
func ArchKey(platform string) string { return platform + "_arch" }

// Config says what to generate and where. Paths are absolute. A Config that
// Load or Resolve returns is valid: its package name is a Go package name,
// its spec and template directories exist.
type Config struct {
	// File is the config file it came from; "" when there is none.
	File string
	// Dir is the directory paths are relative to: File's directory, or the
	// working directory when there is no file. Generated headers name spec
	// files relative to it.
	Dir string
	// Specs is the directory of spec files; "" is the catalogue built into
	// irisgen.
	Specs string
	// Templates is the directory of templates; "" is the built-in one.
	Templates string
	// Catalogue names collectives of irisgen's catalogue to generate into
	// the package beside the specs' own, from irisgen's specs and
	// templates. With no Specs and no Catalogue, the whole catalogue is
	// generated.
	Catalogue []string
	// Out is the output root: Out/hip, Out/<Package>, Out/<Package>/kernels.
	Out string
	// Package is the generated Go package's name and directory under Out.
	Package string
	// ImportPath is the generated package's import path: the file's
	// import_path, else the module path of the go.mod above Out plus the
	// package directory's path below it; "" when there is no go.mod.
	ImportPath string
	// Kernels is how the kernels are built.
	Kernels Kernels
	// Module is the module path of the go.mod in Dir or above it; "" when
	// there is none.
	Module string

	// name is File as messages name it; pos and raw are where the file
	// sets each key (KeySpecs, ...) and the value it writes there.
	name string
	pos  map[string]diag.Pos
	raw  map[string]string
}

// The keys of the file that problems of the layout name.
const (
	KeySpecs      = "specs"
	KeyTemplates  = "templates"
	KeyOut        = "out"
	KeyPackage    = "package"
	KeyImportPath = "import_path"
)

// Kernels is the kernels section.
type Kernels struct {
	// Platform is auto or a platform of Platforms.
	Platform string
	// Arch are the targets per platform (kernels.<platform>_arch); none:
	// the compiler's defaults of `irisgen kernels`.
	Arch map[string][]string
	// Command is what a user of the repository runs, in Dir, to build the
	// kernels (kernels.command, else derived from go.mod: `go tool irisgen
	// kernels` when irisgen is a tool of the module, else `go run
	// github.com/irisgen/irisgen/cmd/irisgen kernels`).
	Command string
}

// PackageDir is the generated package's directory.
func (c *Config) PackageDir() string { return filepath.Join(c.Out, c.Package) }

// KernelsDir is where `irisgen kernels` writes the code objects: beside the
// generated package, which embeds them.
func (c *Config) KernelsDir() string { return filepath.Join(c.PackageDir(), "kernels") }

// Rel names path relative to Dir, slash-separated, for messages and
// generated headers; never an absolute path when Dir and path share a root.
func (c *Config) Rel(path string) string {
	if r, err := filepath.Rel(c.Dir, path); err == nil {
		return filepath.ToSlash(r)
	}
	return filepath.Base(path)
}

// Find looks for FileName in dir and its parents, stopping after the
// directory that holds go.mod (a config belongs to its module). It returns
// "" when there is none.
func Find(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, FileName)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return "", nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", nil
		}
		dir = parent
	}
}

// CatalogueNames lists the collectives of irisgen's catalogue, sorted:
// the spec files built into irisgen are named after their collective.
func CatalogueNames() []string {
	files, _ := fs.Glob(irisgen.Specs, "specs/*.yaml") // the pattern is constant
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(path.Base(f), ".yaml")
	}
	return names
}

// MaxFileBytes bounds the size of every file irisgen reads: a config, a
// spec, a tuning table or a template (the catalogue's largest is 6 KB).
const MaxFileBytes = 1 << 20

// Load reads and validates the config file at path. Mistakes in the file
// come back as a diag.List.
func Load(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	src, err := ReadFile(abs)
	if err != nil {
		return nil, err
	}
	return Parse(abs, filepath.ToSlash(path), src)
}

// Parse reads the config file at abs (its contents src, named name in
// messages) and validates it, the directories it points at included
// (Layout). Mistakes in the file come back as a diag.List.
func Parse(abs, name string, src []byte) (*Config, error) {
	c, err := parseFile(abs, name, src)
	if err != nil {
		return nil, err
	}
	return c, c.check(nil)
}

// parseFile is Parse without the checks of the layout, which Resolve
// makes after the flags.
func parseFile(abs, name string, src []byte) (*Config, error) {
	c, errs := parse(name, src, filepath.Dir(abs))
	if len(errs) > 0 {
		return nil, errs
	}
	c.File, c.name = abs, name
	return c, c.derive()
}

// ReadFile reads an input file of irisgen after CheckFile.
func ReadFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := CheckFile(st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return os.ReadFile(path)
}

// CheckFile refuses to read what is not a regular file (a FIFO would block
// for ever, /dev/zero never ends) and files over MaxFileBytes, with errors
// that say so. st is the result of os.Stat (links followed).
func CheckFile(st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s); irisgen reads only regular files", kind(st.Mode()))
	}
	if st.Size() > MaxFileBytes {
		return fmt.Errorf("%d bytes, more than irisgen reads from one file (%d)", st.Size(), MaxFileBytes)
	}
	return nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.String()
}

// Overrides are command-line values; only non-nil ones replace the file's.
// Paths are relative to the working directory, as the user typed them.
type Overrides struct {
	Specs, Templates, Out, Package *string
	// Output: the command generates, compares or builds the output
	// (generate, check, kernels). Without a config file, where the output
	// lies is checked only then, so that validate and explain of the
	// built-in catalogue work in any directory.
	Output bool
}

// FlagError is a bad command-line value (exit code 2).
type FlagError struct {
	Flag, Value, Msg string
}

func (e *FlagError) Error() string { return fmt.Sprintf("-%s %q: %s", e.Flag, e.Value, e.Msg) }

// Resolve finds the config (the file named by file when not "", else the
// one Find finds from wd, else the defaults: the built-in catalogue into
// wd/generated), applies the overrides and validates the result.
func Resolve(file, wd string, o Overrides) (*Config, error) {
	wd, err := filepath.Abs(wd)
	if err != nil {
		return nil, err
	}
	if file == "" {
		if file, err = Find(wd); err != nil {
			return nil, err
		}
	}
	var c *Config
	if file != "" {
		abs := file
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(wd, file)
		}
		// Named in messages relative to the working directory.
		name := file
		if rel, err := filepath.Rel(wd, abs); err == nil {
			name = rel
		}
		src, err := ReadFile(abs)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			// Too large, not a regular file, unreadable: at the file.
			return nil, diag.List{{Code: diag.IO, Pos: diag.Pos{File: filepath.ToSlash(name), Line: 1, Col: 1}, Msg: unwrapPath(err, abs)}}
		}
		if c, err = parseFile(abs, filepath.ToSlash(name), src); err != nil {
			return nil, err
		}
	} else {
		c = &Config{Dir: wd, Out: filepath.Join(wd, DefaultOut), Package: DefaultPackage, Kernels: Kernels{Platform: "auto"}}
	}
	at := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(wd, p)
	}
	for _, d := range []struct {
		flag string
		val  *string
		dst  *string
	}{{"specs", o.Specs, &c.Specs}, {"templates", o.Templates, &c.Templates}} {
		if d.val == nil {
			continue
		}
		if *d.val == "" {
			*d.dst = "" // explicitly the built-in catalogue
			if d.flag == "specs" {
				// The whole catalogue, with its own templates unless
				// -templates says otherwise (the config's are for its
				// own specs).
				c.Catalogue = nil
				if o.Templates == nil {
					c.Templates = ""
				}
			}
			continue
		}
		if strings.ContainsRune(*d.val, 0) {
			return nil, &FlagError{Flag: d.flag, Value: *d.val, Msg: "a path cannot hold a NUL byte"}
		}
		p := at(*d.val)
		if err := isDir(p); err != nil {
			return nil, &FlagError{Flag: d.flag, Value: *d.val, Msg: err.Error()}
		}
		*d.dst = p
	}
	rederive := false
	if o.Out != nil {
		if *o.Out == "" {
			return nil, &FlagError{Flag: "out", Value: "", Msg: "want the output directory (e.g. generated)"}
		}
		if strings.ContainsRune(*o.Out, 0) {
			return nil, &FlagError{Flag: "out", Value: *o.Out, Msg: "a path cannot hold a NUL byte"}
		}
		c.Out, rederive = at(*o.Out), true
	}
	if o.Package != nil {
		if err := CheckPackage(*o.Package); err != nil {
			return nil, &FlagError{Flag: "package", Value: *o.Package, Msg: err.Error()}
		}
		c.Package, rederive = *o.Package, true
	}
	if rederive || c.File == "" {
		c.ImportPath = ""
		if c.File == "" {
			c.Kernels.Command = ""
		}
	}
	if err := c.derive(); err != nil {
		return nil, err
	}
	flags := map[string]string{}
	for key, v := range map[string]*string{KeySpecs: o.Specs, KeyTemplates: o.Templates, KeyOut: o.Out, KeyPackage: o.Package} {
		if v != nil {
			flags[key] = *v
		}
	}
	return c, c.checkLayout(flags, o.Output)
}

// unwrapPath is err's message without the path ReadFile put in front.
func unwrapPath(err error, path string) string {
	return strings.TrimPrefix(err.Error(), path+": ")
}

func isDir(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no such directory")
		}
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("not a directory")
	}
	return nil
}

// CheckPackage says why name cannot be the generated package's name: it
// must be a lower-case Go identifier ([a-z][a-z0-9_]*), not a keyword, not
// main and not ending in _test.
func CheckPackage(name string) error {
	switch {
	case name == "":
		return errors.New("want the generated Go package's name, e.g. collectives")
	case !spec.IsIdentifier(name):
		return errors.New("a package name is a lower-case Go identifier ([a-z][a-z0-9_]*), e.g. collectives")
	case spec.IsReserved(name):
		return errors.New("a Go, C or C++ keyword cannot name the package")
	case name == "main" || strings.HasSuffix(name, "_test"):
		return errors.New("the generated package is imported: it cannot be main or end in _test")
	}
	return nil
}

// derive fills what the file did not say: the import path and the kernels
// command, from the go.mod above the output.
func (c *Config) derive() error {
	if c.Kernels.Platform == "" {
		c.Kernels.Platform = "auto"
	}
	if own, err := findModule(c.Dir); err != nil {
		return err
	} else if own != nil {
		c.Module = own.path
	}
	if c.ImportPath != "" && c.Kernels.Command != "" {
		return nil
	}
	mod, err := findModule(c.PackageDir())
	if err != nil {
		return err
	}
	if c.ImportPath == "" && mod != nil {
		if rel, err := filepath.Rel(mod.root, c.PackageDir()); err == nil && within(c.PackageDir(), mod.root) {
			c.ImportPath = strings.TrimSuffix(mod.path+"/"+filepath.ToSlash(rel), "/.")
		}
	}
	if c.Kernels.Command == "" {
		c.Kernels.Command = c.kernelsCommand(mod)
	}
	return nil
}

// IrisgenModule is irisgen's own module path.
const IrisgenModule = "github.com/irisgen/irisgen"

// kernelsCommand is how a user of the module runs `irisgen kernels` from Dir.
func (c *Config) kernelsCommand(mod *module) string {
	cmd := "go run " + IrisgenModule + "/cmd/irisgen kernels"
	switch {
	case mod != nil && mod.path == IrisgenModule:
		cmd = "go run ./cmd/irisgen kernels"
	case mod != nil && mod.hasTool(IrisgenModule+"/cmd/irisgen"):
		cmd = "go tool irisgen kernels"
	}
	if c.File != "" {
		return cmd
	}
	// No file: the flags that name this output.
	if out := c.Rel(c.Out); out != DefaultOut {
		cmd += " -out " + out
	}
	if c.Package != DefaultPackage {
		cmd += " -package " + c.Package
	}
	return cmd
}

package irisrt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// KernelFile is the code object file name of module (a collective) on a
// platform: <module>.fatbin for cuda, <module>.hsaco for hip,
// <module>.<platform> otherwise (test platforms). `irisgen kernels` writes
// them into the generated package's kernels/ directory, which the package
// embeds.
func KernelFile(platform, module string) string {
	switch platform {
	case "cuda":
		return module + ".fatbin"
	case "hip":
		return module + ".hsaco"
	}
	return module + "." + platform
}

// DefaultKernelsCommand is the command errors name for building code
// objects when a package's Table does not say (Table.KernelsCommand).
const DefaultKernelsCommand = "irisgen kernels"

// registry maps import paths to the registered tables of the generated
// packages in the program.
var registry struct {
	mu     sync.Mutex
	tables map[string]*Table
}

// Register records a generated package's table under its import path, so
// that its plans find the code objects the package embeds. Every generated
// package calls it in init. A second table under the same import path (a
// generated package copied or moved without regenerating it) is a conflict:
// nothing panics, but every plan of either package fails with an error that
// says to regenerate; other packages are not affected. Registering the same
// table again does nothing.
func Register(t *Table) {
	_ = t.prepare() // an invalid table fails its plans, with the reason
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.tables == nil {
		registry.tables = map[string]*Table{}
	}
	if o := registry.tables[t.ImportPath]; o != nil && o != t {
		o.conflict.Store(t)
		t.conflict.Store(o)
		return
	}
	registry.tables[t.ImportPath] = t
}

// Registered returns the table registered under importPath, or nil.
func Registered(importPath string) *Table {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return registry.tables[importPath]
}

// Tables returns the tables of every generated package registered in the
// program, sorted by import path: what tools that take any generated
// package (irisgen bench and probe, through gputools) work on.
func Tables() []*Table {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	out := make([]*Table, 0, len(registry.tables))
	for _, t := range registry.tables {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Table) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	return out
}

// usable reports why no plan of t can be made: an invalid table or a
// registration conflict; nil otherwise.
func (t *Table) usable() error {
	if err := t.prepare(); err != nil {
		return err
	}
	if t.conflict.Load() != nil {
		return fmt.Errorf("irisrt: two generated packages in this program register the import path %q: "+
			"one of them was copied or moved without regenerating it; regenerate it where it lives now (`go generate ./...`)", t.ImportPath)
	}
	return nil
}

// kernelsCommand is what errors about pkg's code objects tell the user to
// run.
func kernelsCommand(pkg string) string {
	if t := Registered(pkg); t != nil && t.KernelsCommand != "" {
		return t.KernelsCommand
	}
	return DefaultKernelsCommand
}

// kernelCache holds a rank's loaded modules and functions, keyed by the
// generated package and the module (collective), so two packages with a
// collective of the same name each get their own.
type kernelCache struct {
	mu   sync.Mutex
	mods map[moduleKey]*loadedModule
}

type moduleKey struct{ pkg, module string }

type loadedModule struct {
	mod  gpu.Module
	hash string
	fns  map[string]gpu.Function
}

func (c *kernelCache) unload(dev gpu.Device) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, m := range c.mods {
		errs = append(errs, dev.UnloadModule(m.mod))
	}
	c.mods = nil
	return errors.Join(errs...)
}

// Function returns kernel from module of the generated package pkg (its
// import path; "" for a plan made without one), loading the module on first
// use and checking that its spec hash equals specHash (the generated
// package's). Missing or stale code objects give a *KernelError that names
// the command that rebuilds them. Plans call it at creation, never in a
// launch.
func (r *Rank) Function(pkg, module, specHash, kernel string) (gpu.Function, error) {
	if r.isClosed() {
		return 0, r.closedErr("Function " + kernel)
	}
	c := r.kernels // a group shares its world rank's
	c.mu.Lock()
	defer c.mu.Unlock()
	key := moduleKey{pkg, module}
	m := c.mods[key]
	if m == nil {
		var err error
		if m, err = r.loadModule(pkg, module); err != nil {
			return 0, err
		}
		if c.mods == nil {
			c.mods = map[moduleKey]*loadedModule{}
		}
		c.mods[key] = m
	}
	if m.hash != specHash {
		return 0, &KernelError{Package: pkg, Module: module, Kernel: kernel, Stale: true, WantHash: specHash, GotHash: m.hash, Command: kernelsCommand(pkg)}
	}
	if f, ok := m.fns[kernel]; ok {
		return f, nil
	}
	f, err := r.dev.Function(m.mod, kernel)
	if err != nil {
		return 0, &KernelError{Package: pkg, Module: module, Kernel: kernel, Err: err, Command: kernelsCommand(pkg)}
	}
	m.fns[kernel] = f
	return f, nil
}

func (r *Rank) loadModule(pkg, module string) (*loadedModule, error) {
	image, err := findKernel(r.opts.Kernels, r.dev.Platform().Name(), pkg, module)
	if err != nil {
		return nil, err
	}
	mod, err := r.dev.LoadModule(image)
	if err != nil {
		return nil, &KernelError{Package: pkg, Module: module, Command: kernelsCommand(pkg),
			Err: fmt.Errorf("loading the code object on GPU %d: %w", r.dev.Ordinal(), err)}
	}
	hash, err := r.readSpecHash(mod, pkg, module)
	if err != nil {
		_ = r.dev.UnloadModule(mod)
		return nil, err
	}
	return &loadedModule{mod: mod, hash: hash, fns: map[string]gpu.Function{}}, nil
}

func (r *Rank) readSpecHash(mod gpu.Module, pkg, module string) (string, error) {
	sym := irismodel.SpecHashSymbol(module)
	fail := func(err error) error {
		return &KernelError{Package: pkg, Module: module, Err: err, Command: kernelsCommand(pkg)}
	}
	p, size, err := r.dev.Global(mod, sym)
	if err != nil {
		return "", fail(fmt.Errorf("the code object has no %s (%w): it was not built from irisgen's generated source", sym, err))
	}
	if size <= 0 || size > 4096 {
		return "", fail(fmt.Errorf("%s has an implausible size of %d bytes", sym, size))
	}
	buf := make([]byte, size)
	if err := r.dev.CopyDtoH(unsafe.Pointer(&buf[0]), p, size); err != nil {
		return "", fail(fmt.Errorf("reading %s: %w", sym, err))
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

// findKernel reads the code object of module of the generated package pkg:
// from fsys (Options.Kernels) when given, else from $IRISGEN_KERNELS when
// set, and when it is not there from the code objects pkg embeds. The
// overrides come first so that freshly built code objects can be used
// without rebuilding the program; the spec hash check catches a wrong one.
func findKernel(fsys fs.FS, platform, pkg, module string) ([]byte, error) {
	name := KernelFile(platform, module)
	var looked []string
	miss := func(err error, where string) error {
		if errors.Is(err, fs.ErrNotExist) {
			looked = append(looked, where)
			return nil
		}
		return &KernelError{Package: pkg, Module: module, Command: kernelsCommand(pkg), Err: fmt.Errorf("reading %s: %w", where, err)}
	}
	if fsys != nil {
		b, err := fs.ReadFile(fsys, name)
		if err == nil {
			return b, nil
		}
		if err := miss(err, name+" in Options.Kernels"); err != nil {
			return nil, err
		}
	} else if d := os.Getenv("IRISGEN_KERNELS"); d != "" {
		p := filepath.Join(d, name)
		b, err := os.ReadFile(p)
		if err == nil {
			return b, nil
		}
		if err := miss(err, p+" ($IRISGEN_KERNELS)"); err != nil {
			return nil, err
		}
	}
	if t := Registered(pkg); t != nil && t.Embedded != nil {
		p := path.Join("kernels", name)
		b, err := fs.ReadFile(t.Embedded, p)
		if err == nil {
			return b, nil
		}
		if err := miss(err, p+" embedded in "+pkg); err != nil {
			return nil, err
		}
	}
	return nil, &KernelError{Package: pkg, Module: module, Looked: looked, Command: kernelsCommand(pkg)}
}

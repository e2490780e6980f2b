package irisrt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/internal/core"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

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

// function returns the kernel of plan spec s from its module of its
// generated package (s.Package, its import path; "" for a plan made without
// one), loading the module on first use and checking that its spec hash
// equals s.SpecHash (the generated package's). Missing or stale code
// objects give a *KernelError that names the command that rebuilds them
// (s.KernelsCommand). Plans call it at creation, never in a launch.
func (r *Rank) function(s *core.PlanSpec) (gpu.Function, error) {
	if r.isClosed() {
		return 0, r.closedErr("loading kernel " + s.Kernel)
	}
	pkg, module, kernel := s.Package, s.Module, s.Kernel
	cmd := kernelsCommand(s)
	c := r.kernels // a group shares its world rank's
	c.mu.Lock()
	defer c.mu.Unlock()
	key := moduleKey{pkg, module}
	m := c.mods[key]
	if m == nil {
		var err error
		if m, err = r.loadModule(s); err != nil {
			return 0, err
		}
		if c.mods == nil {
			c.mods = map[moduleKey]*loadedModule{}
		}
		c.mods[key] = m
	}
	if m.hash != s.SpecHash {
		return 0, &KernelError{Package: pkg, Module: module, Kernel: kernel, Stale: true, WantHash: s.SpecHash, GotHash: m.hash, Command: cmd}
	}
	if f, ok := m.fns[kernel]; ok {
		return f, nil
	}
	f, err := r.dev.Function(m.mod, kernel)
	if err != nil {
		return 0, &KernelError{Package: pkg, Module: module, Kernel: kernel, Err: err, Command: cmd}
	}
	m.fns[kernel] = f
	return f, nil
}

// kernelsCommand is what errors about s's code objects tell the user to
// run.
func kernelsCommand(s *core.PlanSpec) string {
	if s.KernelsCommand != "" {
		return s.KernelsCommand
	}
	return irismodel.DefaultKernelsCommand
}

func (r *Rank) loadModule(s *core.PlanSpec) (*loadedModule, error) {
	pkg, module := s.Package, s.Module
	image, err := findKernel(r.opts.Kernels, r.dev.Platform().Name(), s)
	if err != nil {
		return nil, err
	}
	mod, err := r.dev.LoadModule(image)
	if err != nil {
		return nil, &KernelError{Package: pkg, Module: module, Command: kernelsCommand(s),
			Err: fmt.Errorf("loading the code object on GPU %d: %w", r.dev.Ordinal(), err)}
	}
	hash, err := r.readSpecHash(mod, s)
	if err != nil {
		_ = r.dev.UnloadModule(mod)
		return nil, err
	}
	return &loadedModule{mod: mod, hash: hash, fns: map[string]gpu.Function{}}, nil
}

func (r *Rank) readSpecHash(mod gpu.Module, s *core.PlanSpec) (string, error) {
	sym := irismodel.SpecHashSymbol(s.Module)
	fail := func(err error) error {
		return &KernelError{Package: s.Package, Module: s.Module, Err: err, Command: kernelsCommand(s)}
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

// findKernel reads the code object of plan spec s: from fsys
// (Options.Kernels) when given, else from $IRISGEN_KERNELS when set, and
// when it is not there from the code objects s's package embeds
// (s.Embedded). The overrides come first so that freshly built code objects
// can be used without rebuilding the program; the spec hash check catches a
// wrong one.
func findKernel(fsys fs.FS, platform string, s *core.PlanSpec) ([]byte, error) {
	pkg, module := s.Package, s.Module
	name := irismodel.KernelFile(platform, module)
	var looked []string
	miss := func(err error, where string) error {
		if errors.Is(err, fs.ErrNotExist) {
			looked = append(looked, where)
			return nil
		}
		return &KernelError{Package: pkg, Module: module, Command: kernelsCommand(s), Err: fmt.Errorf("reading %s: %w", where, err)}
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
	if s.Embedded != nil {
		p := path.Join("kernels", name)
		b, err := fs.ReadFile(s.Embedded, p)
		if err == nil {
			return b, nil
		}
		if err := miss(err, p+" embedded in "+pkg); err != nil {
			return nil, err
		}
	}
	return nil, &KernelError{Package: pkg, Module: module, Looked: looked, Command: kernelsCommand(s)}
}

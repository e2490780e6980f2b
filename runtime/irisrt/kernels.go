package irisrt

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/irisgen/irisgen/runtime/gpu"
)

// ModulePath is the Go module whose root holds generated/kernels.
const ModulePath = "github.com/irisgen/irisgen"

// KernelFile is the code object file name of module on a platform:
// <module>.fatbin for cuda, <module>.hsaco for hip, <module>.<platform>
// otherwise (test platforms).
func KernelFile(platform, module string) string {
	switch platform {
	case "cuda":
		return module + ".fatbin"
	case "hip":
		return module + ".hsaco"
	}
	return module + "." + platform
}

// SpecHashSymbol is the __device__ char array every module defines with the
// spec hash it was generated from.
func SpecHashSymbol(module string) string { return "irisgen_spec_hash_" + module }

// kernelCache holds a rank's loaded modules and functions.
type kernelCache struct {
	mu   sync.Mutex
	mods map[string]*loadedModule
}

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

// Function returns kernel from module, loading the module on first use and
// checking that its spec hash equals specHash (the Go wrapper's). Missing or
// stale code objects give a *KernelError that says how to rebuild them.
// Plans call it at creation, never in a launch.
func (r *Rank) Function(module, specHash, kernel string) (gpu.Function, error) {
	c := r.kernels // a group shares its world rank's
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mods[module]
	if m == nil {
		var err error
		if m, err = r.loadModule(module); err != nil {
			return 0, err
		}
		if c.mods == nil {
			c.mods = map[string]*loadedModule{}
		}
		c.mods[module] = m
	}
	if m.hash != specHash {
		return 0, &KernelError{Module: module, Kernel: kernel, Stale: true, WantHash: specHash, GotHash: m.hash}
	}
	if f, ok := m.fns[kernel]; ok {
		return f, nil
	}
	f, err := r.dev.Function(m.mod, kernel)
	if err != nil {
		return 0, &KernelError{Module: module, Kernel: kernel, Err: err}
	}
	m.fns[kernel] = f
	return f, nil
}

func (r *Rank) loadModule(module string) (*loadedModule, error) {
	image, err := findKernel(r.opts.Kernels, r.dev.Platform().Name(), module)
	if err != nil {
		return nil, err
	}
	mod, err := r.dev.LoadModule(image)
	if err != nil {
		return nil, &KernelError{Module: module, Err: fmt.Errorf("loading the code object on GPU %d: %w", r.dev.Ordinal(), err)}
	}
	hash, err := r.readSpecHash(mod, module)
	if err != nil {
		_ = r.dev.UnloadModule(mod)
		return nil, err
	}
	return &loadedModule{mod: mod, hash: hash, fns: map[string]gpu.Function{}}, nil
}

func (r *Rank) readSpecHash(mod gpu.Module, module string) (string, error) {
	sym := SpecHashSymbol(module)
	p, size, err := r.dev.Global(mod, sym)
	if err != nil {
		return "", &KernelError{Module: module, Err: fmt.Errorf("the code object has no %s (%w): it was not built from irisgen's generated source; "+
			"regenerate with `go generate` and rebuild with `make kernels`", sym, err)}
	}
	if size <= 0 || size > 4096 {
		return "", &KernelError{Module: module, Err: fmt.Errorf("%s has an implausible size of %d bytes", sym, size)}
	}
	buf := make([]byte, size)
	if err := r.dev.CopyDtoH(unsafe.Pointer(&buf[0]), p, size); err != nil {
		return "", &KernelError{Module: module, Err: fmt.Errorf("reading %s: %w", sym, err)}
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

// findKernel reads the code object of module: from fsys when given, else
// from $IRISGEN_KERNELS, else from generated/kernels under the module root.
func findKernel(fsys fs.FS, platform, module string) ([]byte, error) {
	name := KernelFile(platform, module)
	var looked []string
	if fsys != nil {
		b, err := fs.ReadFile(fsys, name)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, &KernelError{Module: module, Err: fmt.Errorf("reading %s from Options.Kernels: %w", name, err)}
		}
		return nil, &KernelError{Module: module, Looked: []string{name + " in Options.Kernels"}}
	}
	var dirs []string
	if d := os.Getenv("IRISGEN_KERNELS"); d != "" {
		dirs = []string{d}
	} else {
		for _, root := range moduleRoots() {
			dirs = append(dirs, filepath.Join(root, "generated", "kernels"))
		}
		if len(dirs) == 0 {
			looked = append(looked, "generated/kernels (no module root of "+ModulePath+" above the working directory or the executable; set IRISGEN_KERNELS)")
		}
	}
	for _, d := range dirs {
		path := filepath.Join(d, name)
		b, err := os.ReadFile(path)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, &KernelError{Module: module, Err: fmt.Errorf("reading %s: %w", path, err)}
		}
		looked = append(looked, path)
	}
	return nil, &KernelError{Module: module, Looked: looked}
}

// moduleRoots lists the distinct roots of this Go module found by walking up
// from the working directory, from the executable's directory and from this
// package's source directory (which is where `go test` binaries come from).
func moduleRoots() []string {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	var roots []string
	seen := map[string]bool{}
	for _, s := range starts {
		if root := findModuleRoot(s); root != "" && !seen[root] {
			seen[root] = true
			roots = append(roots, root)
		}
	}
	return roots
}

// findModuleRoot walks up from dir to a go.mod declaring ModulePath.
func findModuleRoot(dir string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if isModuleRoot(dir) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`) == ModulePath
		}
	}
	return false
}

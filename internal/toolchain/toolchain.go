// Package toolchain finds the GPU compilers that build irisgen's kernels,
// writes their command lines and checks what they produce.
//
// AMD: one code object file per module, an offload bundle holding one
// AMDGPU ELF per target, built in one compiler run by ROCm's hipcc or by a
// clang in HIP mode (Debian's clang-19 builds gfx942, which Debian's hipcc
// 5.2 does not know). Every bundle is checked before it replaces the old
// one: an ELF per requested target, for that GPU, holding the module's
// symbols. NVIDIA: nvcc, one fatbin per module.
package toolchain

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// The platforms this package registers, and Auto: the first registered
// platform (by Prefer) a compiler here builds for.
const (
	HIP  = "hip"
	CUDA = "cuda"
	Auto = "auto"
)

// A Platform is how kernels are built for one GPU platform. Each registers
// itself (Register), so a platform is added in a file of its own: the
// config's kernels.platform and <name>_arch keys, `irisgen kernels
// -platform` and Auto follow the registry.
type Platform struct {
	Name string
	// Prefer orders Auto's tries, lowest first.
	Prefer int
	// DefaultTargets are built when Options.Targets is empty.
	DefaultTargets []string
	// Find returns the compiler here that builds every target of o (with
	// o.Targets filled), a *NotFoundError or a *TargetError.
	Find func(ctx context.Context, o Options) (*Compiler, error)
	// Builds reports whether the compiler at path builds for the platform
	// (Auto with Options.Compiler).
	Builds func(ctx context.Context, path string) bool
	// Verify, when set, checks a code object a compile made (see Verify).
	Verify func(path string, targets, symbols []string) error
	// Vendor and Install name the vendor and what to install, for
	// NotFoundError.
	Vendor, Install string
}

var platforms []Platform

// Register adds a platform; a name registered twice panics.
func Register(p Platform) {
	if _, ok := Lookup(p.Name); ok || p.Name == Auto {
		panic("toolchain: platform " + p.Name + " registered twice")
	}
	platforms = append(platforms, p)
	sort.SliceStable(platforms, func(i, j int) bool { return platforms[i].Prefer < platforms[j].Prefer })
}

// Platforms are the registered platforms' names, in Auto's order.
func Platforms() []string {
	names := make([]string, len(platforms))
	for i, p := range platforms {
		names[i] = p.Name
	}
	return names
}

// Lookup returns the platform called name.
func Lookup(name string) (Platform, bool) {
	for _, p := range platforms {
		if p.Name == name {
			return p, true
		}
	}
	return Platform{}, false
}

// Kind is the kind of a compiler; it decides the command line.
type Kind int

// Compiler kinds.
const (
	Hipcc Kind = iota + 1 // ROCm's (or Debian's) hipcc driver
	Clang                 // a clang in HIP mode, e.g. Debian's clang++-19
	Nvcc
)

func (k Kind) String() string {
	switch k {
	case Hipcc:
		return "hipcc"
	case Clang:
		return "clang"
	case Nvcc:
		return "nvcc"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Compiler is a compiler found on this machine that builds every target of
// Targets.
type Compiler struct {
	Kind     Kind
	Path     string
	Version  string // as the compiler names itself, e.g. "clang 19.1.7", "HIP 5.2.21153, clang 15.0.6"
	Platform string
	Targets  []string
}

func (c *Compiler) String() string {
	if c.Version == "" {
		return c.Path
	}
	return c.Path + " (" + c.Version + ")"
}

// File is the code object file of module: irismodel.KernelFile, the
// runtime's name for it.
func (c *Compiler) File(module string) string { return irismodel.KernelFile(c.Platform, module) }

// Options says which compiler Find looks for.
type Options struct {
	Platform string   // a registered platform, or Auto
	Targets  []string // empty: the platform's DefaultTargets
	// Compiler is a name on PATH or a path. Empty: $HIPCC (HIP) or $NVCC
	// (CUDA) when set, else searched.
	Compiler string
	LookPath func(string) (string, error) // nil: LookPath
	Getenv   func(string) string          // nil: os.Getenv
}

func (o *Options) lookPath(name string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) {
		if st, err := os.Stat(name); err != nil || st.IsDir() {
			return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
		}
		return name, nil
	}
	if o.LookPath != nil {
		return o.LookPath(name)
	}
	return LookPath(name)
}

func (o *Options) getenv(k string) string {
	if o.Getenv != nil {
		return o.Getenv(k)
	}
	return os.Getenv(k)
}

// LookPath finds a compiler on PATH, then in the usual install directories
// (the CUDA toolkit and ROCm are often not on PATH).
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/local/cuda/bin", "/opt/rocm/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// Find returns the compiler that builds every target of o on this machine.
// Errors: *TargetError for a target the platform does not have, *NotFoundError
// when no compiler here builds them all, or a plain error for a bad platform.
func Find(ctx context.Context, o Options) (*Compiler, error) {
	if p, ok := Lookup(o.Platform); ok {
		if len(o.Targets) == 0 {
			o.Targets = p.DefaultTargets
		}
		return p.Find(ctx, o)
	}
	if o.Platform != Auto {
		return nil, fmt.Errorf("platform %q: want %s or %s", o.Platform, strings.Join(Platforms(), ", "), Auto)
	}
	if o.Compiler != "" {
		// The compiler decides which platform it builds for.
		path, err := o.lookPath(o.Compiler)
		if err != nil {
			return nil, &NotFoundError{Platform: Auto, Targets: o.Targets, Tried: []string{o.Compiler + ": not found"}}
		}
		for _, p := range platforms {
			if p.Builds(ctx, path) {
				o.Platform = p.Name
				return Find(ctx, o)
			}
		}
		o.Platform = platforms[len(platforms)-1].Name
		return Find(ctx, o)
	}
	var last error
	for _, p := range platforms {
		o := o
		o.Platform = p.Name
		c, err := Find(ctx, o)
		if err == nil {
			return c, nil
		}
		last = err
	}
	var nf *NotFoundError
	if errors.As(last, &nf) {
		nf.Platform = Auto
	}
	return nil, last
}

// Choose is Find with the targets a configuration gives per platform
// (configured) where o gives none: with a platform named, its configured
// targets; with Auto, those of the platform the compiler found turns out
// to be (else its defaults).
func Choose(ctx context.Context, o Options, configured map[string][]string) (*Compiler, error) {
	if len(o.Targets) == 0 && o.Platform != Auto {
		o.Targets = configured[o.Platform]
	}
	c, err := Find(ctx, o)
	if err == nil && len(o.Targets) == 0 && len(configured[c.Platform]) > 0 {
		o.Platform, o.Targets = c.Platform, configured[c.Platform]
		c, err = Find(ctx, o)
	}
	return c, err
}

// TargetError is a target the platform does not have.
type TargetError struct {
	Platform, Target string
	Why              string
}

func (e *TargetError) Error() string {
	return fmt.Sprintf("%s target %q: %s", e.Platform, e.Target, e.Why)
}

// NotFoundError says that no compiler found here builds the targets, and
// what each candidate lacked.
type NotFoundError struct {
	Platform string
	Targets  []string
	Tried    []string // "hipcc: HIP 5.2, clang 15: does not know gfx942"
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	if e.Platform == Auto {
		b.WriteString("no GPU compiler found")
	} else {
		fmt.Fprintf(&b, "no %s compiler here builds %s", e.Platform, strings.Join(e.Targets, ","))
	}
	for _, t := range e.Tried {
		b.WriteString("; " + t)
	}
	if p, ok := Lookup(e.Platform); ok {
		b.WriteString(": " + p.Install)
		return b.String()
	}
	for i, p := range platforms {
		sep := ": for "
		if i > 0 {
			sep = "; for "
		}
		b.WriteString(sep + p.Vendor + " " + p.Install)
	}
	return b.String()
}

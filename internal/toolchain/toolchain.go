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
	"regexp"
	"strings"
)

// Platforms of Options.Platform.
const (
	HIP  = "hip"
	CUDA = "cuda"
	Auto = "auto" // CUDA when nvcc is found, else HIP
)

// DefaultTargets are the targets built when Options.Targets is empty.
var DefaultTargets = map[string][]string{
	// MI200 and MI300X/MI300A/MI325X. gfx940 and gfx941 (pre-production
	// MI300) are left out: LLVM 21 and ROCm 7 no longer know them.
	HIP:  {"gfx90a", "gfx942"},
	CUDA: {"90"},
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

// Ext is the file extension of the code objects: ".hsaco" or ".fatbin".
func (c *Compiler) Ext() string {
	if c.Platform == CUDA {
		return ".fatbin"
	}
	return ".hsaco"
}

// Options says which compiler Find looks for.
type Options struct {
	Platform string   // HIP, CUDA or Auto
	Targets  []string // empty: DefaultTargets of the platform
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
	switch o.Platform {
	case HIP:
		return findHIP(ctx, o)
	case CUDA:
		return findCUDA(o)
	case Auto:
		if o.Compiler != "" {
			// The compiler decides: nvcc says so in its --version.
			p, err := o.lookPath(o.Compiler)
			if err != nil {
				return nil, &NotFoundError{Platform: Auto, Targets: o.Targets, Tried: []string{o.Compiler + ": not found"}}
			}
			if out, _ := exec.CommandContext(ctx, p, "--version").CombinedOutput(); strings.Contains(string(out), "Cuda compilation tools") {
				return findCUDA(o)
			}
			return findHIP(ctx, o)
		}
		if c, err := findCUDA(o); err == nil {
			return c, nil
		}
		c, err := findHIP(ctx, o)
		var nf *NotFoundError
		if errors.As(err, &nf) {
			nf.Platform = Auto
		}
		return c, err
	}
	return nil, fmt.Errorf("platform %q: want %s, %s or %s", o.Platform, CUDA, HIP, Auto)
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
	switch e.Platform {
	case Auto:
		b.WriteString("no GPU compiler found")
	default:
		fmt.Fprintf(&b, "no %s compiler here builds %s", e.Platform, strings.Join(e.Targets, ","))
	}
	for _, t := range e.Tried {
		b.WriteString("; " + t)
	}
	switch e.Platform {
	case CUDA:
		b.WriteString(": install the CUDA toolkit (nvcc) or set NVCC")
	case HIP:
		b.WriteString(": " + amdInstallHint)
	default:
		b.WriteString(": for AMD " + amdInstallHint + "; for NVIDIA install the CUDA toolkit (nvcc)")
	}
	return b.String()
}

// amdInstallHint says what to install for the AMD targets.
const amdInstallHint = "install clang-19 (apt-get install clang-19 clang-tools-19 lld-19 llvm-19 hipcc; " +
	"it builds gfx90a, gfx940, gfx941 and gfx942) or ROCm 6's hipcc, or set HIPCC; " +
	"gfx950 needs LLVM 20 (clang++-20) or ROCm 7's hipcc"

func findCUDA(o Options) (*Compiler, error) {
	targets := o.Targets
	if len(targets) == 0 {
		targets = DefaultTargets[CUDA]
	}
	var norm []string
	for _, t := range targets {
		n := strings.TrimPrefix(strings.TrimPrefix(t, "sm_"), "compute_")
		if !ccRE.MatchString(n) {
			return nil, &TargetError{Platform: CUDA, Target: t, Why: "want a compute capability such as 90, sm_90 or 90a"}
		}
		norm = append(norm, n)
	}
	name := o.Compiler
	if name == "" {
		name = o.getenv("NVCC")
	}
	if name == "" {
		name = "nvcc"
	}
	p, err := o.lookPath(name)
	if err != nil {
		return nil, &NotFoundError{Platform: CUDA, Targets: norm, Tried: []string{name + ": not found"}}
	}
	return &Compiler{Kind: Nvcc, Path: p, Platform: CUDA, Targets: norm}, nil
}

// ccRE is a compute capability as nvcc's -gencode takes it.
var ccRE = regexp.MustCompile(`^[0-9]+[a-z]?$`)

// nvccArgs is nvcc's command line for one file.
func nvccArgs(targets []string, include, src, dst string) []string {
	a := []string{"-fatbin", "-O3"}
	for _, t := range targets {
		a = append(a, "-gencode", "arch=compute_"+t+",code=sm_"+t)
	}
	return append(a, "-DIRISGEN_CUDA", "-I"+include, "-o", dst, "-x", "cu", src)
}

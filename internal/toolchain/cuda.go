package toolchain

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
)

// NVIDIA: nvcc, one fatbin per module, built for every compute capability
// of the targets.
func init() {
	Register(Platform{Name: CUDA, Prefer: 0, DefaultTargets: []string{"90"}, Find: findCUDA, Builds: isNvcc,
		Vendor: "NVIDIA", Install: "install the CUDA toolkit (nvcc) or set NVCC"})
}

// isNvcc reports whether the compiler at path is nvcc: it says so in its
// --version.
func isNvcc(ctx context.Context, path string) bool {
	out, _ := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	return strings.Contains(string(out), "Cuda compilation tools")
}

func findCUDA(ctx context.Context, o Options) (*Compiler, error) {
	var norm []string
	for _, t := range o.Targets {
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

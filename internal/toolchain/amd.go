package toolchain

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// amdMach maps the AMD GPUs irisgen's kernels run on to the EF_AMDGPU_MACH
// value of their code objects (llvm/BinaryFormat/ELF.h). Only CDNA GPUs:
// the device header reads s_memrealtime as a 100 MHz clock and was written
// for 64-wide wavefronts.
var amdMach = map[string]uint32{
	"gfx90a": 0x03f, // MI200
	"gfx940": 0x040, // pre-production MI300; LLVM 15-20
	"gfx941": 0x04b, // pre-production MI300; LLVM 17-20
	"gfx942": 0x04c, // MI300X, MI300A, MI325X; LLVM 17
	"gfx950": 0x04f, // MI350X, MI355X; LLVM 20
}

// amdProcessor checks an AMD target ID ("gfx942", "gfx90a:xnack-",
// "gfx942:sramecc+:xnack+") and returns its processor.
func amdProcessor(target string) (string, error) {
	parts := strings.Split(target, ":")
	proc := parts[0]
	if _, ok := amdMach[proc]; !ok {
		known := make([]string, 0, len(amdMach))
		for k := range amdMach {
			known = append(known, k)
		}
		sort.Strings(known)
		return "", &TargetError{Platform: HIP, Target: target, Why: "irisgen's AMD kernels are for " + strings.Join(known, ", ")}
	}
	for _, f := range parts[1:] {
		switch f {
		case "xnack+", "xnack-", "sramecc+", "sramecc-":
		default:
			return "", &TargetError{Platform: HIP, Target: target, Why: fmt.Sprintf("feature %q: want xnack+, xnack-, sramecc+ or sramecc-", f)}
		}
	}
	return proc, nil
}

// isaVersion is the __oclc_ISA_version the ROCm device libraries define for
// a processor: gfx<major><minor><stepping>, the last two hex digits, as
// major*1000 + minor*100 + stepping (gfx90a 9010, gfx942 9402).
func isaVersion(proc string) (int, error) {
	s := strings.TrimPrefix(proc, "gfx")
	if len(s) < 3 || s == proc {
		return 0, fmt.Errorf("%q is not a gfx processor", proc)
	}
	major, err := strconv.Atoi(s[:len(s)-2])
	minor, err2 := strconv.ParseUint(s[len(s)-2:len(s)-1], 16, 8)
	step, err3 := strconv.ParseUint(s[len(s)-1:], 16, 8)
	if err != nil || err2 != nil || err3 != nil {
		return 0, fmt.Errorf("%q is not a gfx processor", proc)
	}
	return major*1000 + int(minor)*100 + int(step), nil
}

// amdCandidates are the compilers Find tries for HIP, in order: ROCm's
// hipcc, then clangs, newest first. The first that builds every target wins.
var amdCandidates = []string{"hipcc", "clang++-22", "clang++-21", "clang++-20", "clang++-19", "clang++-18", "clang++-17", "clang++"}

// AMD: one offload bundle per module, built by hipcc or a clang in HIP
// mode, checked (Verify) before it is written.
func init() {
	Register(Platform{Name: HIP, Prefer: 1,
		// MI200 and MI300X/MI300A/MI325X. gfx940 and gfx941 (pre-production
		// MI300) are left out: LLVM 21 and ROCm 7 no longer know them.
		DefaultTargets: []string{"gfx90a", "gfx942"},
		Find:           findHIP, Builds: func(context.Context, string) bool { return true }, Verify: Verify,
		Vendor: "AMD", Install: amdInstallHint})
}

// amdInstallHint says what to install for the AMD targets.
const amdInstallHint = "install clang-19 (apt-get install clang-19 clang-tools-19 lld-19 llvm-19 hipcc; " +
	"it builds gfx90a, gfx940, gfx941 and gfx942) or ROCm 6's hipcc, or set HIPCC; " +
	"gfx950 needs LLVM 20 (clang++-20) or ROCm 7's hipcc"

func findHIP(ctx context.Context, o Options) (*Compiler, error) {
	targets := o.Targets
	for _, t := range targets {
		if _, err := amdProcessor(t); err != nil {
			return nil, err
		}
	}
	names := amdCandidates
	explicit := o.Compiler
	if explicit == "" {
		explicit = o.getenv("HIPCC")
	}
	if explicit != "" {
		names = []string{explicit}
	}
	nf := &NotFoundError{Platform: HIP, Targets: targets}
	for _, name := range names {
		p, err := o.lookPath(name)
		if err != nil {
			if explicit != "" {
				nf.Tried = append(nf.Tried, name+": not found")
			}
			continue
		}
		c, err := identify(ctx, p)
		if err != nil {
			nf.Tried = append(nf.Tried, err.Error())
			continue
		}
		c.Platform, c.Targets = HIP, targets
		if err := c.probe(ctx); err != nil {
			nf.Tried = append(nf.Tried, err.Error())
			continue
		}
		return c, nil
	}
	if len(nf.Tried) == 0 {
		nf.Tried = []string{"neither hipcc nor clang++-17 or later found"}
	}
	return nil, nf
}

var (
	hipVersionRE   = regexp.MustCompile(`HIP version: ([0-9][0-9.]*)`)
	clangVersionRE = regexp.MustCompile(`clang version ([0-9][0-9.]*)`)
)

// hipccEnv keeps hipcc on AMD: it compiles for NVIDIA when it finds nvcc.
var hipccEnv = []string{"HIP_PLATFORM=amd"}

// identify runs `path --version` and tells hipcc from a clang.
func identify(ctx context.Context, path string) (*Compiler, error) {
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = append(os.Environ(), hipccEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %v: %s", path, err, firstLine(out))
	}
	c := &Compiler{Path: path}
	clang := clangVersionRE.FindSubmatch(out)
	if m := hipVersionRE.FindSubmatch(out); m != nil {
		c.Kind, c.Version = Hipcc, "HIP "+string(m[1])
		if clang != nil {
			c.Version += ", clang " + string(clang[1])
		}
		return c, nil
	}
	if clang == nil {
		return nil, fmt.Errorf("%s: neither hipcc nor clang (its --version says %q)", path, firstLine(out))
	}
	c.Kind, c.Version = Clang, "clang "+string(clang[1])
	return c, nil
}

var invalidTargetRE = regexp.MustCompile(`(?i)(?:invalid target ID|unsupported CUDA gpu architecture|unsupported HIP gpu architecture)[: ]*'?([A-Za-z0-9_:+-]*)`)

// probe asks the compiler to check its targets on an empty file: the
// first check that this compiler knows them.
func (c *Compiler) probe(ctx context.Context) error {
	args := []string{"-x", "hip", "--cuda-device-only", "-nogpulib", "-nogpuinc", "-fsyntax-only"}
	for _, t := range c.Targets {
		args = append(args, "--offload-arch="+t)
	}
	cmd := exec.CommandContext(ctx, c.Path, append(args, os.DevNull)...)
	cmd.Env = append(os.Environ(), hipccEnv...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if m := invalidTargetRE.FindSubmatch(out); m != nil {
			return fmt.Errorf("%s: does not know %s", c, m[1])
		}
		return fmt.Errorf("%s cannot compile for %s: %v: %s", c, strings.Join(c.Targets, ","), err, firstLine(errorLines(out)))
	}
	if c.Kind == Clang {
		return c.helpers(ctx)
	}
	return nil
}

// clangHelpers are the programs a clang in HIP mode runs besides itself to
// write an offload bundle, with the Debian package of LLVM NN that has
// them: a syntax check does not run them, so a clang without them would
// pass the probe and fail every compile.
var clangHelpers = []struct{ prog, pkg string }{
	{"clang-offload-bundler", "clang-tools"}, // writes the bundle
	{"ld.lld", "lld"},                        // links each target's code object
}

// helpers asks the clang where its helper programs are (it answers with
// the bare name when it has none) and says which are missing and what to
// install.
func (c *Compiler) helpers(ctx context.Context) error {
	var missing, pkgs []string
	for _, h := range clangHelpers {
		out, err := exec.CommandContext(ctx, c.Path, "-print-prog-name="+h.prog).Output()
		if err != nil {
			return fmt.Errorf("%s -print-prog-name=%s: %v", c, h.prog, err)
		}
		if !filepath.IsAbs(strings.TrimSpace(string(out))) {
			missing = append(missing, h.prog)
			pkg := h.pkg
			if m := clangMajorRE.FindStringSubmatch(c.Version); m != nil {
				pkg += "-" + m[1]
			}
			pkgs = append(pkgs, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s: has no %s, which it runs to write offload bundles (Debian and Ubuntu: apt-get install %s)",
		c, strings.Join(missing, " or "), strings.Join(pkgs, " "))
}

// clangMajorRE finds the major version in Compiler.Version ("clang 19.1.7").
var clangMajorRE = regexp.MustCompile(`^clang ([0-9]+)\.`)

// hipArgs is the command line of hipcc or a clang for one file; devLibs is
// the device-library directory a clang is given ("" to leave its default).
func hipArgs(kind Kind, targets []string, devLibs, include, src, dst string) []string {
	var a []string
	if kind == Hipcc {
		a = []string{"--genco"}
	} else {
		// What hipcc --genco does, spelled out: device code only, one
		// offload bundle for every target. Code object v5 explicitly:
		// clang 19 otherwise links the device libraries' v4 ABI into v5
		// objects.
		a = []string{"-x", "hip", "--cuda-device-only", "--gpu-bundle-output", "-mcode-object-version=5"}
	}
	for _, t := range targets {
		a = append(a, "--offload-arch="+t)
	}
	if devLibs != "" {
		a = append(a, "--rocm-device-lib-path="+devLibs)
	}
	return append(a, "-O3", "-I"+include, "-o", dst, src)
}

// deviceLibDirs lists where the ROCm device libraries (ockl.bc, ...) may
// be, in the order clang searches: ROCm, then the distribution's
// (Debian's rocm-device-libs installs them under /usr/lib/<triple>).
func deviceLibDirs(getenv func(string) string) []string {
	var dirs []string
	if p := getenv("HIP_DEVICE_LIB_PATH"); p != "" {
		dirs = append(dirs, p)
	}
	if p := getenv("ROCM_PATH"); p != "" {
		dirs = append(dirs, filepath.Join(p, "amdgcn", "bitcode"))
	}
	dirs = append(dirs, "/opt/rocm/amdgcn/bitcode")
	multi, _ := filepath.Glob("/usr/lib/*/amdgcn/bitcode")
	sort.Strings(multi)
	dirs = append(dirs, multi...)
	return append(dirs, "/usr/lib/amdgcn/bitcode", "/usr/local/amdgcn/bitcode")
}

// deviceLibs returns the device-library directory to give a clang for
// targets: the first of dirs that holds ockl.bc, or, when that one lacks
// the ISA-version library of a target (Debian's rocm-device-libs 5.2 stops
// at gfx940), a directory in tmp that links every library of it and adds
// the missing ones, made by mkISA. "" when no directory has the libraries:
// the clang then looks itself and says what it misses.
func deviceLibs(dirs, targets []string, tmp string, mkISA func(path string, version int) error) (string, error) {
	src := ""
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(d, "ockl.bc")); err == nil && !st.IsDir() {
			src = d
			break
		}
	}
	if src == "" {
		return "", nil
	}
	missing := map[string]int{}
	for _, t := range targets {
		proc, err := amdProcessor(t)
		if err != nil {
			return "", err
		}
		v, err := isaVersion(proc)
		if err != nil {
			return "", err
		}
		name := "oclc_isa_version_" + strings.TrimPrefix(proc, "gfx") + ".bc"
		if _, err := os.Stat(filepath.Join(src, name)); err != nil {
			missing[name] = v
		}
	}
	if len(missing) == 0 {
		return src, nil
	}
	dir := filepath.Join(tmp, "device-libs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	libs, err := filepath.Glob(filepath.Join(src, "*.bc"))
	if err != nil {
		return "", err
	}
	for _, l := range libs {
		if err := os.Symlink(l, filepath.Join(dir, filepath.Base(l))); err != nil {
			return "", err
		}
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := mkISA(filepath.Join(dir, n), missing[n]); err != nil {
			return "", fmt.Errorf("making %s for %s: %w", n, src, err)
		}
	}
	return dir, nil
}

// isaLibrary compiles the ISA-version library of one processor with the
// clang itself, from the one line the ROCm device libraries build it from
// (amd/device-libs/oclc/src/isa_version_942.cl upstream).
func (c *Compiler) isaLibrary(ctx context.Context, path string, version int) error {
	src := strings.TrimSuffix(path, ".bc") + ".cl"
	if err := os.WriteFile(src, []byte(fmt.Sprintf("const __constant int __oclc_ISA_version = %d;\n", version)), 0o644); err != nil {
		return err
	}
	defer os.Remove(src)
	out, err := exec.CommandContext(ctx, c.Path, "-x", "cl", "-cl-std=CL2.0", "--target=amdgcn-amd-amdhsa", "-nogpulib",
		"-fvisibility=protected", "-Xclang", "-mcode-object-version=none", "-O1", "-emit-llvm", "-c", "-o", path, src).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", c.Path, err, firstLine(errorLines(out)))
	}
	return nil
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}

// errorLines keeps the lines of compiler output that say "error", so that
// warnings do not hide the cause.
func errorLines(out []byte) []byte {
	var keep [][]byte
	for _, l := range bytes.Split(out, []byte("\n")) {
		if bytes.Contains(l, []byte("error")) {
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return out
	}
	return bytes.Join(keep, []byte("\n"))
}

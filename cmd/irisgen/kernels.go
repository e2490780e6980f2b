package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/cli"
)

func init() {
	register(&cli.Command{
		Name:    "kernels",
		Summary: "compile the generated HIP kernels with hipcc or nvcc",
		Usage:   "kernels [-config FILE] [-out DIR] [-package NAME] [-kernels-out DIR] [-platform cuda|hip|auto] [-arch LIST] [-j N]",
		Help: `
Kernels compiles every OUT/hip/*.hip in parallel into code objects the runtime
loads, written next to the generated package, in OUT/PACKAGE/kernels, which
the package embeds (rebuild the Go program after this): with hipcc into
<collective>.hsaco (one bundle for every -arch, default gfx90a,gfx940), with
nvcc into <collective>.fatbin (default arch 90, i.e. sm_90). OUT, PACKAGE, the
platform and the targets come from irisgen.yaml (kernels: platform, hip_arch,
cuda_arch) unless a flag says otherwise. The portable device header is the
one built into irisgen, so downstream repositories need no copy of it.
-platform auto picks nvcc when it is installed, else hipcc. Compiler errors
and warnings are printed with the file that caused them; the exit code is 1
when any file fails. Set HIPCC or NVCC to use a compiler that is not on PATH.

Examples:
  irisgen kernels
  irisgen kernels -platform hip -arch gfx90a,gfx940,gfx942
  irisgen kernels -platform cuda -arch 80,90 -kernels-out build/kernels
  irisgen kernels -out internal/coll -package coll -j 4`,
		Run: runKernels,
	})
}

// toolchain is one way of compiling a .hip file.
type toolchain struct {
	platform string // "hip" or "cuda"
	tool     string // the compiler's name, for messages
	env      string // variable that overrides the compiler path
	ext      string // code object extension
	arch     string // default -arch
	// extraEnv is added to the compiler's environment.
	extraEnv []string
	// args are the compiler arguments for one file.
	args func(archs []string, include, src, dst string) []string
}

var toolchains = map[string]toolchain{
	"hip": {
		platform: "hip", tool: "hipcc", env: "HIPCC", ext: ".hsaco", arch: "gfx90a,gfx940",
		// hipcc compiles for NVIDIA when it finds nvcc, unless told otherwise.
		extraEnv: []string{"HIP_PLATFORM=amd"},
		args: func(archs []string, include, src, dst string) []string {
			a := []string{"--genco"}
			for _, x := range archs {
				a = append(a, "--offload-arch="+x)
			}
			return append(a, "-O3", "-I"+include, "-o", dst, src)
		},
	},
	"cuda": {
		platform: "cuda", tool: "nvcc", env: "NVCC", ext: ".fatbin", arch: "90",
		args: func(archs []string, include, src, dst string) []string {
			a := []string{"-fatbin", "-O3"}
			for _, x := range archs {
				x = strings.TrimPrefix(strings.TrimPrefix(x, "sm_"), "compute_")
				a = append(a, "-gencode", "arch=compute_"+x+",code=sm_"+x)
			}
			return append(a, "-DIRISGEN_CUDA", "-I"+include, "-o", dst, "-x", "cu", src)
		},
	},
}

// lookPath finds a compiler: $HIPCC/$NVCC, then PATH, then the usual
// install directories (the CUDA toolkit is often not on PATH).
func lookPath(name string) (string, error) {
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

// findCompiler is lookPath; tests replace it.
var findCompiler = lookPath

func compiler(tc toolchain) (string, error) {
	if p := os.Getenv(tc.env); p != "" {
		return p, nil
	}
	return findCompiler(tc.tool)
}

const noCompiler = "no GPU compiler found: install hipcc (apt-get install hipcc) or the CUDA toolkit (nvcc)"

// install says how to get each platform's compiler.
var install = map[string]string{
	"hip":  "install hipcc (apt-get install hipcc) or set HIPCC",
	"cuda": "install the CUDA toolkit (nvcc, https://developer.nvidia.com/cuda-downloads) or set NVCC",
}

// pickToolchain resolves -platform to a toolchain and its compiler.
func pickToolchain(platform string) (toolchain, string, error) {
	switch platform {
	case "hip", "cuda":
		tc := toolchains[platform]
		p, err := compiler(tc)
		if err != nil {
			return tc, "", cli.Fail(fmt.Errorf("%s not found for -platform %s; %s", tc.tool, platform, install[platform]))
		}
		return tc, p, nil
	case "auto":
		for _, name := range []string{"cuda", "hip"} {
			tc := toolchains[name]
			if p, err := compiler(tc); err == nil {
				return tc, p, nil
			}
		}
		return toolchain{}, "", cli.Fail(errors.New(noCompiler))
	}
	return toolchain{}, "", cli.UsageErr("-platform %q: want cuda, hip or auto", platform)
}

func runKernels(env *cli.Env, args []string) error {
	c := program.Find("kernels")
	fs := env.Flags(c)
	src := addSourceFlags(fs, false, true)
	kout := fs.String("kernels-out", "", "where the code objects go (default OUT/PACKAGE/kernels, which the generated package embeds)")
	platform := fs.String("platform", "", "cuda (nvcc), hip (hipcc) or auto (nvcc if installed, else hipcc); default: the config's kernels.platform, else auto")
	arch := fs.String("arch", "", "comma-separated targets (default: the config's kernels.hip_arch or cuda_arch, else gfx90a,gfx940 for hip and 90 for cuda)")
	jobs := fs.Int("j", runtime.NumCPU(), "files compiled in parallel")
	if err := env.Parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageErr("unexpected arguments %q", fs.Args())
	}
	if *jobs < 1 {
		return cli.UsageErr("-j %d: want at least 1", *jobs)
	}
	cfg, err := src.resolve(env)
	if err != nil {
		return err
	}
	if *platform == "" {
		*platform = cfg.Kernels.Platform
	}
	tc, cc, err := pickToolchain(*platform)
	if err != nil {
		return err
	}
	archs := cli.SplitList(*arch)
	if len(archs) == 0 {
		archs = map[string][]string{"hip": cfg.Kernels.HIPArch, "cuda": cfg.Kernels.CUDAArch}[tc.platform]
	}
	if len(archs) == 0 {
		archs = cli.SplitList(tc.arch)
	}
	hipDir := filepath.Join(cfg.Out, "hip")
	srcs, err := filepath.Glob(filepath.Join(hipDir, "*.hip"))
	if err != nil {
		return err
	}
	sort.Strings(srcs)
	if len(srcs) == 0 {
		return cli.Fail(fmt.Errorf("no kernels in %s; run `irisgen generate` first", shown(hipDir)))
	}
	dst := cfg.KernelsDir()
	if *kout != "" {
		dst = *kout
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	include, cleanup, err := writeInclude()
	if err != nil {
		return err
	}
	defer cleanup()

	fmt.Fprintf(env.Stdout, "compiling %d kernel file%s with %s (%s) into %s\n", len(srcs), cli.Plural(len(srcs)), cc, strings.Join(archs, ","), shown(dst))
	failed := compileAll(env, srcs, *jobs, func(src string) ([]byte, error) {
		// The runtime's name for the code object (irisrt.KernelFile; a test
		// keeps the two in step without linking the runtime in here).
		obj := filepath.Join(dst, strings.TrimSuffix(filepath.Base(src), ".hip")+tc.ext)
		tmp := obj + ".tmp"
		cmd := exec.CommandContext(context.Background(), cc, tc.args(archs, include, src, tmp)...)
		if len(tc.extraEnv) > 0 {
			cmd.Env = append(os.Environ(), tc.extraEnv...)
		}
		outb, err := cmd.CombinedOutput()
		if err != nil {
			os.Remove(tmp)
			return outb, err
		}
		return outb, os.Rename(tmp, obj) // never leave a half-written code object under the real name
	})
	if failed > 0 {
		return cli.Fail(fmt.Errorf("%d of %d kernel files failed to compile", failed, len(srcs)))
	}
	fmt.Fprintf(env.Stdout, "ok: %d code object%s in %s\n", len(srcs), cli.Plural(len(srcs)), shown(dst))
	return nil
}

// compileAll runs compile on every file with jobs workers, printing a
// progress line per finished file and the compiler's output (errors of a
// failure, warnings of a success) to stderr. It returns the number of
// failures.
func compileAll(env *cli.Env, srcs []string, jobs int, compile func(string) ([]byte, error)) int {
	var (
		mu     sync.Mutex
		done   int
		failed int
		wg     sync.WaitGroup
	)
	next := make(chan string)
	for w := 0; w < min(jobs, len(srcs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for src := range next {
				out, err := compile(src)
				mu.Lock()
				done++
				fmt.Fprintf(env.Stdout, "[%d/%d] %s\n", done, len(srcs), filepath.Base(src))
				if err != nil {
					failed++
					fmt.Fprintf(env.Stderr, "%s: compile failed: %v\n", shown(src), err)
				} else if len(bytes.TrimSpace(out)) > 0 {
					fmt.Fprintf(env.Stderr, "%s: compiled, with this output from the compiler:\n", shown(src))
				}
				if len(bytes.TrimSpace(out)) > 0 {
					fmt.Fprintf(env.Stderr, "%s\n", bytes.TrimRight(out, "\n"))
				}
				mu.Unlock()
			}
		}()
	}
	for _, s := range srcs {
		next <- s
	}
	close(next)
	wg.Wait()
	return failed
}

// writeInclude writes the device header built into irisgen to a temporary
// directory and returns the directory to pass as -I.
func writeInclude() (string, func(), error) {
	tmp, err := os.MkdirTemp("", "irisgen-include-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	err = fs.WalkDir(irisgen.Include, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := fs.ReadFile(irisgen.Include, p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return filepath.Join(tmp, "runtime", "include"), cleanup, nil
}

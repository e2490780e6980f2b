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
)

func init() {
	register(&command{
		name:    "kernels",
		summary: "compile the generated HIP kernels with hipcc or nvcc",
		usage:   "kernels [-out DIR] [-kernels-out DIR] [-platform cuda|hip|auto] [-arch LIST] [-j N]",
		help: `
Kernels compiles every OUT/hip/*.hip in parallel into code objects the runtime
loads: with hipcc into KERNELS/<collective>.hsaco (one bundle for every
-arch, default gfx90a,gfx940), with nvcc into KERNELS/<collective>.fatbin
(default arch 90, i.e. sm_90). The portable device header is the one built
into irisgen, so downstream repositories need no copy of it. -platform auto
picks nvcc when it is installed, else hipcc. Compiler errors are printed with
the file that caused them; the exit code is 1 when any file fails.
Set HIPCC or NVCC to use a compiler that is not on PATH.

Examples:
  irisgen kernels
  irisgen kernels -platform hip -arch gfx90a,gfx940,gfx942
  irisgen kernels -platform cuda -arch 80,90 -kernels-out build/kernels
  irisgen kernels -out internal/coll -j 4`,
		run: runKernels,
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

func (env *cmdEnv) compiler(tc toolchain) (string, error) {
	if p := os.Getenv(tc.env); p != "" {
		return p, nil
	}
	return env.lookPath(tc.tool)
}

const noCompiler = "no GPU compiler found: install hipcc (apt-get install hipcc) or the CUDA toolkit (nvcc)"

// pickToolchain resolves -platform to a toolchain and its compiler.
func (env *cmdEnv) pickToolchain(platform string) (toolchain, string, error) {
	switch platform {
	case "hip", "cuda":
		tc := toolchains[platform]
		p, err := env.compiler(tc)
		if err != nil {
			return tc, "", &exitError{code: 1, err: fmt.Errorf("%s not found for -platform %s; %s", tc.tool, platform, strings.TrimPrefix(noCompiler, "no GPU compiler found: "))}
		}
		return tc, p, nil
	case "auto":
		for _, name := range []string{"cuda", "hip"} {
			tc := toolchains[name]
			if p, err := env.compiler(tc); err == nil {
				return tc, p, nil
			}
		}
		return toolchain{}, "", &exitError{code: 1, err: errors.New(noCompiler)}
	}
	return toolchain{}, "", usageErr("-platform %q: want cuda, hip or auto", platform)
}

func runKernels(env *cmdEnv, args []string) error {
	c := find("kernels")
	fs := env.flags(c)
	out := fs.String("out", "generated", "output root of `irisgen generate`; the sources are OUT/hip/*.hip")
	kout := fs.String("kernels-out", "", "where the code objects go (default OUT/kernels)")
	platform := fs.String("platform", "auto", "cuda (nvcc), hip (hipcc) or auto (nvcc if installed, else hipcc)")
	arch := fs.String("arch", "", "comma-separated targets (default gfx90a,gfx940 for hip, 90 for cuda)")
	jobs := fs.Int("j", runtime.NumCPU(), "files compiled in parallel")
	if err := env.parse(c, fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected arguments %q", fs.Args())
	}
	if *jobs < 1 {
		return usageErr("-j %d: want at least 1", *jobs)
	}
	tc, cc, err := env.pickToolchain(*platform)
	if err != nil {
		return err
	}
	archs := splitList(*arch)
	if len(archs) == 0 {
		archs = splitList(tc.arch)
	}
	srcs, err := filepath.Glob(filepath.Join(*out, "hip", "*.hip"))
	if err != nil {
		return err
	}
	sort.Strings(srcs)
	if len(srcs) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("no kernels in %s; run `irisgen generate` first", filepath.Join(*out, "hip"))}
	}
	dst := *kout
	if dst == "" {
		dst = filepath.Join(*out, "kernels")
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	include, cleanup, err := writeInclude()
	if err != nil {
		return err
	}
	defer cleanup()

	fmt.Fprintf(env.stdout, "compiling %d kernel file%s with %s (%s) into %s\n", len(srcs), plural(len(srcs)), cc, strings.Join(archs, ","), dst)
	failed := compileAll(env, srcs, *jobs, func(src string) ([]byte, error) {
		base := strings.TrimSuffix(filepath.Base(src), ".hip")
		obj := filepath.Join(dst, base+tc.ext)
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
		return &exitError{code: 1, err: fmt.Errorf("%d of %d kernel files failed to compile", failed, len(srcs))}
	}
	fmt.Fprintf(env.stdout, "ok: %d code object%s in %s\n", len(srcs), plural(len(srcs)), dst)
	return nil
}

// compileAll runs compile on every file with jobs workers, printing a
// progress line per finished file and the compiler output of failures.
// It returns the number of failures.
func compileAll(env *cmdEnv, srcs []string, jobs int, compile func(string) ([]byte, error)) int {
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
				fmt.Fprintf(env.stdout, "[%d/%d] %s\n", done, len(srcs), filepath.Base(src))
				if err != nil {
					failed++
					fmt.Fprintf(env.stderr, "%s: compile failed: %v\n", src, err)
					if len(bytes.TrimSpace(out)) > 0 {
						fmt.Fprintf(env.stderr, "%s\n", bytes.TrimRight(out, "\n"))
					}
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

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

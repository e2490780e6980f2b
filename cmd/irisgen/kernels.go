package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/toolchain"
)

func init() {
	register(&command{
		name:    "kernels",
		summary: "compile the generated HIP kernels with hipcc, clang or nvcc",
		usage:   "kernels [-out DIR] [-kernels-out DIR] [-platform cuda|hip|auto] [-arch LIST] [-compiler CC] [-j N]",
		help: `
Kernels compiles every OUT/hip/*.hip in parallel into code objects the runtime
loads. AMD (-platform hip): KERNELS/<collective>.hsaco, one offload bundle
holding a code object for every -arch target (default gfx90a,gfx942; also
gfx940, gfx941 and gfx950), built by the first of hipcc, clang++-22 ...
clang++-17, clang++ that knows every target: Debian's hipcc 5.2 builds
gfx90a and gfx940, Debian's clang-19 (apt-get install clang-19 clang-tools-19
lld-19 llvm-19 hipcc) also gfx941 and gfx942, and gfx950 needs LLVM 20 or
ROCm 7's hipcc. Every bundle is checked before it is written: one AMDGPU
ELF per target, for that GPU, holding the module's kernels and spec hash.
NVIDIA (-platform cuda): KERNELS/<collective>.fatbin with nvcc (default
arch 90, i.e. sm_90). -platform auto picks nvcc when it is installed, else
AMD. The portable device header is the one built into irisgen, so
downstream repositories need no copy of it. Compiler errors are printed with
the file that caused them; the exit code is 1 when any file fails.
-compiler (or HIPCC, NVCC) names the compiler to use instead; with
-platform auto, nvcc or not decides the platform.

Examples:
  irisgen kernels
  irisgen kernels -platform hip -arch gfx90a,gfx940,gfx942 -compiler clang++-19
  irisgen kernels -platform cuda -arch 80,90 -kernels-out build/kernels
  irisgen kernels -out internal/coll -j 4`,
		run: runKernels,
	})
}

// lookPath finds compilers (cmdEnv.lookPath; tests replace it).
var lookPath = toolchain.LookPath

func runKernels(env *cmdEnv, args []string) error {
	c := find("kernels")
	fs := env.flags(c)
	out := fs.String("out", "generated", "output root of `irisgen generate`; the sources are OUT/hip/*.hip")
	kout := fs.String("kernels-out", "", "where the code objects go (default OUT/kernels)")
	platform := fs.String("platform", toolchain.Auto, "cuda (nvcc), hip (hipcc or clang) or auto (nvcc if installed, else hip)")
	arch := fs.String("arch", "", "comma-separated targets (default "+strings.Join(toolchain.DefaultTargets[toolchain.HIP], ",")+" for hip, "+strings.Join(toolchain.DefaultTargets[toolchain.CUDA], ",")+" for cuda)")
	compiler := fs.String("compiler", "", "the compiler, a name on PATH or a path (default $HIPCC or $NVCC, else the first found that builds every target)")
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
	ctx := context.Background()
	cc, err := toolchain.Find(ctx, toolchain.Options{Platform: *platform, Targets: splitList(*arch), Compiler: *compiler, LookPath: env.lookPath})
	var nf *toolchain.NotFoundError
	switch {
	case errors.As(err, &nf):
		return &exitError{code: 1, err: err}
	case err != nil:
		return usageErr("%v", err)
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
	include, err := iofs.Sub(irisgen.Include, "runtime/include")
	if err != nil {
		return err
	}
	b, err := cc.Prepare(ctx, include)
	if err != nil {
		return &exitError{code: 1, err: err}
	}
	defer b.Close()

	fmt.Fprintf(env.stdout, "compiling %d kernel file%s with %s for %s into %s\n", len(srcs), plural(len(srcs)), cc, strings.Join(cc.Targets, ","), dst)
	failed := compileAll(env, srcs, *jobs, func(src string) ([]byte, error) {
		base := strings.TrimSuffix(filepath.Base(src), ".hip")
		// Every module defines its spec hash, which the runtime reads at load.
		return b.Compile(ctx, src, filepath.Join(dst, base+cc.Ext()), "irisgen_spec_hash_"+base)
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

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

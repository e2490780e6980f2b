package commands

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/cli"
	"github.com/irisgen/irisgen/internal/config"
	"github.com/irisgen/irisgen/internal/toolchain"
)

func init() {
	register(&cli.Command{
		Name:    "kernels",
		Summary: "compile the generated HIP kernels with hipcc, clang or nvcc",
		Usage:   "kernels [-config FILE] [-out DIR] [-package NAME] [-kernels-out DIR] [-platform NAME] [-arch LIST] [-compiler CC] [-j N]",
		Help: `
Kernels compiles every OUT/hip/*.hip in parallel into code objects the runtime
loads, written next to the generated package, in OUT/PACKAGE/kernels, which
the package embeds (rebuild the Go program after this). OUT, PACKAGE, the
platform and the targets come from irisgen.yaml (kernels: platform, hip_arch,
cuda_arch) unless a flag says otherwise.

AMD (-platform hip): <collective>.hsaco, one offload bundle holding a code
object for every -arch target (default gfx90a,gfx942; also gfx940, gfx941
and gfx950), built by the first of hipcc, clang++-22 ... clang++-17, clang++
that knows every target: Debian's hipcc 5.2 builds gfx90a and gfx940,
Debian's clang-19 (apt-get install clang-19 clang-tools-19 lld-19 llvm-19
hipcc) also gfx941 and gfx942, and gfx950 needs LLVM 20 or ROCm 7's hipcc.
Every bundle is checked before it is written: one AMDGPU ELF per target,
for that GPU, holding the module's kernels and spec hash. NVIDIA (-platform
cuda): <collective>.fatbin with nvcc (default arch 90, i.e. sm_90).
-platform auto picks nvcc when it is installed, else AMD; -compiler (or
HIPCC, NVCC) names the compiler to use instead, and with -platform auto
nvcc or not decides the platform.

The portable device header is the one built into irisgen, so downstream
repositories need no copy of it. Compiler errors and warnings are printed
with the file that caused them; the exit code is 1 when any file fails.

Examples:
  irisgen kernels
  irisgen kernels -platform hip -arch gfx90a,gfx940,gfx942 -compiler clang++-19
  irisgen kernels -platform cuda -arch 80,90 -kernels-out build/kernels
  irisgen kernels -out internal/coll -package coll -j 4`,
		Run: runKernels,
	})
}

// findCompiler finds compilers on this machine; tests replace it.
var findCompiler = toolchain.LookPath

func runKernels(env *cli.Env, args []string) error {
	c := program.Find("kernels")
	fs := env.Flags(c)
	src := addSourceFlags(fs, false, true)
	kout := fs.String("kernels-out", "", "where the code objects go (default OUT/PACKAGE/kernels, which the generated package embeds)")
	platform := fs.String("platform", "", strings.Join(config.Platforms(), ", ")+" (auto: the first of "+
		strings.Join(toolchain.Platforms(), ", ")+" a compiler here builds for); default: the config's kernels.platform, else auto")
	var defaults []string
	for _, p := range toolchain.Platforms() {
		tp, _ := toolchain.Lookup(p)
		defaults = append(defaults, strings.Join(tp.DefaultTargets, ",")+" for "+p)
	}
	arch := fs.String("arch", "", "comma-separated targets (default: the config's kernels.<platform>_arch, else "+strings.Join(defaults, ", ")+")")
	compiler := fs.String("compiler", "", "the compiler, a name on PATH or a path (default $HIPCC or $NVCC, else the first found that builds every target)")
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
	ctx := context.Background()
	opts := toolchain.Options{Platform: *platform, Targets: cli.SplitList(*arch), Compiler: *compiler, LookPath: findCompiler}
	cc, err := toolchain.Choose(ctx, opts, cfg.Kernels.Arch)
	var nf *toolchain.NotFoundError
	switch {
	case errors.As(err, &nf):
		return cli.Fail(err)
	case err != nil:
		return cli.UsageErr("%v", err)
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
	include, err := iofs.Sub(irisgen.Include, "runtime/include")
	if err != nil {
		return err
	}
	b, err := cc.Prepare(ctx, include)
	if err != nil {
		return cli.Fail(err)
	}
	defer b.Close()
	fmt.Fprintf(env.Stdout, "compiling %d kernel file%s with %s for %s into %s\n", len(srcs), cli.Plural(len(srcs)), cc, strings.Join(cc.Targets, ","), shown(dst))
	if failed := b.CompileAll(ctx, srcs, dst, *jobs, env.Stdout, env.Stderr, shown); failed > 0 {
		return cli.Fail(fmt.Errorf("%d of %d kernel files failed to compile", failed, len(srcs)))
	}
	fmt.Fprintf(env.Stdout, "ok: %d code object%s in %s\n", len(srcs), cli.Plural(len(srcs)), shown(dst))
	return nil
}

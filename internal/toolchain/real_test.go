package toolchain

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/irisgen/irisgen"
)

// llvm19 finds a tool of Debian's LLVM 19 (clang-tools-19, llvm-19), or
// skips: `make test` needs them anyway and fails without them. It returns
// the tool's path in LLVM 19's own directory, not /usr/bin's versioned
// link: clang-offload-bundler looks for llvm-objcopy beside itself, then
// on PATH as plain llvm-objcopy, which only an unversioned llvm package
// installs (a machine that had one passed; a fresh one did not).
func llvm19(t *testing.T, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool + "-19")
	if err != nil {
		t.Skipf("%s-19 not installed (apt-get install clang-19 clang-tools-19 lld-19 llvm-19)", tool)
	}
	// The directory of the link's target, and the tool's own name there
	// (llvm-readelf is itself a link to llvm-readobj, which behaves by the
	// name it is called by).
	if real, err := filepath.EvalSymlinks(p); err == nil {
		if own := filepath.Join(filepath.Dir(real), tool); own != p {
			if _, err := os.Stat(own); err == nil {
				p = own
			}
		}
	}
	return p
}

// TestRealAMDCompilers builds a generated kernel with the AMD compilers of
// this machine (in CI: Debian's clang-19 and hipcc 5.2), through Find,
// Prepare and Compile (so Verify passed), and checks every code object
// again with LLVM 19's own tools: the bundle's entries, and per target the
// ELF header's machine and EF_AMDGPU_MACH and the metadata note's target.
func TestRealAMDCompilers(t *testing.T) {
	bundler, readelf := llvm19(t, "clang-offload-bundler"), llvm19(t, "llvm-readelf")
	ctx := context.Background()
	include, err := fs.Sub(irisgen.Include, "runtime/include")
	if err != nil {
		t.Fatal(err)
	}
	src, err := filepath.Abs("../../generated/hip/barrier.hip")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		compiler string
		targets  []string
	}{
		{"clang++-19", []string{"gfx90a", "gfx940", "gfx942"}},
		{"hipcc", []string{"gfx90a", "gfx940"}},
	} {
		t.Run(c.compiler, func(t *testing.T) {
			if _, err := LookPath(c.compiler); err != nil {
				t.Skipf("%s not installed", c.compiler)
			}
			comp, err := Find(ctx, Options{Platform: HIP, Targets: c.targets, Compiler: c.compiler})
			if err != nil {
				t.Fatal(err)
			}
			b, err := comp.Prepare(ctx, include)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			dst := filepath.Join(t.TempDir(), "barrier.hsaco")
			if out, err := b.Compile(ctx, src, dst, "irisgen_spec_hash_barrier"); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			list, err := exec.Command(bundler, "--list", "--type=o", "--input="+dst).CombinedOutput()
			if err != nil {
				t.Fatalf("%s --list: %v\n%s", bundler, err, list)
			}
			var ids []string
			for _, id := range strings.Fields(string(list)) {
				if !strings.HasPrefix(id, "host-") {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			var want []string
			for _, tg := range c.targets {
				want = append(want, amdBundlePrefix+tg)
			}
			if strings.Join(ids, " ") != strings.Join(want, " ") {
				t.Errorf("bundle entries %q, want %q", ids, want)
			}
			for _, tg := range c.targets {
				obj := filepath.Join(t.TempDir(), tg+".elf")
				if out, err := exec.Command(bundler, "--unbundle", "--type=o", "--input="+dst, "--targets="+amdBundlePrefix+tg, "--output="+obj).CombinedOutput(); err != nil {
					t.Fatalf("unbundle %s: %v\n%s", tg, err, out)
				}
				out, err := exec.Command(readelf, "--file-header", "--notes", "--dyn-syms", obj).CombinedOutput()
				if err != nil {
					t.Fatalf("%s: %v\n%s", readelf, err, out)
				}
				for _, re := range []string{
					`Machine:\s+EM_AMDGPU`,
					`OS/ABI:\s+AMDGPU - HSA`,
					`Flags:\s+0x[0-9a-fA-F]+, ` + tg + `\b`,
					`amdhsa\.target:\s+amdgcn-amd-amdhsa--` + tg + `\s`,
					`irisgen_barrier_device\.kd`,
				} {
					if !regexp.MustCompile(re).Match(out) {
						t.Errorf("%s %s: llvm-readelf output lacks /%s/:\n%s", c.compiler, tg, re, out)
					}
				}
			}
			if comp.Kind == Clang && b.devLibs != "" {
				checkISALibraries(t, b.devLibs, c.targets)
			}
		})
	}
}

// checkISALibraries disassembles the ISA-version library of every target in
// the device-library directory a clang got (Debian's, or one made for the
// targets it lacks) and compares its constant with isaVersion.
func checkISALibraries(t *testing.T, dir string, targets []string) {
	dis := llvm19(t, "llvm-dis")
	for _, tg := range targets {
		proc, _ := amdProcessor(tg)
		v, _ := isaVersion(proc)
		lib := filepath.Join(dir, "oclc_isa_version_"+strings.TrimPrefix(proc, "gfx")+".bc")
		out, err := exec.Command(dis, lib, "-o", "-").CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", dis, lib, err, out)
		}
		want := regexp.MustCompile(`@__oclc_ISA_version = .*addrspace\(4\) constant i32 ` + strconv.Itoa(v) + `\b`)
		if !want.Match(out) {
			t.Errorf("%s: want __oclc_ISA_version %d:\n%s", lib, v, out)
		}
	}
}

// TestISAVersionMatchesDebian compares isaVersion with every ISA-version
// library Debian's rocm-device-libs installs.
func TestISAVersionMatchesDebian(t *testing.T) {
	dis := llvm19(t, "llvm-dis")
	libs, _ := filepath.Glob("/usr/lib/*/amdgcn/bitcode/oclc_isa_version_*.bc")
	if len(libs) == 0 {
		t.Skip("rocm-device-libs not installed")
	}
	re := regexp.MustCompile(`@__oclc_ISA_version = .* constant i32 ([0-9]+)`)
	for _, lib := range libs {
		out, err := exec.Command(dis, lib, "-o", "-").CombinedOutput()
		m := re.FindSubmatch(out)
		if err != nil || m == nil {
			t.Fatalf("%s: %v\n%s", lib, err, out)
		}
		proc := "gfx" + strings.TrimSuffix(strings.TrimPrefix(filepath.Base(lib), "oclc_isa_version_"), ".bc")
		if v, err := isaVersion(proc); err != nil || strconv.Itoa(v) != string(m[1]) {
			t.Errorf("isaVersion(%s) = %d, %v; %s has %s", proc, v, err, lib, m[1])
		}
	}
}

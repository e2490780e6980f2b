package toolchain

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCompiler writes a stand-in compiler that prints version for
// --version and, like clang, rejects an --offload-arch outside known and
// answers -print-prog-name=P with a path (every helper program found).
func fakeCompiler(t *testing.T, dir, name, version, known string) string {
	return fakeCompilerLacking(t, dir, name, version, known, "")
}

// fakeCompilerLacking is fakeCompiler whose -print-prog-name answers with
// the bare name, as clang does, for the programs of lacks.
func fakeCompilerLacking(t *testing.T, dir, name, version, known, lacks string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	script := "#!/bin/sh\nif [ \"$1\" = --version ]; then cat <<'EOF'\n" + version + "\nEOF\nexit 0; fi\n" +
		"case $1 in -print-prog-name=*) n=${1#-print-prog-name=}; case \" " + lacks + " \" in *\" $n \"*) echo $n;; *) echo /usr/lib/llvm/bin/$n;; esac; exit 0;; esac\n" +
		"for a; do case $a in --offload-arch=*) t=${a#--offload-arch=}; case \" " + known + " \" in *\" $t \"*) ;; *)\n" +
		"  echo \"clang: warning: -lamdhip64: 'linker' input unused\" >&2\n" +
		"  echo \"clang: error: invalid target ID '$t'; format is a processor name followed by features\" >&2; exit 1;; esac;; esac; done\n" +
		"exit 0\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	debianHipcc = "HIP version: 5.2.21153-0\nDebian clang version 15.0.6\nTarget: x86_64-pc-linux-gnu\nInstalledDir: /usr/bin"
	debianClang = "Debian clang version 19.1.7 (3~deb12u1)\nTarget: x86_64-pc-linux-gnu\nThread model: posix\nInstalledDir: /usr/lib/llvm-19/bin"
	rocmHipcc   = "HIP version: 6.2.41133-dd7f95766\nAMD clang version 18.0.0git (https://github.com/RadeonOpenCompute/llvm-project roc-6.2.0 24292 26466ce804ac523b398608f17388eb6d605a3f09)"
)

// machine is a set of fake compilers found by name.
type machine map[string]string

func (m machine) lookPath(name string) (string, error) {
	if p, ok := m[name]; ok {
		return p, nil
	}
	return "", exec.ErrNotFound
}

func (m machine) options(platform string, targets ...string) Options {
	return Options{Platform: platform, Targets: targets, LookPath: m.lookPath, Getenv: func(string) string { return "" }}
}

// TestFindHIP enumerates the compiler choice: the first candidate (hipcc,
// then clangs newest first) that knows every target, or an explicit one.
func TestFindHIP(t *testing.T) {
	dir := t.TempDir()
	debian := machine{
		"hipcc":      fakeCompiler(t, dir, "hipcc52", debianHipcc, "gfx90a gfx940"),
		"clang++-19": fakeCompiler(t, dir, "clang19", debianClang, "gfx90a gfx940 gfx941 gfx942"),
	}
	rocm := machine{
		"hipcc":      fakeCompiler(t, dir, "hipcc62", rocmHipcc, "gfx90a gfx942 gfx950"),
		"clang++-19": debian["clang++-19"],
	}
	garbage := machine{"hipcc": fakeCompiler(t, dir, "garbage", "cc (GCC) 12.2.0", "")}
	// clang-19 without clang-tools-19, without lld-19, without both; and
	// hipcc, whose helpers are its own business.
	noBundler := machine{"clang++-19": fakeCompilerLacking(t, dir, "clang19nb", debianClang, "gfx90a gfx940 gfx941 gfx942", "clang-offload-bundler")}
	noLLD := machine{"clang++-19": fakeCompilerLacking(t, dir, "clang19nl", debianClang, "gfx90a gfx940 gfx941 gfx942", "ld.lld")}
	noHelpers := machine{"clang++-19": fakeCompilerLacking(t, dir, "clang19nh", debianClang, "gfx90a gfx940 gfx941 gfx942", "clang-offload-bundler ld.lld")}
	hipccAlone := machine{"hipcc": fakeCompilerLacking(t, dir, "hipcc52nh", debianHipcc, "gfx90a gfx940", "clang-offload-bundler ld.lld")}
	for _, c := range []struct {
		name     string
		m        machine
		opts     func(Options) Options
		targets  []string
		kind     Kind
		path     string
		version  string
		errParts []string
	}{
		{name: "debian default: hipcc 5.2 lacks gfx942, clang-19 has it", m: debian,
			kind: Clang, path: debian["clang++-19"], version: "clang 19.1.7"},
		{name: "debian gfx90a,gfx940: hipcc first", m: debian, targets: []string{"gfx90a", "gfx940"},
			kind: Hipcc, path: debian["hipcc"], version: "HIP 5.2.21153, clang 15.0.6"},
		{name: "rocm 6: hipcc", m: rocm, targets: []string{"gfx90a", "gfx942", "gfx950"},
			kind: Hipcc, path: rocm["hipcc"], version: "HIP 6.2.41133, clang 18.0.0"},
		{name: "target features pass through", m: debian, targets: []string{"gfx942:xnack-"},
			errParts: []string{"does not know gfx942:xnack-"}},
		{name: "gfx950 with LLVM 19", m: debian, targets: []string{"gfx942", "gfx950"},
			errParts: []string{"no hip compiler here builds gfx942,gfx950", "does not know gfx942", "does not know gfx950", "gfx950 needs LLVM 20"}},
		{name: "explicit hipcc is not replaced", m: debian, targets: []string{"gfx942"},
			opts:     func(o Options) Options { o.Compiler = "hipcc"; return o },
			errParts: []string{"hipcc52 (HIP 5.2.21153, clang 15.0.6): does not know gfx942", "apt-get install clang-19"}},
		{name: "explicit path", m: machine{}, targets: []string{"gfx942"},
			opts: func(o Options) Options { o.Compiler = debian["clang++-19"]; return o },
			kind: Clang, path: debian["clang++-19"], version: "clang 19.1.7"},
		{name: "HIPCC names the compiler", m: debian,
			opts: func(o Options) Options {
				o.Getenv = func(k string) string {
					if k == "HIPCC" {
						return "clang++-19"
					}
					return ""
				}
				return o
			},
			kind: Clang, path: debian["clang++-19"]},
		{name: "explicit compiler missing", m: debian,
			opts:     func(o Options) Options { o.Compiler = "clang++-20"; return o },
			errParts: []string{"clang++-20: not found"}},
		{name: "no compiler", m: machine{},
			errParts: []string{"neither hipcc nor clang++-17 or later found", "apt-get install clang-19 clang-tools-19 lld-19 llvm-19"}},
		{name: "not a HIP compiler", m: garbage,
			errParts: []string{"neither hipcc nor clang", "cc (GCC) 12.2.0"}},
		{name: "clang without its bundler", m: noBundler,
			errParts: []string{"clang19nb (clang 19.1.7): has no clang-offload-bundler, which it runs to write offload bundles", "apt-get install clang-tools-19"}},
		{name: "clang without its linker", m: noLLD,
			errParts: []string{"has no ld.lld,", "apt-get install lld-19"}},
		{name: "clang without either", m: noHelpers,
			errParts: []string{"has no clang-offload-bundler or ld.lld,", "apt-get install clang-tools-19 lld-19"}},
		{name: "clang without its bundler, hipcc after it", m: machine{"hipcc": debian["hipcc"], "clang++-19": noBundler["clang++-19"]},
			errParts: []string{"hipcc52 (HIP 5.2.21153, clang 15.0.6): does not know gfx942", "apt-get install clang-tools-19"}},
		{name: "hipcc is not asked for helpers", m: hipccAlone, targets: []string{"gfx90a"},
			kind: Hipcc, path: hipccAlone["hipcc"]},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.m.options(HIP, c.targets...)
			if c.opts != nil {
				o = c.opts(o)
			}
			got, err := Find(context.Background(), o)
			if c.errParts != nil {
				var nf *NotFoundError
				if !errors.As(err, &nf) {
					t.Fatalf("Find = %v, %v; want a *NotFoundError", got, err)
				}
				for _, p := range c.errParts {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error lacks %q:\n%v", p, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := c.targets
			if want == nil {
				hip, _ := Lookup(HIP)
				want = hip.DefaultTargets
			}
			if got.Kind != c.kind || got.Path != c.path || got.Platform != HIP || strings.Join(got.Targets, ",") != strings.Join(want, ",") {
				t.Errorf("Find = %+v, want %v %s for %v", got, c.kind, c.path, want)
			}
			if c.version != "" && got.Version != c.version {
				t.Errorf("Version = %q, want %q", got.Version, c.version)
			}
			if got.File("m") != "m.hsaco" {
				t.Errorf("File = %q", got.File("m"))
			}
		})
	}
}

// TestTargets enumerates the AMD target IDs Find accepts.
func TestTargets(t *testing.T) {
	for target, ok := range map[string]bool{
		"gfx90a": true, "gfx940": true, "gfx941": true, "gfx942": true, "gfx950": true,
		"gfx942:xnack-": true, "gfx942:sramecc+:xnack+": true, "gfx90a:xnack+": true,
		"gfx942:xnack": false, "gfx942:tgsplit+": false, "gfx1100": false, "gfx908": false,
		"sm_90": false, "": false, "GFX942": false,
	} {
		_, err := Find(context.Background(), machine{}.options(HIP, target))
		var te *TargetError
		if isTarget := errors.As(err, &te); isTarget == ok {
			t.Errorf("target %q: %v", target, err)
		}
		if !ok && !strings.Contains(err.Error(), "gfx90a, gfx940, gfx941, gfx942, gfx950") && !strings.Contains(err.Error(), "feature") {
			t.Errorf("target %q: message lacks the known targets: %v", target, err)
		}
	}
}

func TestISAVersion(t *testing.T) {
	for proc, want := range map[string]int{
		"gfx90a": 9010, "gfx940": 9400, "gfx941": 9401, "gfx942": 9402, "gfx950": 9500,
		"gfx908": 9008, "gfx1030": 10300, "gfx1100": 11000, "gfx90c": 9012,
	} {
		if got, err := isaVersion(proc); err != nil || got != want {
			t.Errorf("isaVersion(%s) = %d, %v; want %d", proc, got, err, want)
		}
	}
	for _, bad := range []string{"gfx", "gfx9", "942", "gfxzz2", "sm_90"} {
		if v, err := isaVersion(bad); err == nil {
			t.Errorf("isaVersion(%s) = %d, want an error", bad, v)
		}
	}
}

func TestFindCUDA(t *testing.T) {
	m := machine{"nvcc": "/usr/local/cuda/bin/nvcc"}
	c, err := Find(context.Background(), m.options(CUDA, "sm_80", "90", "compute_90a"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != Nvcc || c.Path != "/usr/local/cuda/bin/nvcc" || strings.Join(c.Targets, ",") != "80,90,90a" || c.File("m") != "m.fatbin" {
		t.Errorf("Find = %+v", c)
	}
	if _, err := Find(context.Background(), m.options(CUDA, "gfx942")); !errors.As(err, new(*TargetError)) {
		t.Errorf("gfx942 for CUDA: %v", err)
	}
	if _, err := Find(context.Background(), machine{}.options(CUDA)); err == nil || !strings.Contains(err.Error(), "install the CUDA toolkit") {
		t.Errorf("no nvcc: %v", err)
	}
}

func TestFindAuto(t *testing.T) {
	dir := t.TempDir()
	clang := fakeCompiler(t, dir, "clang19", debianClang, "gfx90a gfx942")
	for _, c := range []struct {
		m    machine
		want Kind
	}{
		{machine{"nvcc": "/usr/bin/nvcc", "clang++-19": clang}, Nvcc},
		{machine{"clang++-19": clang}, Clang},
		{machine{}, 0},
	} {
		got, err := Find(context.Background(), c.m.options(Auto))
		if c.want == 0 {
			if err == nil || !strings.Contains(err.Error(), "no GPU compiler found") || !strings.Contains(err.Error(), "CUDA toolkit") {
				t.Errorf("no compiler: %v", err)
			}
			continue
		}
		if err != nil || got.Kind != c.want {
			t.Errorf("Find(auto) = %+v, %v; want %v", got, err, c.want)
		}
	}
	// An explicit compiler decides the platform.
	nvcc := filepath.Join(dir, "nvcc")
	os.WriteFile(nvcc, []byte("#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'; echo 'Cuda compilation tools, release 13.0, V13.0.48'\n"), 0o755)
	both := machine{"nvcc": nvcc, "clang++-19": clang}
	for name, want := range map[string]Kind{"clang++-19": Clang, "nvcc": Nvcc, clang: Clang, nvcc: Nvcc} {
		o := both.options(Auto)
		o.Compiler = name
		if got, err := Find(context.Background(), o); err != nil || got.Kind != want {
			t.Errorf("Find(auto, -compiler %s) = %+v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := Find(context.Background(), Options{Platform: Auto, Compiler: "nope", LookPath: both.lookPath}); err == nil || !strings.Contains(err.Error(), "nope: not found") {
		t.Errorf("-compiler nope: %v", err)
	}
	if _, err := Find(context.Background(), machine{}.options("rocm")); err == nil || !strings.Contains(err.Error(), `platform "rocm"`) {
		t.Errorf("bad platform: %v", err)
	}
}

// TestArgs pins the command lines (docs/internals.md shows them).
func TestArgs(t *testing.T) {
	for _, c := range []struct{ got, want []string }{
		{hipArgs(Hipcc, []string{"gfx90a", "gfx940"}, "", "/inc", "x.hip", "x.hsaco"),
			strings.Fields("--genco --offload-arch=gfx90a --offload-arch=gfx940 -O3 -I/inc -o x.hsaco x.hip")},
		{hipArgs(Clang, []string{"gfx90a", "gfx940", "gfx942"}, "/dl", "/inc", "x.hip", "x.hsaco"),
			strings.Fields("-x hip --cuda-device-only --gpu-bundle-output -mcode-object-version=5 --offload-arch=gfx90a --offload-arch=gfx940 --offload-arch=gfx942 --rocm-device-lib-path=/dl -O3 -I/inc -o x.hsaco x.hip")},
		{hipArgs(Clang, []string{"gfx942"}, "", "/inc", "x.hip", "x.hsaco"),
			strings.Fields("-x hip --cuda-device-only --gpu-bundle-output -mcode-object-version=5 --offload-arch=gfx942 -O3 -I/inc -o x.hsaco x.hip")},
		{nvccArgs([]string{"80", "90"}, "/inc", "x.hip", "x.fatbin"),
			strings.Fields("-fatbin -O3 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -DIRISGEN_CUDA -I/inc -o x.fatbin -x cu x.hip")},
	} {
		if strings.Join(c.got, " ") != strings.Join(c.want, " ") {
			t.Errorf("args\n %q\nwant\n %q", c.got, c.want)
		}
	}
}

// TestDeviceLibs enumerates the device-library directory a clang gets.
func TestDeviceLibs(t *testing.T) {
	root := t.TempDir()
	debian := filepath.Join(root, "usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
	rocm := filepath.Join(root, "opt/rocm/amdgcn/bitcode")
	for dir, libs := range map[string][]string{
		debian: {"ockl.bc", "ocml.bc", "oclc_isa_version_90a.bc", "oclc_isa_version_940.bc"},
		rocm:   {"ockl.bc", "oclc_isa_version_90a.bc", "oclc_isa_version_942.bc"},
	} {
		os.MkdirAll(dir, 0o755)
		for _, l := range libs {
			os.WriteFile(filepath.Join(dir, l), []byte(l), 0o644)
		}
	}
	var made map[string]int
	mk := func(path string, v int) error {
		made[filepath.Base(path)] = v
		return os.WriteFile(path, []byte("isa"), 0o644)
	}
	for _, c := range []struct {
		name    string
		dirs    []string
		targets []string
		want    string // "overlay" for a new directory
		made    map[string]int
	}{
		{"debian has gfx90a and gfx940", []string{debian}, []string{"gfx90a", "gfx940"}, debian, nil},
		{"debian lacks gfx942", []string{debian}, []string{"gfx90a", "gfx940", "gfx942"}, "overlay", map[string]int{"oclc_isa_version_942.bc": 9402}},
		{"debian lacks gfx942 and gfx950", []string{debian}, []string{"gfx942:xnack-", "gfx950"}, "overlay",
			map[string]int{"oclc_isa_version_942.bc": 9402, "oclc_isa_version_950.bc": 9500}},
		{"rocm first", []string{rocm, debian}, []string{"gfx90a", "gfx942"}, rocm, nil},
		{"a directory without ockl.bc is skipped", []string{filepath.Join(root, "none"), debian}, []string{"gfx90a"}, debian, nil},
		{"none found", []string{filepath.Join(root, "none")}, []string{"gfx942"}, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			made = map[string]int{}
			tmp := t.TempDir()
			got, err := deviceLibs(c.dirs, c.targets, tmp, mk)
			if err != nil {
				t.Fatal(err)
			}
			if c.want == "overlay" {
				if got != filepath.Join(tmp, "device-libs") {
					t.Fatalf("deviceLibs = %q, want an overlay in %s", got, tmp)
				}
				for _, l := range []string{"ockl.bc", "ocml.bc", "oclc_isa_version_940.bc"} {
					if dst, err := os.Readlink(filepath.Join(got, l)); err != nil || dst != filepath.Join(debian, l) {
						t.Errorf("overlay %s -> %q, %v", l, dst, err)
					}
				}
			} else if got != c.want {
				t.Errorf("deviceLibs = %q, want %q", got, c.want)
			}
			if len(made) != len(c.made) {
				t.Errorf("made %v, want %v", made, c.made)
			}
			for n, v := range c.made {
				if made[n] != v {
					t.Errorf("made %v, want %v", made, c.made)
				}
			}
		})
	}
	if _, err := deviceLibs([]string{debian}, []string{"gfx942"}, t.TempDir(), func(string, int) error { return errors.New("no clang") }); err == nil || !strings.Contains(err.Error(), "oclc_isa_version_942.bc") {
		t.Errorf("a failed ISA library: %v", err)
	}
}

// TestRegistry: the platforms register themselves, CUDA first for Auto;
// every one has what Find and the messages need; a name is registered once.
func TestRegistry(t *testing.T) {
	if got := strings.Join(Platforms(), ","); got != "cuda,hip" {
		t.Errorf("Platforms = %s, want cuda,hip (Auto's order)", got)
	}
	for _, name := range Platforms() {
		p, ok := Lookup(name)
		if !ok || p.Find == nil || p.Builds == nil || len(p.DefaultTargets) == 0 || p.Vendor == "" || p.Install == "" {
			t.Errorf("%s: %+v", name, p)
		}
	}
	if _, ok := Lookup(Auto); ok {
		t.Error("auto is not a platform")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering hip again does not panic")
		}
	}()
	Register(Platform{Name: HIP})
}

// TestChoose enumerates where the targets come from: -arch (o.Targets),
// else the configured ones of the platform named, or with Auto of the
// platform the compiler found turns out to be, else its defaults.
func TestChoose(t *testing.T) {
	m := machine{"nvcc": "/usr/local/cuda/bin/nvcc"}
	configured := map[string][]string{CUDA: {"80"}, HIP: {"gfx90a"}}
	for _, c := range []struct {
		platform   string
		targets    []string
		configured map[string][]string
		want       string
	}{
		{CUDA, nil, configured, "80"},
		{CUDA, []string{"90a"}, configured, "90a"},
		{CUDA, nil, nil, "90"},
		{Auto, nil, configured, "80"},
		{Auto, nil, map[string][]string{HIP: {"gfx90a"}}, "90"},
		{Auto, []string{"75"}, configured, "75"},
	} {
		got, err := Choose(context.Background(), m.options(c.platform, c.targets...), c.configured)
		if err != nil || got.Platform != CUDA || strings.Join(got.Targets, ",") != c.want {
			t.Errorf("%s %v %v: %+v %v, want cuda %s", c.platform, c.targets, c.configured, got, err, c.want)
		}
	}
}

package ir

import (
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compileErrs compiles src with the test templates and returns its errors
// without the "spec.yaml:" prefix.
func compileErrs(t *testing.T, src string) []string {
	t.Helper()
	_, err := Compile("spec.yaml", []byte(src), testTemplates())
	if err == nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		out = append(out, strings.TrimPrefix(line, "spec.yaml:"))
	}
	return out
}

func TestCollectiveNamesThatBreakGoFiles(t *testing.T) {
	bad := map[string]string{
		"x_test":         "x_test.go would be a test file (suffix _test), left out of the package's build",
		"x_linux_test":   "x_linux_test.go would be a test file (suffix _test), left out of the package's build",
		"x_windows":      "x_windows.go would build only for GOOS=windows (a file name suffix is a build constraint)",
		"linux_amd64":    "linux_amd64.go would build only for GOARCH=amd64 (a file name suffix is a build constraint)",
		"x_linux_arm64":  "x_linux_arm64.go would build only for GOOS=linux GOARCH=arm64 (a file name suffix is a build constraint)",
		"all_gather_386": "all_gather_386.go would build only for GOARCH=386 (a file name suffix is a build constraint)",
		"aux":            "aux.go cannot be created on Windows (aux is a device name there)",
		"com1":           "com1.go cannot be created on Windows (com1 is a device name there)",
	}
	for name, why := range bad {
		src := fmt.Sprintf("name: %s\nsummary: s\nvariants:\n  v: {template: t_a}\n", name)
		assert.Equal(t, []string{fmt.Sprintf("1:7: error: collective name %q cannot name the generated Go file: %s; pick another name", name, why)}, compileErrs(t, src), name)
	}
	for _, name := range []string{"linux", "windows", "test", "x_testing", "x_wasm32", "amd64x", "all_gather", "console"} {
		src := fmt.Sprintf("name: %s\nsummary: s\nvariants:\n  v: {template: t_a}\n", name)
		assert.Empty(t, compileErrs(t, src), name)
	}
}

// TestGoFileProblemAgreesWithTheGoTool checks goFileProblem against
// go/build on a real file for every known GOOS and GOARCH suffix: a name is
// refused exactly when the go tool would leave its file out of some build.
func TestGoFileProblemAgreesWithTheGoTool(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for os := range knownOS {
		names = append(names, "x_"+os, os+"_x", "a_b_"+os)
		for arch := range knownArch {
			names = append(names, "x_"+os+"_"+arch, "x_"+arch+"_"+os)
		}
	}
	for arch := range knownArch {
		names = append(names, "x_"+arch, arch+"_x")
	}
	names = append(names, "x_test", "x", "x_y")
	for _, name := range names {
		p := filepath.Join(dir, name+".go")
		require.NoError(t, os.WriteFile(p, []byte("package p\n"), 0o644))
		// Built everywhere iff it matches a context that no suffix names.
		ctx := build.Default
		ctx.GOOS, ctx.GOARCH = "none_os", "none_arch"
		match, err := ctx.MatchFile(dir, name+".go")
		require.NoError(t, err)
		if strings.HasSuffix(name, "_test") {
			match = false
		}
		assert.Equal(t, !match, goFileProblem(name) != "", name)
	}
}

// TestKnownOSArchAreTheGoTools compares the lists with the installed Go's
// internal/syslist, so that a new GOOS or GOARCH is noticed.
func TestKnownOSArchAreTheGoTools(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "src", "internal", "syslist", "syslist.go"))
	if err != nil {
		t.Skipf("no Go source tree: %v", err)
	}
	section := func(name string) map[string]bool {
		s := string(src)
		i := strings.Index(s, "var "+name+" = map[string]bool{")
		require.GreaterOrEqual(t, i, 0, name)
		body := s[i : i+strings.Index(s[i:], "}")]
		m := map[string]bool{}
		for _, line := range strings.Split(body, "\n")[1:] {
			if k, _, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				m[strings.Trim(k, `"`)] = true
			}
		}
		return m
	}
	assert.Equal(t, section("KnownOS"), knownOS)
	assert.Equal(t, section("KnownArch"), knownArch)
}

func TestHIPSymbolCollisions(t *testing.T) {
	assert.Equal(t, []string{
		"4:3: error: HIP symbol irisgen_c_args, a kernel of variant \"args\", is also the kernel argument struct (at 1:7); rename the variant",
	}, compileErrs(t, "name: c\nsummary: s\nvariants:\n  args: {template: t_a}\n"))
	assert.Equal(t, []string{
		"5:3: error: HIP symbol irisgen_c_x_prelude, a kernel of variant \"x_prelude\", is also the prelude namespace of variant \"x\" (at 4:3); rename the variant",
	}, compileErrs(t, "name: c\nsummary: s\nvariants:\n  x: {template: t_a}\n  x_prelude: {template: t_a}\n"))
	assert.Equal(t, []string{
		"4:3: error: HIP symbol irisgen_spec_hash_spec, a kernel of variant \"hash_spec\", is also the spec hash symbol (at 1:7); rename the variant",
	}, compileErrs(t, "name: spec\nsummary: s\nvariants:\n  hash_spec: {template: t_a}\n"))
	// With dtypes and ops the kernel names end in a dtype or op: no collision.
	assert.Empty(t, compileErrs(t, `name: c
summary: s
dtypes: [f32]
ops: [sum]
sizes: [n]
tensors:
  x: {dir: inout, shape: [n]}
variants:
  args: {template: t_a, access: {x: local_write}, barriers: [none]}
  x: {template: t_a, access: {x: local_write}, barriers: [none]}
  x_prelude: {template: t_a, access: {x: local_write}, barriers: [none]}
  x_f32: {template: t_a, access: {x: local_write}, barriers: [none]}
`))
}

func TestNameLength(t *testing.T) {
	long := strings.Repeat("a", MaxNameLen+1)
	assert.Equal(t, []string{
		fmt.Sprintf("1:7: error: collective name %q is %d bytes long; names are at most %d (they become file names and symbols)", long[:MaxNameLen]+"...", MaxNameLen+1, MaxNameLen),
		fmt.Sprintf("4:3: error: variant name %q is %d bytes long; names are at most %d (they become file names and symbols)", long[:MaxNameLen]+"...", MaxNameLen+1, MaxNameLen),
	}, compileErrs(t, fmt.Sprintf("name: %s\nsummary: s\nvariants:\n  %s: {template: t_a}\n", long, long)))
	ok := strings.Repeat("a", MaxNameLen)
	assert.Empty(t, compileErrs(t, fmt.Sprintf("name: %s\nsummary: s\nvariants:\n  %s: {template: t_a}\n", ok, ok)))
}

// TestSizeLimits builds specs one past each limit.
func TestSizeLimits(t *testing.T) {
	spec := func(tensors, sizes, variants, entries, dims int) string {
		var b strings.Builder
		b.WriteString("name: big\nsummary: s\ndtypes: [f32]\nsizes: [n")
		for i := 1; i < sizes; i++ {
			fmt.Fprintf(&b, ", s%d", i)
		}
		b.WriteString("]\ntensors:\n")
		for i := 0; i < tensors; i++ {
			fmt.Fprintf(&b, "  t%d: {dir: in, shape: [n%s]}\n", i, strings.Repeat(", 1", max(dims-1, 0)*boolInt(i == 0)))
		}
		b.WriteString("variants:\n")
		for v := 0; v < variants; v++ {
			fmt.Fprintf(&b, "  v%d:\n    template: t_a\n    barriers: [none]\n    access: {", v)
			for i := 0; i < max(tensors, entries*boolInt(v == 0)); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "t%d: local_read", i)
			}
			b.WriteString("}\n")
		}
		return b.String()
	}
	assert.Empty(t, compileErrs(t, spec(MaxTensors, MaxSizes, MaxVariants, 0, MaxDims)), "at every limit")
	errs := compileErrs(t, spec(MaxTensors+1, 1, 1, 0, 1))
	require.Len(t, errs, 1)
	assert.Equal(t, "70:3: error: the spec has 65 tensors; a collective may have at most 64 (each is a kernel argument)", errs[0])
	errs = compileErrs(t, spec(1, MaxSizes+1, 1, 0, 1))
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], "error: the spec has 33 sizes; a collective may have at most 32 (each is a kernel argument)")
	errs = compileErrs(t, spec(1, 1, MaxVariants+1, 0, 1))
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], "error: the spec has 65 variants; a collective may have at most 64 (each is a kernel per dtype and op)")
	errs = compileErrs(t, spec(1, 1, 1, MaxTensors+1, 1))
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], `error: the spec has 65 access entries in variant "v0"; a collective may have at most 64 (one per tensor)`)
	errs = compileErrs(t, spec(1, 1, 1, 0, MaxDims+1))
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0], `error: shape of tensor "t0" has 17 dimensions; at most 16 are allowed (the element count is their product: merge some)`)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestSummaryLimit(t *testing.T) {
	long := strings.Repeat("x", MaxSummary+1)
	assert.Equal(t, []string{
		fmt.Sprintf("2:10: error: summary is %d bytes; keep it to a sentence or a short paragraph, at most %d bytes (it is repeated in the generated docs)", MaxSummary+1, MaxSummary),
		fmt.Sprintf("4:31: error: summary is %d bytes; keep it to a sentence or a short paragraph, at most %d bytes (it is repeated in the generated docs)", MaxSummary+1, MaxSummary),
	}, compileErrs(t, fmt.Sprintf("name: c\nsummary: %s\nvariants:\n  v: {template: t_a, summary: %s}\n", long, long)))
	c := compileOK(t, "name: c\nsummary: s\nvariants:\n  v: {template: t_a, summary: The variant.}\n", testTemplates())
	assert.Equal(t, "The variant.", c.Variants[0].Summary)
}

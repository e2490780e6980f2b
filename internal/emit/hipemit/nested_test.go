package hipemit

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/ir"
)

// nestSpec has a parameter of every type, a tensor peers read (x), one
// only rank root passes that peers read (y), a local one (out) and an
// index tensor.
const nestSpec = `name: nest
summary: Nested pipelines.
dtypes: [f32]
sizes: [n]
params: {root: rank, k: int, eps: f32}
tensors:
  x:   {dir: in,  shape: [n]}
  y:   {dir: in,  shape: [n], ranks: root}
  out: {dir: out, shape: [n]}
variants:
  v:
    template: t
    access: {x: remote_read, y: remote_read, out: local_write}
`

// nestRest makes every other access and reads every parameter, so that a
// case's only errors are its own.
const nestRest = `
  T* o = {{write "out"}}; const T* xx = {{peer_read "x" "1"}}; const T* yy = {{peer_read "y" "root"}}; (void){{param "k"}}; (void){{param "eps"}}; (void){{param "root"}};
  {{barrier}}`

func emitNest(t *testing.T, spec, tmpl string) (string, []string) {
	t.Helper()
	fs := fstest.MapFS{"t.hip.tmpl": {Data: []byte(tmpl)}}
	c, err := ir.Compile("nest.yaml", []byte(spec), fs)
	require.NoError(t, err)
	out, err := Emit(&emit.Request{Collectives: []*ir.Collective{c}, Templates: fs})
	if err == nil {
		return string(out["hip/nest.hip"]), nil
	}
	var msgs []string
	for _, e := range err.(diag.List) {
		msgs = append(msgs, e.Error())
	}
	return "", msgs
}

// nvccCheck compiles a generated .hip source with nvcc for sm_90, where
// nvcc is installed: what the generator accepts must build.
func nvccCheck(t *testing.T, src string) {
	t.Helper()
	nvcc, err := exec.LookPath("nvcc")
	if err != nil || testing.Short() {
		t.Log("nvcc is not installed (or -short): the accepted kernels are not compiled")
		return
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "k.hip")
	require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
	inc, err := filepath.Abs("../../../runtime/include")
	require.NoError(t, err)
	out, err := exec.Command(nvcc, "-cubin", "-gencode", "arch=compute_90,code=sm_90", "-DIRISGEN_CUDA", "-I"+inc,
		"-o", filepath.Join(dir, "k.cubin"), "-x", "cu", file).CombinedOutput()
	require.NoError(t, err, "nvcc refuses what the generator accepted:\n%s", out)
}

// TestNestedInNameArguments: every helper that takes a name (of a tensor,
// size or parameter) refuses another helper's result there, naming it.
func TestNestedInNameArguments(t *testing.T) {
	inner := []string{`(param "k")`, `(size "n")`, `(read "x")`, `(numel "x")`, `(barrier)`, `(peer_read "x" "0")`}
	for _, helper := range []string{"read", "write", "update", "read_index", "type", "numel", "size", "param", "peer_read", "peer_write", "peer_update", "peer_atomic"} {
		what := map[string]string{"size": "size", "param": "parameter"}[helper]
		if what == "" {
			what = "tensor"
		}
		for _, in := range inner {
			call := "{{" + helper + " " + in
			if strings.HasPrefix(helper, "peer_") {
				call += ` "0"`
			}
			call += "}}"
			_, errs := emitNest(t, nestSpec, "  "+call+nestRest)
			require.NotEmpty(t, errs, call)
			example := helper + ` "x"`
			if strings.HasPrefix(helper, "peer_") {
				example += ` "p"`
			}
			want := helper + ": the " + what + " must be a name in quotes, e.g. {{" + example + "}}; {{" + strings.Trim(in, "()") + "}} gives C code for the kernel, not a name"
			require.Contains(t, errs[0], want, call)
		}
	}
}

// TestNestedInPeerArguments: a peer's rank may hold an integer helper (a
// rank or int parameter, a size, numel), directly, in a printf or piped;
// it is expanded in place, its read counts (a parameter read only there
// is read), and the kernel builds. A pointer, a float, a type or a
// statement there is refused.
func TestNestedInPeerArguments(t *testing.T) {
	rest := strings.Replace(nestRest, `(void){{param "k"}}; `, "", 1)
	var srcs []string
	for tmpl, want := range map[string]string{
		`  const T* a = {{peer_read "x" (param "k")}};`:                                                             `peer_ptr(ctx, (const float*)irisgen_a.t_x, ((irisgen_a.p_k)))`,
		`  const T* a = {{peer_read "x" (printf "(%s + 1) %% ctx.world" (param "k"))}};`:                            `peer_ptr(ctx, (const float*)irisgen_a.t_x, (((irisgen_a.p_k) + 1) % ctx.world))`,
		`  const T* a = {{param "k" | peer_read "x"}};`:                                                             `peer_ptr(ctx, (const float*)irisgen_a.t_x, ((irisgen_a.p_k)))`,
		`  const T* a = {{peer_read "x" (size "n")}}; (void){{param "k"}};`:                                         `peer_ptr(ctx, (const float*)irisgen_a.t_x, (irisgen_a.s_n))`,
		`  const T* a = {{peer_read "x" (numel "x")}}; (void){{param "k"}};`:                                        `peer_ptr(ctx, (const float*)irisgen_a.t_x, ((irisgen_a.s_n)))`,
		`  {{$r := param "k"}}const T* a = {{peer_read "x" $r}};`:                                                   `peer_ptr(ctx, (const float*)irisgen_a.t_x, ((irisgen_a.p_k)))`,
		`  const T* a = {{peer_read "x" "0"}}; const T* b = {{peer_read "y" (param "root")}}; (void){{param "k"}};`: `const T* b = ((const float*)(uintptr_t)(ctx.base[(int)irisgen_a.p_root]`,
	} {
		src, errs := emitNest(t, nestSpec, tmpl+rest)
		require.Empty(t, errs, tmpl)
		require.Contains(t, src, want, tmpl)
		for _, c := range src {
			require.False(t, c < 0x20 && c != '\n' && c != '\t', "control character %q in the kernel of %s", c, tmpl)
		}
		srcs = append(srcs, src)
	}
	nvccCheck(t, srcs[1])

	// The case: the only read of root is nested in a peer helper
	// of a tensor only root passes.
	spec := strings.Replace(nestSpec, "params: {root: rank, k: int, eps: f32}", "params: {root: rank}", 1)
	src, errs := emitNest(t, spec, `  const T* a = {{peer_read "x" "0"}}; T* o = {{write "out"}};
  irisgen::copy(o, {{peer_read "y" (param "root")}}, {{size "n"}});
  {{barrier}}`)
	require.Empty(t, errs)
	nvccCheck(t, src)

	for in, what := range map[string]string{
		`(read "out")`: "gives a pointer", `(peer_read "y" "root")`: "gives a pointer", `(param "eps")`: "gives a float",
		`(sync)`: "is a statement", `(grid_sync_local)`: "is a statement",
	} {
		_, errs := emitNest(t, nestSpec, `  const T* a = {{peer_read "x" `+in+`}};`+nestRest)
		require.NotEmpty(t, errs, in)
		require.Contains(t, errs[0], `peer_read "x": the peer must be a rank, an integer C expression; {{`+strings.Trim(in, "()")+"}} "+what, in)
	}
	// A tensor only root passes: its peer is root's parameter itself.
	_, errs = emitNest(t, nestSpec, `  const T* a = {{peer_read "x" "0"}}; const T* b = {{peer_read "y" (param "k")}};`+nestRest)
	require.NotEmpty(t, errs)
	require.Contains(t, errs[0], `peer_read "y": y is passed on rank root only (ranks: root), so its only peer pointer is that rank's; write {{peer_read "y" "root"}}`)
}

// TestHelperResultsAsValues: a helper's result reaches the kernel as it
// is or not at all: printing and escaping functions that would change it,
// printf verbs that do not fit it, and the builtins that would use its
// text as a value (or decide an if on it) are refused; printing it through
// print, printf %s or %v, html (which leaves it) stays fine.
func TestHelperResultsAsValues(t *testing.T) {
	const head = `  const T* a = {{peer_read "x" "0"}};`
	for _, ok := range []string{
		`  int64_t m = {{print (size "n")}};`, `  int64_t m = {{printf "%s" (size "n")}} + {{printf "%v" (numel "x")}};`,
		`  int64_t m = {{html (size "n")}};`, `  int64_t m = {{println (size "n")}};`,
		`  {{if eq .DType "f32"}}int64_t m = {{size "n"}};{{end}}`, `  {{if eq (type "x") "float"}}int64_t m = 0;{{end}}`, `  {{$s := size "n"}}int64_t m = {{$s}};`,
	} {
		_, errs := emitNest(t, nestSpec, head+ok+nestRest)
		require.Empty(t, errs, ok)
	}
	for bad, want := range map[string]string{
		`  int64_t m = {{printf "%d" (size "n")}};`:   `printf "%d": its verbs do not fit its arguments (fmt wrote %!d(...); use %s for a helper's result, %d for a number`,
		`  int64_t m = {{printf "%q" (size "n")}};`:   `printf changes the result of {{size "n"}}, C code that must reach the kernel as it is`,
		`  int64_t m = {{printf "%.2s" (size "n")}};`: `printf changes the result of {{size "n"}}`,
		`  int64_t m = {{printf "%x" (size "n")}};`:   `printf changes the result of {{size "n"}}`,
		`  int64_t m = {{js (size "n")}};`:            `js changes the result of {{size "n"}}`,
		`  int64_t m = {{urlquery (size "n")}};`:      `urlquery changes the result of {{size "n"}}`,
		`  {{if eq (param "root") "0"}}x{{end}}`:      `eq compares the result of param while the template renders`,
		`  {{if lt (size "n") 4}}x{{end}}`:            `lt compares the result of size`,
		`  int m = {{len (read "x")}};`:               `len measures the result of read`,
		`  int m = {{param "k" | len}};`:              `len measures the result of param`,
		`  int m = {{index (size "n") 0}};`:           `index indexes the result of size`,
		`  const T* m = {{slice (read "x") 1}};`:      `slice slices the result of read`,
		`  {{if read "x"}}x{{end}}`:                   `{{if}} on the result of read is decided while the template renders`,
		`  {{with $p := param "k"}}x{{end}}`:          `{{with}} on the result of param is decided while the template renders`,
		`  {{if not (read "x")}}x{{end}}`:             `not tests the result of read`,
		`  {{if and .T (param "k")}}x{{end}}`:         `and tests the result of param`,
	} {
		_, errs := emitNest(t, nestSpec, head+bad+nestRest)
		require.NotEmpty(t, errs, bad)
		require.Contains(t, strings.Join(errs, "\n"), want, bad)
	}
}

package hipemit

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHelpersWhereTheKernelDoesNotRunThem: a helper in a comment, a
// literal, a preprocessor directive or conditional group, or an
// unevaluated operand would count as the template reading a parameter,
// making an access or meeting its peers while the kernel does none of it;
// each place is refused at the helper, for every kind of helper.
func TestHelpersWhereTheKernelDoesNotRunThem(t *testing.T) {
	places := map[string]string{
		"  // %s\n":                                 "a comment",
		"  /* %s */\n":                              "a comment",
		"  /* a\n  %s\n  */\n":                      "a comment",
		"  const char* m = \"%s\";\n":               "a string or character literal",
		"  const char* m = R\"(%s)\";\n":            "a string or character literal",
		"  auto c = '%s';\n":                        "a string or character literal",
		"#define X %s\n":                            "a preprocessor directive",
		"#if 0\n  %s\n#endif\n":                     "a preprocessor conditional (#if ... #endif), where the kernel does not (or not always) run it",
		"#ifdef IRISGEN_HIP\n  %s\n#else\n#endif\n": "a preprocessor conditional (#if ... #endif), where the kernel does not (or not always) run it",
		"#ifndef X\n#else\n  %s\n#endif\n":          "a preprocessor conditional (#if ... #endif), where the kernel does not (or not always) run it",
		"  (void)sizeof(%s);\n":                     "the unevaluated operand of sizeof",
		"  (void)sizeof %s;\n":                      "the unevaluated operand of sizeof",
		"  decltype(%s) d = 0;\n":                   "the unevaluated operand of decltype",
		"  bool b = noexcept(%s);\n":                "the unevaluated operand of noexcept",
	}
	// Each helper is also made (or read) where it counts, so that the
	// only error is the hidden one.
	for _, helper := range []string{`{{param "k"}}`, `{{write "out"}}`, `{{barrier}}`, `{{peer_read "x" "0"}}`, `{{size "n"}}`} {
		for place, what := range places {
			tmpl := "  " + helper + ";\n" + strings.Replace(place, "%s", helper, 1) + nestRest
			_, errs := emitNest(t, nestSpec, tmpl)
			require.Len(t, errs, 1, "%q", tmpl)
			require.Contains(t, errs[0], "error: "+helper+" stands in "+what, "%q", tmpl)
			// At the hidden helper: line 2, or 3 in a block comment's middle line, ...
			line := 2 + strings.Count(place[:strings.Index(place, "%s")], "\n")
			require.Regexp(t, `^t\.hip\.tmpl:`+strconv.Itoa(line)+`:`, errs[0], "%q", tmpl)
		}
	}
	// The case: a parameter read only in a comment is never read.
	spec := strings.Replace(nestSpec, "params: {root: rank, k: int, eps: f32}", "params: {root: rank, k: int}", 1)
	_, errs := emitNest(t, spec, `  // {{param "k"}}
  const T* a = {{peer_read "x" "0"}}; T* o = {{write "out"}}; const T* b = {{peer_read "y" "root"}};
  {{barrier}}`)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], `t.hip.tmpl:1:8: error: {{param "k"}} stands in a comment`)
	// Text that only looks like these places is fine.
	_, errs = emitNest(t, nestSpec, `  int64_t s = sizeof(T) * {{size "n"}}; const char* m = "/*"; int64_t q = {{size "n"}}; // */ a
  #pragma unroll
  for (int i = 0; i < 2; i++) { const T* r = {{peer_read "x" "i"}}; (void)r; }`+nestRest)
	require.Empty(t, errs)
}

// TestUnterminatedLiterals: a string or character literal that its line
// (or the text) ends before it is closed does not compile, and the text
// after it could be read as code or as literal, so the checks could not
// say whether a helper there runs: refused at its quote, also where the
// template's text functions make it; in a directive or a conditional group
// it is left to the compiler. An unevaluated operand whose ( no ) closes
// runs to the end: a helper after it is refused, as the compiler would
// read it.
func TestUnterminatedLiterals(t *testing.T) {
	const msg = "error: an unterminated string or character literal: the kernel would not compile"
	for tmpl, at := range map[string]string{
		"  const char* m = \"abc;\n":                           "1:19",
		"  char c = 'a;\n":                                     "1:12",
		"  const char* m = R\"(abc;\n":                         "1:19",
		"  const char* m = \"a\\\"\n":                          "1:19",
		"  (void){{printf \"%q\" \"x\" | printf \"%.2s\"}};\n": "1:11",
	} {
		_, errs := emitNest(t, nestSpec, tmpl+nestRest)
		require.Len(t, errs, 1, "%q: %v", tmpl, errs)
		require.Contains(t, errs[0], msg, "%q", tmpl)
		require.True(t, strings.HasPrefix(errs[0], "t.hip.tmpl:"+at+":"), "%q: %s", tmpl, errs[0])
	}
	for _, ok := range []string{"#if 0\n  it's not code\n#endif\n", "#define Q(x) #x\n", "  char q = '\\'';\n", "  const char* m = \"\\\"\";\n"} {
		_, errs := emitNest(t, nestSpec, ok+nestRest)
		require.Empty(t, errs, "%q", ok)
	}
	_, errs := emitNest(t, nestSpec, "  (void)sizeof(int;\n  const T* a = {{peer_read \"x\" \"0\"}};\n"+nestRest)
	require.NotEmpty(t, errs)
	require.Contains(t, errs[0], `t.hip.tmpl:2:18: error: {{peer_read "x" "0"}} stands in the unevaluated operand of sizeof`)
}

// rowLambdas are the lambdas of the device header's row helpers (and
// plain ones): a meeting helper inside any of them is refused.
var rowLambdas = map[string]string{
	"reduce_rows fin": `  irisgen::reduce_rows<T>(t, h, in, ctx.world, [&](int64_t o) { return irisgen::span<T>(res + o, h, true); },
      [&](int64_t i, float* acc, int k) { HELPER return 0.f; },
      [&](int64_t o, const irisgen::span<T>& sp, float ss) {});`,
	"reduce_rows done": `  irisgen::reduce_rows<T>(t, h, in, ctx.world, [&](int64_t o) { return irisgen::span<T>(res + o, h, true); },
      [&](int64_t i, float* acc, int k) { return 0.f; },
      [&](int64_t o, const irisgen::span<T>& sp, float ss) { HELPER });`,
	"reduce_rows span_of": `  irisgen::reduce_rows<T>(t, h, in, ctx.world, [&](int64_t o) { HELPER return irisgen::span<T>(res + o, h, true); },
      [&](int64_t i, float* acc, int k) { return 0.f; }, [&](int64_t o, const irisgen::span<T>& sp, float ss) {});`,
	"row_pieces":          `  irisgen::row_pieces<T>(sp, h, [&](int64_t i, int k) { HELPER });`,
	"map_rows fin":        `  irisgen::map_rows<T>(0, t, 1, h, res, [&](int64_t o) { return irisgen::span<T>(res + o, h, true); }, [&](int64_t i, float* acc, int k) { HELPER return 0.f; }, [&](int64_t o, const irisgen::span<T>& sp, float ss) {});`,
	"reduce_rows_n ready": `  irisgen::reduce_rows_n<T>(t, h, ctx.world, [&](int64_t o) { return irisgen::span<T>(res + o, h, true); }, [&](int p, int64_t i) { return 0; }, [&](int p, int64_t i) { HELPER return true; }, [&](int p, int64_t i) { return 0.f; }, [&](int64_t i, float* acc, int k) { return 0.f; }, [&](int64_t o, const irisgen::span<T>& sp, float ss) {});`,
	"plain":               `  auto f = [&]() { HELPER }; f();`,
	"no parameters":       `  auto f = [&] { HELPER }; f();`,
	"specifiers":          `  auto f = [=] __device__ (int i) mutable -> void { HELPER }; f(0);`,
	"nested":              `  auto f = [&]() { auto g = [&]() { HELPER }; g(); }; f();`,
	"after the return":    `  auto f = [&](int i) { if (i) { return; } HELPER }; f(0);`,
}

// TestMeetingInsideALambda: barrier, sync, grid_sync and grid_sync_local
// return from the enclosing function on a timeout, so inside any lambda
// (every row helper's lambdas, plain ones, nested ones) they are refused
// at the helper with a note at the lambda; in the body's loops, blocks,
// conditions and after a lambda they stay fine.
func TestMeetingInsideALambda(t *testing.T) {
	for _, helper := range []string{"{{barrier}}", "{{sync}}", "{{grid_sync}}", "{{grid_sync_local}}"} {
		for name, body := range rowLambdas {
			tmpl := "  " + strings.Replace(body, "HELPER", helper, 1) + nestRest
			_, errs := emitNest(t, nestSpec, tmpl)
			require.Len(t, errs, 1, "%s %s", name, helper)
			require.Contains(t, errs[0], "error: "+helper+" inside a lambda: on a timeout it returns from the lambda, not from the kernel body", "%s %s", name, helper)
			require.Regexp(t, `^t\.hip\.tmpl:\d+:\d+: error: .*\nt\.hip\.tmpl:\d+:\d+: note: the lambda's body starts here$`, errs[0], "%s %s", name, helper)
		}
	}
	for _, ok := range []string{
		`  int a[2]; a[0] = 1; {{sync}} for (int i = 0; i < 2; i++) { a[i] = 0; {{sync}} }`,
		`  auto f = [&](int i) { return i; }; {{sync}} if (f(1)) { {{sync}} } else {{sync}}`,
		`  T* p = {{write "out"}}; p[0] = T(); [&]() {}(); {{grid_sync_local}} do { {{sync}} } while (0);`,
		`  [[maybe_unused]] int z = 0; {{sync}}`,
	} {
		src, errs := emitNest(t, nestSpec, ok+nestRest)
		require.Empty(t, errs, ok)
		nvccCheck(t, src)
	}
}

// ownSpec: output is passed on rank root only and written locally.
const ownSpec = `name: nest
summary: A tensor only the root passes, written locally.
dtypes: [f32]
sizes: [n]
params: {root: rank, k: int}
tensors:
  x:   {dir: in,  shape: [n]}
  out: {dir: out, shape: [n], ranks: root}
variants:
  v:
    template: t
    access: {x: local_read, out: local_write}
`

// TestOwnedTensorGuards: read, write, update and read_index of a tensor
// only one rank passes give a pointer that is null on every other rank;
// the generator sees the guard in the template (an if whose condition
// implies ctx.rank == the parameter, through ==, &&, ||, !, parentheses
// and a const copy; its else when the condition implies !=; the rest of
// the block after an if that returns) and refuses the helper elsewhere,
// with advice that, followed, gives a template that validates and builds.
func TestOwnedTensorGuards(t *testing.T) {
	const rest = "\n  const T* xr = {{read \"x\"}}; (void)xr; (void){{param \"k\"}}; (void){{param \"root\"}};\n  {{barrier}}"
	const w = `{{write "out"}}`
	all := ""
	for _, ok := range []string{
		`  if (ctx.rank == {{param "root"}}) { W[0] = T(); }`,
		`  if ({{param "root"}} == ctx.rank) W[0] = T();`,
		`  if (ctx.rank == {{param "root"}} && {{param "k"}} > 0) W[0] = T();`,
		`  if ({{param "k"}} > 0 && (ctx.rank == {{param "root"}})) W[0] = T();`,
		`  if (((ctx.rank) == ({{param "root"}}))) W[0] = T();`,
		`  const int root = {{param "root"}}; if (ctx.rank == root) { W[0] = T(); }`,
		`  const int64_t n = {{size "n"}}, root = {{param "root"}}; if (ctx.rank == root) { W[0] = T(); }`,
		`  if (ctx.rank != {{param "root"}}) return; W[0] = T();`,
		`  if (ctx.rank != {{param "root"}}) { return; } T* o = W; o[0] = T();`,
		`  if (ctx.rank != {{param "root"}}) {} else { W[0] = T(); }`,
		`  if (!(ctx.rank != {{param "root"}})) W[0] = T();`,
		`  if (ctx.rank != {{param "root"}} || {{param "k"}} == 0) return; W[0] = T();`,
		`  if (ctx.rank == {{param "root"}}) {} else return; W[0] = T();`,
		`  if ({{param "k"}} > 0) { if (ctx.rank == {{param "root"}}) { for (int i = 0; i < 2; i++) W[i] = T(); } }`,
		`  if (ctx.rank == {{param "root"}}) for (int i = 0; i < 2; i++) W[i] = T();`,
		`  if (ctx.rank == {{param "root"}}) do { W[0] = T(); } while (0);`,
		`  if (ctx.rank == {{param "root"}}) { auto f = [&](int i) { W[i] = T(); }; f(0); }`,
		`  if (ctx.rank == {{param "root"}}) if ({{param "k"}}) W[0] = T(); else W[1] = T();`,
		`  if (ctx.rank == {{param "root"}}) irisgen::copy(W, {{read "x"}}, {{size "n"}});`,
	} {
		_, errs := emitNest(t, ownSpec, strings.ReplaceAll(ok, "W", w)+rest)
		require.Empty(t, errs, ok)
		all += "  {\n" + strings.ReplaceAll(ok, "W", w) + "\n  }\n"
	}
	// All of them in blocks of one kernel: still guarded, and it builds.
	src, errs := emitNest(t, ownSpec, all+rest)
	require.Empty(t, errs)
	nvccCheck(t, src)
	for _, bad := range []string{
		`  W[0] = T();`,
		`  T* o = W; if (ctx.rank == {{param "root"}}) o[0] = T();`,
		`  if (ctx.rank == {{param "k"}}) W[0] = T();`,
		`  if (ctx.rank == {{param "root"}} || {{param "k"}} > 0) W[0] = T();`,
		`  if (ctx.rank == {{param "root"}}) (void)0; W[0] = T();`,
		`  if (ctx.rank == {{param "root"}}); W[0] = T();`,
		`  if (ctx.rank == {{param "root"}}) {} else W[0] = T();`,
		`  if (ctx.rank != {{param "root"}}) W[0] = T();`,
		`  int root = {{param "root"}}; if (ctx.rank == root) W[0] = T();`,
		`  if ({{param "k"}}) { if (ctx.rank != {{param "root"}}) return; } W[0] = T();`,
		`  T* o = ctx.rank == {{param "root"}} ? W : nullptr;`,
		`  // if (ctx.rank == {{print "root"}})
  W[0] = T();`,
		`  while (ctx.rank == {{param "root"}}) { W[0] = T(); break; }`,
		`  if (ctx.rank == {{param "root"}} ? 1 : 0) W[0] = T();`,
		`  if (ctx.rank != {{param "root"}}) { (void)0; return; } W[0] = T();`,
		`  auto f = [&]() { if (ctx.rank != {{param "root"}}) return; }; f(); W[0] = T();`,
	} {
		tmpl := strings.ReplaceAll(bad, "W", w) + rest
		_, errs := emitNest(t, ownSpec, tmpl)
		require.Len(t, errs, 1, bad)
		require.Contains(t, errs[0], `error: {{write "out"}}: out is passed on rank root only (ranks: root), so its pointer is null on every other rank; take it where the kernel runs on that rank alone, e.g. if (ctx.rank == {{param "root"}}) { ... {{write "out"}} ... }`, bad)
		require.Contains(t, errs[0], "nest.yaml:8:38: note: out is passed on rank root only here", bad)
	}
	// Following the advice: the statement in the guard it names.
	guard := regexp.MustCompile(`e\.g\. (if \(ctx\.rank == \{\{param "root"\}\}\)) \{ \.\.\. `)
	for _, stmt := range []string{`  irisgen::copy({{write "out"}}, {{read "x"}}, {{size "n"}});`, `  {{write "out"}}[0] = T();`} {
		_, errs := emitNest(t, ownSpec, stmt+rest)
		require.Len(t, errs, 1)
		m := guard.FindStringSubmatch(errs[0])
		require.NotNil(t, m, errs[0])
		fixed, errs := emitNest(t, ownSpec, "  "+m[1]+" {"+stmt+" }"+rest)
		require.Empty(t, errs)
		nvccCheck(t, fixed)
	}
	// read_index and update of a one-rank tensor are held to it too; peer
	// helpers are not (the exchange gives every rank the owner's pointer).
	spec := strings.Replace(ownSpec, "out: {dir: out, shape: [n], ranks: root}", "out: {dir: inout, shape: [n], ranks: root}", 1)
	spec = strings.Replace(spec, "out: local_write", "out: [local_read, local_write]", 1)
	_, errs = emitNest(t, spec, `  {{update "out"}}[0] = T();`+rest)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], `error: {{update "out"}}: out is passed on rank root only`)
}

package hipemit

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/ir"
)

// rootedSpec has a parameter of every type and two tensors only one rank
// passes: input (root's, read by peers in v) and output (dst's, written
// locally).
const rootedSpec = `name: rt
summary: Test collective with parameters.
dtypes: [f32]
sizes: [n]
params:
  root: rank
  k: {type: int, min: 1}
  eps: f32
tensors:
  input:  {dir: in,  shape: [n], ranks: root}
  output: {dir: out, shape: [n]}
variants:
  v:
    template: t
    access: {input: remote_read, output: local_write}
`

func emitRooted(t *testing.T, tmpl string) (string, []string) {
	t.Helper()
	fs := fstest.MapFS{"t.hip.tmpl": {Data: []byte(tmpl)}}
	c, err := ir.Compile("rt.yaml", []byte(rootedSpec), fs)
	require.NoError(t, err)
	out, err := Emit(&emit.Request{Collectives: []*ir.Collective{c}, Templates: fs})
	if err == nil {
		return string(out["hip/rt.hip"]), nil
	}
	var msgs []string
	for _, e := range err.(diag.List) {
		msgs = append(msgs, e.Error())
	}
	return "", msgs
}

const rootedGood = `  const int r = {{param "root"}}; const int64_t k = {{param "k"}}; const float e = {{param "eps"}};
  T* out = {{write "output"}};
  irisgen::copy(out, {{peer_read "input" "root"}}, {{size "n"}});
  {{barrier}}`

// TestEmitParams: the argument struct holds the parameters after the sizes
// (8 bytes each, an f32 as a double) and the address slots last; the param
// helper reads each in its C type; a tensor only one rank passes that peers
// read makes the kernel start by publishing its offset and meeting the
// peers, and its peer helper gives the owner's pointer.
func TestEmitParams(t *testing.T) {
	src, errs := emitRooted(t, rootedGood)
	require.Empty(t, errs)
	require.Contains(t, src, `struct irisgen_rt_args {
  irisgen_ctx ctx;
  void* t_input;  // in [n], on rank root only
  void* t_output;  // out [n]
  int64_t s_n;
  int64_t p_root;  // rank: 0 <= root < world
  int64_t p_k;  // int: k >= 1
  double p_eps;  // f32: any f32
  void* x_input;  // uint64[blocks]: rank root's heap offset of input, for the kernels that touch it remotely
};`)
	require.Contains(t, src, "const int r = ((int)irisgen_a.p_root); const int64_t k = (irisgen_a.p_k); const float e = ((float)irisgen_a.p_eps);")
	require.Contains(t, src, `  [&]() {
  // input is passed on rank root only: tell every rank where it is.
  if (ctx.rank == (int)irisgen_a.p_root && threadIdx.x < (unsigned)ctx.world)
    irisgen::detail::peer_ptr(ctx, (uint64_t*)irisgen_a.x_input, (int)threadIdx.x)[blockIdx.x] = (uint64_t)(uintptr_t)irisgen_a.t_input - ctx.base[ctx.rank];
  if (!irisgen::sync(ctx)) return;
#line 1 "t.hip.tmpl"
  const int r =`)
	require.Contains(t, src, "irisgen::copy(out, ((const float*)(uintptr_t)(ctx.base[(int)irisgen_a.p_root] + irisgen::load_relaxed((const uint64_t*)irisgen_a.x_input + blockIdx.x))), irisgen_a.s_n);")

	// Without a remote access to a one-rank tensor: no prologue.
	c, err := ir.Compile("rt.yaml", []byte(strings.Replace(rootedSpec, "input: remote_read", "input: local_read", 1)),
		fstest.MapFS{"t.hip.tmpl": {Data: []byte("x")}})
	require.NoError(t, err)
	fs := fstest.MapFS{"t.hip.tmpl": {Data: []byte(`  {{param "k"}} {{param "eps"}} if (ctx.rank == {{param "root"}}) { {{read "input"}}; } {{write "output"}} {{barrier}}`)}}
	out, err := Emit(&emit.Request{Collectives: []*ir.Collective{c}, Templates: fs})
	require.NoError(t, err)
	require.NotContains(t, string(out["hip/rt.hip"]), "tell every rank where it is")
}

// TestEmitParamErrors: an unknown parameter, one a kernel never reads, a
// peer helper of a one-rank tensor that names another peer, a parameter in
// the prelude, and the argument struct's p_ and x_ members named directly.
func TestEmitParamErrors(t *testing.T) {
	for _, c := range []struct {
		tmpl string
		want []string
	}{
		{strings.Replace(rootedGood, `{{param "k"}}`, `{{param "kk"}}`, 1), []string{
			`t.hip.tmpl:1:55: error: param "kk": no such parameter (params: root, k, eps)`}},
		{strings.Replace(rootedGood, `{{param "k"}}`, `0`, 1), []string{
			"rt.yaml:7:3: error: parameter \"k\" is never read by template t.hip.tmpl (variant \"v\"): every variant's kernel must use every parameter; read it with {{param \"k\"}}, or remove it\n" +
				"t.hip.tmpl:1:1: note: the template renders kernel irisgen_rt_v_f32 without it"}},
		{strings.Replace(rootedGood, `{{peer_read "input" "root"}}`, `{{peer_read "input" "r"}}`, 1), []string{
			`t.hip.tmpl:3:24: error: peer_read "input": input is passed on rank root only (ranks: root), so its only peer pointer is that rank's; write {{peer_read "input" "root"}}`}},
		{`{{define "prelude"}}{{param "root"}}{{end}}` + rootedGood, []string{
			`t.hip.tmpl:1:23: error: param "root": only in the kernel body; pass parameters to the prelude's functions`}},
		{rootedGood + "\n  int64_t x = irisgen_a.p_k;", []string{
			"t.hip.tmpl:5:15: error: the template names the kernel's argument struct (irisgen_a); reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md), sizes through size and parameters through param"}},
		{rootedGood + "\n  auto x = irisgen_a.x_input;", []string{
			"t.hip.tmpl:5:12: error: the template names the kernel's argument struct (irisgen_a); reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md), sizes through size and parameters through param"}},
	} {
		_, errs := emitRooted(t, c.tmpl)
		require.Len(t, errs, len(c.want), "%s: %v", c.tmpl, errs)
		for i, w := range c.want {
			require.True(t, strings.HasPrefix(errs[i], w), "got\n%s\nwant\n%s", errs[i], w)
		}
	}
}

// TestEmitExchangeCountsAsMeeting: a variant whose kernel starts with the
// address exchange meets its peers there, so a template without barriers
// supports mode device.
func TestEmitExchangeCountsAsMeeting(t *testing.T) {
	_, errs := emitRooted(t, `  {{param "k"}} {{param "eps"}} irisgen::copy({{write "output"}}, {{peer_read "input" "root"}}, {{size "n"}});`)
	require.Empty(t, errs)
}

package hipemit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/ir"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// FuzzTemplate renders any template text for the specs of hipemit_test.go
// and params_test.go (parameters and one-rank tensors): no panic, no stall,
// and either a kernel source or errors positioned in the template or the
// spec. Seeds: the test templates, the bypass cases and the catalogue's
// templates.
func FuzzTemplate(f *testing.F) {
	f.Add(good)
	f.Add(prefix)
	f.Add(rootedGood)
	names, _ := filepath.Glob("../../../templates/*.hip.tmpl")
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			f.Add(string(b))
		}
	}
	c, err := ir.Compile("ag.yaml", []byte(agSpec), fstest.MapFS{"t.hip.tmpl": {Data: []byte("x")}})
	if err != nil {
		f.Fatal(err)
	}
	rt, err := ir.Compile("rt.yaml", []byte(rootedSpec), fstest.MapFS{"t.hip.tmpl": {Data: []byte("x")}})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		`  {{peer_read "input" (param "root")}} {{write "output"}} {{param "k"}} {{param "eps"}} {{barrier}}`,
		`  // {{param "k"}}` + "\n" + rootedGood, `  auto f = [&]() { {{sync}} };` + "\n" + rootedGood,
		`  {{printf "%d" (size "n")}} {{js (param "k")}} {{if eq (param "root") "0"}}x{{end}}` + "\n" + rootedGood,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tmpl string) {
		for _, c := range []*ir.Collective{c, rt} {
			if src := fuzzOne(t, c, tmpl); src != "" {
				checkKernels(t, c, src, tmpl)
			}
		}
	})
}

// fuzzOne renders tmpl for c and checks the result; it returns the
// kernel source when the template is accepted.
func fuzzOne(t *testing.T, c *ir.Collective, tmpl string) string {
	type result struct {
		files emit.Files
		err   error
	}
	done := make(chan result, 1)
	go func() {
		files, err := Emit(&emit.Request{Collectives: []*ir.Collective{c}, Templates: fstest.MapFS{"t.hip.tmpl": {Data: []byte(tmpl)}}})
		done <- result{files, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("Emit took more than 5s on a %d-byte template", len(tmpl))
	}
	err := r.err
	if err == nil {
		return string(r.files["hip/"+c.Name+".hip"])
	}
	var l diag.List
	if !errors.As(err, &l) || len(l) == 0 {
		t.Fatalf("not a diag.List: %v", err)
	}
	for _, e := range l {
		if (e.Pos.File != "t.hip.tmpl" && e.Pos.File != c.SpecFile) || e.Pos.Line < 1 || e.Pos.Col < 1 || e.Msg == "" {
			t.Fatalf("badly positioned: %v", e)
		}
	}
	return ""
}

// pipeGen builds a template from fuzz bytes: statements that put nested
// pipelines of helpers, template builtins and variables in every C
// context the checks know (code, comments, literals, lambdas, guards,
// preprocessor groups, unevaluated operands, template conditions).
type pipeGen struct {
	b []byte
	i int
}

func (g *pipeGen) pick(n int) int {
	if g.i >= len(g.b) {
		return 0
	}
	v := int(g.b[g.i]) % n
	g.i++
	return v
}

func (g *pipeGen) expr(depth int) string {
	leaves := []string{`param "root"`, `param "k"`, `param "eps"`, `size "n"`, `numel "x"`, `type "x"`, `read "x"`,
		`write "out"`, `read_index "x"`, `barrier`, `sync`, `grid_sync`, `grid_sync_local`, `"0"`, `.T`, `size "world"`}
	if depth >= 3 {
		return leaves[g.pick(len(leaves))]
	}
	switch g.pick(24) {
	case 0, 1, 2:
		tensor := []string{`"x"`, `"y"`, `"out"`}[g.pick(3)]
		helper := []string{"peer_read", "peer_write", "peer_update", "peer_atomic"}[g.pick(4)]
		return helper + " " + tensor + " " + g.arg(depth+1)
	case 3:
		return `printf "%s" (` + g.expr(depth+1) + `)`
	case 4:
		return `printf "` + []string{"%d", "%q", "%x", "%.2s", "%v", "(%s + 1) %% ctx.world"}[g.pick(6)] + `" (` + g.expr(depth+1) + `)`
	case 5:
		return []string{"print", "js", "html", "urlquery", "len", "println"}[g.pick(6)] + " (" + g.expr(depth+1) + ")"
	case 6:
		return []string{"eq", "ne", "lt"}[g.pick(3)] + " (" + g.expr(depth+1) + `) "0"`
	case 7:
		return g.expr(depth+1) + " | " + []string{"len", "print", `peer_read "x"`, `printf "%s"`}[g.pick(4)]
	case 8:
		return []string{"param", "size", "read", "numel", "type"}[g.pick(5)] + " (" + g.expr(depth+1) + ")"
	case 9:
		return `slice (` + g.expr(depth+1) + `) 1`
	case 10:
		return `index (` + g.expr(depth+1) + `) 0`
	}
	return leaves[g.pick(len(leaves))]
}

func (g *pipeGen) arg(depth int) string {
	switch g.pick(6) {
	case 0:
		return `"0"`
	case 1:
		return `"root"`
	case 2:
		return `"(ctx.rank + 1) % ctx.world"`
	}
	return "(" + g.expr(depth) + ")"
}

func (g *pipeGen) stmt() string {
	e := func() string { return "{{" + g.expr(0) + "}}" }
	switch g.pick(16) {
	case 0:
		return "  // " + e()
	case 1:
		return "  /* " + e() + " */"
	case 2:
		return `  const char* s = "` + e() + `";`
	case 3:
		return "  auto f = [&]() { " + e() + "; }; f();"
	case 4:
		return `  if (ctx.rank == {{param "root"}}) { ` + e() + "; }"
	case 5:
		return "#if 0\n  " + e() + "\n#endif"
	case 6:
		return "  (void)sizeof(" + e() + ");"
	case 7:
		return "  {{if " + g.expr(0) + "}}x{{end}}"
	case 8:
		return "  {{$v := " + g.expr(0) + "}}(void){{$v}};"
	case 9:
		return "  irisgen::copy(" + e() + ", " + e() + ", " + e() + ");"
	case 10:
		return `  if (ctx.rank != {{param "root"}}) return; ` + e() + ";"
	case 11:
		return "  irisgen::row_pieces<T>(sp, 4, [&](int64_t i, int k) { " + e() + " });"
	}
	return "  (void)" + e() + ";"
}

// base are statements that make the spec's accesses and read its
// parameters, each included or not by a bit of the input, so that
// accepted templates are common and must still make all of them.
var base = []string{
	`  const T* xx = {{peer_read "x" "0"}};`, `  const T* yy = {{peer_read "y" "root"}};`,
	`  if (ctx.rank == {{param "root"}}) { T* o = {{write "out"}}; o[0] = T(); }`,
	`  (void){{param "k"}}; (void){{param "eps"}}; (void){{param "root"}};`, `  {{barrier}}`,
}

// FuzzNestedPipelines renders generated templates (pipeGen) for nestSpec
// and ownSpec: no panic, no stall, positioned errors, and an accepted
// kernel holds no control character and really (in code, not in a
// comment, literal, preprocessor group or unevaluated operand) reads
// every parameter, touches every tensor it declares and meets its peers
// when it supports mode device.
func FuzzNestedPipelines(f *testing.F) {
	f.Add([]byte{0x1f})
	f.Add([]byte{0x1f, 0, 0, 1, 3})
	f.Add([]byte{0x0f, 1, 3, 2, 0, 0, 5, 0})
	f.Add([]byte{0x1b, 9, 0, 3, 0, 5, 0, 3, 8, 0, 8, 1})
	f.Add([]byte{0x1f, 3, 0, 0, 0, 1, 4, 0, 7, 0})
	specs := map[string]*ir.Collective{}
	for name, src := range map[string]string{"nest.yaml": nestSpec, "own.yaml": ownSpec} {
		c, err := ir.Compile(name, []byte(src), fstest.MapFS{"t.hip.tmpl": {Data: []byte("x")}})
		if err != nil {
			f.Fatal(err)
		}
		specs[name] = c
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) > 256 {
			return
		}
		g := &pipeGen{b: b[1:]}
		var lines []string
		for i, s := range base {
			if b[0]&(1<<i) != 0 {
				lines = append(lines, s)
			}
		}
		for n := 0; g.i < len(g.b) && n < 12; n++ {
			lines = append(lines, g.stmt())
		}
		tmpl := strings.Join(lines, "\n")
		for _, c := range []*ir.Collective{specs["nest.yaml"], specs["own.yaml"]} {
			src := fuzzOne(t, c, tmpl)
			if src != "" {
				checkKernels(t, c, src, tmpl)
			}
		}
	})
}

// checkKernels checks every kernel body of an accepted source, with an
// oracle of its own: the code tokens of the body, outside comments,
// literals, preprocessor lines and groups and unevaluated operands.
func checkKernels(t *testing.T, c *ir.Collective, src, tmpl string) {
	t.Helper()
	for i, ch := range []byte(src) {
		if ch < 0x20 && ch != '\n' && ch != '\t' {
			t.Fatalf("control character %#x at %d of the kernel source of\n%s", ch, i, tmpl)
		}
	}
	for _, v := range c.Variants {
		for _, k := range v.Kernels {
			at := strings.Index(src, k.Name+"(")
			if at < 0 {
				t.Fatalf("no kernel %s", k.Name)
			}
			body := src[at:]
			body = body[strings.Index(body, "[&]() {\n")+len("[&]() {\n"):]
			body = body[:strings.Index(body, "\n  }();\n")]
			body = strings.TrimPrefix(body, exchangePrologue(v))
			code := codeIdents(body)
			for _, p := range c.Params {
				if !code[ParamField(p)] {
					t.Fatalf("kernel %s does not read parameter %s in code, yet was accepted:\n%s\n--- body\n%s", k.Name, p.Name, tmpl, body)
				}
			}
			for _, u := range v.Uses {
				if u.Access != 0 && !code[TensorField(u.Tensor)] && !code[SlotField(u.Tensor)] {
					t.Fatalf("kernel %s does not touch %s in code, yet was accepted:\n%s\n--- body\n%s", k.Name, u.Tensor.Name, tmpl, body)
				}
			}
			if v.Supports(irismodel.BarrierDevice) && !exchanges(v) && !code["barrier"] && !code["sync"] && !code["grid_sync"] {
				t.Fatalf("kernel %s meets no peer in code, yet supports mode device:\n%s\n--- body\n%s", k.Name, tmpl, body)
			}
		}
	}
}

// codeIdents are the identifiers of C++ text that the compiler evaluates.
func codeIdents(text string) map[string]bool {
	var kept []string
	depth := 0
	for _, line := range strings.Split(text, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "#if"):
			depth++
			continue
		case strings.HasPrefix(l, "#endif"):
			depth--
			continue
		case strings.HasPrefix(l, "#") || depth > 0:
			continue
		}
		kept = append(kept, line)
	}
	toks := lex([]byte(strings.Join(kept, "\n")))
	out := map[string]bool{}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == 'i' && unevaluated[t.text] && i+1 < len(toks) && toks[i+1].text == "(" {
			for d := 0; i+1 < len(toks); i++ {
				switch toks[i+1].text {
				case "(":
					d++
				case ")":
					d--
				}
				if d == 0 {
					break
				}
			}
			continue
		}
		if t.kind == 'i' {
			out[t.text] = true
		}
	}
	return out
}

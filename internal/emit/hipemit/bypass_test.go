package hipemit

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/ir"
)

// prefix makes every access the spec of hipemit_test.go declares, so that
// a case's only errors are its bypass.
const prefix = "  uint64_t* s = {{update \"scratch\"}}; {{barrier}} T* o = {{write \"output\"}}; const T* i = {{peer_read \"input\" \"0\"}};\n"

const (
	noteAccess = "ag.yaml:13:5: note: variant \"v\" declares its accesses here; the wrappers' checks come from them, so the kernel must reach tensors only through the helpers"
	noteInput  = "ag.yaml:13:14: note: the wrappers check \"input\" as declared here (remote_read)"
	noteOutput = "ag.yaml:13:34: note: the wrappers check \"output\" as declared here (local_write)"
)

// TestBypassRefused: every way around the helpers the checks know, each at
// its position in the template (line 2, after the prefix) with a note at
// the spec.
func TestBypassRefused(t *testing.T) {
	for _, c := range []struct {
		name, body string
		col        int
		msg, note  string
	}{
		{"raw argument struct", "  irisgen::copy(o, (const T*)irisgen_a.t_input, 4);", 30,
			"the template names the kernel's argument struct (irisgen_a); reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size", noteInput},
		{"argument struct assembled by template functions", `  {{printf "%s_%s" "irisgen" "a"}}.t_output[0] = 1;`, 5,
			"the template names the kernel's argument struct (irisgen_a); reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size", noteOutput},
		{"argument struct through a variable", `  {{$n := "irisgen_a"}}{{$n}}.s_n;`, 26,
			"the template names the kernel's argument struct (irisgen_a); reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size", noteAccess},
		{"argument struct spliced by the preprocessor", "  irisgen\\\n_a.s_n;", 3,
			"the template names the kernel's argument struct (irisgen_a); reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size", noteAccess},
		{"argument struct type", "  auto& a = *(const irisgen_ag_args*)0;", 21,
			"the template names the kernel's argument struct type (irisgen_ag_args); reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size", noteAccess},
		{"argument struct member", "  auto q = (&ctx)[1];", 13,
			"the template takes the address of ctx, the first member of the kernel's argument struct; read ctx's fields (ctx.rank, ctx.world) and pass ctx to the header's functions", noteAccess},
		{"member of the struct through a cast", "  x->t_output;", 6,
			"the template reads the argument struct's member t_output; reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size", noteOutput},
		{"the ctx type", "  const irisgen_ctx* c = 0;", 9,
			"the template names the type irisgen_ctx, which reaches the argument struct around the helpers; read ctx's fields (ctx.rank, ctx.world) and pass ctx to the header's functions", noteAccess},
		{"addressof", "  auto p = __builtin_addressof(ctx);", 12,
			"the template takes an address with __builtin_addressof, which can reach the argument struct around the helpers; reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size", noteAccess},
		{"address of a size", `  const int64_t* n = &{{size "n"}};`, 22,
			"the template takes the address of a helper's value, which points into the kernel's argument struct; copy the value instead", noteAccess},
		{"header address translation", `  T* w = irisgen::peer_ptr(ctx, o, 1);`, 19,
			"the template translates addresses itself (peer_ptr); take peer pointers with peer_read, peer_write, peer_update or peer_atomic, which record the access", noteAccess},
		{"header internals", `  using namespace irisgen; auto f = &detail::store;`, 38,
			"the template names irisgen::detail, the device header's internals (address translation); take peer pointers with peer_read, peer_write, peer_update or peer_atomic", noteAccess},
		{"heap bases", `  uint64_t b = ctx.base[1];`, 20,
			"the template reads the heap bases (ctx.base) and so translates addresses around the helpers; take peer pointers with peer_read, peer_write, peer_update or peer_atomic", noteAccess},
		{"const_cast of a read pointer", `  const_cast<T*>(i)[0] = T();`, 3,
			"the template uses const_cast, which can turn a pointer from read or peer_read into a writable one; take a writable pointer with write, update, peer_write or peer_update, which record the write", noteAccess},
		{"reinterpret_cast", `  reinterpret_cast<T*>((uintptr_t)i)[0] = T();`, 3,
			"the template uses reinterpret_cast, which can turn a pointer from read or peer_read into a writable one; take a writable pointer with write, update, peer_write or peer_update, which record the write", noteAccess},
		{"C-style cast of a read pointer", `  ((T*)i)[0] = T();`, 4,
			"the template casts to T*, a non-const pointer or reference type, which can turn a read pointer into a writable one; take writable pointers with write, update, peer_write or peer_update (casts to const pointers are fine)", noteAccess},
		{"C-style cast of a helper", `  T* w = (T*){{peer_read "input" "1"}};`, 10,
			"the template casts to T*, a non-const pointer or reference type, which can turn a read pointer into a writable one; take writable pointers with write, update, peer_write or peer_update (casts to const pointers are fine)", noteAccess},
		{"cast to a const pointer to non-const", `  T* w = (T* const)i;`, 10,
			"the template casts to T* const, a non-const pointer or reference type, which can turn a read pointer into a writable one; take writable pointers with write, update, peer_write or peer_update (casts to const pointers are fine)", noteAccess},
		{"cast to a reference", `  (T&)i[0] = T();`, 3,
			"the template casts to T&, a non-const pointer or reference type, which can turn a read pointer into a writable one; take writable pointers with write, update, peer_write or peer_update (casts to const pointers are fine)", noteAccess},
		{"cast in a macro", "#define W (T*)\n  W i;", 11,
			"the template casts to T*, a non-const pointer or reference type, which can turn a read pointer into a writable one; take writable pointers with write, update, peer_write or peer_update (casts to const pointers are fine)", noteAccess},
		{"read pointer cast to an integer", `  auto u = (uintptr_t){{read "input"}};`, 12,
			"the template casts the read pointer of \"input\" to uintptr_t, which can turn it into a writable one; cast it to a const pointer if it needs another type", noteInput},
		{"pointer typedef", `  typedef T* TP; TP w = TP(i);`, 3,
			"the template declares T*, an alias of a non-const pointer or reference type, through which a cast can turn a read pointer into a writable one; declare pointer variables with their type written out", noteAccess},
		{"pointer using", `  using TP = T*;`, 3,
			"the template declares T*, an alias of a non-const pointer or reference type, through which a cast can turn a read pointer into a writable one; declare pointer variables with their type written out", noteAccess},
		{"union", `  union { const T* r; T* w; } u;`, 3,
			"the template declares a union, which can reinterpret a read pointer as a writable one; use separate variables", noteAccess},
		{"memcpy of pointer bits", `  T* w; memcpy(&w, &i, 8);`, 9,
			"the template copies bits with memcpy, which can turn a read pointer into a writable one; copy data with the header's copy functions, and take writable pointers with write, update, peer_write or peer_update", noteAccess},
		{"token pasting", "#define CAT(a, b) a##b\n  CAT(irisgen_, a);", 20,
			"the template pastes tokens (##), which can assemble names the generator refuses; write names out", noteAccess},
		{"token pasting digraph", "#define CAT(a, b) a%:%:b", 20,
			"the template pastes tokens (%:%:), which can assemble names the generator refuses; write names out", noteAccess},
		{"peer expression", `  T* w = {{peer_write "output" "irisgen_a.s_n"}};`, 12,
			"the template names the kernel's argument struct (irisgen_a); reach tensors through the helpers (read, write, peer_read, ...; docs/templates.md) and sizes through size", noteAccess},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := emitErrs(t, prefix+c.body)
			var found []string
			for _, e := range errs {
				if !strings.Contains(e, "access to tensor") { // a case may also make an undeclared access
					found = append(found, e)
				}
			}
			require.NotEmpty(t, found, "not refused:\n%s", c.body)
			want := fmt.Sprintf("t.hip.tmpl:2:%d: error: %s\n%s", c.col, c.msg, c.note)
			assert.Equal(t, want, found[0])
		})
	}
}

// TestBypassAllowed: what the catalogue's templates do stays accepted, and
// so do the checked names where they are not what the checks look for.
func TestBypassAllowed(t *testing.T) {
	for _, body := range []string{
		`  const T* c = (const T*)o + 4; if ((const void*)o != (const void*)i) o[0] = i[0];`,
		`  const int64_t n = {{size "n"}}; for (int p = 0; p < ctx.world; p++) o[(int64_t)p * n] = T();`,
		`  // irisgen_a, peer_ptr, const_cast and (T*) in a comment are fine`,
		`  /* irisgen_a.t_input */ const char* m = "irisgen_a peer_ptr ## (T*)x"; char q = '#';`,
		`  auto part = [&](int c) { return (int64_t)c * sizeof(T*); };`,
		`  T* w = o; uint64_t b = (uint64_t)(uintptr_t)o; int x = a * (b) - c;`,
		`  if (irisgen::aligned16(o) && ctx.rank == 0) irisgen::copy(o, i, 4);`,
		`  int detail = 1; using namespace irisgen;`,
		`  typedef const T* CTP; using CP = const T*; T x = static_cast<T>(0);`,
	} {
		c, fs := compile(t, prefix+body)
		_, err := Emit(&emit.Request{Collectives: []*ir.Collective{c}, Templates: fs})
		assert.NoError(t, err, "refused:\n%s", body)
	}
}

// TestHeaderGlobals keeps ir.HeaderGlobals equal to the names the device
// header declares at file scope (types, structs, namespaces), so that a
// generated symbol never takes one.
func TestHeaderGlobals(t *testing.T) {
	src, err := os.ReadFile("../../../runtime/include/irisgen.h")
	require.NoError(t, err)
	found := map[string]bool{}
	depth := 0
	for _, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimSpace(line)
		next := depth + strings.Count(line, "{") - strings.Count(line, "}")
		var res []*regexp.Regexp
		if depth == 0 {
			res = append(res, regexp.MustCompile(`^namespace (\w+) \{`), regexp.MustCompile(`^struct (\w+)`), regexp.MustCompile(`^typedef .* (\w+);`))
		}
		if next == 0 {
			res = append(res, regexp.MustCompile(`^\} (\w+);`)) // typedef struct { ... } name;
		}
		for _, re := range res {
			if m := re.FindStringSubmatch(trimmed); m != nil {
				found[m[1]] = true
			}
		}
		depth = next
	}
	want := map[string]bool{}
	for _, n := range ir.HeaderGlobals {
		want[n] = true
	}
	assert.Equal(t, want, found)
}

package ir

import (
	"fmt"
	"strings"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// The names a spec chooses become file names, HIP symbols and Go
// identifiers. The checks here refuse, at the spec's position, every name
// whose output would not build or would silently change meaning; the
// emitters can then use names as they are.

// MaxNameLen bounds every name of a spec (collectives, variants, tensors,
// sizes, templates): they become file names (<collective>.go, .hip, .hsaco,
// .fatbin; <template>.hip.tmpl) and parts of symbols, and 64 bytes keeps
// both far below any file system's limit.
const MaxNameLen = 64

// Size limits of one spec. Each is far above what a collective needs (the
// catalogue's largest has 8 variants, 9 tensors, 5 sizes, 3 dimensions) and
// keeps the kernel argument struct within the 4 KiB that every GPU
// platform passes (112 + 8 x (tensors + sizes + params + index widths +
// one-rank tensors) bytes) and the generated wrappers' size bounded.
const (
	MaxSummary  = 2048
	MaxTensors  = 64
	MaxSizes    = 32
	MaxParams   = 16
	MaxVariants = 64
	MaxDims     = 16
)

// ArgsStructName is the C name of a collective's kernel argument struct.
func ArgsStructName(collective string) string { return "irisgen_" + collective + "_args" }

// PreludeNamespace is the namespace of a variant's template prelude. The
// suffix keeps it apart from the variant's kernel when the collective has
// no dtypes and no ops (the kernel is then irisgen_<collective>_<variant>).
func PreludeNamespace(collective, variant string) string {
	return "irisgen_" + collective + "_" + variant + "_prelude"
}

// HeaderGlobals are the names runtime/include/irisgen.h declares at file
// scope (macros are upper case and cannot collide); a generated symbol may
// not take one. hipemit's tests keep the list equal to the header.
var HeaderGlobals = []string{"irisgen", "irisgen_ctx", "irisgen_error", "irisgen_f16", "irisgen_bf16"}

// goFileProblem says why <name>.go would not be an ordinary file of the
// generated package, or returns "". The go tool reads a suffix _test as a
// test file and a suffix _GOOS, _GOARCH or _GOOS_GOARCH (after the first
// element) as a build constraint, so the wrappers would vanish from some
// or all builds; Windows cannot create files named like its devices.
func goFileProblem(name string) string {
	parts := strings.Split(name, "_")
	if len(parts) > 1 && parts[len(parts)-1] == "test" {
		return fmt.Sprintf("%s.go would be a test file (suffix _test), left out of the package's build", name)
	}
	parts = parts[1:] // the go tool ignores the element before the first _
	if n := len(parts); n >= 2 && knownOS[parts[n-2]] && knownArch[parts[n-1]] {
		return fmt.Sprintf("%s.go would build only for GOOS=%s GOARCH=%s (a file name suffix is a build constraint)", name, parts[n-2], parts[n-1])
	}
	if n := len(parts); n >= 1 && knownOS[parts[n-1]] {
		return fmt.Sprintf("%s.go would build only for GOOS=%s (a file name suffix is a build constraint)", name, parts[n-1])
	}
	if n := len(parts); n >= 1 && knownArch[parts[n-1]] {
		return fmt.Sprintf("%s.go would build only for GOARCH=%s (a file name suffix is a build constraint)", name, parts[n-1])
	}
	if windowsDevices[name] {
		return fmt.Sprintf("%s.go cannot be created on Windows (%s is a device name there)", name, name)
	}
	return ""
}

// knownOS and knownArch are the go tool's lists (internal/syslist); names
// tests/ir compare them with the installed Go's.
var knownOS = wordSet(`aix android darwin dragonfly freebsd hurd illumos ios js linux nacl netbsd
	openbsd plan9 solaris wasip1 windows zos`)

var knownArch = wordSet(`386 amd64 amd64p32 arm armbe arm64 arm64be loong64 mips mipsle mips64
	mips64le mips64p32 mips64p32le ppc ppc64 ppc64le riscv riscv64 s390 s390x sparc sparc64 wasm`)

var windowsDevices = wordSet(`con prn aux nul com0 com1 com2 com3 com4 com5 com6 com7 com8 com9
	lpt0 lpt1 lpt2 lpt3 lpt4 lpt5 lpt6 lpt7 lpt8 lpt9`)

func wordSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// symbolOwner is what a generated HIP symbol names, for messages.
type symbolOwner struct {
	what string
	pos  Pos
}

// hipSymbols refuses a collective whose generated HIP symbols collide with
// each other or with the header's: the argument struct, the spec hash, and
// per variant its prelude namespace (reserved even when the template has no
// prelude, so adding one later cannot break the build) and its kernels.
// Kernel names of different dtypes and ops never collide with each other,
// but a variant name can spell another's kernel or namespace (variant x_f32
// against variant x's f32 kernel) or the struct (a variant called args).
func (b *builder) hipSymbols(c *Collective) {
	owners := map[string]symbolOwner{}
	for _, h := range HeaderGlobals {
		owners[h] = symbolOwner{what: "a name of the device header irisgen.h"}
	}
	claim := func(sym, what string, at Pos) bool {
		if prev, taken := owners[sym]; taken {
			where := ""
			if prev.pos.Line > 0 {
				where = " (at " + lineCol(prev.pos) + ")"
			}
			b.errorf(diag.Name, at, "HIP symbol %s, %s, is also %s%s; rename the variant", sym, what, prev.what, where)
			return false
		}
		owners[sym] = symbolOwner{what: what, pos: at}
		return true
	}
	claim(ArgsStructName(c.Name), "the kernel argument struct", c.Pos)
	claim(irismodel.SpecHashSymbol(c.Name), "the spec hash symbol", c.Pos)
	for _, v := range c.Variants {
		if !claim(PreludeNamespace(c.Name, v.Name), fmt.Sprintf("the prelude namespace of variant %q", v.Name), v.Pos) {
			continue
		}
		for _, k := range v.Kernels {
			if !claim(k.Name, fmt.Sprintf("a kernel of variant %q", v.Name), v.Pos) {
				break
			}
		}
	}
}

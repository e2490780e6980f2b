package irismodel

// KernelName is the one naming function for kernel entry points:
// irisgen_<collective>_<variant>[_<dtype>][_<op>]. The dtype is 0 for a
// collective without data types (e.g. barrier), the op "" for one that
// does not reduce; each is then left out with its underscore.
func KernelName(collective, variant string, dt DType, op string) string {
	name := "irisgen_" + collective + "_" + variant
	if dt != 0 {
		name += "_" + dt.String()
	}
	if op != "" {
		name += "_" + op
	}
	return name
}

// SpecHashSymbol is the __device__ char array every module of collective
// defines with the spec hash it was generated from; the runtime reads it
// when it loads the module and compares it with the generated wrapper's.
func SpecHashSymbol(collective string) string { return "irisgen_spec_hash_" + collective }

// AutoVariant is the name of the variant that picks one of the others from
// the collective's tuning table (Choose).
const AutoVariant = "auto"

// AutoRule picks Variant for a launch on World ranks (0: any) whose largest
// user tensor has at most MaxBytes bytes (0: any size). A tuning table is a
// list of them, first match first, the last matching everything.
type AutoRule struct {
	World    int
	MaxBytes int64
	Variant  string
}

// Matches reports whether the rule picks its variant for a launch on world
// ranks whose largest user tensor has the given bytes.
func (r AutoRule) Matches(world int, bytes int64) bool {
	return (r.World == 0 || r.World == world) && (r.MaxBytes == 0 || bytes <= r.MaxBytes)
}

// Choose is the variant the first matching rule picks ("" when none does).
func Choose(rules []AutoRule, world int, bytes int64) string {
	for _, r := range rules {
		if r.Matches(world, bytes) {
			return r.Variant
		}
	}
	return ""
}

// DefaultKernelsCommand is the command that builds a generated package's
// code objects, as errors about missing or stale ones name it, when the
// package's configuration gives none.
const DefaultKernelsCommand = "irisgen kernels"

// ObjectExt is the code object file extension of each platform (what its
// runtime binding loads and its compiler writes): the one place a new
// platform adds beside its binding (runtime/gpu's Register) and its
// compiler (internal/toolchain's Register). A platform not listed, such as
// the test platforms, uses its own name.
var ObjectExt = map[string]string{"cuda": "fatbin", "hip": "hsaco"}

// KernelFile is the code object file name of module (a collective) on a
// platform: <module>.<ObjectExt[platform]>, e.g. all_reduce.hsaco.
// `irisgen kernels` writes them into the generated package's kernels/
// directory, which the package embeds.
func KernelFile(platform, module string) string {
	if ext, ok := ObjectExt[platform]; ok {
		return module + "." + ext
	}
	return module + "." + platform
}

// Package ir holds the resolved, validated form of the collective specs. It is
// the only input of the emitters: everything they need (kernel names, derived
// placements, aliasing, barrier modes, capturability, the spec hash) is here,
// so no emitter re-derives a rule from the YAML.
package ir

import (
	"fmt"
	"strings"

	"github.com/irisgen/irisgen/internal/diag"
)

// Pos is a position in a spec file, 1-based like the YAML parser's. It is
// an alias of diag.Pos so that the IR builder (Compile) can return diag
// errors: diag must not import ir.
type Pos = diag.Pos

// DType is an element type a spec may name.
type DType string

// The element types. F32/F16/BF16 are data types of collectives; I32/I64 are
// index types (MoE expert ids); U64 is the type of workspace flags.
const (
	F32  DType = "f32"
	F16  DType = "f16"
	BF16 DType = "bf16"
	I32  DType = "i32"
	I64  DType = "i64"
	U64  DType = "u64"
)

// Size is the size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case I64, U64:
		return 8
	}
	return 0
}

// Op is a reduction operator.
type Op string

// The reduction operators.
const (
	OpNone Op = "" // collectives that do not reduce
	OpSum  Op = "sum"
	OpMax  Op = "max"
	OpMin  Op = "min"
)

// Access is a set of ways a kernel touches a tensor.
type Access uint8

// The access kinds of the spec language.
const (
	LocalRead Access = 1 << iota
	LocalWrite
	RemoteRead
	RemoteWrite
	RemoteAtomic
)

// AccessNames maps spec spellings to access kinds, in a fixed order.
var AccessNames = []struct {
	Name   string
	Access Access
}{
	{"local_read", LocalRead},
	{"local_write", LocalWrite},
	{"remote_read", RemoteRead},
	{"remote_write", RemoteWrite},
	{"remote_atomic", RemoteAtomic},
}

func (a Access) String() string {
	var parts []string
	for _, n := range AccessNames {
		if a&n.Access != 0 {
			parts = append(parts, n.Name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Remote reports whether any access is on a peer.
func (a Access) Remote() bool { return a&remote != 0 }

// Writes reports whether the tensor is written, locally or remotely.
func (a Access) Writes() bool { return a&writes != 0 }

// Placement is the heap rule a launch wrapper enforces for a tensor; it is
// derived from the tensor's role and access (the rule table, rules.go),
// never written in a spec.
type Placement uint8

// The placement rules.
const (
	// PlaceAny: only this rank touches it; any device memory will do.
	PlaceAny Placement = iota
	// PlaceImport: read by peers and written by nobody; on the heap, or
	// copied into plan-owned heap staging on the stream before the launch.
	PlaceImport
	// PlaceHeap: written by peers, or read by peers while this rank writes
	// it; must be on the heap, otherwise a typed error and nothing is
	// launched.
	PlaceHeap
	// PlacePlan: a workspace; the plan allocates it on the heap.
	PlacePlan
)

func (p Placement) String() string {
	return [...]string{"any", "import", "heap", "plan"}[p]
}

// Dir is the direction of a tensor in a collective's signature.
type Dir string

// Tensor directions. Workspace tensors are not passed by the user: the plan
// allocates them on the heap.
const (
	In        Dir = "in"
	Out       Dir = "out"
	InOut     Dir = "inout"
	Workspace Dir = "workspace"
)

// Dim is one factor of a shape: a symbol (a size parameter such as "n", or
// one of the built-ins "world" and "blocks") or a positive constant.
type Dim struct {
	Symbol string // empty for a constant
	Const  int64
}

func (d Dim) String() string {
	if d.Symbol != "" {
		return d.Symbol
	}
	return fmt.Sprint(d.Const)
}

// Built-in shape symbols, known to every spec.
const (
	SymWorld  = "world"
	SymBlocks = "blocks"
)

// Tensor is a tensor of a collective's signature.
type Tensor struct {
	Name  string
	Dir   Dir
	Shape []Dim
	// DType is fixed for workspace and index tensors (e.g. U64 flags, I32
	// ids); empty means "the kernel's data type".
	DType DType
	// IndexDTypes, when set, are the index types a launch may pass for this
	// tensor (DType is the first); kernels read it through read_index.
	IndexDTypes []DType
	// Optional: a launch may leave the tensor out (a nil pointer reaches
	// the kernel). Only dir: in tensors that no peer touches.
	Optional bool
	// Ranks, when set, is the rank parameter whose rank alone uses the
	// tensor (spec key ranks): the other ranks pass the zero tensor, and the
	// launch checks it on that rank only (OwnedTable).
	Ranks    string
	RanksPos Pos // the ranks key's value
	Pos      Pos
}

// ParamType is the type of a scalar launch parameter.
type ParamType string

// The parameter types.
const (
	// ParamRank is a rank of the world: the launch checks 0 <= p < world.
	ParamRank ParamType = "rank"
	// ParamInt is a signed 64-bit integer, within Min and Max where given.
	ParamInt ParamType = "int"
	// ParamF32 is a 32-bit float (an epsilon, a scale), not range-checked.
	ParamF32 ParamType = "f32"
)

// Param is a typed scalar a launch passes (spec key params): one plan
// serves every value, and a captured graph replays the value it captured.
type Param struct {
	Name string
	Type ParamType
	// Min and Max bound an int parameter; nil where the spec gives none.
	Min, Max *int64
	Pos      Pos
}

// Range describes the values the launch accepts, e.g. "0 <= root < world",
// "1 <= k <= 64", "any int64".
func (p *Param) Range() string {
	switch {
	case p.Type == ParamRank:
		return "0 <= " + p.Name + " < world"
	case p.Type == ParamF32:
		return "any f32"
	case p.Min != nil && p.Max != nil:
		return fmt.Sprintf("%d <= %s <= %d", *p.Min, p.Name, *p.Max)
	case p.Min != nil:
		return fmt.Sprintf("%s >= %d", p.Name, *p.Min)
	case p.Max != nil:
		return fmt.Sprintf("%s <= %d", p.Name, *p.Max)
	}
	return "any int64"
}

// Use is how one variant touches one tensor.
type Use struct {
	Tensor    *Tensor
	Access    Access
	Placement Placement // Rule.Placement
	// Rule is the row of the rule table (rules.go) the tensor's role and
	// access select; everything derived for the tensor comes from it.
	Rule *Rule
	// Owned is the row of OwnedTable for a tensor only one rank uses
	// (Tensor.Ranks), nil for the others.
	Owned *OwnedRule
	Pos   Pos // position of the access entry in the spec
}

// Exchanged reports whether peers touch a tensor only one rank uses: the
// kernel then learns that rank's address of it at its start (OwnedTable).
func (u Use) Exchanged() bool { return u.Owned != nil && u.Owned.Exchange }

// Aliasing is whether input and output tensors of a launch may overlap.
type Aliasing string

// Aliasing rules.
const (
	AliasForbid Aliasing = "forbid"
	AliasAllow  Aliasing = "allow"
)

// BarrierMode is how a launch is ordered against the peers' launches.
type BarrierMode string

// Barrier modes, selectable per launch among those a variant supports.
const (
	BarrierDevice BarrierMode = "device" // GPU flags on the heap; capturable
	BarrierHost   BarrierMode = "host"   // stream sync + CPU rendezvous; not capturable
	BarrierNone   BarrierMode = "none"   // the caller orders things
)

// Launch is a variant's launch shape.
type Launch struct {
	Threads     int // threads per block
	MaxBlocks   int // upper bound of the grid; the plan picks blocks <= MaxBlocks from the size
	VectorBytes int // bytes per vector access (16 by default)
}

// Variant is one algorithm of a collective.
type Variant struct {
	Name     string
	Summary  string // the spec's one sentence for the variant's docs, or ""
	Template string // template name under templates/, without extension
	// TemplatePos is where the spec names the template; errors found while
	// rendering it note it.
	TemplatePos Pos
	// AccessPos is the variant's access key (its name when it has none):
	// errors about what a template does note it.
	AccessPos Pos
	Uses      []Use // one per tensor of the collective, in tensor order
	Aliasing  Aliasing
	// Barriers lists the modes a launch may ask for; Barriers[0] is the default.
	Barriers []BarrierMode
	Launch   Launch
	// Capturable reports, per barrier mode, whether a launch in that mode can
	// be captured in a GPU graph, with the reason when it cannot.
	Capture []Capture
	Kernels []Kernel
	Pos     Pos
}

// Capture is the derived graph-capture claim of one barrier mode of a variant.
type Capture struct {
	Mode       BarrierMode
	Capturable bool
	Reason     string // why not, when not
}

// Kernel is one compiled entry point: a variant for one data type and op.
type Kernel struct {
	Name  string // KernelName(...)
	DType DType
	Op    Op
}

// Collective is one spec file.
type Collective struct {
	Name     string
	Summary  string
	SpecFile string // path as given to the generator, used in "generated from" headers and errors
	// SpecHash is a hex digest of the spec's content and of the templates it
	// uses; it is baked into both the HIP module and the Go wrapper.
	SpecHash string
	DTypes   []DType
	Ops      []Op     // empty when the collective does not reduce
	Symbols  []string // user size parameters in the order of the spec's sizes (e.g. "n"); kernel args follow this order
	// SymbolPos is where the spec declares each of Symbols.
	SymbolPos []Pos
	Params    []*Param // launch parameters in spec order, packed after the sizes
	Tensors   []*Tensor
	Variants  []*Variant
	// Auto is the tuning table of the auto variant, nil without one.
	Auto *Auto
	Pos  Pos
}

// KernelName is the one naming function for kernel entry points:
// irisgen_<collective>_<variant>[_<dtype>][_<op>]. The dtype is empty for a
// collective without data tensors (e.g. barrier), the op is OpNone for one
// that does not reduce; each empty part is left out with its underscore.
func KernelName(collective, variant string, dt DType, op Op) string {
	name := "irisgen_" + collective + "_" + variant
	if dt != "" {
		name += "_" + string(dt)
	}
	if op != OpNone {
		name += "_" + string(op)
	}
	return name
}

// AutoVariant is the name of the variant that picks one of the others by
// size and world size from a tuning table.
const AutoVariant = "auto"

// Auto is a collective's tuning table (specs/tuning/<collective>.yaml): the
// rules of its auto variant, measured by `irisgen bench -tune`.
type Auto struct {
	File     string // path as given to the generator
	Measured string // provenance: machine, date, dtype, mode
	Rules    []AutoRule
}

// AutoRule picks Variant for a launch on World ranks (0: any) whose largest
// tensor has at most MaxBytes bytes (0: any size). The first matching rule
// wins; the last rule matches everything.
type AutoRule struct {
	World    int
	MaxBytes int64
	Variant  string
	Pos      Pos
}

// Choose returns the variant the table picks.
func (a *Auto) Choose(world int, bytes int64) string {
	for _, r := range a.Rules {
		if (r.World == 0 || r.World == world) && (r.MaxBytes == 0 || bytes <= r.MaxBytes) {
			return r.Variant
		}
	}
	return ""
}

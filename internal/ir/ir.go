// Package ir holds the resolved, validated form of the collective specs. It is
// the only input of the emitters: everything they need (kernel names, derived
// placements, aliasing, barrier modes, capturability, the spec hash) is here,
// so no emitter re-derives a rule from the YAML.
package ir

import (
	"fmt"
	"strings"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Pos is a position in a spec file, 1-based like the YAML parser's. It is
// an alias of diag.Pos so that the IR builder (Compile) can return diag
// errors: diag must not import ir.
type Pos = diag.Pos

// Op is a reduction operator.
type Op string

// The reduction operators.
const (
	OpNone Op = "" // collectives that do not reduce
	OpSum  Op = "sum"
	OpMax  Op = "max"
	OpMin  Op = "min"
)

func (o Op) String() string { return string(o) }

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

// Tensor is a tensor of a collective's signature: the descriptor the
// runtime gets (its shape in the collective's sizes, its fixed dtype or
// index types, optional, the rank parameter whose rank alone uses it:
// Owner, spec key ranks, see OwnedTable) with its positions in the spec.
type Tensor struct {
	irismodel.TensorDesc
	OwnerPos Pos // the ranks key's value
	Pos      Pos
}

// Param is a typed scalar a launch passes (spec key params): one plan
// serves every value, and a captured graph replays the value it captured.
// An int parameter without min or max has the ends of int64 there.
type Param struct {
	irismodel.ParamDesc
	Pos Pos
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
	// Staged: a copy-engine variant's peers write this tensor, which only
	// one rank passes, at that rank's staging buffer, and the launch
	// copies the buffer into it after its last barrier (StagesAlways).
	Staged bool
	Pos    Pos // position of the access entry in the spec
}

// Exchanged reports whether peers touch a tensor only one rank uses: the
// kernel then learns that rank's address of it at its start (OwnedTable).
func (u Use) Exchanged() bool { return u.Owned != nil && u.Owned.Exchange }

// PlacementDoc says what the rule table's row asks of the caller for the
// tensor (Rule.Doc) and, for a tensor only one rank uses, which rank
// passes it: the one wording of the generated docs and irisgen explain.
func (u Use) PlacementDoc() string {
	rule := u.Rule
	if rule == nil { // IR built by hand, not by the builder
		rule = Classify(RoleOf(u.Tensor), u.Access)
	}
	d := rule.Doc
	if u.Staged {
		d = fmt.Sprintf("peers write it at rank %s's staging buffer, which the launch copies into it after its last barrier: any device memory", u.Tensor.Owner)
	}
	if o := u.Tensor.Owner; o != "" {
		d += fmt.Sprintf("; checked on rank %s only, the other ranks pass the zero irisrt.Tensor", o)
		if u.Exchanged() && !u.Staged {
			d += fmt.Sprintf(" (the kernel tells them where rank %s's is)", o)
		}
	}
	return d
}

// Aliasing is whether input and output tensors of a launch may overlap.
type Aliasing string

// Aliasing rules. AliasOwnBlock is for copy-engine variants: a dir: in
// tensor may be the rank's own block of a written tensor whose shape is
// [world] followed by its (irismodel.TensorDesc.OwnBlock; NCCL's in-place
// all_gather), which the copies prove safe (ownBlockSafe).
const (
	AliasForbid   Aliasing = "forbid"
	AliasAllow    Aliasing = "allow"
	AliasOwnBlock Aliasing = "own_block"
)

// aliasings are the spec's values, in the order errors list them.
var aliasings = []string{string(AliasForbid), string(AliasAllow), string(AliasOwnBlock)}

// Launch is a variant's launch shape.
type Launch struct {
	Threads     int // threads per block: the kernel's launch bound (a plan below MinBlocks launches fewer)
	MaxBlocks   int // upper bound of the grid; the plan picks blocks <= MaxBlocks from the size
	MinBlocks   int // min_blocks (1 by default: no effect): below it, smaller blocks, up to MinBlocks of them (irisimpl.Grid)
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
	Barriers []irismodel.Barrier
	Launch   Launch
	// Capturable reports, per barrier mode, whether a launch in that mode can
	// be captured in a GPU graph, with the reason when it cannot.
	Capture []Capture
	// Kernels are the variant's entry points; none for EngineCopy.
	Kernels []Kernel
	// Engine is what moves the data (spec key engine): EngineSM, a kernel
	// rendered from Template; EngineCopy, the copy engines, by the
	// schedule Copies (no template, no kernel).
	Engine irismodel.Engine
	Copies []*CopyStmt
	Pos    Pos
}

// CopyStmt is one statement of a copy-engine variant's schedule (an item
// of its copies), resolved: the runtime's statement, with the names of its
// rank variables and its positions.
type CopyStmt struct {
	irismodel.CopyStmt
	Vars                []string // the each list
	Pos, FromPos, ToPos Pos
}

// Schedule is every copy the variant's launches issue on world ranks with
// the parameter values params (rank and int parameters as int64, in spec
// order), rank by rank in issue order, one a line (irismodel.SpellCopies).
func (v *Variant) Schedule(c *Collective, world int, params []int64) string {
	names := make([]string, len(c.Tensors))
	for i, t := range c.Tensors {
		names[i] = t.Name
	}
	return irismodel.SpellCopies(v.Stmts(), world, params, names)
}

// Stmts are the runtime statements of Copies.
func (v *Variant) Stmts() []irismodel.CopyStmt {
	out := make([]irismodel.CopyStmt, len(v.Copies))
	for i, c := range v.Copies {
		out[i] = c.CopyStmt
	}
	return out
}

// Capture is the derived graph-capture claim of one barrier mode of a variant.
type Capture struct {
	Mode       irismodel.Barrier
	Capturable bool
	Reason     string // why not, when not
}

// Kernel is one compiled entry point: a variant for one data type and op.
type Kernel struct {
	Name  string          // irismodel.KernelName(...)
	DType irismodel.DType // 0 for a collective without data types
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
	DTypes   []irismodel.DType
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

// Auto is a collective's tuning table (specs/tuning/<collective>.yaml): the
// rules of its auto variant, measured by `irisgen bench -tune`.
type Auto struct {
	File     string // path as given to the generator
	Measured string // provenance: machine, date, dtype, mode
	Rules    []AutoRule
}

// AutoRule is a rule of the table (irismodel.AutoRule: the first matching
// rule wins; the last rule matches everything) with its position.
type AutoRule struct {
	irismodel.AutoRule
	Pos Pos
}

// ModelRules are the rules without their positions: what the generated
// table holds and irismodel.Choose picks from.
func (a *Auto) ModelRules() []irismodel.AutoRule {
	out := make([]irismodel.AutoRule, len(a.Rules))
	for i, r := range a.Rules {
		out[i] = r.AutoRule
	}
	return out
}

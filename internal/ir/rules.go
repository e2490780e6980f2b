package ir

import (
	"fmt"
	"strings"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// The rule table: what irisgen derives for one tensor of one variant from
// its role in the signature (direction, optional) and the access kinds the
// variant declares for it. It is the one place these rules live: the
// builder looks every tensor up here (Classify), docs/spec.md prints it
// (RuleTableMarkdown; a test keeps the two equal) and a property test
// checks every combination against an independent statement of the rules.

// Role is a tensor's place in the signature, as the rule table reads it.
type Role string

// The roles. An optional tensor is always dir in.
const (
	RoleIn         Role = "in"
	RoleInOptional Role = "in, optional"
	RoleOut        Role = "out"
	RoleInOut      Role = "inout"
	RoleWorkspace  Role = "workspace"
)

// Roles lists every role, in the table's order.
var Roles = []Role{RoleIn, RoleInOptional, RoleOut, RoleInOut, RoleWorkspace}

// RoleOf is the role of t.
func RoleOf(t *Tensor) Role {
	switch {
	case t.Dir == irismodel.In && t.Optional:
		return RoleInOptional
	case t.Dir == irismodel.Workspace:
		return RoleWorkspace
	}
	return Role(t.Dir)
}

// Refusal says why a combination is refused; NotRefused for one the
// language accepts.
type Refusal uint8

// The refusals of the table; the builder words them (with the tensor and
// variant names) in build.go.
const (
	NotRefused Refusal = iota
	// RefuseInWritten: a dir: in tensor may not be written.
	RefuseInWritten
	// RefuseOutUnwritten: a dir: out or inout tensor must be written.
	RefuseOutUnwritten
	// RefuseOptionalRemote: a tensor a launch may leave out has nothing to
	// put on the heap, so peers may not touch it.
	RefuseOptionalRemote
)

// Rule is one row of the table. The When fields select the combinations
// the row covers; every (role, access set) combination is covered by
// exactly one row.
type Rule struct {
	Row int // 1-based, as numbered in docs/spec.md

	// When: the tensor's role is one of Roles, and its access set holds
	// every kind of All, at least one kind of Any (when Any is not 0), no
	// kind of Not, and is empty when Untouched.
	Roles     []Role
	All       Access
	Any       Access
	Not       Access
	Untouched bool

	// Then.
	Refused   Refusal
	Placement Placement
	// Staging: a launch may copy the tensor, when it is not on the heap,
	// into plan-owned heap staging and hand the kernel that copy. Only for
	// tensors nobody writes: a kernel writing a staged copy would leave the
	// caller's tensor unchanged.
	Staging bool
	// InPlace: under aliasing: allow the tensor may be the very memory of
	// its in-place partner (docs/spec.md "aliasing"). False wherever peers
	// touch the tensor: in place, they would read memory this rank is
	// overwriting, or overwrite memory this rank has yet to read. A variant
	// whose in-place pairs hold such a tensor is refused under allow.
	InPlace bool
	// Launch says what a launch does for the tensor; every row's work is
	// stream-ordered, so graph capture depends on the barrier mode only
	// (host mode: not capturable).
	Launch string
	// Why is the reason, for the docs.
	Why string
	// Doc says what the rule asks of the caller, in the words the
	// generated docs and irisgen explain use (Use.PlacementDoc).
	Doc string
}

// Matches reports whether the row covers role r with access set a.
func (rl *Rule) Matches(r Role, a Access) bool {
	hasRole := false
	for _, x := range rl.Roles {
		hasRole = hasRole || x == r
	}
	switch {
	case !hasRole, a&rl.All != rl.All, a&rl.Not != 0:
		return false
	case rl.Any != 0 && a&rl.Any == 0:
		return false
	case rl.Untouched && a != 0:
		return false
	}
	return true
}

// writes are the kinds that change a tensor's contents.
const writes = LocalWrite | RemoteWrite | RemoteAtomic

// remote are the kinds by which peers touch a tensor.
const remote = RemoteRead | RemoteWrite | RemoteAtomic

var (
	userIn  = []Role{RoleIn, RoleInOptional}
	written = []Role{RoleOut, RoleInOut}
)

// Launch texts of the table.
const (
	docAny        = "only this rank touches it: any device memory"
	launchNothing = "nothing"
	launchChecked = "checks it is on the heap (else *irisrt.PlacementError, nothing enqueued)"
	launchStaged  = "off the heap: copies it on the stream into plan staging before the kernel (captured with the launch; refused in mode none)"
	launchPlan    = "nothing: allocated and zeroed on the heap when the plan is made"
	launchUnused  = "nothing: not allocated, the kernel gets a null pointer"
)

// RuleTable is the table. Rows are disjoint; the property test
// (rules_test.go) checks that, and that they cover every combination.
var RuleTable = []Rule{
	{Row: 1, Roles: []Role{RoleWorkspace}, Untouched: true,
		Placement: PlacePlan, InPlace: true, Launch: launchUnused,
		Why: "another variant of the collective uses the buffer", Doc: "unused: not allocated"},
	{Row: 2, Roles: []Role{RoleWorkspace}, Any: LocalRead | writes | remote,
		Placement: PlacePlan, InPlace: true, Launch: launchPlan,
		Why: "the plan owns it, on the heap; a launch never sees it", Doc: "the plan's workspace, on the heap"},
	{Row: 3, Roles: userIn, Untouched: true,
		Placement: PlaceAny, InPlace: true, Launch: launchNothing,
		Why: "the variant does not touch it (its dtype and length are still checked)", Doc: docAny},
	{Row: 4, Roles: userIn, All: LocalRead, Not: writes | remote,
		Placement: PlaceAny, InPlace: true, Launch: launchNothing,
		Why: "only this rank reads it: any device memory", Doc: docAny},
	{Row: 5, Roles: []Role{RoleIn}, All: RemoteRead, Not: writes,
		Placement: PlaceImport, Staging: true, Launch: launchStaged,
		Why: "peers read it and nobody writes it, so a copy on the heap serves as well",
		Doc: "peers read it: on the symmetric heap, or else copied into the plan's staging on s"},
	{Row: 6, Roles: []Role{RoleInOptional}, All: RemoteRead, Not: writes,
		Refused: RefuseOptionalRemote,
		Why:     "a launch may leave it out, and then there is nothing for peers to read"},
	{Row: 7, Roles: userIn, Any: writes,
		Refused: RefuseInWritten,
		Why:     "dir: in promises the caller that the tensor is not written"},
	{Row: 8, Roles: written, Not: writes,
		Refused: RefuseOutUnwritten,
		Why:     "an output the variant never writes would come back unchanged"},
	{Row: 9, Roles: written, All: LocalWrite, Not: remote,
		Placement: PlaceAny, InPlace: true, Launch: launchNothing,
		Why: "only this rank touches it: any device memory", Doc: docAny},
	{Row: 10, Roles: written, All: LocalWrite | RemoteRead, Not: RemoteWrite | RemoteAtomic,
		Placement: PlaceHeap, Launch: launchChecked,
		Why: "peers read what this rank writes: a staged copy would take the kernel's writes and the caller would never see them, and peers would read the copy",
		Doc: "written here and read by peers: must be on the symmetric heap"},
	{Row: 11, Roles: written, Any: RemoteWrite | RemoteAtomic,
		Placement: PlaceHeap, Launch: launchChecked,
		Why: "peers write it: off the heap their stores would go to a copy and be lost",
		Doc: "peers write it: must be on the symmetric heap"},
}

// Classify returns the row of the table for role r and access set a. Every
// combination of a role of Roles and an access set has one (the property
// test checks it); it returns nil only for a role outside Roles. The row's
// Refused says whether the spec is accepted.
func Classify(r Role, a Access) *Rule {
	for i := range RuleTable {
		if RuleTable[i].Matches(r, a) {
			return &RuleTable[i]
		}
	}
	return nil
}

// RuleTableMarkdown renders the table for docs/spec.md.
func RuleTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| row | dir | access (all of / one of / none of) | placement | staging | in place under `aliasing: allow` | launch does | why |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, rl := range RuleTable {
		roles := make([]string, len(rl.Roles))
		for i, r := range rl.Roles {
			roles[i] = "`" + string(r) + "`"
		}
		placement, staging, inPlace, launch := "refused", "-", "-", "-"
		if rl.Refused == NotRefused {
			placement, staging, launch = "`"+rl.Placement.String()+"`", yesNo(rl.Staging), rl.Launch
			switch {
			case rl.Placement == PlacePlan:
				inPlace = "- (never aliased)"
			case rl.InPlace:
				inPlace = "yes"
			default:
				inPlace = "no: refused if it is in an in-place pair"
			}
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", rl.Row, strings.Join(roles, ", "), rl.accessText(), placement, staging, inPlace, launch, rl.Why)
	}
	return b.String()
}

// accessText describes the row's condition on the access set.
func (rl *Rule) accessText() string {
	if rl.Untouched {
		return "`none`"
	}
	var parts []string
	if rl.All != 0 {
		parts = append(parts, "all of "+kindList(rl.All))
	}
	switch {
	case rl.Any == LocalRead|writes|remote:
		parts = append(parts, "any kind")
	case rl.Any != 0:
		parts = append(parts, "one of "+kindList(rl.Any))
	}
	if rl.Not != 0 {
		parts = append(parts, "none of "+kindList(rl.Not))
	}
	return strings.Join(parts, "; ")
}

func kindList(a Access) string {
	var out []string
	for _, n := range AccessNames {
		if a&n.Access != 0 {
			out = append(out, "`"+n.Name+"`")
		}
	}
	return strings.Join(out, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// PlacementOf is the placement of an accepted user tensor with access a.
// Its role follows from a: an accepted tensor that is written is dir out or
// inout, any other is dir in, so the table gives the same row. For hand-built
// IR in tests; the builder classifies with the tensor's real role.
func PlacementOf(a Access) Placement {
	r := RoleIn
	if a.Writes() {
		r = RoleOut
	}
	return Classify(r, a).Placement
}

// The owned table: what changes for a tensor that only one rank uses
// (spec key ranks: p, p a rank parameter; Tensor.Ranks). Such a tensor is
// classified by the rule table like any other; this table says, for the
// row it falls in, where that row's checks apply and what the kernel does
// so that peers find the tensor. Every (role, access set) combination is
// covered by exactly one row; the property test checks it, docs/spec.md
// prints it (OwnedTableMarkdown).

// OwnedRefusal says why a tensor cannot be one rank's; OwnedOK for one that
// can.
type OwnedRefusal uint8

// The refusals of the owned table.
const (
	OwnedOK OwnedRefusal = iota
	// OwnedWorkspace: a workspace is the plan's, on every rank.
	OwnedWorkspace
	// OwnedOptional: optional already lets every rank leave it out.
	OwnedOptional
)

// OwnedRule is one row of the owned table.
type OwnedRule struct {
	Row int // 1-based, as numbered in docs/spec.md
	// When: the tensor's role is one of Roles, and its access set holds
	// one kind of Any (when Any is not 0) and no kind of Not.
	Roles []Role
	Any   Access
	Not   Access

	// Then. A row not refused applies the rule table's row on the owning
	// rank only; on the others the launch checks nothing of the tensor and
	// the kernel gets a null pointer.
	Refused OwnedRefusal
	// Exchange: peers touch the tensor, but only its owner passes it, so
	// the others cannot translate their own address of it: the kernel
	// learns the owner's address at its start (it is on the owner's heap:
	// rows 10 and 11 require it, row 5 stages it there), and peer helpers
	// take the owner's pointer.
	Exchange bool
	Owner    string // what a launch does on the owning rank
	Others   string // ... and on the others
	Kernel   string // what the kernel does for it
	Why      string
}

// Matches reports whether the row covers role r with access set a.
func (o *OwnedRule) Matches(r Role, a Access) bool {
	hasRole := false
	for _, x := range o.Roles {
		hasRole = hasRole || x == r
	}
	return hasRole && (o.Any == 0 || a&o.Any != 0) && a&o.Not == 0
}

// Texts of the owned table.
const (
	ownedOwner    = "the rule table row's checks and work (dtype, length, placement, staging, aliasing)"
	ownedOthers   = "nothing: whatever the caller passes (the zero irisrt.Tensor) is ignored, the kernel gets a null pointer"
	ownedLocal    = "the template must use it on that rank only (its pointer is null elsewhere)"
	ownedExchange = "before the template runs, the owner stores the tensor's heap offset into every rank's plan-owned slot and every rank meets its peers (a sync, in every barrier mode); peer helpers must name the parameter as the peer and give the owner's pointer"
)

// OwnedTable is the table. Rows are disjoint; the property test checks
// that, and that they cover every combination.
var OwnedTable = []OwnedRule{
	{Row: 1, Roles: []Role{RoleWorkspace},
		Refused: OwnedWorkspace,
		Why:     "a workspace is the plan's, allocated on every rank"},
	{Row: 2, Roles: []Role{RoleInOptional},
		Refused: OwnedOptional,
		Why:     "optional already lets every rank leave the tensor out; keep one of the two"},
	{Row: 3, Roles: []Role{RoleIn, RoleOut, RoleInOut}, Not: remote,
		Owner: ownedOwner, Others: ownedOthers, Kernel: ownedLocal,
		Why: "only the owner touches it, so only the owner needs it"},
	{Row: 4, Roles: []Role{RoleIn, RoleOut, RoleInOut}, Any: remote,
		Exchange: true, Owner: ownedOwner, Others: ownedOthers, Kernel: ownedExchange,
		Why: "peers address the owner's tensor, but only the owner knows where it is: the others pass nothing to translate"},
}

// ClassifyOwned returns the row of the owned table for role r and access
// set a, nil only for a role outside Roles.
func ClassifyOwned(r Role, a Access) *OwnedRule {
	for i := range OwnedTable {
		if OwnedTable[i].Matches(r, a) {
			return &OwnedTable[i]
		}
	}
	return nil
}

// OwnedTableMarkdown renders the owned table for docs/spec.md.
func OwnedTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| row | dir | access | on the owning rank | on the other ranks | kernel | why |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, o := range OwnedTable {
		roles := make([]string, len(o.Roles))
		for i, r := range o.Roles {
			roles[i] = "`" + string(r) + "`"
		}
		access := "any"
		switch {
		case o.Any != 0:
			access = "one of " + kindList(o.Any)
		case o.Not != 0:
			access = "none of " + kindList(o.Not)
		}
		owner, others, kernel := "refused", "-", "-"
		if o.Refused == OwnedOK {
			owner, others, kernel = o.Owner, o.Others, o.Kernel
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s | %s |\n", o.Row, strings.Join(roles, ", "), access, owner, others, kernel, o.Why)
	}
	return b.String()
}

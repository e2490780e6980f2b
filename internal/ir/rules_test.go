package ir

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen/internal/diag"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// allAccessSets is every subset of the five access kinds (0 is none).
func allAccessSets() []Access {
	var out []Access
	for a := Access(0); a < 1<<len(AccessNames); a++ {
		out = append(out, a)
	}
	return out
}

// want is the rule table stated a second way, from the prose of
// docs/spec.md rather than from rows: who writes, who reads remotely.
type want struct {
	refused   Refusal
	placement Placement
	staging   bool
	inPlace   bool
}

func independent(r Role, a Access) want {
	thisRankWrites := a&LocalWrite != 0
	peersRead := a&RemoteRead != 0
	peersWrite := a&(RemoteWrite|RemoteAtomic) != 0
	anyWrite := thisRankWrites || peersWrite
	switch {
	case r == RoleWorkspace:
		return want{placement: PlacePlan, inPlace: true}
	case (r == RoleIn || r == RoleInOptional) && anyWrite:
		return want{refused: RefuseInWritten}
	case r == RoleInOptional && peersRead:
		return want{refused: RefuseOptionalRemote}
	case (r == RoleOut || r == RoleInOut) && !anyWrite:
		return want{refused: RefuseOutUnwritten}
	case peersWrite, peersRead && thisRankWrites:
		return want{placement: PlaceHeap}
	case peersRead:
		return want{placement: PlaceImport, staging: true}
	}
	return want{placement: PlaceAny, inPlace: true}
}

// TestRuleTableRowsPartition checks that every (role, access set) is
// covered by exactly one row, and that no row is dead.
func TestRuleTableRowsPartition(t *testing.T) {
	used := map[int]int{}
	for _, r := range Roles {
		for _, a := range allAccessSets() {
			var rows []int
			for _, rl := range RuleTable {
				if rl.Matches(r, a) {
					rows = append(rows, rl.Row)
				}
			}
			require.Len(t, rows, 1, "role %q, access %v: rows %v", r, a, rows)
			used[rows[0]]++
		}
	}
	for i, rl := range RuleTable {
		assert.Equal(t, i+1, rl.Row, "rows are numbered in order")
		assert.NotZero(t, used[rl.Row], "row %d matches nothing", rl.Row)
		if rl.Refused == NotRefused {
			assert.NotEmpty(t, rl.Launch, "row %d", rl.Row)
		}
		assert.NotEmpty(t, rl.Why, "row %d", rl.Row)
	}
	assert.Nil(t, Classify("bogus", LocalRead))
}

// TestRuleTableMatchesIndependentStatement compares Classify with the rules
// stated without the table, for every role and access set.
func TestRuleTableMatchesIndependentStatement(t *testing.T) {
	for _, r := range Roles {
		for _, a := range allAccessSets() {
			rl := Classify(r, a)
			require.NotNil(t, rl, "role %q, access %v", r, a)
			w := independent(r, a)
			got := want{refused: rl.Refused}
			if rl.Refused == NotRefused {
				got = want{placement: rl.Placement, staging: rl.Staging, inPlace: rl.InPlace}
			}
			assert.Equal(t, w, got, "role %q, access %v (row %d)", r, a, rl.Row)
			// Staging only where nobody writes; the heap wherever peers write.
			if rl.Staging {
				assert.False(t, a.Writes(), "row %d stages a written tensor", rl.Row)
			}
		}
	}
}

// ruleSpec is a spec with tensor x of role r and access a in variant v, and
// a partner tensor y that forms an in-place pair with x when x is a user
// tensor (an output for an input, an input for an output).
func ruleSpec(r Role, a Access, aliasing Aliasing) string {
	x := map[Role]string{
		RoleIn:         "{dir: in, shape: [n]}",
		RoleInOptional: "{dir: in, shape: [n], optional: true}",
		RoleOut:        "{dir: out, shape: [n]}",
		RoleInOut:      "{dir: inout, shape: [n]}",
		RoleWorkspace:  "{dir: workspace, shape: [n]}",
	}[r]
	y, yAccess := "{dir: out, shape: [n]}", "local_write"
	if r == RoleOut || r == RoleInOut {
		y, yAccess = "{dir: in, shape: [n]}", "local_read"
	}
	kinds := "none"
	if a != 0 {
		kinds = "[" + strings.ReplaceAll(a.String(), ",", ", ") + "]"
	}
	return fmt.Sprintf(`name: rules
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: %s
  y: %s
variants:
  v:
    template: t_a
    access:
      x: %s
      y: %s
    aliasing: %s
`, x, y, kinds, yAccess, aliasing)
}

// TestRuleTableInTheIR compiles a spec for every role x access set x
// aliasing and checks the IR against the independent statement: what is
// refused and where, the placement, the row, and that graph capture
// depends on the barrier mode only.
func TestRuleTableInTheIR(t *testing.T) {
	const accessLine, aliasingLine = 12, 14
	for _, r := range Roles {
		for _, a := range allAccessSets() {
			for _, al := range []Aliasing{AliasForbid, AliasAllow} {
				name := fmt.Sprintf("%s/%v/%s", r, a, al)
				w := independent(r, a)
				c, err := Compile("spec.yaml", []byte(ruleSpec(r, a, al)), testTemplates())
				aliasRefused := al == AliasAllow && r != RoleWorkspace && w.refused == NotRefused && !w.inPlace
				if w.refused == NotRefused && !aliasRefused {
					require.NoError(t, err, name)
					v := c.Variants[0]
					u := v.Use("x")
					assert.Equal(t, a, u.Access, name)
					assert.Equal(t, w.placement, u.Placement, name)
					assert.Equal(t, Classify(r, a), u.Rule, name)
					assert.Equal(t, []Capture{
						{Mode: irismodel.BarrierDevice, Capturable: true},
						{Mode: irismodel.BarrierHost, Reason: HostCaptureReason},
						{Mode: irismodel.BarrierNone, Capturable: true},
					}, v.Capture, name)
					if r != RoleWorkspace {
						require.Len(t, v.AliasPairs(), 1, name)
						assert.Equal(t, al == AliasAllow, v.InPlace(c.Tensor("x"), c.Tensor("y")), name)
					}
					continue
				}
				require.Error(t, err, name)
				list := err.(diag.List)
				require.Len(t, list, 1, "%s: %v", name, err)
				e := list[0]
				if w.refused != NotRefused {
					assert.Equal(t, accessLine, e.Pos.Line, "%s: %v", name, e)
					assert.Contains(t, e.Msg, `tensor "x"`, name)
					continue
				}
				assert.Equal(t, aliasingLine, e.Pos.Line, "%s: %v", name, e)
				assert.Contains(t, e.Msg, `aliasing: allow is unsafe in variant "v": peers`, name)
				require.Len(t, e.Notes, 1, name)
				assert.Equal(t, accessLine, e.Notes[0].Pos.Line, name)
			}
		}
	}
}

// TestRuleTableDocumented keeps docs/spec.md's table equal to the code's.
func TestRuleTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/spec.md")
	require.NoError(t, err)
	if !strings.Contains(string(doc), RuleTableMarkdown()) {
		t.Errorf("docs/spec.md must hold the rule table as ir.RuleTableMarkdown renders it; replace its table with:\n%s", RuleTableMarkdown())
	}
}

// TestPlacementOfAcceptedUserTensors: PlacementOf agrees with the table for
// every user tensor the table accepts.
func TestPlacementOfAcceptedUserTensors(t *testing.T) {
	for _, r := range []Role{RoleIn, RoleInOptional, RoleOut, RoleInOut} {
		for _, a := range allAccessSets() {
			if rl := Classify(r, a); rl.Refused == NotRefused {
				assert.Equal(t, rl.Placement, PlacementOf(a), "role %q, access %v", r, a)
			}
		}
	}
}

// ownedIndependent is the owned table stated a second way, from the prose
// of docs/spec.md: a workspace and an optional tensor cannot be one rank's;
// any other is exchanged exactly when peers touch it.
func ownedIndependent(r Role, a Access) (OwnedRefusal, bool) {
	switch r {
	case RoleWorkspace:
		return OwnedWorkspace, false
	case RoleInOptional:
		return OwnedOptional, false
	}
	return OwnedOK, a&(RemoteRead|RemoteWrite|RemoteAtomic) != 0
}

// TestOwnedTableRowsPartition checks that every (role, access set) is
// covered by exactly one row of the owned table, and that no row is dead.
func TestOwnedTableRowsPartition(t *testing.T) {
	used := map[int]int{}
	for _, r := range Roles {
		for _, a := range allAccessSets() {
			var rows []int
			for _, o := range OwnedTable {
				if o.Matches(r, a) {
					rows = append(rows, o.Row)
				}
			}
			require.Len(t, rows, 1, "role %q, access %v: rows %v", r, a, rows)
			used[rows[0]]++
			o := ClassifyOwned(r, a)
			refused, exchange := ownedIndependent(r, a)
			assert.Equal(t, refused, o.Refused, "role %q, access %v (row %d)", r, a, o.Row)
			assert.Equal(t, exchange, o.Exchange, "role %q, access %v (row %d)", r, a, o.Row)
		}
	}
	for i, o := range OwnedTable {
		assert.Equal(t, i+1, o.Row, "rows are numbered in order")
		assert.NotZero(t, used[o.Row], "row %d matches nothing", o.Row)
		assert.NotEmpty(t, o.Why, "row %d", o.Row)
		if o.Refused == OwnedOK {
			assert.NotEmpty(t, o.Owner+o.Others+o.Kernel, "row %d", o.Row)
		}
	}
	assert.Nil(t, ClassifyOwned("bogus", LocalRead))
}

// ownedSpec is ruleSpec with a rank parameter root that tensor x names
// (ranks: root).
func ownedSpec(r Role, a Access) string {
	src := ruleSpec(r, a, AliasForbid)
	src = strings.Replace(src, "sizes: [n]\n", "sizes: [n]\nparams: {root: rank}\n", 1)
	i := strings.Index(src, "  x: {")
	j := i + strings.Index(src[i:], "}\n")
	return src[:j] + ", ranks: root" + src[j:]
}

// TestOwnedTableInTheIR compiles, for every role x access set, a spec whose
// tensor x only rank root passes, and checks the IR against the two
// independent statements: the rule table's refusal at the access entry
// first, else the owned table's at the ranks key, else the row and whether
// the kernel exchanges x's address.
func TestOwnedTableInTheIR(t *testing.T) {
	const ranksLine, accessLine = 7, 13
	for _, r := range Roles {
		for _, a := range allAccessSets() {
			name := fmt.Sprintf("%s/%v", r, a)
			base := independent(r, a)
			refused, exchange := ownedIndependent(r, a)
			c, err := Compile("spec.yaml", []byte(ownedSpec(r, a)), testTemplates())
			if base.refused == NotRefused && refused == OwnedOK {
				require.NoError(t, err, name)
				u := c.Variants[0].Use("x")
				assert.Equal(t, "root", u.Tensor.Owner, name)
				assert.Equal(t, ClassifyOwned(r, a), u.Owned, name)
				assert.Equal(t, exchange, u.Exchanged(), name)
				assert.Nil(t, c.Variants[0].Use("y").Owned, "%s: y is every rank's", name)
				continue
			}
			require.Error(t, err, name)
			list := err.(diag.List)
			require.Len(t, list, 1, "%s: %v", name, err)
			line := accessLine
			if base.refused == NotRefused {
				line = ranksLine
			}
			assert.Equal(t, line, list[0].Pos.Line, "%s: %v", name, list[0])
			assert.Contains(t, list[0].Msg, `tensor "x"`, name)
		}
	}
}

// TestOwnedTableDocumented keeps docs/spec.md's owned table equal to the
// code's.
func TestOwnedTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/spec.md")
	require.NoError(t, err)
	if !strings.Contains(string(doc), OwnedTableMarkdown()) {
		t.Errorf("docs/spec.md must hold the owned table as ir.OwnedTableMarkdown renders it; replace its table with:\n%s", OwnedTableMarkdown())
	}
}

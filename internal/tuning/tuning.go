// Package tuning writes the tables of the auto variants
// (specs/tuning/<collective>.yaml): `irisgen bench -tune` makes them from
// a benchmark run, and internal/ir reads them back (ir.ParseTuning, which
// also checks them). It is apart from ir so that the GPU tools write the
// format without linking the compiler. A rule is the model's
// (irismodel.AutoRule), the type the generated table and the runtime's
// choice use too.
package tuning

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Table is one collective's table: where it was measured, and its rules,
// first match first, the last matching every launch.
type Table struct {
	Measured string
	Rules    []irismodel.AutoRule
}

// Format writes t, the table of collective, in the file format, with a
// header comment.
func Format(collective string, t Table) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The auto variant of %s: written by `irisgen bench -tune` from a benchmark\n", collective)
	b.WriteString("# run; the first rule that matches a launch picks its variant. Regenerate the\n")
	b.WriteString("# Go code (irisgen generate) after changing it.\n")
	var worlds []string
	seen := map[int]bool{}
	for _, r := range t.Rules {
		if r.World > 0 && !seen[r.World] {
			seen[r.World] = true
			worlds = append(worlds, strconv.Itoa(r.World))
		}
	}
	if len(worlds) > 0 {
		fmt.Fprintf(&b, "# Measured world sizes: %s; other world sizes take the rules without a world (the largest measured world's).\n", strings.Join(worlds, ", "))
	}
	fmt.Fprintf(&b, "collective: %s\nmeasured: %q\nrules:\n", collective, t.Measured)
	for _, r := range t.Rules {
		var parts []string
		if r.World > 0 {
			parts = append(parts, fmt.Sprintf("world: %d", r.World))
		}
		if r.MaxBytes > 0 {
			parts = append(parts, fmt.Sprintf("max_bytes: %d", r.MaxBytes))
		}
		parts = append(parts, "variant: "+r.Variant)
		fmt.Fprintf(&b, "  - {%s}\n", strings.Join(parts, ", "))
	}
	return b.Bytes()
}

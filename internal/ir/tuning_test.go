package ir

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const tuneSpec = `name: ar
summary: s
dtypes: [f32]
sizes: [n]
tensors:
  x: {dir: in, shape: [n]}
  y: {dir: out, shape: [n]}
variants:
  one_shot: {template: t_a, access: {x: local_read, y: local_write}}
  two_shot: {template: t_a, access: {x: local_read, y: local_write}}
`

func compileTuned(t *testing.T, table string) ([]*Collective, error) {
	t.Helper()
	specs := fstest.MapFS{"ar.yaml": {Data: []byte(tuneSpec)}}
	if table != "" {
		specs["tuning/ar.yaml"] = &fstest.MapFile{Data: []byte(table)}
	}
	tmpl := fstest.MapFS{"t_a" + TemplateExt: {Data: []byte("x")}}
	return CompileAll(specs, tmpl, "specs")
}

func TestTuningTable(t *testing.T) {
	cs, err := compileTuned(t, "collective: ar\nmeasured: \"2x H200, today\"\nrules:\n  - {world: 2, max_bytes: 1024, variant: one_shot}\n  - {variant: two_shot}\n")
	require.NoError(t, err)
	a := cs[0].Auto
	require.NotNil(t, a)
	require.Equal(t, "specs/tuning/ar.yaml", a.File)
	rules := a.ModelRules()
	require.Equal(t, "one_shot", irismodel.Choose(rules, 2, 1024))
	require.Equal(t, "two_shot", irismodel.Choose(rules, 2, 1025))
	require.Equal(t, "two_shot", irismodel.Choose(rules, 4, 8))
	// What FormatTuning writes, ParseTuning reads back.
	back, errs := ParseTuning("x.yaml", FormatTuning("ar", a), cs[0])
	require.Empty(t, errs)
	require.Equal(t, a.Rules[0].Variant, back.Rules[0].Variant)
	require.Equal(t, a.Rules[0].MaxBytes, back.Rules[0].MaxBytes)
	require.Equal(t, a.Measured, back.Measured)

	cs, err = compileTuned(t, "")
	require.NoError(t, err)
	require.Nil(t, cs[0].Auto, "no table, no auto variant")

	// Anchors work as in specs.
	cs, err = compileTuned(t, "collective: ar\nmeasured: m\nrules:\n  - &r {world: 2, variant: one_shot}\n  - {variant: two_shot}\n")
	require.NoError(t, err)
	require.Equal(t, 2, cs[0].Auto.Rules[0].World)
}

// tuningErrorCases are the exact errors of bad tables (file
// specs/tuning/ar.yaml, prefix left out), sorted.
var tuningErrorCases = []struct {
	name, table string
	want        []string
}{
	{"empty", "", nil}, // no file: not an error (checked in TestTuningTable)
	{"blank", "# nothing\n", []string{"1:1: error: the tuning table is empty; start it with `collective: <name>` (see docs/spec.md)"}},
	{"invalid YAML", "collective: ar\nmeasured: m\nrules: [\n", []string{"4:1: error: invalid YAML: did not find expected node content"}},
	{"not a mapping", "- a\n- b\n", []string{"1:1: error: a tuning table must be a mapping with the keys collective, measured, rules; found a list"}},
	{"second document", "collective: ar\nmeasured: m\nrules: [{variant: one_shot}]\n---\ncollective: ar\n", []string{
		"4:1: error: a tuning table file holds one YAML document; move this one to its own file"}},
	{"duplicate top-level key", "collective: ar\nmeasured: m\nmeasured: n\nrules: [{variant: one_shot}]\n", []string{
		"3:1: error: duplicate key \"measured\" in the tuning table (first at 2:1); keep only one"}},
	{"duplicate key in a rule", "collective: ar\nmeasured: m\nrules:\n  - {world: 2, world: 4, variant: one_shot}\n  - {variant: two_shot}\n", []string{
		"4:16: error: duplicate key \"world\" in rule 1 (first at 4:6); keep only one"}},
	{"unknown keys", "collective: ar\nmesured: m\nrules:\n  - {worlds: 2, variant: one_shot}\n  - {variant: two_shot, bytes: 3}\n", []string{
		"2:1: error: unknown key \"mesured\" in the tuning table (did you mean \"measured\"?)",
		"4:6: error: unknown key \"worlds\" in rule 1 (did you mean \"world\"?)",
		"5:25: error: unknown key \"bytes\" in rule 2 (expected one of: world, max_bytes, variant)"}},
	{"missing keys", "rules: [{variant: one_shot}]\n", []string{
		"1:1: error: the tuning table has no collective; add collective: ar",
		"1:1: error: the tuning table has no measured; add measured: \"<machine, date, dtype, mode>\""}},
	{"wrong kinds of value", "collective: [ar]\nmeasured: {a: 1}\nrules: {variant: one_shot}\n", []string{
		"1:13: error: collective must be a string, found a list",
		"2:11: error: measured must be a string, found a mapping",
		"3:8: error: rules must be a non-empty list of {world, max_bytes, variant}; found a mapping"}},
	{"wrong kinds in a rule", "collective: ar\nmeasured: m\nrules:\n  - one_shot\n  - {world: \"2\", max_bytes: 1.5, variant: [one_shot]}\n  - {variant: two_shot}\n", []string{
		"4:5: error: rule 1 must be a mapping {world, max_bytes, variant}; found the string \"one_shot\"",
		"5:13: error: world of rule 2 must be an integer, found the string \"2\"",
		"5:29: error: max_bytes of rule 2 must be an integer, found the number 1.5",
		"5:43: error: variant of rule 2 must be a string, found a list"}},
	{"out of range", "collective: ar\nmeasured: m\nrules:\n  - {world: 0, variant: one_shot}\n  - {world: 9, variant: one_shot}\n  - {max_bytes: -3, variant: one_shot}\n  - {max_bytes: 99999999999999999999, variant: one_shot}\n  - {variant: two_shot}\n", []string{
		"4:13: error: world of rule 1 is 0; it must be a positive integer up to 8",
		"5:13: error: world of rule 2 is 9; it must be a positive integer up to 8",
		"6:17: error: max_bytes of rule 3 is -3; it must be a positive integer",
		"7:17: error: max_bytes of rule 4 must be an integer, found the number 99999999999999999999"}},
	{"empty rules", "collective: ar\nmeasured: m\nrules: []\n", []string{
		"3:8: error: rules is empty; give at least one rule, the last one matching every launch: - {variant: <name>}"}},
	{"rule without variant; unknown variant", "collective: ar\nmeasured: m\nrules:\n  - {world: 2}\n  - {variant: one_shto}\n  - {variant: ring}\n", []string{
		"4:5: error: rule 1 has no variant; add variant: <name>",
		"5:15: error: ar has no variant \"one_shto\" (did you mean \"one_shot\"?)",
		"6:15: error: ar has no variant \"ring\" (variants: one_shot, two_shot)"}},
	{"hidden rule, last rule", "collective: ar\nmeasured: m\nrules:\n  - {world: 2, variant: one_shot}\n  - {world: 2, max_bytes: 64, variant: two_shot}\n  - {max_bytes: 64, variant: two_shot}\n", []string{
		"5:5: error: rule 2 is never chosen: rule 1 (at 4:5) matches every launch it matches; remove it or move it before rule 1",
		"6:5: error: the last rule must match every launch: give it only a variant (no world, no max_bytes)"}},
	{"collective mismatch", "collective: other\nmeasured: m\nrules: [{variant: one_shot}]\n", []string{
		"1:13: error: collective \"other\", but the file is named after \"ar\"; they must agree"}},
	{"too large", "collective: ar\nmeasured: \"" + strings.Repeat("x", 1<<20) + "\"\nrules: [{variant: one_shot}]\n", []string{
		"1:1: error: the tuning table is 1048633 bytes; irisgen reads files of at most 1048576 bytes (1 MiB): split it"}},
}

func TestTuningErrors(t *testing.T) {
	for _, c := range tuningErrorCases {
		if c.want == nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			_, err := compileTuned(t, c.table)
			require.Error(t, err)
			var got []string
			for _, line := range strings.Split(err.Error(), "\n") {
				got = append(got, strings.TrimPrefix(line, "specs/tuning/ar.yaml:"))
			}
			assert.Equal(t, c.want, got)
		})
	}
	specs := fstest.MapFS{"ar.yaml": {Data: []byte(tuneSpec)}, "tuning/nope.yaml": {Data: []byte("collective: nope\n")}}
	_, err := CompileAll(specs, fstest.MapFS{"t_a" + TemplateExt: {Data: []byte("x")}}, "specs")
	require.ErrorContains(t, err, `specs/tuning/nope.yaml:1:1: error: tuning table for "nope", but no spec defines that collective`)

	auto := strings.Replace(tuneSpec, "two_shot:", "auto:", 1)
	specs = fstest.MapFS{"ar.yaml": {Data: []byte(auto)}, "tuning/ar.yaml": {Data: []byte("collective: ar\nmeasured: m\nrules: [{variant: one_shot}]\n")}}
	_, err = CompileAll(specs, fstest.MapFS{"t_a" + TemplateExt: {Data: []byte("x")}}, "specs")
	require.EqualError(t, err, `specs/ar.yaml:10:3: error: variant "auto" is the name of the tuned variant, and specs/tuning/ar.yaml has a tuning table; rename the variant`)
}

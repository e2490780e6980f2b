package ir

import (
	"testing"
	"testing/fstest"

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
  a: {template: t_a, access: {x: local_read, y: local_write}}
  b: {template: t_a, access: {x: local_read, y: local_write}}
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
	cs, err := compileTuned(t, "collective: ar\nmeasured: \"2x H200, today\"\nrules:\n  - {world: 2, max_bytes: 1024, variant: a}\n  - {variant: b}\n")
	require.NoError(t, err)
	a := cs[0].Auto
	require.NotNil(t, a)
	require.Equal(t, "specs/tuning/ar.yaml", a.File)
	require.Equal(t, "a", a.Choose(2, 1024))
	require.Equal(t, "b", a.Choose(2, 1025))
	require.Equal(t, "b", a.Choose(4, 8))
	// What FormatTuning writes, ParseTuning reads back.
	back, errs := ParseTuning("x.yaml", FormatTuning("ar", a), cs[0])
	require.Empty(t, errs)
	require.Equal(t, a.Rules[0].Variant, back.Rules[0].Variant)
	require.Equal(t, a.Rules[0].MaxBytes, back.Rules[0].MaxBytes)
	require.Equal(t, a.Measured, back.Measured)

	cs, err = compileTuned(t, "")
	require.NoError(t, err)
	require.Nil(t, cs[0].Auto, "no table, no auto variant")
}

func TestTuningErrors(t *testing.T) {
	for _, c := range []struct{ table, want string }{
		{"collective: ar\nmeasured: m\nrules:\n  - {world: 2, variant: a}\n", "specs/tuning/ar.yaml:4:5: error: the last rule must match every launch"},
		{"collective: ar\nmeasured: m\nrules:\n  - {variant: c}\n", `specs/tuning/ar.yaml:4:15: error: ar has no variant "c" (variants: a, b)`},
		{"collective: ar\nmeasured: m\nrules:\n  - {max_bytes: -3, variant: a}\n  - {variant: a}\n", `specs/tuning/ar.yaml:4:17: error: max_bytes must be a positive integer, found "-3"`},
		{"collective: other\nmeasured: m\nrules:\n  - {variant: a}\n", `specs/tuning/ar.yaml:1:13: error: collective "other", but the file is named after "ar"`},
		{"collective: ar\nmeasured: m\nrulez: []\n", `specs/tuning/ar.yaml:3:1: error: unknown key "rulez"`},
		{"collective: ar\nrules: []\n", "error: the tuning table has no measured"},
		{"collective: ar\nmeasured: m\nrules: [\n", "error: invalid YAML"},
	} {
		_, err := compileTuned(t, c.table)
		require.ErrorContains(t, err, c.want, "table:\n%s", c.table)
	}
	specs := fstest.MapFS{"ar.yaml": {Data: []byte(tuneSpec)}, "tuning/nope.yaml": {Data: []byte("collective: nope\n")}}
	_, err := CompileAll(specs, fstest.MapFS{"t_a" + TemplateExt: {Data: []byte("x")}}, "specs")
	require.ErrorContains(t, err, `specs/tuning/nope.yaml:1:1: error: tuning table for "nope", but no spec defines that collective`)
}

package gpu_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/irisgen/irisgen/runtime/irismodel"
)

// allDataTypes are the catalogue's dtypes, in the order the matrix tests
// take them.
var allDataTypes = []irismodel.DType{irismodel.F32, irismodel.F16, irismodel.BF16}

// dataTypes are the dtypes the matrix tests check: every dtype, or those
// $IRISGEN_TEST_DTYPES names (parseDTypes; run.sh's initcheck shards leave
// out f16, whose kernels take bf16's code paths at the same element
// size). A bad value stops the suite, naming it.
func dataTypes() []irismodel.DType {
	dtypeFilter.once.Do(func() {
		dtypeFilter.list, dtypeFilter.err = parseDTypes(os.Getenv("IRISGEN_TEST_DTYPES"))
	})
	if dtypeFilter.err != nil {
		panic(dtypeFilter.err.Error())
	}
	return dtypeFilter.list
}

var dtypeFilter struct {
	once sync.Once
	list []irismodel.DType
	err  error
}

// parseDTypes reads a value of $IRISGEN_TEST_DTYPES: comma-separated spec
// names (f32, f16, bf16), each once; empty: every dtype. The list keeps
// allDataTypes' order, whatever the value's.
func parseDTypes(v string) ([]irismodel.DType, error) {
	if strings.TrimSpace(v) == "" {
		return allDataTypes, nil
	}
	var names []string
	for _, d := range allDataTypes {
		names = append(names, d.String())
	}
	named := map[string]bool{}
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		switch {
		case !slices.Contains(names, name):
			return nil, fmt.Errorf("IRISGEN_TEST_DTYPES=%q: %q is none of %s", v, name, strings.Join(names, ", "))
		case named[name]:
			return nil, fmt.Errorf("IRISGEN_TEST_DTYPES=%q: %s is named twice; name each once", v, name)
		}
		named[name] = true
	}
	var out []irismodel.DType
	for _, d := range allDataTypes {
		if named[d.String()] {
			out = append(out, d)
		}
	}
	return out, nil
}

// dtypeNames is "f32,f16,bf16" for the dtypes the matrix tests check.
func dtypeNames() string {
	var names []string
	for _, d := range dataTypes() {
		names = append(names, d.String())
	}
	return strings.Join(names, ",")
}

// TestParseDTypes enumerates the forms of $IRISGEN_TEST_DTYPES.
func TestParseDTypes(t *testing.T) {
	for _, c := range []struct {
		v    string
		want []irismodel.DType
		err  string
	}{
		{"", allDataTypes, ""},
		{" ", allDataTypes, ""},
		{"f32,bf16", []irismodel.DType{irismodel.F32, irismodel.BF16}, ""},
		{"bf16, f32", []irismodel.DType{irismodel.F32, irismodel.BF16}, ""},
		{"f16", []irismodel.DType{irismodel.F16}, ""},
		{"f32,f16,bf16", allDataTypes, ""},
		{"f64", nil, `"f64" is none of f32, f16, bf16`},
		{"f32,", nil, `"" is none of f32, f16, bf16`},
		{"bf16,bf16", nil, "bf16 is named twice"},
	} {
		got, err := parseDTypes(c.v)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("parseDTypes(%q): error %v, want one saying %q", c.v, err, c.err)
		case c.err == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("parseDTypes(%q) = %v, %v; want %v", c.v, got, err, c.want)
		}
	}
}

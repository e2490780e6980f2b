package gpu

import "testing"

// TestPDLAllowed enumerates IRISGEN_PDL's values: on unless 0 or false,
// anything else an error naming the variable and what to set.
func TestPDLAllowed(t *testing.T) {
	for _, c := range []struct {
		v       string
		on, bad bool
	}{
		{"", true, false}, {"1", true, false}, {"true", true, false}, {"TRUE", true, false},
		{"0", false, false}, {"false", false, false}, {"False", false, false},
		{"yes", false, true}, {"2", false, true}, {" 1", false, true},
	} {
		t.Setenv(EnvPDL, c.v)
		on, err := pdlAllowed()
		if c.bad {
			if err == nil || on {
				t.Errorf("%s=%q: got %v, %v; want an error", EnvPDL, c.v, on, err)
			} else if want := EnvPDL + "="; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
				t.Errorf("%s=%q: error %q does not name the variable", EnvPDL, c.v, err)
			}
			continue
		}
		if err != nil || on != c.on {
			t.Errorf("%s=%q: got %v, %v; want %v", EnvPDL, c.v, on, err, c.on)
		}
	}
}

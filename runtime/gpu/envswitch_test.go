package gpu

import (
	"strings"
	"testing"
)

// TestEnvSwitches enumerates the values of IRISGEN_PDL and
// IRISGEN_PEER_WRITES: on unless 0 or false, anything else an error naming
// the variable and what to set.
func TestEnvSwitches(t *testing.T) {
	for name, read := range map[string]func() (bool, error){EnvPDL: pdlAllowed, EnvPeerWrites: peerWritesAllowed} {
		for _, c := range []struct {
			v       string
			on, bad bool
		}{
			{"", true, false}, {"1", true, false}, {"true", true, false}, {"TRUE", true, false},
			{"0", false, false}, {"false", false, false}, {"False", false, false},
			{"yes", false, true}, {"2", false, true}, {" 1", false, true},
		} {
			t.Setenv(name, c.v)
			on, err := read()
			if c.bad {
				if err == nil || on {
					t.Errorf("%s=%q: got %v, %v; want an error", name, c.v, on, err)
				} else if !strings.HasPrefix(err.Error(), name+"=") || !strings.Contains(err.Error(), "want 0 or false") {
					t.Errorf("%s=%q: error %q does not name the variable and its values", name, c.v, err)
				}
				continue
			}
			if err != nil || on != c.on {
				t.Errorf("%s=%q: got %v, %v; want %v", name, c.v, on, err, c.on)
			}
		}
	}
}

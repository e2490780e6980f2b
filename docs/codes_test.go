package docs

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/irisgen/irisgen/internal/diag"
)

// TestErrorCodesDocumented: the table of error codes in spec.md lists
// every code of internal/diag, in diag.Codes' order, and no other, so
// that users read the codes `-error-format json` really writes.
func TestErrorCodesDocumented(t *testing.T) {
	b, err := os.ReadFile("spec.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "### Error codes and `-error-format json`"
	_, sec, ok := strings.Cut(string(b), heading)
	if !ok {
		t.Fatalf("spec.md has no section %q", heading)
	}
	sec, _, _ = strings.Cut(sec, "| field |") // the JSON fields' table follows
	var got []diag.Code
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z]+)` \\|").FindAllStringSubmatch(sec, -1) {
		got = append(got, diag.Code(m[1]))
	}
	if !slices.Equal(got, diag.Codes) {
		t.Errorf("spec.md's table of error codes lists %v; internal/diag defines %v: add a row per code, in that order", got, diag.Codes)
	}
}

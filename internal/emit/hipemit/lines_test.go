package hipemit

import (
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/irisgen/irisgen"
	"github.com/irisgen/irisgen/internal/emit"
	"github.com/irisgen/irisgen/internal/ir"
)

// TestLineDirectives checks the #line directives of every generated file
// of the catalogue against the templates: a line the directives give to a
// template line that is plain text (no action, no trimming around it) is
// that line, and a directive back to the generated file gives the next
// line its real number there.
func TestLineDirectives(t *testing.T) {
	specs, err := fs.Sub(irisgen.Specs, "specs")
	require.NoError(t, err)
	templates, err := fs.Sub(irisgen.Templates, "templates")
	require.NoError(t, err)
	cs, err := ir.CompileAll(specs, templates, "specs")
	require.NoError(t, err)
	files, err := Emit(&emit.Request{Collectives: cs, Templates: templates, TemplatesDir: "templates", OutDir: "generated"})
	require.NoError(t, err)

	directive := regexp.MustCompile(`^#line (\d+) "([^"]*)"$`)
	checked, back := 0, 0
	for name, b := range files {
		hipPath := path.Join("generated", name)
		lines := strings.Split(string(b), "\n")
		file, next := hipPath, 1 // where the next line is said to be
		for i, l := range lines {
			real := i + 1
			if m := directive.FindStringSubmatch(l); m != nil {
				n, _ := strconv.Atoi(m[1])
				file, next = m[2], n
				if file == hipPath {
					require.Equal(t, real+1, n, "%s:%d: a directive back to the generated file names the next line", hipPath, real)
					back++
				} else {
					require.True(t, strings.HasPrefix(file, "templates/"), "%s:%d: %s", hipPath, real, l)
				}
				continue
			}
			at := next
			next++
			if file == hipPath {
				require.Equal(t, real, at, "%s:%d: the generated file's own lines keep their numbers", hipPath, real)
				continue
			}
			src, err := fs.ReadFile(templates, strings.TrimPrefix(file, "templates/"))
			require.NoError(t, err, "%s:%d names %s", hipPath, real, file)
			tl := strings.Split(string(src), "\n")
			require.LessOrEqual(t, at, len(tl), "%s:%d: %s has %d lines, not %d", hipPath, real, file, len(tl), at)
			if plainText(tl, at-1) {
				require.Equal(t, strings.TrimSpace(tl[at-1]), strings.TrimSpace(l), "%s:%d is said to be %s:%d", hipPath, real, file, at)
				checked++
			}
		}
	}
	// Every kernel of every variant has a body and a directive back.
	require.Greater(t, checked, 1000, "template lines compared")
	require.Greater(t, back, 100, "directives back to the generated file")
	t.Logf("%d template lines compared, %d directives back", checked, back)
}

// plainText: line i of a template is copied to the output as it is: no
// action on it, and no trim marker around it that could join it to a
// neighbour.
func plainText(lines []string, i int) bool {
	l := lines[i]
	if strings.Contains(l, "{{") || strings.Contains(l, "}}") || strings.TrimSpace(l) == "" {
		return false
	}
	if i > 0 && strings.HasSuffix(strings.TrimSpace(lines[i-1]), "-}}") {
		return false
	}
	if i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "{{-") {
		return false
	}
	return true
}

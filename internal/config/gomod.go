package config

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// module is what the config needs from a go.mod: where it is, the module
// path and the tools it declares.
type module struct {
	root, path string
	tools      []string
}

func (m *module) hasTool(p string) bool { return contains(m.tools, p) }

// findModule reads the go.mod in dir or the nearest parent; nil when there
// is none. A directory that cannot exist (a file on its path, a name too
// long for the file system) holds none: the search goes on above it, and
// whatever later writes there reports the path.
func findModule(dir string) (*module, error) {
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			m := parseGoMod(b)
			m.root = dir
			return m, nil
		}
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrPermission) && !errors.Is(err, syscall.ENOTDIR) && !errors.Is(err, syscall.ENAMETOOLONG) {
			return nil, err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil, nil
		}
		dir = parent
	}
}

// parseGoMod reads the module path and the tool directives (`tool x` and
// `tool ( x ... )`) of a go.mod; enough of the syntax for that.
func parseGoMod(b []byte) *module {
	m := &module{}
	inTool := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case inTool && f[0] == ")":
			inTool = false
		case inTool:
			m.tools = append(m.tools, unquote(f[0]))
		case f[0] == "module" && len(f) >= 2:
			m.path = unquote(f[1])
		case f[0] == "tool" && len(f) >= 2 && f[1] == "(":
			inTool = true
		case f[0] == "tool" && len(f) >= 2:
			m.tools = append(m.tools, unquote(f[1]))
		}
	}
	return m
}

func unquote(s string) string { return strings.Trim(s, "\"`") }

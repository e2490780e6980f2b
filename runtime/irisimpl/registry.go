package irisimpl

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// registry maps import paths to the registered tables of the generated
// packages in the program.
var registry struct {
	mu     sync.Mutex
	tables map[string]*Table
}

// Register records a generated package's table under its import path, so
// that its plans find the code objects the package embeds. Every generated
// package calls it in init. A second table under the same import path (a
// generated package copied or moved without regenerating it) is a conflict:
// nothing panics, but every plan of either package fails with an error that
// says to regenerate; other packages are not affected. Registering the same
// table again does nothing.
func Register(t *Table) {
	_ = t.prepare() // an invalid table fails its plans, with the reason
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.tables == nil {
		registry.tables = map[string]*Table{}
	}
	if o := registry.tables[t.ImportPath]; o != nil && o != t {
		o.conflict.Store(t)
		t.conflict.Store(o)
		return
	}
	registry.tables[t.ImportPath] = t
}

// Registered returns the table registered under importPath, or nil.
func Registered(importPath string) *Table {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return registry.tables[importPath]
}

// Tables returns the tables of every generated package registered in the
// program, sorted by import path: what tools that take any generated
// package (irisgen bench and probe, through gputools) work on.
func Tables() []*Table {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	out := make([]*Table, 0, len(registry.tables))
	for _, t := range registry.tables {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Table) int { return strings.Compare(a.ImportPath, b.ImportPath) })
	return out
}

// usable reports why no plan of t can be made: an invalid table or a
// registration conflict; nil otherwise.
func (t *Table) usable() error {
	if err := t.prepare(); err != nil {
		return err
	}
	if t.conflict.Load() != nil {
		return fmt.Errorf("irisimpl: two generated packages in this program register the import path %q: "+
			"one of them was copied or moved without regenerating it; regenerate it where it lives now (`go generate ./...`)", t.ImportPath)
	}
	return nil
}

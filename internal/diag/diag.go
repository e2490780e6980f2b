// Package diag holds positioned user errors: every problem a spec or a
// template can have is reported as `file:line:col: error: message`, and a run
// collects all of them instead of stopping at the first.
package diag

import (
	"fmt"
	"sort"
	"strings"
)

// Pos is a position in a spec or template file, 1-based like the YAML
// parser's. It is defined here, not in package ir, so that ir can return
// diag errors without an import cycle; ir.Pos is an alias of it.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Error is one positioned problem.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": error: " + e.Msg }

// List is a set of errors; it is itself an error when non-empty.
type List []*Error

// Add appends an error at pos.
func (l *List) Add(pos Pos, msg string) { *l = append(*l, &Error{Pos: pos, Msg: msg}) }

// Sort orders errors by file, line and column, keeping insertion order for ties.
func (l List) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// Err returns nil for an empty list, else the list.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

func (l List) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

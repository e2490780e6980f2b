// Package diag holds positioned user errors: every problem a spec or a
// template can have is reported as `file:line:col: error: message`, and a run
// collects all of them instead of stopping at the first. An error may carry
// notes, each a further `file:line:col: note: message` line: a template error
// is positioned in the template (where an editor jumps) and notes the spec
// entry it contradicts.
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

// Note is a secondary position of an error: the other side of a mismatch.
type Note struct {
	Pos Pos
	Msg string
}

// Error is one positioned problem.
type Error struct {
	Pos   Pos
	Msg   string
	Notes []Note
}

// Error is the problem's line, then one line per note.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pos.String() + ": error: " + e.Msg)
	for _, n := range e.Notes {
		b.WriteString("\n" + n.Pos.String() + ": note: " + n.Msg)
	}
	return b.String()
}

// List is a set of errors; it is itself an error when non-empty.
type List []*Error

// Add appends an error at pos.
func (l *List) Add(pos Pos, msg string) { *l = append(*l, &Error{Pos: pos, Msg: msg}) }

// AddNoted appends an error at pos with one note.
func (l *List) AddNoted(pos Pos, msg string, note Note) {
	*l = append(*l, &Error{Pos: pos, Msg: msg, Notes: []Note{note}})
}

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

// MaxErrors is how many errors Cap keeps: past it, more errors add noise and
// (on hostile input) time, not help.
const MaxErrors = 100

// Cap sorts l and keeps its first MaxErrors errors; the last one kept says
// how many were left out.
func (l List) Cap() List {
	l.Sort()
	if len(l) <= MaxErrors {
		return l
	}
	out := append(List(nil), l[:MaxErrors]...)
	last := *out[MaxErrors-1]
	last.Notes = append(append([]Note(nil), last.Notes...), Note{Pos: l[MaxErrors].Pos, Msg: fmt.Sprintf("%d more errors from here on are not shown; fix these first", len(l)-MaxErrors)})
	out[MaxErrors-1] = &last
	return out
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

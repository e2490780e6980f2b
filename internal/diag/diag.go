// Package diag holds positioned user errors: every problem a spec, a
// template, irisgen.yaml or a tuning table can have is reported as
// `file:line:col: error: message`, and a run collects all of them instead
// of stopping at the first. An error may carry notes, each a further
// `file:line:col: note: message` line: a template error is positioned in
// the template (where an editor jumps) and notes the spec entry it
// contradicts.
//
// Every error has a Code, the kind of problem, stable across releases so
// that tools can match on it, and its position a range (Pos.End): both are
// in `irisgen validate -error-format json` (WriteJSON), not in the text,
// which stays one line per error and note.
package diag

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Pos is a position in a spec or template file, 1-based like the YAML
// parser's, with the end of what it points at when known: EndLine and
// EndCol are the position just past its last character (so a one-line
// token of n characters at column c ends at column c+n), zero when not
// known. It is defined here, not in package ir, so that ir can return diag
// errors without an import cycle; ir.Pos is an alias of it.
type Pos struct {
	File string
	Line int
	Col  int

	EndLine, EndCol int
}

// String is file:line:col, the start only (as editors and compilers print it).
func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// End is the end of the range: EndLine and EndCol, or the start when the
// end is not known (an empty range).
func (p Pos) End() (line, col int) {
	if p.EndLine == 0 {
		return p.Line, p.Col
	}
	return p.EndLine, p.EndCol
}

// Start is p without its end, for comparing positions by where they start.
func (p Pos) Start() Pos { return Pos{File: p.File, Line: p.Line, Col: p.Col} }

// Code is the kind of an error, stable across releases (tools match on it;
// the message's words may change).
type Code string

// The codes. Every error has one; the stage that finds a problem picks the
// most specific.
const (
	// Syntax: the file is not valid YAML, or the template does not parse.
	Syntax Code = "syntax"
	// Schema: the document's shape is wrong: an unknown, missing or
	// duplicate key, a value of the wrong kind (a list where a name goes),
	// an entry defined twice.
	Schema Code = "schema"
	// Value: a value outside its set or range: an unknown dtype, dir, op,
	// access kind, barrier mode or type, an empty list, an item listed
	// twice, a launch setting out of bounds.
	Value Code = "value"
	// Name: a name that is not an identifier, is a keyword, or collides
	// with another once generated (Go names, HIP symbols, file names).
	Name Code = "name"
	// Undefined: a reference to something not defined: a tensor, a size
	// symbol, a rank parameter, a template file, a collective.
	Undefined Code = "undefined"
	// Rule: the spec contradicts irisgen's rules (a tensor's dir against
	// its access, optional or one-rank tensors peers touch, blocks in a
	// user shape).
	Rule Code = "rule"
	// Limit: past one of irisgen's limits (file bytes, counts, lengths,
	// dimensions, bytes of a tensor).
	Limit Code = "limit"
	// Template: a template contradicts its spec or misuses a helper: an
	// access it makes but the spec does not declare (or the reverse), a
	// parameter it never reads, a missing barrier, a failed execution.
	Template Code = "template"
	// Config: irisgen.yaml's own rules (its version, a path that cannot
	// be used) or the layout of the repository it describes; a misspelt
	// key or a wrong value in it is Schema or Value, as in a spec.
	Config Code = "config"
	// Tuning: a tuning table.
	Tuning Code = "tuning"
	// IO: a file could not be read.
	IO Code = "io"
	// Internal: an IR the generator cannot emit, built by hand rather than
	// from a spec (the spec checks catch these first).
	Internal Code = "internal"
)

// Codes lists every code, for documentation and tests; docs/spec.md
// ("Error codes and -error-format json") has the same table for users.
var Codes = []Code{Syntax, Schema, Value, Name, Undefined, Rule, Limit, Template, Config, Tuning, IO, Internal}

// Note is a secondary position of an error: the other side of a mismatch.
type Note struct {
	Pos Pos
	Msg string
}

// Error is one positioned problem.
type Error struct {
	Code  Code
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

// Add appends an error of kind code at pos.
func (l *List) Add(code Code, pos Pos, msg string) {
	*l = append(*l, &Error{Code: code, Pos: pos, Msg: msg})
}

// AddNoted appends an error of kind code at pos with one note.
func (l *List) AddNoted(code Code, pos Pos, msg string, note Note) {
	*l = append(*l, &Error{Code: code, Pos: pos, Msg: msg, Notes: []Note{note}})
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

// Format is how a command prints errors: FormatText (the default) is
// Error's lines, FormatJSON one JSON object per error and line (WriteJSON).
type Format string

const (
	FormatText Format = "text"
	FormatJSON Format = "json"
)

// Formats lists the formats, for flag help.
var Formats = []Format{FormatText, FormatJSON}

// ParseFormat returns the format called s.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown error format %q (want text or json)", s)
}

// JSONError is an error as WriteJSON writes it: its code, its range (end
// exclusive, the start again when the end is not known), "error" as the
// severity, the message, and its notes, each with a range of its own.
type JSONError struct {
	Code      Code       `json:"code"`
	File      string     `json:"file"`
	Line      int        `json:"line"`
	Column    int        `json:"column"`
	EndLine   int        `json:"end_line"`
	EndColumn int        `json:"end_column"`
	Severity  string     `json:"severity"`
	Message   string     `json:"message"`
	Notes     []JSONNote `json:"notes"`
}

// JSONNote is a note as WriteJSON writes it.
type JSONNote struct {
	File      string `json:"file"`
	Line      int    `json:"line"`
	Column    int    `json:"column"`
	EndLine   int    `json:"end_line"`
	EndColumn int    `json:"end_column"`
	Message   string `json:"message"`
}

// JSON is e as WriteJSON writes it.
func (e *Error) JSON() JSONError {
	el, ec := e.Pos.End()
	j := JSONError{Code: e.Code, File: e.Pos.File, Line: e.Pos.Line, Column: e.Pos.Col, EndLine: el, EndColumn: ec,
		Severity: "error", Message: e.Msg, Notes: []JSONNote{}}
	for _, n := range e.Notes {
		el, ec := n.Pos.End()
		j.Notes = append(j.Notes, JSONNote{File: n.Pos.File, Line: n.Pos.Line, Column: n.Pos.Col, EndLine: el, EndColumn: ec, Message: n.Msg})
	}
	return j
}

// WriteJSON writes one JSON object per error of l, one a line (JSON Lines,
// as buf's --error-format=json does).
func WriteJSON(w io.Writer, l List) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, e := range l {
		if err := enc.Encode(e.JSON()); err != nil {
			return err
		}
	}
	return nil
}

// Write writes l in format f: text lines and a count of the errors, or
// JSON Lines alone.
func Write(w io.Writer, f Format, l List) error {
	if f == FormatJSON {
		return WriteJSON(w, l)
	}
	for _, e := range l {
		if _, err := fmt.Fprintln(w, e); err != nil {
			return err
		}
	}
	s := "s"
	if len(l) == 1 {
		s = ""
	}
	_, err := fmt.Fprintf(w, "%d error%s\n", len(l), s)
	return err
}

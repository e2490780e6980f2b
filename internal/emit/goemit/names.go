package goemit

import (
	"go/token"
	"strings"
	"unicode"
)

// Exported turns a snake_case spec name into an exported Go identifier:
// all_gather -> AllGather, one_shot -> OneShot.
func Exported(snake string) string {
	var b strings.Builder
	for _, part := range strings.Split(snake, "_") {
		if part == "" {
			continue
		}
		r := []rune(part)
		r[0] = unicode.ToUpper(r[0])
		b.WriteString(string(r))
	}
	return b.String()
}

// local turns a snake_case spec name into an unexported identifier that is
// safe as a parameter of the generated functions: it never shadows a package
// the generated code uses, a predeclared name, a keyword, one of the
// wrappers' own parameters, or a package-level name of the generated
// package (the collectives' table entries all end in "Desc").
func local(snake string) string {
	e := Exported(snake)
	if e == "" {
		return "x"
	}
	r := []rune(e)
	r[0] = unicode.ToLower(r[0])
	id := string(r)
	if token.IsKeyword(id) || reserved[id] || strings.HasSuffix(id, "Desc") {
		id += "Arg"
	}
	return id
}

// reserved are names the generated code uses itself (parameters, locals,
// imported packages) or that Go predeclares and the code relies on.
var reserved = map[string]bool{
	// parameters of the generated functions
	"r": true, "s": true, "dt": true, "op": true, "mode": true, "p": true,
	"bytes": true, "world": true, "variant": true, "collective": true,
	// package-level names of the fixed files
	"table": true, "kernelFiles": true, "irisimplAPI": true,
	// packages
	"irisrt": true, "gpu": true, "embed": true, "math": true,
	// predeclared identifiers the generated code calls or names
	"max": true, "min": true, "len": true, "int64": true, "int": true,
	"string": true, "error": true, "nil": true, "any": true, "true": true,
	"false": true, "append": true, "new": true, "make": true, "uint8": true,
	"float32": true,
}

package spec

import (
	"regexp"
	"strings"
)

// Closest returns the candidate nearest to word by edit distance, for a
// "did you mean" hint, or "" when none is close enough to be a likely typo
// (none for words under 4 letters, at most 1 edit up to 4 letters, 2 from
// 5 letters on).
func Closest(word string, candidates []string) string {
	if len(word) < 4 {
		return "" // "f64" is one edit from "i64": too short to guess
	}
	limit := 1
	if len(word) >= 5 {
		limit = 2
	}
	if limit > len(word)/2 {
		limit = len(word) / 2
	}
	best, bestD := "", limit+1
	lower := strings.ToLower(word)
	for _, c := range candidates {
		if diff := len(lower) - len(c); diff > limit || -diff > limit {
			continue // more edits than the limit apart: skip the quadratic distance
		}
		if d := distance(lower, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// distance is the Levenshtein distance with adjacent transpositions counted
// as one edit ("acces" and "acecss" are both one typo from "access").
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Specs are short; keep the cost bounded on hostile input anyway.
	if len(ra) > 64 || len(rb) > 64 {
		if a == b {
			return 0
		}
		return 1 << 30
	}
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

var identifier = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// IsIdentifier reports whether s is a name the spec language accepts for
// collectives, variants, tensors, sizes and templates: [a-z][a-z0-9_]*.
// Such names are valid in file names, C and Go as they are.
func IsIdentifier(s string) bool { return identifier.MatchString(s) }

// reserved are the lower-case keywords of Go, C and C++ that an identifier
// could spell; tensor and size names become Go parameters and C struct
// fields, so they must not be keywords.
var reserved = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`
		break case chan const continue default defer else fallthrough for func go goto if
		import interface map package range return select struct switch type var
		auto char double enum extern float int long register short signed sizeof static
		union unsigned void volatile while do bool true false nullptr class new delete
		this template typename namespace using public private protected virtual operator
		friend inline mutable explicit static_cast const_cast dynamic_cast reinterpret_cast
		throw try catch restrict alignas alignof constexpr decltype noexcept thread_local
		static_assert typedef asm export`) {
		reserved[w] = true
	}
}

// IsReserved reports whether s is a Go, C or C++ keyword.
func IsReserved(s string) bool { return reserved[s] }

package driver

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestUnifiedDiffExact(t *testing.T) {
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\n"
	cases := []struct {
		name, new, want string
	}{
		{"equal", old, ""},
		{"middle", strings.Replace(old, "g\n", "G\n", 1), `--- old
+++ new
@@ -4,7 +4,7 @@
 d
 e
 f
-g
+G
 h
 i
 j
`},
		{"insert at start", "0\n" + old, `--- old
+++ new
@@ -1,3 +1,4 @@
+0
 a
 b
 c
`},
		{"delete at end", strings.TrimSuffix(old, "n\n"), `--- old
+++ new
@@ -11,4 +11,3 @@
 k
 l
 m
-n
`},
		{"two hunks", strings.Replace(strings.Replace(old, "a\n", "A\n", 1), "n\n", "N\n", 1), `--- old
+++ new
@@ -1,4 +1,4 @@
-a
+A
 b
 c
 d
@@ -11,4 +11,4 @@
 k
 l
 m
-n
+N
`},
		{"merged hunk", strings.Replace(strings.Replace(old, "b\n", "B\n", 1), "i\n", "I\n", 1), `--- old
+++ new
@@ -1,12 +1,12 @@
 a
-b
+B
 c
 d
 e
 f
 g
 h
-i
+I
 j
 k
 l
`},
		{"no newline at end", strings.TrimSuffix(old, "\n"), `--- old
+++ new
@@ -11,4 +11,4 @@
 k
 l
 m
-n
+n
\ No newline at end of file
`},
		{"from empty", "x\n", "--- old\n+++ new\n@@ -0,0 +1 @@\n+x\n"},
	}
	for _, c := range cases {
		o := old
		if c.name == "from empty" {
			o = ""
		}
		if got := unifiedDiff("old", "new", o, c.new); got != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}

// apply applies a unified diff made by unifiedDiff to old, checking every
// context and removed line, so the round trip proves the hunks are right.
func apply(t *testing.T, old, diff string) string {
	t.Helper()
	src := splitLines(old)
	lines := strings.SplitAfter(diff, "\n")
	var out []string
	pos := 0 // next unconsumed line of src
	for i := 2; i < len(lines) && lines[i] != ""; {
		h := lines[i]
		var oa, ob string
		if _, err := fmt.Sscanf(h, "@@ -%s +%s @@", &oa, &ob); err != nil {
			t.Fatalf("bad hunk header %q: %v", h, err)
		}
		parts := strings.Split(oa, ",")
		start, _ := strconv.Atoi(parts[0])
		if len(parts) == 1 || parts[1] != "0" {
			start-- // 1-based first line -> 0-based; an empty range names the line before
		}
		out = append(out, src[pos:start]...)
		pos = start
		i++
		for i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "@@") {
			l := lines[i]
			text := l[1:]
			if i+1 < len(lines) && lines[i+1] == "\\ No newline at end of file\n" {
				text = strings.TrimSuffix(text, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(src) || src[pos] != text {
					t.Fatalf("hunk %q: line %d is %q, diff says %q", h, pos+1, src[pos:min(pos+1, len(src))], text)
				}
				if l[0] == ' ' {
					out = append(out, text)
				}
				pos++
			case '+':
				out = append(out, text)
			default:
				t.Fatalf("bad diff line %q", l)
			}
			i++
		}
	}
	out = append(out, src[pos:]...)
	return strings.Join(out, "")
}

func TestUnifiedDiffRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gen := func() string {
		var b strings.Builder
		n := rng.IntN(40)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%d\n", rng.IntN(6))
		}
		if n > 0 && rng.IntN(4) == 0 {
			return strings.TrimSuffix(b.String(), "\n")
		}
		return b.String()
	}
	for i := 0; i < 2000; i++ {
		a, b := gen(), gen()
		d := unifiedDiff("a", "b", a, b)
		if a == b {
			if d != "" {
				t.Fatalf("equal inputs gave a diff:\n%s", d)
			}
			continue
		}
		if got := apply(t, a, d); got != b {
			t.Fatalf("case %d: applying the diff gives\n%q\nwant\n%q\ndiff:\n%s", i, got, b, d)
		}
	}
}

func TestEditsAreMinimal(t *testing.T) {
	a := splitLines("a\nb\nc\nd\n")
	b := splitLines("a\nx\nc\nd\ny\n")
	n := 0
	for _, e := range edits(a, b) {
		if e.kind != same {
			n++
		}
	}
	if n != 3 { // -b +x +y
		t.Errorf("%d changed lines, want 3", n)
	}
}

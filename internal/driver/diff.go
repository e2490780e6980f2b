package driver

import (
	"fmt"
	"strings"
)

// The unified diff `irisgen check` prints: a longest-common-subsequence edit
// script over lines, cut into hunks with three lines of context. Generated
// files differ from their checked-in copies in a few places, so the common
// prefix and suffix are trimmed before the quadratic part.

type editKind byte

const (
	same editKind = ' '
	del  editKind = '-'
	add  editKind = '+'
)

type edit struct {
	kind editKind
	text string
	a, b int // 0-based line numbers in old (a) and new (b) before this edit
}

// maxCells bounds the LCS table; beyond it the middle is shown as replaced
// wholesale, which is still a correct diff.
const maxCells = 25_000_000

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// edits returns the edit script turning a into b.
func edits(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out []edit
	for i := 0; i < pre; i++ {
		out = append(out, edit{same, a[i], i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	for _, e := range lcsEdits(ma, mb) {
		e.a += pre
		e.b += pre
		out = append(out, e)
	}
	for i := 0; i < suf; i++ {
		ia, ib := len(a)-suf+i, len(b)-suf+i
		out = append(out, edit{same, a[ia], ia, ib})
	}
	return out
}

func lcsEdits(a, b []string) []edit {
	n, m := len(a), len(b)
	var out []edit
	if n*m > maxCells {
		for i, l := range a {
			out = append(out, edit{del, l, i, 0})
		}
		for j, l := range b {
			out = append(out, edit{add, l, n, j})
		}
		return out
	}
	// l[i][j] is the LCS length of a[i:] and b[j:].
	l := make([][]int32, n+1)
	for i := range l {
		l[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, edit{same, a[i], i, j})
			i++
			j++
		case i < n && (j == m || l[i+1][j] >= l[i][j+1]):
			out = append(out, edit{del, a[i], i, j}) // removals first, like diff(1)
			i++
		default:
			out = append(out, edit{add, b[j], i, j})
			j++
		}
	}
	return out
}

// unifiedDiff renders the difference between old and new as a unified diff
// with the given file labels; it returns "" when they are equal.
func unifiedDiff(oldName, newName, old, new string) string {
	if old == new {
		return ""
	}
	es := edits(splitLines(old), splitLines(new))
	const ctx = 3
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", oldName, newName)
	for i := 0; i < len(es); {
		if es[i].kind == same {
			i++
			continue
		}
		// A hunk starts ctx lines before the first change and runs until
		// more than 2*ctx unchanged lines follow a change.
		start := max(0, i-ctx)
		end := i
		for k := i; k < len(es); k++ {
			if es[k].kind != same {
				end = k + 1
				continue
			}
			if k-end >= 2*ctx {
				break
			}
		}
		stop := min(len(es), end+ctx)
		writeHunk(&b, es[start:stop])
		i = stop
	}
	return b.String()
}

func writeHunk(b *strings.Builder, h []edit) {
	na, nb := 0, 0
	for _, e := range h {
		if e.kind != add {
			na++
		}
		if e.kind != del {
			nb++
		}
	}
	sa, sb := h[0].a+1, h[0].b+1
	if na == 0 {
		sa-- // GNU convention: an empty range names the line before it
	}
	if nb == 0 {
		sb--
	}
	fmt.Fprintf(b, "@@ -%s +%s @@\n", hunkRange(sa, na), hunkRange(sb, nb))
	for _, e := range h {
		b.WriteByte(byte(e.kind))
		b.WriteString(e.text)
		if !strings.HasSuffix(e.text, "\n") {
			b.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}

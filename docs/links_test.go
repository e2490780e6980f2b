// Package docs holds the repository's documentation; its test keeps the
// documentation, and every other file, self-contained: no link or reference
// to a file outside the repository, which every clone would have broken.
package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// outside are references to files outside the repository, in any text
// file: the workplace's shared notes next to the checkout, and absolute
// paths of the machines the project is developed on.
var outside = []*regexp.Regexp{
	regexp.MustCompile(`(^|[^\w.])(\.\./)+shared\b`),
	regexp.MustCompile(`\bshared/(DESIGN|GPU|STYLE)\.md\b`),
	regexp.MustCompile(`(^|[\s"'(\x60])/work/`),
}

// pending are references in files of other owners, each to be replaced
// by the text given; listed so that this test passes until they are, and
// fails once one is gone (then its entry goes too).
var pending = []struct{ file, text, by string }{}

// root is the repository's root directory.
const root = ".."

// skipDir: directories that are not the repository's text: git's store,
// build output.
func skipDir(rel string) bool {
	switch rel {
	case ".git", "build", ".carry":
		return true
	}
	return false
}

// textFiles returns every text file of the repository (slash paths relative
// to the root) with its contents; binary files (a NUL byte) are left out.
func textFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && rel != "." && skipDir(rel):
			return filepath.SkipDir
		case d.IsDir(), rel == ".git": // a worktree's .git is a file
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.ContainsRune(b, 0) {
			files[rel] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 {
		t.Fatalf("only %d text files under %s: is the test running in docs/?", len(files), root)
	}
	return files
}

// TestNoReferenceOutside: no file of the repository refers to a file
// outside it, by a relative path that climbs out of it or by a path of the
// machines it is developed on (but for the pending entries).
func TestNoReferenceOutside(t *testing.T) {
	files := textFiles(t)
	self := "docs/links_test.go"
	for _, p := range pending {
		if !bytes.Contains(files[p.file], []byte(p.text)) {
			t.Errorf("%s no longer holds %q: remove its entry from pending", p.file, p.text)
		}
	}
	for name, b := range files {
		if name == self {
			continue
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, re := range outside {
				if !re.MatchString(line) || isPending(name, line) {
					continue
				}
				t.Errorf("%s:%d: refers to a file outside the repository (%s): %s\n\tthe docs users need live in docs/ (design.md, gpu-machines.md): point there", name, i+1, re, strings.TrimSpace(line))
			}
		}
	}
}

func isPending(file, line string) bool {
	for _, p := range pending {
		if p.file == file && strings.Contains(line, p.text) {
			return true
		}
	}
	return false
}

// mdLink is a markdown link or image: [text](target) or [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestMarkdownLinks: every relative link of every markdown file names a
// file or directory that exists inside the repository, and a link's
// #anchor into a markdown file (the same page's too) names one of its
// headings as GitHub renders it (anchors); links to the web are left
// alone.
func TestMarkdownLinks(t *testing.T) {
	files := textFiles(t)
	n, nAnchors := 0, 0
	anchorsOf := map[string]map[string]bool{}
	for name, b := range files {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		for _, l := range links(string(b)) {
			target, frag, hasFrag := strings.Cut(l.target, "#")
			switch {
			case strings.Contains(l.target, "://"), strings.HasPrefix(l.target, "mailto:"):
				continue
			case path.IsAbs(target):
				t.Errorf("%s:%d: link %q is an absolute path; link relative to the file", name, l.line, l.target)
				continue
			}
			p := name
			if target != "" {
				n++
				p = path.Join(path.Dir(name), target)
				if p == ".." || strings.HasPrefix(p, "../") {
					t.Errorf("%s:%d: link %q leaves the repository; what users need belongs in docs/", name, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
					t.Errorf("%s:%d: link %q: no %s in the repository", name, l.line, l.target, p)
					continue
				}
			}
			if !hasFrag || !strings.HasSuffix(p, ".md") {
				continue
			}
			if anchorsOf[p] == nil {
				anchorsOf[p] = anchors(string(files[p]))
			}
			nAnchors++
			if !anchorsOf[p][frag] {
				t.Errorf("%s:%d: link %q: %s has no heading whose anchor is #%s", name, l.line, l.target, p, frag)
			}
		}
	}
	if n < 20 || nAnchors < 20 {
		t.Errorf("only %d relative links and %d anchors checked", n, nAnchors)
	}
}

// anchors returns the anchors GitHub gives a markdown text's headings
// (outside fenced code): the heading's text without its markup, lower
// case, every character but letters, digits, spaces, '-' and '_' dropped
// and spaces made '-'; a repeated anchor gets -1, -2, ... after the first.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		text, ok := heading(line)
		if fenced || !ok {
			continue
		}
		a := slug(text)
		if k := seen[a]; k > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, k)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// heading returns an ATX heading's text ("## Text ##" -> "Text").
func heading(line string) (string, bool) {
	hashes := len(line) - len(strings.TrimLeft(line, "#"))
	if hashes < 1 || hashes > 6 || (len(line) > hashes && line[hashes] != ' ') {
		return "", false
	}
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[hashes:]), "#")), true
}

// inlineLink is a link or image in a heading: its text is what renders.
var inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// slug is GitHub's anchor of a heading's text.
func slug(text string) string {
	text = inlineLink.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-', r == '_', unicode.IsLetter(r), unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

type link struct {
	line   int
	target string
}

// links returns the links of a markdown text outside code: fenced blocks
// and inline code spans are skipped (C++ lambdas look like links).
func links(md string) []link {
	var out []link
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(line), -1) {
			out = append(out, link{i + 1, m[1]})
		}
	}
	return out
}

// stripCode removes inline code spans from a line of markdown, keeping a
// link whose text is code ([`x`](y)).
func stripCode(line string) string {
	var b strings.Builder
	in := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '`' {
			in = !in
			continue
		}
		if !in {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// TestCheckerFindsWhatItShould: each rule catches a sample and passes the
// near misses.
func TestCheckerFindsWhatItShould(t *testing.T) {
	up := ".." + "/"
	for _, c := range []struct {
		line string
		want bool
	}{
		{"see [the design](" + up + "shared/DESIGN.md)", true},
		{"measured there (" + up + up + "shared/GPU.md)", true},
		{"# see shared/" + "GPU.md", true},
		{"cat /" + "work/shared/x", true},
		{"the machines are shared; see docs/gpu-machines.md", false},
		{"replace github.com/irisgen/irisgen => " + up + "..", false},
		{"sharedmem/GPU.md", false},
	} {
		got := false
		for _, re := range outside {
			got = got || re.MatchString(c.line)
		}
		if got != c.want {
			t.Errorf("%q: flagged %v, want %v", c.line, got, c.want)
		}
	}
	md := "a [x](y.md) and `[no](code)` and [`z`](z.md)\n```\n[no](fenced)\n```\n[w](http://e.com) [a](#b) [img](p.png \"t\")\n"
	var got []string
	for _, l := range links(md) {
		got = append(got, fmt.Sprintf("%d:%s", l.line, l.target))
	}
	if want := "1:y.md 1:z.md 5:http://e.com 5:#b 5:p.png"; strings.Join(got, " ") != want {
		t.Errorf("links = %q, want %q", got, want)
	}
}

// TestAnchors: GitHub's anchors of headings, the cases the docs use.
func TestAnchors(t *testing.T) {
	md := "# Performance\n" +
		"## Fused all_reduce + residual + RMSNorm against the unfused path\n" +
		"### Copy engines on 4 H200s (twenty-second session, 2026-11-28)\n" +
		"### broadcast `scatter_gather` stores: [link](x.md) 1.5x\n" +
		"```\n# not a heading\n```\n" +
		"#not a heading either\n" +
		"## Rows\n## Rows ##\n"
	want := []string{"performance", "fused-all_reduce--residual--rmsnorm-against-the-unfused-path",
		"copy-engines-on-4-h200s-twenty-second-session-2026-11-28", "broadcast-scatter_gather-stores-link-15x", "rows", "rows-1"}
	got := anchors(md)
	for _, a := range want {
		if !got[a] {
			t.Errorf("no anchor %q in %v", a, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("anchors %v, want exactly %v", got, want)
	}
}

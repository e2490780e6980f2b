package diag

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func at(file string, line, col int) Pos { return Pos{File: file, Line: line, Col: col} }

func TestErrorWithNotes(t *testing.T) {
	var l List
	l.AddNoted(Template, at("templates/t.hip.tmpl", 3, 7), "bad", Note{at("specs/a.yaml", 12, 5), "declared here"})
	l.Add(Schema, at("specs/a.yaml", 1, 1), "first")
	l.Sort()
	assert.Equal(t, "specs/a.yaml:1:1: error: first\n"+
		"templates/t.hip.tmpl:3:7: error: bad\n"+
		"specs/a.yaml:12:5: note: declared here", l.Error())
}

func TestCap(t *testing.T) {
	var l List
	for i := MaxErrors + 5; i > 0; i-- {
		l.Add(Value, at("f", i, 1), fmt.Sprint("e", i))
	}
	c := l.Cap()
	assert.Len(t, c, MaxErrors)
	assert.Equal(t, 1, c[0].Pos.Line)
	last := c[MaxErrors-1]
	assert.Equal(t, []Note{{at("f", MaxErrors+1, 1), "5 more errors from here on are not shown; fix these first"}}, last.Notes)
	assert.Empty(t, l[MaxErrors-1].Notes, "Cap must not change the errors it was given")

	short := List{{Code: Value, Pos: at("f", 1, 1), Msg: "x"}}
	assert.Equal(t, short, short.Cap())
}

// TestText: the end of a range is not in the text, which stays
// file:line:col, and Write adds the count.
func TestText(t *testing.T) {
	p := Pos{File: "s.yaml", Line: 2, Col: 3, EndLine: 2, EndCol: 9}
	assert.Equal(t, "s.yaml:2:3", p.String())
	var b bytes.Buffer
	require.NoError(t, Write(&b, FormatText, List{{Code: Value, Pos: p, Msg: "bad"}}))
	assert.Equal(t, "s.yaml:2:3: error: bad\n1 error\n", b.String())
}

func TestJSON(t *testing.T) {
	l := List{
		{Code: Template, Pos: Pos{File: "t.hip.tmpl", Line: 3, Col: 7, EndLine: 3, EndCol: 20}, Msg: `makes "remote_write" access`,
			Notes: []Note{{Pos: Pos{File: "s.yaml", Line: 12, Col: 5, EndLine: 12, EndCol: 15}, Msg: "declared here"}}},
		{Code: IO, Pos: at("s.yaml", 1, 1), Msg: "cannot read <it>"},
	}
	var b bytes.Buffer
	require.NoError(t, Write(&b, FormatJSON, l))
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	require.Len(t, lines, 2, "one object a line, and no count")
	assert.JSONEq(t, `{"code":"template","file":"t.hip.tmpl","line":3,"column":7,"end_line":3,"end_column":20,"severity":"error",
		"message":"makes \"remote_write\" access","notes":[{"file":"s.yaml","line":12,"column":5,"end_line":12,"end_column":15,"message":"declared here"}]}`, lines[0])
	// An unknown end is the start; notes are [] rather than null; no HTML escaping.
	assert.Equal(t, `{"code":"io","file":"s.yaml","line":1,"column":1,"end_line":1,"end_column":1,"severity":"error","message":"cannot read <it>","notes":[]}`, lines[1])
	var back JSONError
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &back))
	assert.Equal(t, l[0].JSON(), back)
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats {
		got, err := ParseFormat(string(f))
		require.NoError(t, err)
		assert.Equal(t, f, got)
	}
	_, err := ParseFormat("xml")
	assert.EqualError(t, err, `unknown error format "xml" (want text or json)`)
}

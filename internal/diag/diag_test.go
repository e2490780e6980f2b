package diag

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestErrorWithNotes(t *testing.T) {
	var l List
	l.AddNoted(Pos{"templates/t.hip.tmpl", 3, 7}, "bad", Note{Pos{"specs/a.yaml", 12, 5}, "declared here"})
	l.Add(Pos{"specs/a.yaml", 1, 1}, "first")
	l.Sort()
	assert.Equal(t, "specs/a.yaml:1:1: error: first\n"+
		"templates/t.hip.tmpl:3:7: error: bad\n"+
		"specs/a.yaml:12:5: note: declared here", l.Error())
}

func TestCap(t *testing.T) {
	var l List
	for i := MaxErrors + 5; i > 0; i-- {
		l.Add(Pos{"f", i, 1}, fmt.Sprint("e", i))
	}
	c := l.Cap()
	assert.Len(t, c, MaxErrors)
	assert.Equal(t, 1, c[0].Pos.Line)
	last := c[MaxErrors-1]
	assert.Equal(t, []Note{{Pos{"f", MaxErrors + 1, 1}, "5 more errors from here on are not shown; fix these first"}}, last.Notes)
	assert.Empty(t, l[MaxErrors-1].Notes, "Cap must not change the errors it was given")

	short := List{{Pos: Pos{"f", 1, 1}, Msg: "x"}}
	assert.Equal(t, short, short.Cap())
}

package session_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

func text(t *testing.T, d history.Display, mime string) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(d.Data[mime], &s), "%s of %v", mime, d)
	return s
}

// IPython semantics in a session, as a notebook cell has them: display() and the final value
// with their mime bundles in order, figures inline, magics, _ and Out, help; and they survive
// a stop before every cell.
func TestNotebookSemantics(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()

	var streamed []history.Display
	res, err := s.Exec(testenv.Ctx(t, 2*time.Minute),
		"from IPython.display import HTML, Markdown\nprint('before')\ndisplay(HTML('<b>x</b>'), Markdown('*m*'))\nprint('after')\n6 * 7",
		session.ExecOptions{OnDisplay: func(d history.Display) { streamed = append(streamed, d) }})
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	assert.Equal(t, "before\nafter\n", res.Stdout)
	require.Len(t, res.Displays, 3)
	assert.Equal(t, res.Displays, streamed)
	assert.Equal(t, "<b>x</b>", text(t, res.Displays[0], "text/html"))
	assert.Equal(t, "*m*", text(t, res.Displays[1], "text/markdown"))
	assert.Equal(t, contract.DisplayResult, res.Displays[2].Kind)
	assert.Equal(t, "42", text(t, res.Displays[2], "text/plain"))
	assert.Equal(t, int64(len("before\n")), res.Displays[0].StdoutPos)
	assert.Equal(t, int64(len("before\nafter\n")), res.Displays[2].StdoutPos)
	require.NotNil(t, res.Result)
	assert.Equal(t, "42", *res.Result)

	res = run(t, s, "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('t')")
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	var figs int
	for _, d := range res.Displays {
		if d.Kind == contract.DisplayData {
			png, err := base64.StdEncoding.DecodeString(text(t, d, "image/png"))
			require.NoError(t, err)
			assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
			figs++
		}
	}
	assert.Equal(t, 1, figs, "a figure left open is shown at the end of the cell")
	assert.Len(t, res.Outputs, 1, "and saved in outputs, as before")

	res = run(t, s, "%matplotlib inline\n%time total = sum(range(10))")
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	assert.Contains(t, res.Stdout, "Wall time")
	res = run(t, s, "%%writefile nb.py\nVALUE = 5\n")
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	res = run(t, s, "%run nb.py\n!echo shell\nVALUE * 2")
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	assert.Equal(t, "shell\n", res.Stdout)
	require.NotNil(t, res.Result)
	assert.Equal(t, "10", *res.Result)
	seq := res.Seq

	res = run(t, s, "len?")
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	require.Len(t, res.Displays, 1)
	assert.Equal(t, contract.DisplayPage, res.Displays[0].Kind)
	assert.Contains(t, res.Displays[0].Text(), "Return the number of items")

	// _, Out and In come back after a stop
	s = stopStart(t, c, name)
	res = run(t, s, "(_, Out[1], In[1].splitlines()[1])")
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	require.NotNil(t, res.Result)
	assert.Equal(t, "(10, 42, \"print('before')\")", *res.Result)
	_ = seq

	// the history's notebook shows them, figures inline
	execs, _, err := c.History(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	var nb bytes.Buffer
	require.NoError(t, history.WriteIPYNB(&nb, "python", execs))
	var doc struct {
		Cells []struct {
			Outputs []struct {
				OutputType string         `json:"output_type"`
				Data       map[string]any `json:"data"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	require.NoError(t, json.Unmarshal(nb.Bytes(), &doc))
	require.GreaterOrEqual(t, len(doc.Cells), 2)
	var types []string
	for _, o := range doc.Cells[0].Outputs {
		types = append(types, o.OutputType)
	}
	assert.Equal(t, []string{"stream", "display_data", "display_data", "stream", "execute_result"}, types)
	var png bool
	for _, o := range doc.Cells[1].Outputs {
		if _, ok := o.Data["image/png"]; ok && o.OutputType == "display_data" {
			png = true
		}
	}
	assert.True(t, png, "the figure is inline in the notebook")
}

// complete, inspect and is_complete, as a Jupyter kernel asks them; a bash session answers
// neutrally.
func TestNotebookQueries(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	run(t, s, "import os\nmy_value = 3")
	ctx := testenv.Ctx(t, 2*time.Minute)
	cr, err := s.Complete(ctx, "my_va", 5)
	require.NoError(t, err)
	assert.Contains(t, cr.Matches, "my_value")
	assert.Equal(t, 0, cr.CursorStart)
	assert.Equal(t, 5, cr.CursorEnd)
	ir, err := s.Inspect(ctx, "os.getcwd", 9, 0)
	require.NoError(t, err)
	require.True(t, ir.Found)
	var doc string
	require.NoError(t, json.Unmarshal(ir.Data["text/plain"], &doc))
	assert.True(t, strings.Contains(doc, "current working directory"), doc)
	ic, err := s.IsComplete(ctx, "for i in range(3):")
	require.NoError(t, err)
	assert.Equal(t, "incomplete", ic.Status)
	assert.Equal(t, "    ", ic.Indent)
	ic, err = s.IsComplete(ctx, "x = 1")
	require.NoError(t, err)
	assert.Equal(t, "complete", ic.Status)

	b := testenv.Start(t, c, session.Spec{Lang: "bash"})
	ic, err = b.IsComplete(ctx, "echo hi")
	require.NoError(t, err)
	assert.Equal(t, "unknown", ic.Status)
	cr, err = b.Complete(ctx, "ec", 2)
	require.NoError(t, err)
	assert.Empty(t, cr.Matches)
}

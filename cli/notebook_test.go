package cli_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// IPython semantics through the CLI, as a new user tries them: display(df) and figures in
// --json, magics and help at a terminal, and a notebook from the history with the outputs.
func TestCLINotebookSemantics(t *testing.T) {
	name := startSession(t)
	r := rt(t, "", "session", "exec", name, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\ndisplay(df)\nprint('after')", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var res struct {
		Stdout   string `json:"stdout"`
		Displays []struct {
			Kind      string         `json:"kind"`
			Data      map[string]any `json:"data"`
			StdoutPos int            `json:"stdout_pos"`
			Metadata  map[string]any `json:"metadata"`
		} `json:"displays"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	require.Len(t, res.Displays, 1)
	assert.Equal(t, "display_data", res.Displays[0].Kind)
	assert.Contains(t, res.Displays[0].Data["text/html"], "<table")
	assert.Contains(t, res.Displays[0].Data, "text/plain")
	assert.Equal(t, 0, res.Displays[0].StdoutPos)
	assert.Equal(t, "after\n", res.Stdout)

	r = rt(t, "", "session", "exec", name, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	require.Len(t, res.Displays, 1)
	assert.NotEmpty(t, res.Displays[0].Data["image/png"])

	r = rt(t, "", "session", "exec", name, "%%time\nsum(range(10))")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Wall time")
	assert.Contains(t, r.stdout, "45")
	r = rt(t, "", "session", "exec", name, "%who")
	assert.Contains(t, r.stdout, "df")
	r = rt(t, "", "session", "exec", name, "df.shape?")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "Type:")

	r = rt(t, "", "session", "history", name, "--format", "ipynb")
	require.Equal(t, 0, r.code, r.stderr)
	var nb struct {
		Cells []struct {
			Outputs []struct {
				OutputType string         `json:"output_type"`
				Data       map[string]any `json:"data"`
			} `json:"outputs"`
		} `json:"cells"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &nb))
	require.GreaterOrEqual(t, len(nb.Cells), 2)
	require.Len(t, nb.Cells[0].Outputs, 2)
	assert.Equal(t, "display_data", nb.Cells[0].Outputs[0].OutputType)
	assert.Contains(t, nb.Cells[0].Outputs[0].Data, "text/html")
	assert.Equal(t, "stream", nb.Cells[0].Outputs[1].OutputType)
	assert.Contains(t, nb.Cells[1].Outputs[0].Data, "image/png")
}

package history

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// tinyPNG is a 1x1 PNG, what the loader returns for the figure of seq 3.
var tinyPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAX+XDSwAAAABJRU5ErkJggg==")

func loadTestdata(path string) ([]byte, error) {
	if path == "/workspace/outputs/exec-3-1.png" {
		return tinyPNG, nil
	}
	return nil, os.ErrNotExist
}

func testExecutions(t *testing.T) []Execution {
	t.Helper()
	f, err := os.Open("testdata/history.jsonl")
	require.NoError(t, err)
	defer f.Close()
	execs, problems, err := Parse(f)
	require.NoError(t, err)
	require.Empty(t, problems)
	require.Len(t, execs, 6)
	return execs
}

// golden compares got with testdata/golden/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.Equal(t, string(want), string(got))
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteText(&b, testExecutions(t)))
	golden(t, "history.txt", b.Bytes())
}

func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, testExecutions(t)))
	golden(t, "history.json", b.Bytes())

	var back []map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &back))
	for _, e := range back {
		for _, k := range []string{"seq", "code", "status", "stdout", "stderr", "result", "error", "started", "duration_ms", "outputs"} {
			assert.Contains(t, e, k)
		}
		assert.NotNil(t, e["outputs"], "outputs is [] when empty, never null")
	}
}

func TestWriteJSONEmpty(t *testing.T) {
	for _, execs := range [][]Execution{nil, {}} {
		var b bytes.Buffer
		require.NoError(t, WriteJSON(&b, execs))
		assert.Equal(t, "[]\n", b.String())
	}
	var b bytes.Buffer
	require.NoError(t, WriteJSON(&b, []Execution{{Seq: 1}}))
	assert.Contains(t, b.String(), `"outputs": []`)
}

func TestWriteIPYNB(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteIPYNB(&b, "python", testExecutions(t), WithOutputLoader(loadTestdata)))
	golden(t, "history.ipynb", b.Bytes())
	checkNotebook(t, b.Bytes(), "python3", 6)

	var nb struct {
		Cells []struct {
			Outputs []map[string]any `json:"outputs"`
		} `json:"cells"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &nb))
	// seq 2: the traceback is shown once, as the error, not again in stderr.
	types := func(i int) []string {
		var ts []string
		for _, o := range nb.Cells[i].Outputs {
			ts = append(ts, o["output_type"].(string))
		}
		return ts
	}
	assert.Equal(t, []string{"execute_result"}, types(0))
	assert.Equal(t, []string{"stream", "error"}, types(1))
	assert.Equal(t, "stdout", nb.Cells[1].Outputs[0]["name"])
	assert.Equal(t, []string{"stream", "display_data"}, types(2), "the missing figure is left out")
	assert.Equal(t, base64.StdEncoding.EncodeToString(tinyPNG), nb.Cells[2].Outputs[1]["data"].(map[string]any)["image/png"])
	assert.Equal(t, []string{"stream", "error"}, types(3), "timeout")
	assert.Equal(t, []string{"stream", "error"}, types(4), "crashed")
	assert.Empty(t, types(5), "still running")
}

func TestWriteIPYNBWithoutLoader(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteIPYNB(&b, "python", testExecutions(t)))
	assert.NotContains(t, b.String(), "display_data")
	checkNotebook(t, b.Bytes(), "python3", 6)

	b.Reset()
	failing := func(string) ([]byte, error) { return nil, errors.New("no") }
	require.NoError(t, WriteIPYNB(&b, "python", testExecutions(t), WithOutputLoader(failing)))
	assert.NotContains(t, b.String(), "display_data")
}

func TestWriteIPYNBBash(t *testing.T) {
	execs := []Execution{
		{Seq: 1, Code: "x=1; echo $x", Status: StatusOK, Stdout: "1\n", Outputs: []Output{}},
		{Seq: 2, Code: "false", Status: StatusError, Error: &Error{Name: "ExitStatus", Value: "1"}, Outputs: []Output{}},
		{Seq: 2, Code: "dup", Status: StatusOK, Outputs: []Output{}},
		{Seq: 3, Code: "cat page.html", Status: StatusOK, Outputs: []Output{{Mime: "text/html", Path: "/p.html"}}},
	}
	load := func(string) ([]byte, error) { return []byte("<b>hi</b>\n<i>there</i>"), nil }
	var b bytes.Buffer
	require.NoError(t, WriteIPYNB(&b, "bash", execs, WithOutputLoader(load)))
	golden(t, "bash.ipynb", b.Bytes())
	checkNotebook(t, b.Bytes(), "bash", 4)
}

func TestWriteIPYNBEmpty(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteIPYNB(&b, "python", nil))
	checkNotebook(t, b.Bytes(), "python3", 0)
	assert.Contains(t, b.String(), `"cells": []`)
	require.Error(t, WriteIPYNB(&b, "", nil))
}

// checkNotebook checks what nbformat 4.5 requires of a notebook and its code
// cells and outputs.
func checkNotebook(t *testing.T, b []byte, kernel string, cells int) {
	t.Helper()
	var nb map[string]any
	require.NoError(t, json.Unmarshal(b, &nb))
	for _, k := range []string{"cells", "metadata", "nbformat", "nbformat_minor"} {
		require.Contains(t, nb, k)
	}
	assert.EqualValues(t, 4, nb["nbformat"])
	assert.EqualValues(t, 5, nb["nbformat_minor"])
	meta := nb["metadata"].(map[string]any)
	ks := meta["kernelspec"].(map[string]any)
	assert.Equal(t, kernel, ks["name"])
	assert.NotEmpty(t, ks["display_name"])
	assert.NotEmpty(t, ks["language"])
	assert.NotEmpty(t, meta["language_info"].(map[string]any)["name"])

	idRE := regexp.MustCompile(`^[a-zA-Z0-9-_]+$`)
	ids := map[string]bool{}
	list := nb["cells"].([]any)
	require.Len(t, list, cells)
	for i, c := range list {
		cell := c.(map[string]any)
		for _, k := range []string{"cell_type", "execution_count", "id", "metadata", "outputs", "source"} {
			require.Contains(t, cell, k, "cell %d", i)
		}
		assert.Equal(t, "code", cell["cell_type"])
		id := cell["id"].(string)
		assert.Regexp(t, idRE, id)
		assert.LessOrEqual(t, len(id), 64)
		assert.False(t, ids[id], "cell id %q is unique", id)
		ids[id] = true
		for _, line := range cell["source"].([]any) {
			assert.IsType(t, "", line)
		}
		for j, o := range cell["outputs"].([]any) {
			out := o.(map[string]any)
			where := "cell " + strconv.Itoa(i) + " output " + strconv.Itoa(j)
			switch out["output_type"] {
			case "stream":
				assert.Contains(t, []any{"stdout", "stderr"}, out["name"], where)
				assert.IsType(t, []any{}, out["text"], where)
			case "execute_result":
				assert.Contains(t, out, "execution_count", where)
				assert.IsType(t, map[string]any{}, out["data"], where)
				assert.IsType(t, map[string]any{}, out["metadata"], where)
			case "display_data":
				assert.IsType(t, map[string]any{}, out["data"], where)
				assert.IsType(t, map[string]any{}, out["metadata"], where)
				assert.NotContains(t, out, "execution_count", where)
			case "error":
				assert.IsType(t, "", out["ename"], where)
				assert.IsType(t, "", out["evalue"], where)
				assert.IsType(t, []any{}, out["traceback"], where)
			default:
				t.Errorf("%s: unknown output_type %v", where, out["output_type"])
			}
		}
	}
}

func TestWriteExecutorJSON(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteExecutorJSON(&b, testExecutions(t)))
	golden(t, "executor.json", b.Bytes())

	var doc map[string]map[string]map[string]string
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	space := doc["_cmd_space"]
	require.Len(t, space, 6)
	for i := range 6 {
		e, ok := space[strconv.Itoa(i)]
		require.True(t, ok, "key %d: keys are positions from 0, as MetaGPT numbers them", i)
		assert.Len(t, e, 3)
	}
	assert.Equal(t, "x = 1\nx + 1", space["0"]["cmd"])
	assert.Equal(t, "a<b & c>d\n", space["1"]["stdout"])

	b.Reset()
	require.NoError(t, WriteExecutorJSON(&b, nil))
	assert.Equal(t, "{\n    \"_cmd_space\": {}\n}\n", b.String())
}

func TestWriteTextEdgeCases(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, WriteText(&b, nil))
	assert.Empty(t, b.String())
	require.NoError(t, WriteText(&b, []Execution{{Seq: 1, Status: StatusOK, DurationMs: 0.04, Stdout: "no newline"}}))
	assert.Equal(t, "[1] ok 40µs\n--- stdout\nno newline\n", b.String())
}

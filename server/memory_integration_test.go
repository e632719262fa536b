package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
)

// rss reads this process's resident memory and its peak (VmRSS, VmHWM) from /proc, in bytes.
func rss(t *testing.T) (now, peak int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		require.NoError(t, err, line)
		if k == "VmRSS" {
			now = n << 10
		} else {
			peak = n << 10
		}
	}
	return now, peak
}

// resetPeak settles the heap and starts a new peak of resident memory (clear_refs 5 resets
// VmHWM to the current VmRSS); it returns the baseline.
func resetPeak(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0))
	now, _ := rss(t)
	return now
}

// The server's memory is the operator's, not the client's: max_output has a ceiling, a
// streamed execution keeps none of its output (and its end event does not repeat it), and a
// reply's rich outputs share one budget, past which they are marked with where to fetch them.
// Measured from /proc in this test process, where the server runs.
func TestTheServersMemoryIsBoundedWhateverTheClientAsks(t *testing.T) {
	const ceiling = 160 << 20
	c := testenv.Client(t)
	base := newServer(t, c, func(cfg *server.Config) { cfg.MaxOutput = ceiling; cfg.MaxRichOutputs = 6 << 20 })
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)

	st, raw := a.do("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": "1", "max_output": "1g"}, nil)
	assert.Equal(t, http.StatusForbidden, st)
	assert.Contains(t, string(raw), "over the server's ceiling of 160MiB per stream (serve --max-output)")
	st, raw = a.do("POST", "/v1/sessions", map[string]any{"name": name + "-big", "max_output": "1g"}, nil)
	assert.Equal(t, http.StatusForbidden, st)
	assert.Contains(t, string(raw), "serve --max-output")

	// 300 MiB printed, 160 MiB of it (the ceiling) streamed: the server holds none of it (a
	// server that kept the output would hold the ceiling's 160 MiB; the budget leaves room for
	// the collector's lag on a loaded machine).
	const streamBudget = 64 << 20
	base0 := resetPeak(t)
	code := "import sys\nfor _ in range(300):\n    sys.stdout.write('x' * (1 << 20))\n'end'"
	resp := a.req("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": code, "max_output": "160m", "timeout": 120}, map[string]string{"Accept": server.NDJSON})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	var streamed int64
	var end map[string]any
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			streamed += 1 << 20
			continue
		}
		if bytes.HasPrefix(line, []byte(`{"event":"stdout"`)) {
			streamed += int64(len(line))
		} else if len(line) > 0 {
			require.NoError(t, json.Unmarshal(line, &end), string(line))
		}
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	_, peak := rss(t)
	t.Logf("streamed %d MiB; resident %d MiB before, peak %d MiB (+%d MiB, budget %d MiB)", streamed>>20, base0>>20, peak>>20, (peak-base0)>>20, streamBudget>>20)
	assert.GreaterOrEqual(t, streamed, int64(ceiling), "the output up to the cap was streamed")
	require.Equal(t, "end", end["event"])
	assert.Equal(t, "", end["stdout"], "the end event does not repeat the output")
	assert.Equal(t, true, end["streamed"])
	assert.Equal(t, "'end'", end["result"])
	assert.Greater(t, end["stdout_truncated"], float64(100<<20), "the cap is said")
	assert.Less(t, peak-base0, int64(streamBudget), "streaming holds nothing of the output")

	// The same not streamed: capped at what the request asked for, within the ceiling.
	var res result
	st, raw = a.do("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": code, "max_output": "2m", "timeout": 120}, &res)
	require.Equal(t, http.StatusOK, st, string(raw[:min(len(raw), 300)]))
	assert.LessOrEqual(t, len(res.Stdout), 2<<20+4096)

	// 24 open figures of ~0.5 MiB each (the agent sends some with the result, the server reads
	// others): a reply carries at most 6 MiB of them, the others marked.
	figs := "import numpy as np\nimport matplotlib.pyplot as plt\nrng = np.random.default_rng(0)\nfor i in range(24):\n" +
		"    plt.figure(figsize=(6, 6))\n    plt.imshow(rng.random((600, 600, 3)))\n" // open figures are the outputs
	var figRes struct {
		Status  string `json:"status"`
		Outputs []struct {
			Path    string `json:"path"`
			Data    []byte `json:"data"`
			Omitted bool   `json:"omitted"`
			Problem string `json:"problem"`
		} `json:"outputs"`
		Displays []struct {
			Data     map[string]json.RawMessage `json:"data"`
			Metadata struct {
				Runtimectl struct {
					Omitted bool   `json:"omitted"`
					Problem string `json:"problem"`
				} `json:"runtimectl"`
			} `json:"metadata"`
		} `json:"displays"`
	}
	resetPeak(t)
	st, raw = a.do("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": figs, "timeout": 120}, &figRes)
	require.Equal(t, http.StatusOK, st, string(raw[:min(len(raw), 300)]))
	require.Equal(t, "ok", figRes.Status, string(raw[:min(len(raw), 2000)]))
	require.Len(t, figRes.Outputs, 24)
	var total int64
	omitted := 0
	for _, o := range figRes.Outputs {
		total += int64(len(o.Data))
		if o.Omitted {
			omitted++
			assert.Empty(t, o.Data)
			assert.Contains(t, o.Problem, "capped at 6MiB in all (serve --max-rich-outputs)")
			assert.Contains(t, o.Problem, "GET /v1/sessions/"+name+"/files/"+strings.TrimPrefix(o.Path, "/workspace/"))
		}
	}
	t.Logf("figures: %d carried (%d KiB), %d left out; reply %d KiB", 24-omitted, total>>10, omitted, len(raw)>>10)
	assert.LessOrEqual(t, total, int64(6<<20))
	assert.Greater(t, omitted, 5)
	// The figures are displays too (IPython's inline backend): they share what is left.
	shown := 0
	for _, d := range figRes.Displays {
		if d.Metadata.Runtimectl.Omitted {
			assert.NotContains(t, d.Data, "image/png")
			assert.Contains(t, d.Metadata.Runtimectl.Problem, "serve --max-rich-outputs")
		} else if _, ok := d.Data["image/png"]; ok {
			shown++
		}
	}
	t.Logf("displays: %d of %d with their figure", shown, len(figRes.Displays))
	assert.Less(t, shown, len(figRes.Displays), "displays past the budget keep their text only")
	assert.Less(t, len(raw), 9<<20, "the reply stays near the budget (base64)")
	last := figRes.Outputs[len(figRes.Outputs)-1]
	require.True(t, last.Omitted)
	st, png := a.do("GET", "/v1/sessions/"+name+"/files/"+strings.TrimPrefix(last.Path, "/workspace/"), nil, nil)
	require.Equal(t, http.StatusOK, st)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "the marker's route fetches it")
	_ = fmt.Sprint()
}

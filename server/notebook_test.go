package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

// Displays over HTTP: in the JSON result's "displays", and as display events in their place
// in the NDJSON stream.
func TestServeDisplays(t *testing.T) {
	c := testenv.Client(t)
	testenv.Images(t)
	a := api{t: t, base: newServer(t, c, nil), token: tokA}
	name := startSession(t, c, a, nil)

	var res struct {
		Displays []struct {
			Kind string                     `json:"kind"`
			Data map[string]json.RawMessage `json:"data"`
		} `json:"displays"`
	}
	st, raw := a.do("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": "from IPython.display import HTML\ndisplay(HTML('<p>x</p>'))\n1 + 1"}, &res)
	require.Equal(t, http.StatusOK, st, string(raw))
	require.Len(t, res.Displays, 2, string(raw))
	assert.Equal(t, "display_data", res.Displays[0].Kind)
	assert.JSONEq(t, `"<p>x</p>"`, string(res.Displays[0].Data["text/html"]))
	assert.Equal(t, "execute_result", res.Displays[1].Kind)

	evs := a.stream(name, "print('a', flush=True)\ndisplay({'text/plain': 'shown'}, raw=True)\nprint('b')")
	var order []string
	for _, ev := range evs {
		switch ev["event"] {
		case "stdout": // a stream's chunks are the writes as they came: join the adjacent ones
			if n := len(order); n > 0 && !strings.HasPrefix(order[n-1], "display:") {
				order[n-1] += ev["data"].(string)
			} else {
				order = append(order, ev["data"].(string))
			}
		case "display":
			d := ev["display"].(map[string]any)
			order = append(order, "display:"+d["data"].(map[string]any)["text/plain"].(string))
		}
	}
	assert.Equal(t, []string{"a\n", "display:shown", "b\n"}, order)
}

package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

var pngBytes = []byte("\x89PNG\r\n\x1a\nfigure-bytes")

// bundle is a display's mime bundle from Go values, as the driver sends it (images base64).
func bundle(t *testing.T, kv ...any) map[string]json.RawMessage {
	t.Helper()
	b := map[string]json.RawMessage{}
	for i := 0; i < len(kv); i += 2 {
		v := kv[i+1]
		if raw, ok := v.([]byte); ok {
			v = base64.StdEncoding.EncodeToString(raw)
		}
		j, err := json.Marshal(v)
		require.NoError(t, err)
		b[kv[i].(string)] = j
	}
	return b
}

func shows(ds ...history.Display) *session.Result {
	return &session.Result{Session: "demo", Seq: 7, Status: "ok", Displays: ds, Outputs: []history.Output{}}
}

// rich is the content of res between the text of its streams and its last line.
func rich(t *testing.T, res *session.Result) []mcp.Content {
	t.Helper()
	s := &Server{cfg: Config{OutputBudget: 1000}}
	c := s.execContent(context.Background(), "demo", res, nil)
	require.NotEmpty(t, c)
	last, ok := c[len(c)-1].(*mcp.TextContent)
	require.True(t, ok)
	assert.Contains(t, last.Text, "session demo, execution 7")
	return c[:len(c)-1]
}

func TestEachMimeTypeOfADisplayBecomesItsContent(t *testing.T) {
	plain := "<IPython.core.display.X object>"
	for _, tc := range []struct {
		name  string
		data  map[string]json.RawMessage
		check func(t *testing.T, c mcp.Content)
	}{
		{"png", bundle(t, "image/png", pngBytes, "text/plain", "<Figure size 640x480 with 1 Axes>"), func(t *testing.T, c mcp.Content) {
			img := c.(*mcp.ImageContent)
			assert.Equal(t, "image/png", img.MIMEType)
			assert.Equal(t, pngBytes, img.Data, "the bytes, decoded from the bundle's base64")
		}},
		{"jpeg", bundle(t, "image/jpeg", []byte("\xff\xd8jpeg"), "text/plain", plain), func(t *testing.T, c mcp.Content) {
			img := c.(*mcp.ImageContent)
			assert.Equal(t, "image/jpeg", img.MIMEType)
			assert.Equal(t, []byte("\xff\xd8jpeg"), img.Data)
		}},
		{"svg", bundle(t, "image/svg+xml", "<svg></svg>", "text/plain", plain), func(t *testing.T, c mcp.Content) {
			r := c.(*mcp.EmbeddedResource).Resource
			assert.Equal(t, "image/svg+xml", r.MIMEType, "SVG is no image a model is shown: a resource of its type")
			assert.Equal(t, "<svg></svg>", r.Text)
			assert.Equal(t, "runtimectl://sessions/demo/history.ipynb#exec-7-display-1", r.URI)
		}},
		{"html", bundle(t, "text/html", "<b>bold</b>", "text/plain", plain), func(t *testing.T, c mcp.Content) {
			r := c.(*mcp.EmbeddedResource).Resource
			assert.Equal(t, "text/html", r.MIMEType)
			assert.Equal(t, "<b>bold</b>", r.Text)
		}},
		{"html as lines", bundle(t, "text/html", []string{"<p>\n", "x</p>"}), func(t *testing.T, c mcp.Content) {
			assert.Equal(t, "<p>\nx</p>", c.(*mcp.EmbeddedResource).Resource.Text)
		}},
		{"markdown", bundle(t, "text/markdown", "# Title", "text/plain", plain), func(t *testing.T, c mcp.Content) {
			assert.Equal(t, "# Title", c.(*mcp.TextContent).Text)
		}},
		{"latex", bundle(t, "text/latex", "$x^2$", "text/plain", plain), func(t *testing.T, c mcp.Content) {
			assert.Equal(t, "$x^2$", c.(*mcp.TextContent).Text)
		}},
		{"json", bundle(t, "application/json", map[string]any{"a": 1}, "text/plain", plain), func(t *testing.T, c mcp.Content) {
			assert.Equal(t, "{\n  \"a\": 1\n}", c.(*mcp.TextContent).Text)
		}},
		{"plain", bundle(t, "text/plain", "'text'"), func(t *testing.T, c mcp.Content) {
			assert.Equal(t, "'text'", c.(*mcp.TextContent).Text)
		}},
		{"unknown type: its text/plain", bundle(t, "application/vnd.custom+xml", "<x/>", "text/plain", "custom"), func(t *testing.T, c mcp.Content) {
			assert.Equal(t, "custom", c.(*mcp.TextContent).Text)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := rich(t, shows(history.Display{Kind: contract.DisplayData, Data: tc.data}))
			require.Len(t, c, 1, "one content for one display")
			tc.check(t, c[0])
		})
	}
}

func TestDisplaysKeepTheirOrderAfterUpdatesAndClears(t *testing.T) {
	d := func(kind contract.DisplayKind, id, text string) history.Display {
		return history.Display{Kind: kind, DisplayID: id, Data: bundle(t, "text/plain", text)}
	}
	texts := func(cs []mcp.Content) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.(*mcp.TextContent).Text)
		}
		return out
	}
	c := rich(t, shows(d(contract.DisplayData, "", "one"), d(contract.DisplayData, "p", "progress 0"), d(contract.DisplayData, "", "two"),
		d(contract.DisplayUpdate, "p", "progress 100"), d(contract.DisplayUpdate, "elsewhere", "an update of another cell's display")))
	assert.Equal(t, []string{"one", "progress 100", "two", "an update of another cell's display"}, texts(c))

	c = rich(t, shows(d(contract.DisplayData, "", "gone"), history.Display{Kind: contract.DisplayClear, Wait: true}, d(contract.DisplayData, "", "kept")))
	assert.Equal(t, []string{"kept"}, texts(c), "clear_output drops the displays before it")

	c = rich(t, shows(d(contract.DisplayPage, "", "Signature: f(x)\nDocstring: doubles")))
	assert.Equal(t, []string{"Signature: f(x)\nDocstring: doubles"}, texts(c), "obj? is its page's text")
}

func TestAFigureShownAndSavedIsSentOnce(t *testing.T) {
	res := shows(history.Display{Kind: contract.DisplayData, Data: bundle(t, "image/png", pngBytes, "text/plain", "<Figure>")})
	res.Outputs = []history.Output{
		{Mime: "image/png", Path: "/workspace/outputs/exec-7-1.png", Data: pngBytes},
		{Mime: "image/png", Path: "/workspace/outputs/exec-7-2.png", Data: []byte("\x89PNGanother figure, not shown")},
	}
	c := rich(t, res)
	require.Len(t, c, 2, "the shown figure once, the figure only saved once")
	assert.Equal(t, pngBytes, c[0].(*mcp.ImageContent).Data)
	assert.Equal(t, []byte("\x89PNGanother figure, not shown"), c[1].(*mcp.ImageContent).Data)

	// A value's rich form: its HTML display (the result's text/plain is the "result:" text),
	// and its saved HTML file is not sent again.
	html := "<table><tr><td>1</td></tr></table>"
	repr := "   a\n0  1"
	res = shows(history.Display{Kind: contract.DisplayResult, Data: bundle(t, "text/html", html, "text/plain", repr)})
	res.Result = &repr
	res.Outputs = []history.Output{{Mime: "text/html", Path: "/workspace/outputs/exec-7-result.html", Data: []byte(html)}}
	s := &Server{cfg: Config{OutputBudget: 1000}}
	all := s.execContent(context.Background(), "demo", res, nil)
	require.Len(t, all, 3, "result text, its HTML, the last line")
	assert.Equal(t, "result:\n"+repr, all[0].(*mcp.TextContent).Text)
	assert.Equal(t, html, all[1].(*mcp.EmbeddedResource).Resource.Text)

	res = shows(history.Display{Kind: contract.DisplayResult, Data: bundle(t, "text/plain", "42")})
	r := "42"
	res.Result = &r
	assert.Empty(t, rich(t, res)[1:], "a value with only text is the result text alone")

	e := s.execution(res)
	assert.Equal(t, []DisplayInfo{{Kind: "execute_result", Mimes: []string{"text/plain"}}}, e.Displays)
}

func TestADisplayPastTheBudgetIsItsTextAndSaysWhereTheWholeIs(t *testing.T) {
	s := &Server{cfg: Config{OutputBudget: 1000}}
	big := history.Display{Kind: contract.DisplayData, Data: bundle(t, "image/png", pngBytes, "text/plain", "<Figure size 640x480>")}
	small := history.Display{Kind: contract.DisplayData, Data: bundle(t, "text/html", "<b>x</b>")}
	left := int64(len(pngBytes) - 1)
	c := s.displayContent("demo", 7, []history.Display{big, small}, false, &left, newShownData())
	require.Len(t, c, 2)
	note := c[0].(*mcp.TextContent).Text
	assert.True(t, strings.HasPrefix(note, "<Figure size 640x480>\n"), note)
	assert.Contains(t, note, "image/png of 20 bytes is left out")
	assert.Contains(t, note, "runtimectl://sessions/demo/history.ipynb")
	assert.Equal(t, "<b>x</b>", c[1].(*mcp.EmbeddedResource).Resource.Text, "a smaller display after it still fits")
	assert.Equal(t, int64(len(pngBytes)-1-len("<b>x</b>")), left)
}

package mcpserver

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/history"
)

// maxRichReply is what the rich content of one run_code reply (displays and saved outputs
// together) carries at most; past it a display is its text/plain and a note says where the
// whole is.
const maxRichReply = 16 << 20

// DisplayInfo is a display of an execution as run_code's structured content lists it: what
// it is, not its data (which is in the reply's content).
type DisplayInfo struct {
	Kind      string   `json:"kind" jsonschema:"display_data, execute_result (the final expression's value), update_display_data, clear_output or page (obj?)"`
	Mimes     []string `json:"mimes,omitempty" jsonschema:"the mime types of its bundle"`
	DisplayID string   `json:"display_id,omitempty"`
}

// displayOrder is the mime type of a display that its content is made of, the first of these
// that its bundle has: what a model reads best first (images it can see, then markup), as a
// notebook front end picks one representation of a bundle.
var displayOrder = []string{"image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml", "text/html",
	"text/markdown", "text/latex", "application/json", "text/plain"}

// shownData records the bytes that displays carried, by mime type, so that a saved output with
// the same bytes (the driver saves every image/png display, and the HTML of the final value, to
// the outputs folder) is not sent a second time.
type shownData struct {
	sums  map[[sha256.Size]byte]bool // mime type NUL bytes
	sizes map[string]bool            // mime type NUL size: for an output too large to read whole
}

func newShownData() *shownData {
	return &shownData{sums: map[[sha256.Size]byte]bool{}, sizes: map[string]bool{}}
}

func (sd *shownData) add(mime string, data []byte) {
	sd.sums[sum(mime, data)] = true
	sd.sizes[fmt.Sprintf("%s\x00%d", mime, len(data))] = true
}

// has says whether a display carried data of type mime (whole: data is all of it) or, for an
// output not read whole, one of its size.
func (sd *shownData) has(mime string, data []byte, size int64) bool {
	if int64(len(data)) == size {
		return sd.sums[sum(mime, data)]
	}
	return sd.sizes[fmt.Sprintf("%s\x00%d", mime, size)]
}

func sum(mime string, data []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(mime))
	h.Write([]byte{0})
	h.Write(data)
	var s [sha256.Size]byte
	h.Sum(s[:0])
	return s
}

// displayInfos lists ds for the structured content.
func displayInfos(ds []history.Display) []DisplayInfo {
	out := make([]DisplayInfo, 0, len(ds))
	for _, d := range ds {
		info := DisplayInfo{Kind: string(d.Kind), DisplayID: d.DisplayID}
		for m := range d.Data {
			info.Mimes = append(info.Mimes, m)
		}
		slices.Sort(info.Mimes)
		out = append(out, info)
	}
	return out
}

// displayContent is the content of an execution's displays, in their order, as a notebook
// would show them at the end of the cell: an update_display_data replaces the content of the
// earlier display with its id, a clear_output drops the displays before it. Each display is
// one content: an image as image content, SVG and HTML as an embedded resource of that type,
// markdown, LaTeX, JSON and text/plain as text. The final value's text/plain is left out when
// hasResult (the reply's "result:" text is it). left is the rich budget of the reply, spent
// here; shown records what the displays carried (those cleared or replaced too).
func (s *Server) displayContent(name string, seq int64, ds []history.Display, hasResult bool, left *int64, shown *shownData) []mcp.Content {
	type item struct {
		id string
		c  mcp.Content
	}
	var items []item
	for i, d := range ds {
		for mime := range d.Data {
			if b, ok := displayBytes(mime, d.Data[mime]); ok && !strings.HasPrefix(mime, "text/plain") {
				shown.add(mime, b)
			}
		}
		switch d.Kind {
		case contract.DisplayClear:
			items = items[:0]
			continue
		case contract.DisplayData, contract.DisplayResult, contract.DisplayUpdate, contract.DisplayPage:
		default:
			continue
		}
		uri := fmt.Sprintf("%s#exec-%d-display-%d", historyURI(name), seq, i+1)
		c := s.displayItem(name, uri, d, hasResult, left)
		if d.Kind == contract.DisplayUpdate {
			replaced := false
			for j := range items {
				if items[j].id == d.DisplayID {
					items[j].c, replaced = c, true
				}
			}
			if replaced || c == nil {
				continue
			}
		}
		if c != nil {
			items = append(items, item{id: d.DisplayID, c: c})
		}
	}
	content := make([]mcp.Content, 0, len(items))
	for _, it := range items {
		if it.c != nil {
			content = append(content, it.c)
		}
	}
	return content
}

// displayItem is the content of one display (nil: nothing to show).
func (s *Server) displayItem(name, uri string, d history.Display, hasResult bool, left *int64) mcp.Content {
	order := displayOrder
	if d.Kind == contract.DisplayPage {
		order = []string{"text/plain", "text/markdown", "text/html"} // obj?: the text IPython pages
	}
	for _, mime := range order {
		raw, ok := d.Data[mime]
		if !ok {
			continue
		}
		data, ok := displayBytes(mime, raw)
		if !ok {
			continue
		}
		if mime == "text/plain" {
			if d.Kind == contract.DisplayResult && hasResult {
				return nil
			}
			if len(data) == 0 {
				return nil
			}
			return &mcp.TextContent{Text: s.clip(string(data), "a display's text", name)}
		}
		if n := int64(len(data)); n > maxRich || n > *left {
			note := fmt.Sprintf("[a display's %s of %d bytes is left out: a reply carries %d MiB of each and %d MiB of rich output in all; the session's history has it (resource %s)]",
				mime, n, maxRich>>20, maxRichReply>>20, historyURI(name))
			if t, ok := displayBytes("text/plain", d.Data["text/plain"]); ok && len(t) > 0 && !(d.Kind == contract.DisplayResult && hasResult) {
				note = s.clip(string(t), "a display's text", name) + "\n" + note
			}
			return &mcp.TextContent{Text: note}
		}
		*left -= int64(len(data))
		switch {
		case picture(mime):
			return &mcp.ImageContent{Data: data, MIMEType: mime}
		case mime == "image/svg+xml" || mime == "text/html":
			return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: uri, MIMEType: mime, Text: s.clip(string(data), mime, name)}}
		default:
			return &mcp.TextContent{Text: s.clip(string(data), mime, name)}
		}
	}
	return nil
}

// displayBytes is the content of one entry of a mime bundle: an image's bytes (base64 in the
// bundle), a text's (a string, or a list of lines as in a notebook), JSON indented.
func displayBytes(mime string, raw json.RawMessage) ([]byte, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	if mime == "application/json" || strings.HasSuffix(mime, "+json") {
		var b bytes.Buffer
		if json.Indent(&b, raw, "", "  ") != nil {
			return nil, false
		}
		return b.Bytes(), true
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		var lines []string
		if json.Unmarshal(raw, &lines) != nil {
			return nil, false
		}
		text = strings.Join(lines, "")
	}
	if picture(mime) {
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), ""))
		if err != nil {
			return nil, false
		}
		return b, true
	}
	return []byte(text), true
}

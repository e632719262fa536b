package history

import (
	"encoding/json"

	"github.com/runtimectl/runtimectl/contract"
)

// Display is one rich output of an execution (display(obj), a figure, the final expression's
// value), as the agent delivered it: Jupyter's fields, the mime bundle verbatim (text/plain
// always; image/png base64; application/json a JSON value). StdoutPos and StderrPos are the
// bytes of each stream before it, so an export can put it back in its place.
type Display struct {
	Kind      contract.DisplayKind       `json:"kind"`
	Data      map[string]json.RawMessage `json:"data,omitempty"`
	Metadata  json.RawMessage            `json:"metadata,omitempty"`
	DisplayID string                     `json:"display_id,omitempty"`
	Wait      bool                       `json:"wait,omitempty"`
	StdoutPos int64                      `json:"stdout_pos"`
	StderrPos int64                      `json:"stderr_pos"`
}

// Text returns the display's text/plain, or "".
func (d Display) Text() string {
	var s string
	_ = json.Unmarshal(d.Data["text/plain"], &s)
	return s
}

// DisplayHistoryMax bounds the display data that one history record keeps; past it a display
// keeps only its text/plain and says in its metadata how many bytes it dropped.
const DisplayHistoryMax = 4 << 20

// CapDisplays returns ds within DisplayHistoryMax (the earlier displays kept whole first).
func CapDisplays(ds []Display) []Display {
	var total int64
	out := make([]Display, 0, len(ds))
	for _, d := range ds {
		n := int64(len(d.Metadata))
		for k, v := range d.Data {
			n += int64(len(k) + len(v))
		}
		if total+n > DisplayHistoryMax {
			text := d.Data["text/plain"]
			d.Data = map[string]json.RawMessage{}
			if text != nil {
				d.Data["text/plain"] = text
				n = int64(len(text))
			} else {
				n = 0
			}
			d.Metadata = json.RawMessage(`{"runtimectl":{"dropped_from_history":true}}`)
		}
		total += n
		out = append(out, d)
	}
	return out
}

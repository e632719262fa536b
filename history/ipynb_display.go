package history

import (
	"encoding/json"

	"github.com/runtimectl/runtimectl/contract"
)

// displayOutputs is a cell's outputs from its streams and displays, as Jupyter would have
// recorded them: the streams cut at each display's positions, display_data and
// execute_result outputs, an update_display_data applied to the earlier output of its
// display_id, a clear_output dropping what came before it; pages (obj?) are not outputs (they
// are execute_reply payloads in Jupyter).
func displayOutputs(stdout, stderr string, ds []Display, count int64) []any {
	outs := []any{}
	var op, ep int
	streams := func(so, se int64) {
		so, se = min(max(so, int64(op)), int64(len(stdout))), min(max(se, int64(ep)), int64(len(stderr)))
		if int(so) > op {
			outs = append(outs, nbStream{OutputType: "stream", Name: "stdout", Text: splitLines(stdout[op:so])})
			op = int(so)
		}
		if int(se) > ep {
			outs = append(outs, nbStream{OutputType: "stream", Name: "stderr", Text: splitLines(stderr[ep:se])})
			ep = int(se)
		}
	}
	byID := map[string][]int{}
	for _, d := range ds {
		streams(d.StdoutPos, d.StderrPos)
		switch d.Kind {
		case contract.DisplayData, contract.DisplayResult:
			out := nbData{OutputType: string(d.Kind), Data: bundle(d.Data), Metadata: metadataOf(d.Metadata)}
			if d.Kind == contract.DisplayResult {
				n := count
				out.ExecutionCount = &n
			}
			if d.DisplayID != "" {
				byID[d.DisplayID] = append(byID[d.DisplayID], len(outs))
			}
			outs = append(outs, out)
		case contract.DisplayUpdate:
			for _, i := range byID[d.DisplayID] {
				if old, ok := outs[i].(nbData); ok {
					old.Data, old.Metadata = bundle(d.Data), metadataOf(d.Metadata)
					outs[i] = old
				}
			}
		case contract.DisplayClear:
			outs = outs[:0]
			byID = map[string][]int{}
		}
	}
	streams(int64(len(stdout)), int64(len(stderr)))
	return outs
}

func bundle(data map[string]json.RawMessage) map[string]any {
	b := make(map[string]any, len(data))
	for k, v := range data {
		b[k] = v
	}
	return b
}

func metadataOf(raw json.RawMessage) map[string]any {
	m := map[string]any{}
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &m)
	}
	return m
}

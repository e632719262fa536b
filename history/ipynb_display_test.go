package history

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
)

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// A cell's displays come out in their place among the streams, updates applied to their
// display_id, pages left out, the final value an execute_result with the cell's count.
func TestDisplayOutputsInOrder(t *testing.T) {
	ds := []Display{
		{Kind: contract.DisplayData, Data: map[string]json.RawMessage{"text/plain": raw(`"a"`), "image/png": raw(`"iVBO"`)}, DisplayID: "p", StdoutPos: 4},
		{Kind: contract.DisplayPage, Data: map[string]json.RawMessage{"text/plain": raw(`"help"`)}, StdoutPos: 4},
		{Kind: contract.DisplayUpdate, Data: map[string]json.RawMessage{"text/plain": raw(`"b"`)}, DisplayID: "p", StdoutPos: 8, StderrPos: 2},
		{Kind: contract.DisplayResult, Data: map[string]json.RawMessage{"text/plain": raw(`"3"`)}, Metadata: raw(`{"k":1}`), StdoutPos: 8, StderrPos: 2},
	}
	outs := displayOutputs("one\ntwo\nend\n", "e\n", ds, 7)
	b, err := json.Marshal(outs)
	require.NoError(t, err)
	assert.JSONEq(t, `[
	  {"name":"stdout","output_type":"stream","text":["one\n"]},
	  {"data":{"text/plain":"b"},"metadata":{},"output_type":"display_data"},
	  {"name":"stdout","output_type":"stream","text":["two\n"]},
	  {"name":"stderr","output_type":"stream","text":["e\n"]},
	  {"data":{"text/plain":"3"},"execution_count":7,"metadata":{"k":1},"output_type":"execute_result"},
	  {"name":"stdout","output_type":"stream","text":["end\n"]}
	]`, string(b))

	cleared := displayOutputs("x\n", "", []Display{{Kind: contract.DisplayClear, StdoutPos: 2}}, 1)
	assert.Empty(t, cleared)
}

// A record's displays beyond the history's bound keep only their text.
func TestCapDisplays(t *testing.T) {
	png := make([]byte, DisplayHistoryMax)
	for i := range png {
		png[i] = 'A'
	}
	ds := CapDisplays([]Display{
		{Kind: contract.DisplayData, Data: map[string]json.RawMessage{"text/plain": raw(`"small"`)}},
		{Kind: contract.DisplayData, Data: map[string]json.RawMessage{"text/plain": raw(`"fig"`), "image/png": raw(`"` + string(png) + `"`)}},
	})
	require.Len(t, ds, 2)
	assert.Equal(t, "small", ds[0].Text())
	assert.Equal(t, "fig", ds[1].Text())
	assert.NotContains(t, ds[1].Data, "image/png")
}

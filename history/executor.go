package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// WriteExecutorJSON prints executions in the shape of MetaGPT's
// executor.json (the file that its code executors save with
// save_executor and read back with load):
//
//	{
//	    "_cmd_space": {
//	        "0": {
//	            "cmd": "x = 1",
//	            "stderr": "",
//	            "stdout": ""
//	        },
//	        ...
//	    }
//	}
//
// As in MetaGPT, the keys of "_cmd_space" are the positions of the commands,
// "0", "1", ..., in order, not seqs: MetaGPT numbers the next command
// len(_cmd_space), so keys that skip a number would make it overwrite an
// entry. They are written in numeric order (MetaGPT's own
// json.dump(sort_keys=True) would put "10" before "2"). cmd is the code as
// it was run and stdout and stderr are the output as captured; MetaGPT
// itself appends "\n\n" to cmd and strips the output, which loses
// whitespace that belongs to it.
func WriteExecutorJSON(w io.Writer, execs []Execution) error {
	type cmd struct {
		Cmd    string `json:"cmd"`
		Stderr string `json:"stderr"`
		Stdout string `json:"stdout"`
	}
	bw := bufio.NewWriter(w)
	if len(execs) == 0 {
		bw.WriteString("{\n    \"_cmd_space\": {}\n}\n")
	} else {
		bw.WriteString("{\n    \"_cmd_space\": {\n")
		for i, e := range execs {
			b, err := marshalIndentNoEscape(cmd{Cmd: e.Code, Stderr: e.Stderr, Stdout: e.Stdout}, "        ", "    ")
			if err != nil {
				return fmt.Errorf("write executor json: %w", err)
			}
			fmt.Fprintf(bw, "        %s: %s", strconv.Quote(strconv.Itoa(i)), b)
			if i < len(execs)-1 {
				bw.WriteString(",")
			}
			bw.WriteString("\n")
		}
		bw.WriteString("    }\n}\n")
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write executor json: %w", err)
	}
	return nil
}

// marshalIndentNoEscape is json.MarshalIndent without HTML escaping.
func marshalIndentNoEscape(v any, prefix, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil // drop Encode's newline
}

package history

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// IPYNBOption configures [WriteIPYNB].
type IPYNBOption func(*ipynbOptions)

type ipynbOptions struct {
	load func(path string) ([]byte, error)
}

// WithOutputLoader gives [WriteIPYNB] a way to read the files of rich
// outputs (their paths are inside the session, such as
// /workspace/outputs/exec-7-1.png), so that images and HTML are embedded in
// the notebook. Without a loader, or when it fails for a file, that output
// is left out.
func WithOutputLoader(load func(path string) ([]byte, error)) IPYNBOption {
	return func(o *ipynbOptions) { o.load = load }
}

// WriteIPYNB prints executions as a Jupyter notebook (nbformat 4.5): one
// code cell per execution, with execution_count = seq and a unique id
// "exec-<seq>", and its outputs: stdout and stderr streams, rich outputs
// (image/png and image/jpeg base64, text/html, image/svg+xml) when
// [WithOutputLoader] can read them, the result as an execute_result, the
// error as an error output. A traceback that stderr also holds is shown
// once, as the error. A crash or a timeout without an error gets an error
// output that says so. Cell metadata "runtimectl" keeps seq, status,
// started and duration_ms.
//
// lang picks the kernelspec: "python" (python3) or "bash"; another name is
// used as it is.
func WriteIPYNB(w io.Writer, lang string, execs []Execution, opts ...IPYNBOption) error {
	var o ipynbOptions
	for _, opt := range opts {
		opt(&o)
	}
	if lang == "" {
		return errors.New("write notebook: no language")
	}
	nb := notebook{
		Cells:         make([]nbCell, 0, len(execs)),
		Metadata:      nbMetadata{Kernelspec: kernelspecFor(lang), LanguageInfo: languageInfoFor(lang)},
		NBFormat:      4,
		NBFormatMinor: 5,
	}
	ids := make(map[string]bool, len(execs))
	for _, e := range execs {
		id := "exec-" + strconv.FormatInt(e.Seq, 10)
		for n := 2; ids[id]; n++ {
			id = "exec-" + strconv.FormatInt(e.Seq, 10) + "-" + strconv.Itoa(n)
		}
		ids[id] = true
		nb.Cells = append(nb.Cells, cellFor(id, e, o))
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(nb); err != nil {
		return fmt.Errorf("write notebook: %w", err)
	}
	return nil
}

// The notebook's JSON, with keys in the order Jupyter writes them (sorted).
type notebook struct {
	Cells         []nbCell   `json:"cells"`
	Metadata      nbMetadata `json:"metadata"`
	NBFormat      int        `json:"nbformat"`
	NBFormatMinor int        `json:"nbformat_minor"`
}

type nbMetadata struct {
	Kernelspec   kernelspec   `json:"kernelspec"`
	LanguageInfo languageInfo `json:"language_info"`
}

type kernelspec struct {
	DisplayName string `json:"display_name"`
	Language    string `json:"language"`
	Name        string `json:"name"`
}

type languageInfo struct {
	FileExtension string `json:"file_extension,omitempty"`
	Mimetype      string `json:"mimetype,omitempty"`
	Name          string `json:"name"`
}

type nbCell struct {
	CellType       string         `json:"cell_type"`
	ExecutionCount *int64         `json:"execution_count"`
	ID             string         `json:"id"`
	Metadata       nbCellMetadata `json:"metadata"`
	Outputs        []any          `json:"outputs"`
	Source         []string       `json:"source"`
}

type nbCellMetadata struct {
	Runtimectl nbRuntimectl `json:"runtimectl"`
}

type nbRuntimectl struct {
	DurationMs float64    `json:"duration_ms"`
	Seq        int64      `json:"seq"`
	Started    *time.Time `json:"started,omitempty"`
	Status     string     `json:"status"`
}

type nbStream struct {
	Name       string   `json:"name"`
	OutputType string   `json:"output_type"`
	Text       []string `json:"text"`
}

type nbData struct {
	Data           map[string]any `json:"data"`
	ExecutionCount *int64         `json:"execution_count,omitempty"`
	Metadata       map[string]any `json:"metadata"`
	OutputType     string         `json:"output_type"`
}

type nbError struct {
	Ename      string   `json:"ename"`
	Evalue     string   `json:"evalue"`
	OutputType string   `json:"output_type"`
	Traceback  []string `json:"traceback"`
}

func kernelspecFor(lang string) kernelspec {
	switch lang {
	case "python":
		return kernelspec{Name: "python3", DisplayName: "Python 3", Language: "python"}
	case "bash":
		return kernelspec{Name: "bash", DisplayName: "Bash", Language: "bash"}
	}
	return kernelspec{Name: lang, DisplayName: lang, Language: lang}
}

func languageInfoFor(lang string) languageInfo {
	switch lang {
	case "python":
		return languageInfo{Name: "python", FileExtension: ".py", Mimetype: "text/x-python"}
	case "bash":
		return languageInfo{Name: "bash", FileExtension: ".sh", Mimetype: "text/x-sh"}
	}
	return languageInfo{Name: lang}
}

func cellFor(id string, e Execution, o ipynbOptions) nbCell {
	count := e.Seq
	c := nbCell{
		CellType:       "code",
		ExecutionCount: &count,
		ID:             id,
		Metadata: nbCellMetadata{Runtimectl: nbRuntimectl{
			Seq: e.Seq, Status: string(e.Status), DurationMs: e.DurationMs,
		}},
		Outputs: []any{},
		Source:  splitLines(e.Code),
	}
	if !e.Started.IsZero() {
		started := e.Started.UTC()
		c.Metadata.Runtimectl.Started = &started
	}

	stderr := e.Stderr
	if e.Error != nil && e.Error.Traceback != "" {
		// Python writes the traceback to stderr too; show it once.
		if i := strings.LastIndex(stderr, e.Error.Traceback); i >= 0 {
			stderr = stderr[:i] + stderr[i+len(e.Error.Traceback):]
		}
	}
	if len(e.Displays) > 0 {
		// The displays carry the rich outputs and the final value, in the run's order among
		// the streams (the files of e.Outputs are the same figures).
		c.Outputs = displayOutputs(e.Stdout, stderr, e.Displays, count)
	} else {
		if e.Stdout != "" {
			c.Outputs = append(c.Outputs, nbStream{OutputType: "stream", Name: "stdout", Text: splitLines(e.Stdout)})
		}
		if stderr != "" {
			c.Outputs = append(c.Outputs, nbStream{OutputType: "stream", Name: "stderr", Text: splitLines(stderr)})
		}
		for _, out := range e.Outputs {
			if d, ok := richOutput(out, o.load); ok {
				c.Outputs = append(c.Outputs, d)
			}
		}
	}
	if e.Result != nil && len(e.Displays) == 0 {
		c.Outputs = append(c.Outputs, nbData{
			OutputType:     "execute_result",
			ExecutionCount: &count,
			Data:           map[string]any{"text/plain": splitLines(*e.Result)},
			Metadata:       map[string]any{},
		})
	}
	switch {
	case e.Error != nil:
		c.Outputs = append(c.Outputs, nbError{
			OutputType: "error", Ename: e.Error.Name, Evalue: e.Error.Value,
			Traceback: tracebackLines(e.Error.Traceback),
		})
	case e.Status == StatusCrashed:
		c.Outputs = append(c.Outputs, nbError{
			OutputType: "error", Ename: "Crashed", Evalue: "the interpreter died during this execution", Traceback: []string{},
		})
	case e.Status == StatusTimeout:
		c.Outputs = append(c.Outputs, nbError{
			OutputType: "error", Ename: "Timeout", Evalue: "the execution ran past its timeout and was interrupted", Traceback: []string{},
		})
	}
	return c
}

// richOutput loads one rich output for a display_data output.
func richOutput(out Output, load func(string) ([]byte, error)) (nbData, bool) {
	if load == nil {
		return nbData{}, false
	}
	var text bool
	switch out.Mime {
	case "image/png", "image/jpeg":
	case "text/html", "image/svg+xml":
		text = true
	default:
		return nbData{}, false
	}
	b, err := load(out.Path)
	if err != nil {
		return nbData{}, false
	}
	var v any = base64.StdEncoding.EncodeToString(b)
	if text {
		v = splitLines(string(b))
	}
	return nbData{
		OutputType: "display_data",
		Data:       map[string]any{out.Mime: v},
		Metadata:   map[string]any{},
	}, true
}

// splitLines splits s into lines that keep their "\n", as notebooks store
// multi-line strings: "a\nb" is ["a\n", "b"]; "" is [].
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// tracebackLines splits a traceback into its lines, without newlines, as the
// error output of a notebook stores it.
func tracebackLines(tb string) []string {
	tb = strings.TrimSuffix(tb, "\n")
	if tb == "" {
		return []string{}
	}
	return strings.Split(tb, "\n")
}

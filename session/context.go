package session

import (
	"context"
	"fmt"
	"strings"

	"github.com/runtimectl/runtimectl/execproto"
)

// Summary is a compact picture of a session for a model's next prompt: what `runtimectl session
// context` prints. An agent that pastes it never has to keep its own copy of the state.
type Summary struct {
	Session    string           `json:"session"`
	Lang       string           `json:"lang"`
	Executions int64            `json:"executions"`
	Recent     []RecentExec     `json:"recent"`
	Vars       []execproto.Var  `json:"vars"`
	Modules    []string         `json:"modules"`
	Files      []execproto.File `json:"files"`
	FilesTotal int              `json:"files_total"`
	FilesSize  int64            `json:"files_size"`
	LastOutput string           `json:"last_output"`
}

// RecentExec is one of the last executions in a Summary.
type RecentExec struct {
	Seq    int64  `json:"seq"`
	Status string `json:"status"`
	Code   string `json:"code"`
	Error  string `json:"error,omitempty"`
}

// ContextOptions tune a Summary.
type ContextOptions struct {
	Recent int // executions listed (default 5)
	Files  int // files listed (default 20)
}

// Context gathers the session's summary: the last executions from its history, its variables,
// its newest workspace files and the last output. It starts a stopped session.
func (c *Client) Context(ctx context.Context, name string, o ContextOptions) (*Summary, error) {
	if o.Recent <= 0 {
		o.Recent = 5
	}
	if o.Files <= 0 {
		o.Files = 20
	}
	s, _, err := c.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	execs, _, err := c.readHistory(ctx, name)
	if err != nil {
		return nil, err
	}
	sum := &Summary{Session: name, Lang: s.Lang(), Executions: int64(len(execs)), Recent: []RecentExec{}}
	if n := len(execs); n > 0 {
		sum.Executions = execs[n-1].Seq
	}
	start := max(0, len(execs)-o.Recent)
	for _, e := range execs[start:] {
		r := RecentExec{Seq: e.Seq, Status: string(e.Status), Code: clip(e.Code, 300)}
		if e.Error != nil {
			r.Error = clip(e.Error.Name+": "+e.Error.Value, 300)
		}
		sum.Recent = append(sum.Recent, r)
	}
	if n := len(execs); n > 0 {
		last := execs[n-1]
		out := last.Stdout
		if last.Stderr != "" {
			out += last.Stderr
		}
		if last.Result != nil {
			out += *last.Result + "\n"
		}
		sum.LastOutput = clipTail(out, 1500)
	}
	vars, err := s.Vars(ctx)
	if err != nil {
		return nil, err
	}
	sum.Vars, sum.Modules = vars.Vars, vars.Modules
	if sum.Vars == nil {
		sum.Vars = []execproto.Var{}
	}
	files, err := s.Files(ctx)
	if err != nil {
		return nil, err
	}
	if len(files.Files) > o.Files {
		files.Files = files.Files[:o.Files]
	}
	sum.Files, sum.FilesTotal, sum.FilesSize = files.Files, files.Total, files.TotalSize
	return sum, nil
}

// Text renders the summary in at most maxChars characters (0: no cap), dropping detail from
// the least useful sections first.
func (s *Summary) Text(maxChars int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Session %s (%s), %d executions so far. Variables persist between executions.\n", s.Session, s.Lang, s.Executions)
	if len(s.Recent) > 0 {
		b.WriteString("\nRecent executions:\n")
		for _, r := range s.Recent {
			fmt.Fprintf(&b, "[%d] %s: %s\n", r.Seq, r.Status, oneLineCode(r.Code))
			if r.Error != "" {
				fmt.Fprintf(&b, "    error: %s\n", r.Error)
			}
		}
	}
	if len(s.Vars) > 0 {
		b.WriteString("\nVariables:\n")
		for _, v := range s.Vars {
			shape := v.Shape
			if shape == "" && v.Len != nil {
				shape = fmt.Sprintf("len %d", *v.Len)
			}
			if shape != "" {
				shape = " " + shape
			}
			fmt.Fprintf(&b, "- %s: %s%s, %s: %s\n", v.Name, v.Type, shape, FormatSize(v.Size), clip(strings.ReplaceAll(v.Preview, "\n", " "), 80))
		}
	}
	if len(s.Modules) > 0 {
		fmt.Fprintf(&b, "Modules: %s\n", strings.Join(s.Modules, ", "))
	}
	if s.FilesTotal > 0 {
		fmt.Fprintf(&b, "\nWorkspace files (%d, %s in all; newest first):\n", s.FilesTotal, FormatSize(s.FilesSize))
		for _, f := range s.Files {
			fmt.Fprintf(&b, "- %s (%s)\n", f.Path, FormatSize(f.Size))
		}
	}
	if s.LastOutput != "" {
		b.WriteString("\nLast output:\n")
		b.WriteString(s.LastOutput)
		if !strings.HasSuffix(s.LastOutput, "\n") {
			b.WriteString("\n")
		}
	}
	out := b.String()
	if maxChars > 0 && len([]rune(out)) > maxChars {
		const marker = "\n[... context truncated ...]\n"
		r := []rune(out)
		keep := maxChars - len(marker)
		if keep < 0 {
			keep = 0
		}
		out = string(r[:keep]) + marker
		if len([]rune(out)) > maxChars {
			out = string([]rune(out)[:maxChars])
		}
	}
	return out
}

func oneLineCode(code string) string {
	code = strings.TrimSpace(code)
	if i := strings.IndexByte(code, '\n'); i >= 0 {
		lines := strings.Count(code, "\n") + 1
		return fmt.Sprintf("%s ... (%d lines)", clip(code[:i], 100), lines)
	}
	return clip(code, 120)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}

func clipTail(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "..." + string(r[len(r)-n:])
}

// FormatSize renders a byte count for people: "512 B", "1.5 KiB", "3.2 MiB", "1.1 GiB".
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

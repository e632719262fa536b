package server

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/docker/go-units"

	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

// What one execution may cost the server's memory is set by the operator, never by the
// client: the output cap of an execution has a ceiling (Config.MaxOutput), a streamed
// execution keeps none of its output (session.ExecOptions.StreamOnly, and the end event does
// not repeat it), and the rich outputs of one reply share one budget (Config.MaxRichOutputs).

const (
	// DefaultMaxOutput is Config.MaxOutput's default.
	DefaultMaxOutput = 16 << 20
	// DefaultMaxRichOutputs is Config.MaxRichOutputs' default.
	DefaultMaxRichOutputs = 16 << 20
	// sessionDefaultOutput is the library's output cap of a session that sets none.
	sessionDefaultOutput = 4 << 20
)

// LimitError is a request past a limit that the operator set (serve's flags or the token
// file): 403, with a message that names the limit and who sets it.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }

func limitf(format string, a ...any) error { return &LimitError{fmt.Sprintf(format, a...)} }

func human(n int64) string { return units.BytesSize(float64(n)) }

// maxOutput is the output cap to give an execution of name that asked for asked (0: the
// session's own): never over the server's ceiling.
func (s *Server) maxOutput(name string, asked int64) (int64, error) {
	ceiling := s.cfg.MaxOutput
	if asked > ceiling {
		return 0, limitf("max_output %s is over the server's ceiling of %s per stream (serve --max-output); ask for less, or stream the output (Accept: %s) and write large results to files", human(asked), human(ceiling), NDJSON)
	}
	if asked > 0 {
		return asked, nil
	}
	s.mu.Lock()
	own := s.owners[name].maxOutput
	s.mu.Unlock()
	if own <= 0 {
		own = sessionDefaultOutput
	}
	return min(own, ceiling), nil
}

// outputs gives each rich output its bytes, within one budget for the reply: the bytes the
// agent sent with the result count, and a file is read only when it fits what is left (its
// size is read from the archive's header before its content). An output past the budget is
// marked Omitted, with where to fetch it. It also returns what is left of the budget, for the
// displays (see displays).
func (s *Server) outputs(r *http.Request, name string, outs []history.Output) ([]richOutput, int64) {
	left := s.cfg.MaxRichOutputs
	rich := make([]richOutput, 0, len(outs))
	omit := func(ro *richOutput, size int64) {
		ro.Data, ro.Omitted = nil, true
		where := "it has no file in the session: display less in one execution"
		if ro.Path != "" {
			where = fmt.Sprintf("fetch it with GET /v1/sessions/%s/files/%s", name, strings.TrimPrefix(ro.Path, session.Workspace+"/"))
		}
		what := "its size is unknown"
		if size >= 0 {
			what = fmt.Sprintf("it holds %s", human(size))
		}
		ro.Problem = fmt.Sprintf("left out: the rich outputs of one reply are capped at %s in all (serve --max-rich-outputs), %s left and %s; %s", human(s.cfg.MaxRichOutputs), human(left), what, where)
	}
	for _, o := range outs {
		ro := richOutput{Output: o}
		ro.Output.Data = nil // the reply's Data is richOutput's
		if len(o.Data) > 0 {
			if int64(len(o.Data)) > left {
				omit(&ro, int64(len(o.Data)))
			} else {
				ro.Data = o.Data // the agent sent it with the result
				left -= int64(len(o.Data))
			}
			rich = append(rich, ro)
			continue
		}
		if left <= 0 {
			omit(&ro, -1)
			rich = append(rich, ro)
			continue
		}
		data, size, err := s.readOne(r, name, o.Path, left)
		switch {
		case err != nil:
			ro.Problem = err.Error()
		case data == nil:
			omit(&ro, size)
		default:
			ro.Data = data
			left -= int64(len(data))
		}
		rich = append(rich, ro)
	}
	return rich, left
}

// displays keeps the displays of one reply within what is left of its rich budget: a display
// whose data past text/plain would pass it keeps its text/plain only, and its metadata says
// what was left out and where the whole is (the session's history: `runtimectl session
// history NAME --format ipynb`, or GET .../history).
func (s *Server) displays(name string, ds []history.Display, left int64) []history.Display {
	out := make([]history.Display, 0, len(ds))
	for _, d := range ds {
		var n int64
		for k, v := range d.Data {
			if k != "text/plain" {
				n += int64(len(v))
			}
		}
		if n > 0 && n > left {
			note, _ := json.Marshal(map[string]any{"runtimectl": map[string]any{"omitted": true, "problem": fmt.Sprintf(
				"left out: the rich outputs of one reply are capped at %s in all (serve --max-rich-outputs), %s left and the display's data holds %s; its text/plain is kept, the whole display is in the session's history (GET /v1/sessions/%s/history?format=ipynb)",
				human(s.cfg.MaxRichOutputs), human(max(left, 0)), human(n), name)}})
			text := d.Data["text/plain"]
			d.Data = map[string]json.RawMessage{}
			if text != nil {
				d.Data["text/plain"] = text
			}
			d.Metadata = note
			left = 0
		} else {
			left -= n
		}
		out = append(out, d)
	}
	return out
}

// readOne reads one regular file of the session through the engine (running or not) when it
// holds at most max bytes; a larger one gives nil data and its size, unread.
func (s *Server) readOne(r *http.Request, name, path string, max int64) ([]byte, int64, error) {
	abs, err := s.cfg.Client.ResolveRead(r.Context(), name, path)
	if err != nil {
		return nil, 0, err
	}
	rc, err := s.cfg.Client.Runtimes().CopyFrom(r.Context(), name, abs)
	if err != nil {
		return nil, 0, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err != nil {
			return nil, 0, fmt.Errorf("%s: not a file", path)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		if !s.cfg.Client.SessionOwns(r.Context(), hdr.Uid) {
			return nil, 0, notTheUsers(path, hdr)
		}
		if hdr.Size > max {
			return nil, hdr.Size, nil
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		return data, hdr.Size, err
	}
}

// startLimits checks a start request against the operator's limits.
func (s *Server) startLimits(tok Token, q *startRequest) error {
	if int64(q.MaxOutput) > s.cfg.MaxOutput {
		return limitf("max_output %s is over the server's ceiling of %s per stream (serve --max-output); ask for less", human(int64(q.MaxOutput)), human(s.cfg.MaxOutput))
	}
	return s.applyPolicy(tok, q)
}

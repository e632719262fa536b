package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

// execRequest is the body of POST /v1/sessions/NAME/exec.
type execRequest struct {
	Code      string   `json:"code"`
	Timeout   Duration `json:"timeout"`    // seconds, or "30s"; 0: none
	MaxOutput Size     `json:"max_output"` // bytes per stream delivered; 0: the session's default
	// IgnoreDiskCap runs the code even past the session's disk cap (to free space).
	IgnoreDiskCap bool `json:"ignore_disk_cap"`
	// Env (KEY=VALUE) and Workdir hold for this execution only.
	Env     []string `json:"env"`
	Workdir string   `json:"workdir"`
}

// richOutput is a rich output with its bytes (base64 in JSON).
type richOutput struct {
	history.Output
	Data []byte `json:"data,omitempty"`
	// Problem says why Data is missing (too large, unreadable, past the reply's budget).
	Problem string `json:"problem,omitempty"`
	// Omitted marks an output left out of the reply because the reply's rich outputs would
	// pass the server's budget (Config.MaxRichOutputs); Problem says how to fetch it.
	Omitted bool `json:"omitted,omitempty"`
}

// execReply is the Result of `session exec --json`, its outputs carrying their bytes.
type execReply struct {
	*session.Result
	Outputs []richOutput `json:"outputs"`
	// Streamed says that stdout and stderr came as events only (the end event of a stream
	// does not repeat them: the server keeps no copy).
	Streamed bool `json:"streamed,omitempty"`
}

// Event is one line of an execution's NDJSON stream.
type Event struct {
	Event   string `json:"event"` // stdout, stderr, notice, display, output, end, fail
	Data    string `json:"data,omitempty"`
	Message string `json:"message,omitempty"`
	// Display is a display event's display (the objects of the result's "displays").
	Display *history.Display `json:"display,omitempty"`
}

// NDJSON is the media type of a streamed execution.
const NDJSON = "application/x-ndjson"

func wantsStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && (mt == NDJSON || mt == "application/jsonl") {
			return true
		}
	}
	return false
}

// writerFunc is a function as an io.Writer.
type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}

// streamWriter writes events as lines, each with its own deadline; the first failed write
// marks the client gone and closes gone.
type streamWriter struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	timeout  time.Duration
	broken   bool
	gone     chan struct{}
	goneOnce sync.Once
	bytes    func(stream string, n int)
	// carry holds the start of a UTF-8 character split across two chunks, per stream.
	carry map[string][]byte
}

func (sw *streamWriter) write(v any) {
	if sw.broken {
		return
	}
	b, err := json.Marshal(v)
	if err == nil {
		_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
		if _, err = sw.w.Write(append(b, '\n')); err == nil {
			err = sw.rc.Flush()
		}
	}
	if err != nil {
		sw.broken = true
		sw.goneOnce.Do(func() { close(sw.gone) })
	}
}

// chunk sends output of one stream, holding back an incomplete character at its end.
func (sw *streamWriter) chunk(stream string, p []byte) {
	sw.bytes(stream, len(p))
	buf := append(sw.carry[stream], p...)
	cut := len(buf)
	// An incomplete character is at most 3 bytes from the end.
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-3; i-- {
		if utf8.RuneStart(buf[i]) {
			if !utf8.FullRune(buf[i:]) {
				cut = i
			}
			break
		}
	}
	sw.carry[stream] = append([]byte(nil), buf[cut:]...)
	if cut > 0 {
		sw.write(Event{Event: stream, Data: string(buf[:cut])})
	}
}

func (sw *streamWriter) flushCarry() {
	for _, stream := range []string{"stdout", "stderr"} {
		if c := sw.carry[stream]; len(c) > 0 {
			sw.write(Event{Event: stream, Data: string(c)})
			sw.carry[stream] = nil
		}
	}
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	var req execRequest
	if !s.readJSONRule(w, r, &req, bodyRequired) {
		return
	}
	ctx := r.Context()
	if err := s.checkOwner(ctx, name, tok, false); err != nil {
		fail(w, err)
		return
	}
	maxOut, err := s.maxOutput(name, int64(req.MaxOutput))
	if err != nil {
		fail(w, err)
		return
	}
	if !s.acquire(tok) {
		writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("%d executions of this token run already (the cap, %s); wait for one to end", s.maxExecs(tok), s.execsWhere(tok)))
		return
	}
	defer s.release(tok)
	h, err := s.handle(ctx, name)
	if err != nil {
		fail(w, err)
		return
	}
	start := time.Now()
	stream := wantsStream(r)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout, gone: make(chan struct{}),
		carry: map[string][]byte{}, bytes: func(st string, n int) { s.metrics.bytes.WithLabelValues(st).Add(float64(n)) }}
	// The code is not interrupted when the client goes away, nor when the server stops: the
	// execution ends in the session and lands in its history. Only the stream ends.
	detach := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-s.detach:
		case <-sw.gone:
		case <-done:
			return
		}
		close(detach)
	}()
	eo := session.ExecOptions{Timeout: time.Duration(req.Timeout), MaxOutput: maxOut, IgnoreDiskCap: req.IgnoreDiskCap, Env: req.Env, Workdir: req.Workdir, Detach: detach}
	if stream {
		// The output goes to the client as it comes; the server keeps none of it.
		eo.StreamOnly = true
		w.Header().Set("Content-Type", NDJSON)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusOK)
		_ = sw.rc.Flush()
		eo.Stdout = writerFunc(func(p []byte) { sw.chunk("stdout", p) })
		eo.Stderr = writerFunc(func(p []byte) { sw.chunk("stderr", p) })
		eo.OnNotice = func(m string) { sw.write(Event{Event: "notice", Message: m}) }
		eo.OnDisplay = func(d history.Display) {
			sw.flushCarry() // what came before the display is whole: the driver flushed it
			sw.write(Event{Event: "display", Display: &d})
		}
	} else {
		eo.Stdout = writerFunc(func(p []byte) { sw.bytes("stdout", len(p)) })
		eo.Stderr = writerFunc(func(p []byte) { sw.bytes("stderr", len(p)) })
	}
	res, err := h.Exec(context.WithoutCancel(ctx), req.Code, eo)
	if err != nil {
		status := "failed"
		select {
		case <-detach:
			status = "detached"
		default:
		}
		s.metrics.execs.WithLabelValues(status).Inc()
		if errors.Is(err, session.ErrNotFound) {
			s.forget(name)
		}
		if stream {
			code, msg := "internal", err.Error()
			if status == "detached" {
				code, msg = "detached", "the stream ended before the execution; it goes on in the session and lands in its history"
			} else {
				_, code = classify(err)
			}
			sw.flushCarry()
			sw.write(struct {
				Event string `json:"event"`
				apiError
			}{"fail", apiError{Error: msg, Code: code}})
			return
		}
		fail(w, err)
		return
	}
	s.metrics.execs.WithLabelValues(string(res.Status)).Inc()
	s.metrics.latency.Observe(time.Since(start).Seconds())
	outs, left := s.outputs(r, name, res.Outputs)
	res.Displays = s.displays(name, res.Displays, left)
	rep := execReply{Result: res, Outputs: outs, Streamed: stream}
	if !stream {
		writeJSON(w, http.StatusOK, rep)
		return
	}
	sw.flushCarry()
	for _, o := range rep.Outputs {
		sw.write(struct {
			Event string `json:"event"`
			richOutput
		}{"output", o})
	}
	sw.write(struct {
		Event string `json:"event"`
		execReply
	}{"end", rep})
}

package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ Token) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// visible filters sessions down to those tok may see.
func visible(list []session.Info, tok Token) []session.Info {
	out := []session.Info{}
	for _, in := range list {
		if tok.Admin || in.Owner == tok.Name {
			out = append(out, in)
		}
	}
	return out
}

// list is `session ls` of the token's own sessions (an admin's: all), filtered before
// anything is read of the histories of the sessions it does not show.
func (s *Server) list(w http.ResponseWriter, r *http.Request, tok Token) {
	list, err := s.cfg.Client.ListWith(r.Context(), session.ListOptions{Keep: func(in session.Info) bool { return tok.Admin || in.Owner == tok.Name }})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, visible(list, tok))
}

// info describes one session without starting it.
func (s *Server) info(ctx context.Context, name string) (session.Info, error) {
	in, running, err := s.cfg.Client.Info(ctx, name)
	if err != nil {
		return in, err
	}
	if running {
		if h, err := s.handle(ctx, name); err == nil {
			if stat, err := h.Status(ctx); err == nil {
				in.Executions, in.LastExec = stat.NextSeq-1, stat.LastExec
			}
		}
	}
	return in, nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	if err := s.checkOwner(r.Context(), name, tok, false); err != nil {
		fail(w, err)
		return
	}
	in, err := s.info(r.Context(), name)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}

// startRequest is the body of POST /v1/sessions: the flags of `session start`.
type startRequest struct {
	Name          string   `json:"name"`
	Lang          string   `json:"lang"`
	Image         string   `json:"image"`
	Memory        Size     `json:"memory"`
	CPUs          float64  `json:"cpus"`
	Pids          int64    `json:"pids"`
	Network       string   `json:"network"`
	Env           []string `json:"env"`
	Snapshot      string   `json:"snapshot"`
	KeepSnapshots int      `json:"keep_snapshots"`
	MaxOutput     Size     `json:"max_output"`
	Disk          Size     `json:"disk"`
	IdleStop      Duration `json:"idle_stop"`
	TTL           Duration `json:"ttl"`
	// AllowHosts and SecretHeaders are session.Spec's (--allow-host, --secret-header). A secret
	// header's source is the server's own environment variable or file: admin tokens only.
	AllowHosts    []string `json:"allow_hosts"`
	SecretHeaders []string `json:"secret_headers"`
}

// startReply is the session's line of `session ls --json` and what start did.
type startReply struct {
	session.Info
	New      bool                 `json:"new"`     // the session was created
	Started  bool                 `json:"started"` // it was stopped and was started again
	Restored *session.RestoreInfo `json:"restored,omitempty"`
	Message  string               `json:"message,omitempty"`
}

func (s *Server) start(w http.ResponseWriter, r *http.Request, tok Token) {
	var req startRequest
	if !s.readJSON(w, r, &req) {
		return
	}
	if req.Name == "" {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		req.Name = "s-" + hex.EncodeToString(b)
	}
	if err := session.ValidateName(req.Name); err != nil {
		fail(w, err)
		return
	}
	if len(req.SecretHeaders) > 0 && !tok.Admin {
		writeError(w, http.StatusForbidden, "forbidden", "secret_headers name the server's own environment variables or files: only an admin token may give them; ask the server's operator")
		return
	}
	if err := s.startLimits(tok, &req); err != nil {
		fail(w, err)
		return
	}
	ctx := r.Context()
	taken := func() {
		// Names are one namespace on the engine: a name another token holds cannot be made
		// again. The answer says no more than that (not whose, nor anything of the session).
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("session name %q is in use on this server (names are shared by every token); choose another", req.Name))
	}
	if st, err := s.cfg.Client.RecordedSettings(ctx, req.Name); err == nil {
		if !tok.Admin && st.Owner != tok.Name {
			taken()
			return
		}
	} else if !errors.Is(err, session.ErrNotFound) {
		fail(w, err)
		return
	} else {
		unlock := s.lockStarts(tok)
		defer unlock()
		if err := s.checkSessions(ctx, tok); err != nil {
			fail(w, err)
			return
		}
	}
	keep := req.KeepSnapshots
	if keep == 0 {
		keep = 10
	}
	spec := session.Spec{
		Name: req.Name, Lang: req.Lang, Image: req.Image, Memory: int64(req.Memory), CPUs: req.CPUs, Pids: req.Pids,
		Network: req.Network, Env: req.Env, Snapshot: req.Snapshot, KeepSnapshots: keep,
		MaxOutput: int64(req.MaxOutput), Disk: int64(req.Disk), IdleStop: time.Duration(req.IdleStop), TTL: time.Duration(req.TTL), Owner: tok.Name,
		AllowHosts: req.AllowHosts, SecretHeaders: req.SecretHeaders,
	}
	h, info, err := s.cfg.Client.Start(ctx, spec)
	if err != nil {
		fail(w, err)
		return
	}
	// Two tokens that start one name at the same moment: only the one that made it owns it.
	if err := s.checkOwner(ctx, req.Name, tok, true); err != nil {
		h.Close()
		taken()
		return
	}
	s.mu.Lock()
	if old := s.handles[req.Name]; old != nil {
		old.Close()
	}
	s.handles[req.Name] = h
	s.mu.Unlock()
	in, err := s.info(ctx, req.Name)
	if err != nil {
		fail(w, err)
		return
	}
	rep := startReply{Info: in, New: info.Created, Started: info.Started || info.Recreate}
	status := http.StatusOK
	if info.Created {
		status = http.StatusCreated
	}
	if rep.Started {
		rep.Restored = h.Restored()
		rep.Message = session.DescribeRestore(req.Name, rep.Restored)
	}
	writeJSON(w, status, rep)
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	if err := s.checkOwner(r.Context(), name, tok, true); err != nil {
		fail(w, err)
		return
	}
	s.forget(name)
	if err := s.cfg.Client.Stop(r.Context(), name); err != nil {
		fail(w, err)
		return
	}
	in, err := s.info(r.Context(), name)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}

// remove is `session rm`: ?force=true for a running session; with ?keep=GLOB (repeatable)
// and/or ?keep_history=true the kept files come back as a tar before the session is removed.
func (s *Server) remove(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	ctx := r.Context()
	if err := s.checkOwner(ctx, name, tok, true); err != nil {
		fail(w, err)
		return
	}
	q := r.URL.Query()
	force, _ := strconv.ParseBool(q.Get("force"))
	keepHistory, _ := strconv.ParseBool(q.Get("keep_history"))
	keep := q["keep"]
	s.forget(name)
	if len(keep) == 0 && !keepHistory {
		if err := s.cfg.Client.Remove(ctx, name, force); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.removeExport(w, r, tok, name, force, session.ExportOptions{Keep: keep, History: keepHistory})
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	ctx := r.Context()
	if err := s.checkOwner(ctx, name, tok, false); err != nil {
		fail(w, err)
		return
	}
	q := r.URL.Query()
	format := q.Get("format")
	if format == "" {
		format = "json"
	}
	switch format {
	case "text", "json", "ipynb", "executor-json":
	default:
		writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("unknown format %q: use text, json, ipynb or executor-json", format))
		return
	}
	last := 0
	if v := q.Get("last"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("last=%q: give 0 or a positive number", v))
			return
		}
		last = n
	}
	execs, problems, err := s.cfg.Client.History(ctx, name)
	if err != nil {
		fail(w, err)
		return
	}
	for _, p := range problems {
		w.Header().Add("X-Runtimectl-History-Problem", p)
	}
	if last > 0 && len(execs) > last {
		execs = execs[len(execs)-last:]
	}
	switch format {
	case "json":
		w.Header().Set("Content-Type", "application/json")
		_ = history.WriteJSON(w, execs)
	case "ipynb":
		lang := "python"
		if st, err := s.cfg.Client.RecordedSettings(ctx, name); err == nil {
			lang = st.Lang
		}
		w.Header().Set("Content-Type", "application/x-ipynb+json")
		_ = history.WriteIPYNB(w, lang, execs)
	case "executor-json":
		w.Header().Set("Content-Type", "application/json")
		_ = history.WriteExecutorJSON(w, execs)
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = history.WriteText(w, execs)
	}
}

func (s *Server) snapshots(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	if err := s.checkOwner(r.Context(), name, tok, false); err != nil {
		fail(w, err)
		return
	}
	list, err := s.cfg.Client.Snapshots(r.Context(), name)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// agentCall opens the session's handle (after the owner check) and runs f on it.
func (s *Server) agentCall(w http.ResponseWriter, r *http.Request, tok Token, f func(*session.Session) (any, error)) {
	name := r.PathValue("name")
	if err := s.checkOwner(r.Context(), name, tok, false); err != nil {
		fail(w, err)
		return
	}
	h, err := s.handle(r.Context(), name)
	if err != nil {
		fail(w, err)
		return
	}
	v, err := f(h)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request, tok Token) {
	s.agentCall(w, r, tok, func(h *session.Session) (any, error) { return h.Snapshot(r.Context()) })
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request, tok Token) {
	var req struct {
		Snapshot string `json:"snapshot"`
	}
	if !s.readJSON(w, r, &req) {
		return
	}
	if req.Snapshot == "" {
		writeError(w, http.StatusBadRequest, "invalid", `give {"snapshot": ID}; list the ids with GET /v1/sessions/NAME/snapshots`)
		return
	}
	s.agentCall(w, r, tok, func(h *session.Session) (any, error) { return h.RestoreSnapshot(r.Context(), req.Snapshot) })
}

func (s *Server) vars(w http.ResponseWriter, r *http.Request, tok Token) {
	s.agentCall(w, r, tok, func(h *session.Session) (any, error) { return h.Vars(r.Context()) })
}

func (s *Server) interrupt(w http.ResponseWriter, r *http.Request, tok Token) {
	s.agentCall(w, r, tok, func(h *session.Session) (any, error) {
		ok, err := h.Interrupt(r.Context())
		return map[string]bool{"interrupted": ok}, err
	})
}

// contextReply is `session context --json` with the text that `session context` prints.
type contextReply struct {
	*session.Summary
	Text string `json:"text"`
}

func (s *Server) context(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	if err := s.checkOwner(r.Context(), name, tok, false); err != nil {
		fail(w, err)
		return
	}
	maxChars := 4000
	if v := r.URL.Query().Get("max_chars"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("max_chars=%q: give 0 (no cap) or more", v))
			return
		}
		maxChars = n
	}
	sum, err := s.cfg.Client.Context(r.Context(), name, session.ContextOptions{})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, contextReply{Summary: sum, Text: sum.Text(maxChars)})
}

func (s *Server) fork(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	var req struct {
		Name string `json:"name"`
		At   string `json:"at"`
	}
	if !s.readJSON(w, r, &req) {
		return
	}
	if err := s.checkOwner(r.Context(), name, tok, true); err != nil {
		fail(w, err)
		return
	}
	if err := session.ValidateName(req.Name); err != nil {
		fail(w, err)
		return
	}
	unlock := s.lockStarts(tok)
	defer unlock()
	if err := s.checkSessions(r.Context(), tok); err != nil {
		fail(w, err)
		return
	}
	h, err := s.cfg.Client.Fork(r.Context(), name, req.Name, req.At)
	if err != nil {
		fail(w, err)
		return
	}
	h.Close()
	in, err := s.info(r.Context(), req.Name)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, in)
}

// install is `session install`: pip in an installer container, into the session's virtual
// environment; the reply carries the end of pip's output.
func (s *Server) install(w http.ResponseWriter, r *http.Request, tok Token) {
	name := r.PathValue("name")
	var req struct {
		Packages       []string `json:"packages"`
		Requirements   string   `json:"requirements"`
		IndexURL       string   `json:"index_url"`
		ExtraIndexURLs []string `json:"extra_index_urls"`
		TrustedHosts   []string `json:"trusted_hosts"`
		NoDeps         bool     `json:"no_deps"`
	}
	if !s.readJSON(w, r, &req) {
		return
	}
	if err := s.checkOwner(r.Context(), name, tok, true); err != nil {
		fail(w, err)
		return
	}
	out := &session.Tail{Max: 64 << 10}
	err := s.cfg.Client.Install(r.Context(), name, session.InstallOptions{Packages: req.Packages, Requirements: req.Requirements,
		IndexURL: req.IndexURL, ExtraIndexURLs: req.ExtraIndexURLs, TrustedHosts: req.TrustedHosts, NoDeps: req.NoDeps, Output: out})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"output": out.String()})
}

package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/session"
)

// Config is what a Server needs. Client and Tokens are required; zero limits take the defaults.
type Config struct {
	Client *session.Client
	Tokens *Tokens
	Logger *slog.Logger
	// MaxBody caps a JSON request body (default 16 MiB: the code of an execution rides in it).
	MaxBody int64
	// MaxUpload caps a file or tar sent to a session, and MaxDownload what leaves one
	// (default 256 MiB each).
	MaxUpload, MaxDownload int64
	// MaxExecs caps the executions that one token runs at once (default 8); past it, 429.
	MaxExecs int
	// MaxTransfers caps the file transfers (downloads, uploads, exports) that one token runs
	// at once (default 4); past it, 429.
	MaxTransfers int
	// WriteTimeout bounds each write to a client; a client that reads slower than that is
	// cut off (its execution goes on in the session). Default 30 s.
	WriteTimeout time.Duration
	// OwnerTTL is how long the server trusts what it read of a session's owner (default 5 s);
	// routes that change a session read it afresh.
	OwnerTTL time.Duration
	// MaxOutput is the ceiling on an execution's max_output (bytes per stream, default 16 MiB):
	// a request or a session that asks for more is refused (403), and an execution of a
	// session whose own cap is higher is capped at it. It bounds what the server holds for
	// one execution that is not streamed; a streamed one holds none.
	MaxOutput int64
	// MaxRichOutputs is the budget of the rich outputs' bytes in one reply, all together
	// (default 16 MiB); those past it are left out, marked, with where to fetch them.
	MaxRichOutputs int64
	// Version is the server's version, as the MCP handshake gives it.
	Version string
	// SweepEvery is how often Sweep applies the sessions' own --ttl and --idle-stop (and
	// removes what ended test processes left); default 1 min.
	SweepEvery time.Duration
}

// Server is the HTTP API. Its Handler serves every route.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics

	mu        sync.Mutex
	running   map[string]int // executions running per token name
	transfers map[string]int // file transfers running per token name
	// startLocks serialize the creation of one token's sessions (its sessions limit).
	startLocks map[string]*sync.Mutex
	handles    map[string]*session.Session
	owners     map[string]ownerEntry
	mcps       map[string]*mcpEndpoint // per token: see serveMCP

	// detach is closed when the server shuts down: streams end, executions go on.
	detach     chan struct{}
	detachOnce sync.Once
	// draining is closed when the server begins to stop (Drain).
	draining  chan struct{}
	drainOnce sync.Once
}

type ownerEntry struct {
	owner string
	at    time.Time
	// maxOutput is the session's own output cap (its settings; 0: the library's default).
	maxOutput int64
}

// route is one documented route: the test compares this table with openapi.json.
type route struct {
	method, pattern string
	auth            bool
	h               func(w http.ResponseWriter, r *http.Request, tok Token)
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.Tokens == nil {
		return nil, errors.New("server: a session client and tokens are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 16 << 20
	}
	if cfg.MaxUpload <= 0 {
		cfg.MaxUpload = 256 << 20
	}
	if cfg.MaxDownload <= 0 {
		cfg.MaxDownload = 256 << 20
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultMaxOutput
	}
	if cfg.MaxRichOutputs <= 0 {
		cfg.MaxRichOutputs = DefaultMaxRichOutputs
	}
	if cfg.MaxExecs <= 0 {
		cfg.MaxExecs = 8
	}
	if cfg.MaxTransfers <= 0 {
		cfg.MaxTransfers = DefaultMaxTransfers
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.OwnerTTL <= 0 {
		cfg.OwnerTTL = 5 * time.Second
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, mux: http.NewServeMux(),
		running: map[string]int{}, transfers: map[string]int{}, startLocks: map[string]*sync.Mutex{}, handles: map[string]*session.Session{}, owners: map[string]ownerEntry{},
		mcps: map[string]*mcpEndpoint{}, detach: make(chan struct{}), draining: make(chan struct{}),
	}
	s.metrics = newMetrics(cfg.Client)
	for _, rt := range s.routes() {
		s.mux.HandleFunc(rt.method+" "+rt.pattern, s.wrap(rt))
	}
	// The MCP endpoint takes GET, POST and DELETE (the SDK answers each); not a JSON route, so
	// not in openapi.json.
	s.mux.HandleFunc(MCPPath, s.wrap(route{"ANY", MCPPath, true, s.serveMCP}))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.authenticate(r); !ok {
			unauthorized(w)
			return
		}
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route %s %s; see /openapi.json", r.Method, r.URL.Path))
	})
	return s, nil
}

func (s *Server) routes() []route {
	return []route{
		{"GET", "/healthz", false, s.healthz},
		{"GET", "/openapi.json", false, s.openapi},
		{"GET", "/metrics", true, s.serveMetrics},
		{"GET", "/v1/sessions", true, s.list},
		{"POST", "/v1/sessions", true, s.start},
		{"GET", "/v1/sessions/{name}", true, s.get},
		{"DELETE", "/v1/sessions/{name}", true, s.remove},
		{"POST", "/v1/sessions/{name}/exec", true, s.exec},
		{"POST", "/v1/sessions/{name}/interrupt", true, s.interrupt},
		{"POST", "/v1/sessions/{name}/stop", true, s.stop},
		{"GET", "/v1/sessions/{name}/history", true, s.history},
		{"GET", "/v1/sessions/{name}/snapshots", true, s.snapshots},
		{"POST", "/v1/sessions/{name}/snapshots", true, s.snapshot},
		{"POST", "/v1/sessions/{name}/restore", true, s.restore},
		{"GET", "/v1/sessions/{name}/vars", true, s.vars},
		{"GET", "/v1/sessions/{name}/context", true, s.context},
		{"POST", "/v1/sessions/{name}/fork", true, s.fork},
		{"POST", "/v1/sessions/{name}/install", true, s.install},
		{"GET", "/v1/sessions/{name}/files/{path...}", true, s.readFiles},
		{"PUT", "/v1/sessions/{name}/files/{path...}", true, s.writeFiles},
	}
}

// Handler returns the server's handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Detach ends every stream now; the executions go on in their sessions. A server that shuts
// down calls it once its grace period is over.
func (s *Server) Detach() {
	s.detachOnce.Do(func() { close(s.detach) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ep := range s.mcps {
		ep.srv.Detach()
	}
}

// Drain ends the streams that only wait for notifications (an MCP client's GET of /mcp): a
// server that begins to stop calls it (http.Server.RegisterOnShutdown), so that its shutdown
// waits only for the requests that run.
func (s *Server) Drain() { s.drainOnce.Do(func() { close(s.draining) }) }

// Close closes the server's handles on sessions and its MCP servers; the sessions go on
// running.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, h := range s.handles {
		h.Close()
		delete(s.handles, n)
	}
	for k, ep := range s.mcps {
		ep.srv.Close()
		delete(s.mcps, k)
	}
}

func (s *Server) wrap(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: 200}
		defer func() {
			s.metrics.requests.WithLabelValues(rt.method+" "+rt.pattern, fmt.Sprint(sw.status)).Inc()
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "ms", time.Since(start).Milliseconds())
		}()
		var tok Token
		if rt.auth {
			var ok bool
			if tok, ok = s.authenticate(r); !ok {
				unauthorized(sw)
				return
			}
		}
		rt.h(sw, r, tok)
	}
}

// statusWriter remembers the status for the metrics; it passes Flush and deadlines through
// (http.ResponseController unwraps it).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) authenticate(r *http.Request) (Token, bool) {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || secret == "" {
		return Token{}, false
	}
	return s.cfg.Tokens.Lookup(strings.TrimSpace(secret))
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="runtimectl"`)
	w.WriteHeader(http.StatusUnauthorized)
}

// apiError is the body of every error response.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(apiError{Error: msg, Code: code})
}

// fail maps an error of the session library to a status and writes it.
func fail(w http.ResponseWriter, err error) {
	status, code := classify(err)
	writeError(w, status, code, err.Error())
}

func classify(err error) (int, string) {
	var re *execproto.RemoteError
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, session.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, session.ErrInvalid):
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, session.ErrRunning):
		return http.StatusConflict, "running"
	case errors.Is(err, session.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.As(err, &re) && re.Code == contract.DiskCapCode:
		return http.StatusInsufficientStorage, contract.DiskCapCode
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.As(err, new(*LimitError)):
		return http.StatusForbidden, "limit"
	case errors.As(err, new(*invalidBody)):
		return http.StatusBadRequest, "invalid"
	case errors.As(err, &re) && re.Code == "busy":
		return http.StatusTooManyRequests, "busy"
	case errors.As(err, &re) && re.Code == "not_found":
		return http.StatusNotFound, "not_found"
	case errors.As(err, &re) && re.Code == "bad_request":
		return http.StatusBadRequest, "invalid"
	case errors.Is(err, engine.ErrUnreachable):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, session.ErrNoImage):
		return http.StatusServiceUnavailable, "no_image"
	case errors.Is(err, session.ErrNoAnswer):
		return http.StatusGatewayTimeout, "no_answer"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout"
	}
	return http.StatusInternalServerError, "internal"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// checkOwner returns the session's recorded owner after checking that tok may see it: another
// token's session is not found, exactly like a missing one. fresh reads it from the engine.
func (s *Server) checkOwner(ctx context.Context, name string, tok Token, fresh bool) error {
	if err := session.ValidateName(name); err != nil {
		return err
	}
	s.mu.Lock()
	e, ok := s.owners[name]
	s.mu.Unlock()
	if !ok || fresh || time.Since(e.at) > s.cfg.OwnerTTL {
		st, err := s.cfg.Client.RecordedSettings(ctx, name)
		if err != nil {
			if errors.Is(err, session.ErrNotFound) {
				s.forget(name)
				return notFound(name)
			}
			return err
		}
		e = ownerEntry{owner: st.Owner, at: time.Now(), maxOutput: st.MaxOutput}
		s.mu.Lock()
		s.owners[name] = e
		s.mu.Unlock()
	}
	if !tok.Admin && e.owner != tok.Name {
		return notFound(name)
	}
	return nil
}

func notFound(name string) error {
	return fmt.Errorf("%w %q: start it with POST /v1/sessions", session.ErrNotFound, name)
}

// forget drops what the server holds about a session (after stop or rm).
func (s *Server) forget(name string) {
	s.mu.Lock()
	h := s.handles[name]
	delete(s.handles, name)
	delete(s.owners, name)
	s.mu.Unlock()
	if h != nil {
		h.Close()
	}
}

// handle returns a handle on the session, kept between requests so that only the first pays
// for opening the stream to its agent. A stopped session is started (its state restored).
func (s *Server) handle(ctx context.Context, name string) (*session.Session, error) {
	s.mu.Lock()
	h := s.handles[name]
	s.mu.Unlock()
	if h != nil {
		return h, nil
	}
	h, _, err := s.cfg.Client.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if old := s.handles[name]; old != nil {
		s.mu.Unlock()
		h.Close()
		return old, nil
	}
	s.handles[name] = h
	s.mu.Unlock()
	return h, nil
}

// acquire counts an execution of tok; false past the cap.
func (s *Server) acquire(tok Token) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.maxExecs(tok); n > 0 && s.running[tok.Name] >= n {
		return false
	}
	s.running[tok.Name]++
	return true
}

func (s *Server) release(tok Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[tok.Name]--
}

// Sweep applies, every SweepEvery until ctx ends, what `session gc` does without flags: each
// session's own --idle-stop (stopped) and --ttl (removed), and sessions of test processes
// that have ended (removed). A server keeps running for weeks: sessions a caller forgot do not
// pile up.
func (s *Server) Sweep(ctx context.Context) {
	every := s.cfg.SweepEvery
	if every <= 0 {
		every = time.Minute
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
		acts, err := s.cfg.Client.GC(ctx, session.GCOptions{})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("sweep", "err", err)
			}
			continue
		}
		// The warm pools: members past their TTL made again, the ones starts took made anew.
		if ps, err := s.cfg.Client.Pools(ctx); err == nil {
			for _, p := range ps {
				if _, _, err := s.cfg.Client.FillPool(ctx, p.Name); err != nil && ctx.Err() == nil {
					s.log.Warn("sweep: fill pool", "pool", p.Name, "err", err)
				}
			}
		}
		for _, a := range acts {
			s.log.Info("sweep", "session", a.Session, "action", a.Action, "done", a.Done, "reason", a.Reason, "fix", a.Fix)
		}
	}
}

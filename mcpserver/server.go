package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/session"
)

// Config is what a Server needs. Client is required.
type Config struct {
	Client *session.Client
	// Spec holds the settings of the sessions the Server makes, as the flags of `session start`
	// give them (a zero field asks for nothing). Its Name is the default session's (""
	// makes one up per connection) and its Lang the default session's language ("": python,
	// or the language of the session Name when it exists). Given settings also hold for a
	// default session that exists: one that differs is refused, as `session start` does.
	Spec session.Spec
	// DefaultTTL is the TTL of the sessions the Server makes when Spec.TTL is zero (default
	// 24 h; a negative value: none).
	DefaultTTL time.Duration
	// Tools limits the tools served to these names (nil: all of ToolNames).
	Tools []string
	// Access decides which sessions the caller may reach (nil: all of them).
	Access Access
	// Logger receives the Server's and the SDK's logs (default: discarded).
	Logger *slog.Logger
	// Version is the server's version in the MCP handshake.
	Version string
	// OutputBudget caps the characters of stdout, of stderr and of the result that run_code
	// returns (default 20000 each); the middle is cut, the cut said.
	OutputBudget int
	// ProgressEvery is how often a running execution sends a progress notification (default
	// 1 s); SyncEvery how often the resource list is brought up to date with the sessions
	// (default 15 s; tools that make or remove sessions update it at once).
	ProgressEvery, SyncEvery time.Duration
	// OnDefault is told the name of a connection's default session when it is first used.
	OnDefault func(name string, created bool)
}

// Access decides which sessions a caller reaches: a token of `runtimectl serve` reaches the
// sessions it made (an admin token all of them).
type Access interface {
	// Owner is recorded as the owner of the sessions the caller makes.
	Owner() string
	// Reach returns nil when the caller may use the existing session name, else an error; a
	// session that is another's is ErrNotFound, exactly as a missing one. fresh reads the
	// owner afresh rather than from a cache.
	Reach(ctx context.Context, name string, fresh bool) error
	// Sees says whether the caller may see a session of a listing.
	Sees(session.Info) bool
}

// Limits is what an Access may also enforce (type-asserted): the caller's policy on the
// sessions it makes and the executions it runs at once, as `runtimectl serve` holds a token
// to its token file's limits on every route.
type Limits interface {
	// Admit checks a new session's spec against the caller's policy, and may set what the
	// spec leaves to a default that is over a ceiling; release is called once the start has
	// ended, made or not.
	Admit(ctx context.Context, spec *session.Spec) (release func(), err error)
	// Run counts an execution of the caller until release; past the caller's cap, an error.
	Run() (release func(), err error)
}

// Header is the HTTP request header (or the ?session= of the /mcp URL) that names an HTTP
// connection's default session.
const Header = "Runtimectl-Session"

// Server is an MCP server over the session library. It is safe for concurrent use by any
// number of MCP connections.
type Server struct {
	cfg Config
	log *slog.Logger
	mcp *mcp.Server

	mu      sync.Mutex
	handles map[string]*session.Session
	conns   map[*mcp.ServerSession]*conn

	res     *resources
	stop    context.CancelFunc
	stopped chan struct{}

	// detach is closed by Detach: executions stop being waited for and go on in their sessions.
	detach     chan struct{}
	detachOnce sync.Once
}

// conn is what the Server keeps of one MCP connection: its default session.
type conn struct {
	mu       sync.Mutex
	base     string          // the default session's name ("" until first use)
	baseLang string          // its language, once known
	told     map[string]bool // the default sessions OnDefault was told of
}

// New returns a Server; Close ends its background work.
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil {
		return nil, errors.New("mcpserver: a session client is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DefaultTTL == 0 {
		cfg.DefaultTTL = 24 * time.Hour
	}
	if cfg.OutputBudget <= 0 {
		cfg.OutputBudget = 20000
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = time.Second
	}
	if cfg.SyncEvery <= 0 {
		cfg.SyncEvery = 15 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Spec.Name != "" {
		if err := session.ValidateName(cfg.Spec.Name); err != nil {
			return nil, err
		}
	}
	tools, err := pickTools(cfg.Tools)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, handles: map[string]*session.Session{}, conns: map[*mcp.ServerSession]*conn{}, stopped: make(chan struct{}), detach: make(chan struct{})}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "runtimectl", Title: "runtimectl sessions", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Logger:       cfg.Logger,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true},
		},
	})
	for _, t := range tools {
		t.add(s)
	}
	s.res = newResources(s)
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() {
		defer close(s.stopped)
		s.res.loop(ctx)
	}()
	return s, nil
}

// instructions tell the model what the tools are for, once per connection.
const instructions = `runtimectl runs code in sessions: long-lived Python or bash interpreters in containers, whose variables, imports and functions persist between run_code calls, like a notebook's, and survive restarts (each session is snapshotted). Files live under /workspace. Without a session argument every tool uses this connection's session, created on first use; each result names it. Prefer small steps: define data once, then inspect it in later calls.`

// MCP returns the SDK's server, for transports (StreamableHTTPHandler, in-memory).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one MCP connection over t (mcp.StdioTransport for `runtimectl mcp`) until the
// client ends it or ctx ends. The sessions go on.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	err := s.mcp.Run(ctx, t)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Detach stops waiting for the executions that run, and for any started later: they go on in
// their sessions and land in their histories, and their calls end with a tool error. A server
// whose client went away (stdin at its end, SIGTERM) or that stops calls it, so that it ends at
// once rather than when the code does.
func (s *Server) Detach() { s.detachOnce.Do(func() { close(s.detach) }) }

// Close stops the Server's background work and closes its handles on sessions; the sessions
// go on running.
func (s *Server) Close() {
	s.stop()
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, h := range s.handles {
		h.Close()
		delete(s.handles, n)
	}
}

// connOf returns what the Server keeps of the connection of a request, dropping what it kept
// of connections that have ended.
func (s *Server) connOf(ss *mcp.ServerSession) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.conns[ss]
	if c == nil {
		c = &conn{}
		s.conns[ss] = c
		live := slices.Collect(s.mcp.Sessions())
		for k := range s.conns {
			if k != ss && !slices.Contains(live, k) {
				delete(s.conns, k)
			}
		}
	}
	return c
}

// newName makes up a session name.
func newName() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "mcp-" + hex.EncodeToString(b)
}

// reach checks that the caller may use the session name (nil Access: any).
func (s *Server) reach(ctx context.Context, name string, fresh bool) error {
	if err := session.ValidateName(name); err != nil {
		return err
	}
	if s.cfg.Access == nil {
		return nil
	}
	return s.cfg.Access.Reach(ctx, name, fresh)
}

// admit applies the caller's policy to a new session (see Limits).
func (s *Server) admit(ctx context.Context, spec *session.Spec) (func(), error) {
	if l, ok := s.cfg.Access.(Limits); ok {
		return l.Admit(ctx, spec)
	}
	return func() {}, nil
}

// run counts an execution of the caller (see Limits).
func (s *Server) run() (func(), error) {
	if l, ok := s.cfg.Access.(Limits); ok {
		return l.Run()
	}
	return func() {}, nil
}

func (s *Server) owner() string {
	if s.cfg.Access == nil {
		return ""
	}
	return s.cfg.Access.Owner()
}

// handle returns a handle on the session, kept between calls so that only the first pays for
// opening the stream to its agent. A stopped session is started (its state restored).
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
	return s.keep(h), nil
}

// keep caches h as the handle of its session, unless another call cached one first.
func (s *Server) keep(h *session.Session) *session.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.handles[h.Name()]; old != nil {
		if old != h {
			h.Close()
		}
		return old
	}
	s.handles[h.Name()] = h
	return h
}

// forget drops the handle on a session (after stop or rm, or when it is gone).
func (s *Server) forget(name string) {
	s.mu.Lock()
	h := s.handles[name]
	delete(s.handles, name)
	s.mu.Unlock()
	if h != nil {
		h.Close()
	}
}

// forgetAll drops every handle.
func (s *Server) forgetAll() {
	s.mu.Lock()
	hs := s.handles
	s.handles = map[string]*session.Session{}
	s.mu.Unlock()
	for _, h := range hs {
		h.Close()
	}
}

// named opens a session the call names: it must exist and be the caller's.
func (s *Server) named(ctx context.Context, name, lang string) (*session.Session, error) {
	if err := s.reach(ctx, name, false); err != nil {
		return nil, err
	}
	h, err := s.handle(ctx, name)
	if err != nil {
		return nil, err
	}
	if lang != "" && h.Lang() != lang {
		return nil, fmt.Errorf("%w: session %s is a %s session, not %s; name another session, or leave the session out to use this connection's %s session", session.ErrInvalid, name, h.Lang(), lang, lang)
	}
	return h, nil
}

// use returns the session a call asks for: the one named, else the connection's default for
// the language (created on first use).
func (s *Server) use(ctx context.Context, req *mcp.CallToolRequest, name, lang string) (*session.Session, error) {
	if name != "" {
		return s.named(ctx, name, lang)
	}
	return s.defaultSession(ctx, req, lang)
}

// defaultSession returns the connection's default session for lang ("": its own language),
// starting it, or creating it with the Server's settings.
func (s *Server) defaultSession(ctx context.Context, req *mcp.CallToolRequest, lang string) (*session.Session, error) {
	c := s.connOf(req.Session)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base == "" {
		c.base = s.cfg.Spec.Name
		if req.Extra != nil && req.Extra.Header != nil {
			if n := strings.TrimSpace(req.Extra.Header.Get(Header)); n != "" {
				if err := session.ValidateName(n); err != nil {
					return nil, fmt.Errorf("the %s header (or ?session=): %w", Header, err)
				}
				c.base = n
			}
		}
		if c.base == "" {
			c.base = newName()
		}
	}
	if c.baseLang == "" {
		c.baseLang = s.cfg.Spec.Lang
		if c.baseLang == "" {
			c.baseLang = "python"
			if st, err := s.cfg.Client.RecordedSettings(ctx, c.base); err == nil {
				c.baseLang = st.Lang
			} else if !errors.Is(err, session.ErrNotFound) {
				return nil, err
			}
		}
	}
	name, l := c.base, lang
	if l == "" {
		l = c.baseLang
	}
	if l != c.baseLang {
		name = c.base + "-" + l
	}
	s.mu.Lock()
	h := s.handles[name]
	s.mu.Unlock()
	if h != nil {
		return h, nil
	}
	h, info, err := s.ensure(ctx, name, l, s.cfg.Spec)
	if err != nil {
		return nil, err
	}
	if s.cfg.OnDefault != nil && !c.told[name] {
		if c.told == nil {
			c.told = map[string]bool{}
		}
		c.told[name] = true
		s.cfg.OnDefault(name, info.Created)
	}
	return h, nil
}

// ensure starts the session name, creating it with spec's settings (in lang, when given) when
// it does not exist; an existing one must be the caller's, and spec's settings (those given)
// must match its own.
func (s *Server) ensure(ctx context.Context, name, lang string, spec session.Spec) (*session.Session, session.StartInfo, error) {
	var none session.StartInfo
	spec.Name = name
	if lang != "" {
		spec.Lang = lang
	}
	taken := fmt.Errorf("%w: session name %q is taken; choose another", session.ErrInvalid, name)
	_, err := s.cfg.Client.RecordedSettings(ctx, name)
	switch {
	case err == nil:
		if err := s.reach(ctx, name, true); err != nil {
			if errors.Is(err, session.ErrNotFound) {
				return nil, none, taken
			}
			return nil, none, err
		}
	case errors.Is(err, session.ErrNotFound):
		if spec.TTL == 0 && s.cfg.DefaultTTL > 0 {
			spec.TTL = s.cfg.DefaultTTL
		}
		spec.Owner = s.owner()
		release, err := s.admit(ctx, &spec)
		if err != nil {
			return nil, none, err
		}
		defer release()
	default:
		return nil, none, err
	}
	h, info, err := s.cfg.Client.Start(ctx, spec)
	if err != nil {
		return nil, none, err
	}
	// Two callers that start one name at the same moment: only the one that made it owns it.
	if err := s.reach(ctx, name, true); err != nil {
		h.Close()
		return nil, none, taken
	}
	if info.Created {
		s.res.sync(ctx)
	}
	return s.keep(h), info, nil
}

// toolError is the tool error for err: the one line the CLI prints for it, with the remedies
// of a missing session in this server's words.
func toolError(err error) error {
	if errors.Is(err, session.ErrNotFound) {
		msg := oneLine(err.Error())
		if i := strings.Index(msg, ": "); i > 0 && strings.HasPrefix(msg, session.ErrNotFound.Error()) {
			msg = msg[:i]
		}
		return fmt.Errorf("%s: start it with start_session, or see list_sessions", msg)
	}
	return errors.New(oneLine(advice.CLI(err)))
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

package server

import (
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runtimectl/runtimectl/mcpserver"
	"github.com/runtimectl/runtimectl/session"
)

// MCPPath is where the server serves the Model Context Protocol (streamable HTTP).
const MCPPath = "/mcp"

// mcpEndpoint is a token's MCP server and its HTTP handler. Each token has its own, so an
// MCP session of one token is unknown to another's requests, whatever Mcp-Session-Id they send.
type mcpEndpoint struct {
	srv *mcpserver.Server
	h   http.Handler
}

// serveMCP serves /mcp behind the same tokens as every route: the token's MCP server reaches
// the sessions the token reaches here, and makes sessions it owns. ?session=NAME names the
// connection's default session (as the Runtimectl-Session header does).
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, tok Token) {
	if n := r.URL.Query().Get("session"); n != "" && r.Header.Get(mcpserver.Header) == "" {
		r.Header.Set(mcpserver.Header, n)
	}
	ep, err := s.mcpFor(tok)
	if err != nil {
		fail(w, err)
		return
	}
	if r.Method == http.MethodGet {
		// A client's stream of notifications never ends by itself: it ends when the server
		// begins to stop, so that the shutdown waits only for the calls running.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-s.draining:
				cancel()
			case <-ctx.Done():
			}
		}()
		r = r.WithContext(ctx)
	}
	ep.h.ServeHTTP(w, r)
}

func (s *Server) mcpFor(tok Token) (*mcpEndpoint, error) {
	key := tok.Name
	if tok.Admin {
		key += " admin"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ep := s.mcps[key]; ep != nil {
		return ep, nil
	}
	srv, err := mcpserver.New(mcpserver.Config{Client: s.cfg.Client, Access: tokenAccess{s, tok}, Logger: s.log, Version: s.cfg.Version})
	if err != nil {
		return nil, err
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv.MCP() }, &mcp.StreamableHTTPOptions{
		Logger:              s.log,
		SessionTimeout:      30 * time.Minute, // an MCP session left idle; its runtime sessions stay
		MaxRequestBodyBytes: s.cfg.MaxBody,
	})
	ep := &mcpEndpoint{srv: srv, h: h}
	s.mcps[key] = ep
	return ep, nil
}

// tokenAccess is what a token reaches through MCP: what it reaches through the other routes.
type tokenAccess struct {
	s   *Server
	tok Token
}

func (a tokenAccess) Owner() string { return a.tok.Name }

func (a tokenAccess) Reach(ctx context.Context, name string, fresh bool) error {
	return a.s.checkOwner(ctx, name, a.tok, fresh)
}

func (a tokenAccess) Sees(in session.Info) bool { return a.tok.Admin || in.Owner == a.tok.Name }

// Admit holds a session that /mcp makes to the token's policy, as POST /v1/sessions does: the
// token file's ceilings (memory, cpus, pids, disk), networks, images and hosts, its number of
// sessions (its starts one at a time), and secret headers for admin tokens only.
func (a tokenAccess) Admit(ctx context.Context, spec *session.Spec) (func(), error) {
	if err := a.s.admitSpec(a.tok, spec); err != nil {
		return nil, err
	}
	unlock := a.s.lockStarts(a.tok)
	if err := a.s.checkSessions(ctx, a.tok); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// Run counts an execution of run_code against the token's cap of executions at once.
func (a tokenAccess) Run() (func(), error) {
	if !a.s.acquire(a.tok) {
		return nil, limitf("%d executions of this token run already (the cap, %s); wait for one to end", a.s.maxExecs(a.tok), a.s.execsWhere(a.tok))
	}
	return func() { a.s.release(a.tok) }, nil
}

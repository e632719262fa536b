package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
	"github.com/runtimectl/runtimectl/snapshot"
)

// toolDef is one tool: its name and what adds it to a Server.
type toolDef struct {
	name string
	add  func(s *Server)
}

// tools lists every tool, in the order they are listed to clients.
var tools = []toolDef{
	{"run_code", addRunCode},
	{"start_session", addStartSession},
	{"list_sessions", addListSessions},
	{"stop_session", addStopSession},
	{"remove_session", addRemoveSession},
	{"write_file", addWriteFile},
	{"read_file", addReadFile},
	{"list_files", addListFiles},
	{"install_packages", addInstallPackages},
	{"list_variables", addListVariables},
	{"session_context", addSessionContext},
	{"list_snapshots", addListSnapshots},
	{"restore_snapshot", addRestoreSnapshot},
	{"fork_session", addForkSession},
}

// ToolNames returns the names of every tool a Server can serve.
func ToolNames() []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	return names
}

// pickTools returns the tools named (nil: all), refusing an unknown name.
func pickTools(names []string) ([]toolDef, error) {
	if names == nil {
		return tools, nil
	}
	var out []toolDef
	for _, n := range names {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(tools, func(t toolDef) bool { return t.name == n })
		if i < 0 {
			return nil, fmt.Errorf("%w tool %q: the tools are %s", session.ErrInvalid, n, strings.Join(ToolNames(), ", "))
		}
		if !slices.ContainsFunc(out, func(t toolDef) bool { return t.name == n }) {
			out = append(out, tools[i])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no tool allowed; name at least one of %s", session.ErrInvalid, strings.Join(ToolNames(), ", "))
	}
	return out, nil
}

// addTool adds a typed tool whose errors become tool errors in the CLI's words.
func addTool[In, Out any](s *Server, t *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error)) {
	mcp.AddTool(s.mcp, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		res, out, err := h(ctx, req, in)
		if err != nil {
			if errors.Is(err, session.ErrNotFound) {
				s.forgetAll() // a session removed behind the Server's back: its handle is stale
			}
			var zero Out
			return nil, zero, toolError(err)
		}
		return res, out, nil
	})
}

// hints are a tool's annotations. openWorld says it reaches beyond the session (a package
// index, a network).
func hints(title string, readOnly, destructive, idempotent, openWorld bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: readOnly, DestructiveHint: &destructive, IdempotentHint: idempotent, OpenWorldHint: &openWorld}
}

// schema is the input schema inferred from T, with the languages as the values of a
// "language" property.
func schema[T any]() *jsonschema.Schema {
	sc, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(T), err))
	}
	if p := sc.Properties["language"]; p != nil {
		for _, n := range lang.Names() {
			p.Enum = append(p.Enum, n)
		}
	}
	return sc
}

// inSession names the session a tool works on.
type inSession struct {
	Session string `json:"session,omitempty" jsonschema:"the session to use (see list_sessions); leave it out for this connection's session, created on first use"`
}

// SessionInfo is a session that a tool started, stopped or made.
type SessionInfo struct {
	Name       string `json:"name"`
	Lang       string `json:"lang"`
	State      string `json:"state" jsonschema:"running, or stopped (its state kept)"`
	Executions int64  `json:"executions" jsonschema:"executions so far (-1: unknown)"`
	New        bool   `json:"new" jsonschema:"the call created the session"`
	Message    string `json:"message,omitempty" jsonschema:"what state a stopped session came back with"`
}

func running(ctx context.Context, h *session.Session, created bool) SessionInfo {
	in := SessionInfo{Name: h.Name(), Lang: h.Lang(), State: "running", Executions: -1, New: created}
	if st, err := h.Status(ctx); err == nil {
		in.Executions = st.NextSeq - 1
	}
	return in
}

type startIn struct {
	Name     string `json:"name,omitempty" jsonschema:"a name for the session: 1 to 63 characters of a-z, 0-9, '-', '_' and '.'; leave it out to have one made up"`
	Language string `json:"language,omitempty" jsonschema:"the interpreter (default python); a session has one language for its life"`
}

func addStartSession(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "start_session",
		Description: `Start a session: a new, empty interpreter with its own /workspace, or a stopped one again with its variables restored. Returns its name: pass it as "session" to the other tools. You seldom need this, since every tool uses this connection's session when you name none; start another to keep a separate state, or for another language.`,
		InputSchema: schema[startIn](),
		Annotations: hints("Start a session", false, false, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in startIn) (*mcp.CallToolResult, SessionInfo, error) {
		name := in.Name
		if name == "" {
			name = newName()
		}
		if err := session.ValidateName(name); err != nil {
			return nil, SessionInfo{}, err
		}
		// The Server's settings make a new session; an existing one is started as it is.
		spec := s.cfg.Spec
		if _, err := s.cfg.Client.RecordedSettings(ctx, name); err == nil {
			spec = session.Spec{}
		}
		h, started, err := s.ensure(ctx, name, in.Language, spec)
		if err != nil {
			return nil, SessionInfo{}, err
		}
		info := running(ctx, h, started.Created)
		if started.Started || started.Recreate {
			info.Message = session.DescribeRestore(name, h.Restored())
		}
		return nil, info, nil
	})
}

type listSessionsOut struct {
	Sessions []session.Info `json:"sessions"`
}

func addListSessions(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "list_sessions",
		Description: `List the sessions you can use: name, language, state ("running"; "exited" or "stopped": its state is kept and any call on it starts it again), image, when it was made, executions so far.`,
		InputSchema: schema[struct{}](),
		Annotations: hints("List sessions", true, false, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, listSessionsOut, error) {
		list, err := s.visible(ctx)
		return nil, listSessionsOut{Sessions: list}, err
	})
}

// visible lists the sessions the caller sees.
func (s *Server) visible(ctx context.Context) ([]session.Info, error) {
	list, err := s.cfg.Client.List(ctx)
	if err != nil {
		return nil, err
	}
	out := []session.Info{}
	for _, in := range list {
		if s.cfg.Access == nil || s.cfg.Access.Sees(in) {
			out = append(out, in)
		}
	}
	return out, nil
}

func addStopSession(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "stop_session",
		Description: `Stop a session to free its memory: its state is snapshotted first and kept with its files, and the next call on it starts it again as it was. Nothing is lost.`,
		InputSchema: schema[inSession](),
		Annotations: hints("Stop a session", false, false, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in inSession) (*mcp.CallToolResult, SessionInfo, error) {
		name, err := s.target(ctx, req, in.Session)
		if err != nil {
			return nil, SessionInfo{}, err
		}
		if err := s.reach(ctx, name, true); err != nil {
			return nil, SessionInfo{}, err
		}
		s.forget(name)
		if err := s.cfg.Client.Stop(ctx, name); err != nil {
			return nil, SessionInfo{}, err
		}
		info := SessionInfo{Name: name, State: "stopped", Executions: -1}
		if st, err := s.cfg.Client.RecordedSettings(ctx, name); err == nil {
			info.Lang = st.Lang
		}
		return nil, info, nil
	})
}

// target names the session a call asks for without starting it: the one named, else the
// connection's default (created on first use).
func (s *Server) target(ctx context.Context, req *mcp.CallToolRequest, name string) (string, error) {
	if name != "" {
		return name, s.reach(ctx, name, false)
	}
	h, err := s.defaultSession(ctx, req, "")
	if err != nil {
		return "", err
	}
	return h.Name(), nil
}

type removeIn struct {
	Session string `json:"session" jsonschema:"the session to remove"`
}

type removeOut struct {
	Removed string `json:"removed"`
}

func addRemoveSession(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "remove_session",
		Description: `Remove a session for good, running or not: its interpreter and variables, its files in /workspace, its history and its snapshots. This cannot be undone; stop_session keeps everything instead.`,
		InputSchema: schema[removeIn](),
		Annotations: hints("Remove a session", false, true, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in removeIn) (*mcp.CallToolResult, removeOut, error) {
		if err := s.reach(ctx, in.Session, true); err != nil {
			return nil, removeOut{}, err
		}
		s.forget(in.Session)
		if err := s.cfg.Client.Remove(ctx, in.Session, true); err != nil {
			return nil, removeOut{}, err
		}
		s.res.sync(ctx)
		return nil, removeOut{Removed: in.Session}, nil
	})
}

type installIn struct {
	Packages []string `json:"packages" jsonschema:"pip requirement specifiers: names, optionally with versions (\"requests\", \"httpx>=0.27\")"`
	inSession
}

type installOut struct {
	Session string `json:"session"`
	Output  string `json:"output" jsonschema:"the end of pip's output"`
}

func addInstallPackages(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "install_packages",
		Description: `Install Python packages with pip into a Python session. They are kept on the session's volume, importable at once without a restart, and after restarts. The session itself has no network: pip runs beside it, reaching the package index and nothing else. numpy, pandas and matplotlib are there already.`,
		InputSchema: schema[installIn](),
		Annotations: hints("Install packages", false, false, true, true),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in installIn) (*mcp.CallToolResult, installOut, error) {
		name, err := s.target(ctx, req, in.Session)
		if err != nil {
			return nil, installOut{}, err
		}
		if err := s.reach(ctx, name, true); err != nil {
			return nil, installOut{}, err
		}
		tail := &session.Tail{Max: 4000}
		err = s.cfg.Client.Install(ctx, name, session.InstallOptions{Packages: in.Packages, Output: tail})
		return nil, installOut{Session: name, Output: tail.String()}, err
	})
}

type varsOut struct {
	Session string `json:"session"`
	execproto.VarsReply
}

func addListVariables(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "list_variables",
		Description: `List the session's variables (name, type, shape or length, size, a short preview) and its imported modules: what you can use in the next run_code without defining it again.`,
		InputSchema: schema[inSession](),
		Annotations: hints("List variables", true, false, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in inSession) (*mcp.CallToolResult, varsOut, error) {
		h, err := s.use(ctx, req, in.Session, "")
		if err != nil {
			return nil, varsOut{}, err
		}
		v, err := h.Vars(ctx)
		return nil, varsOut{Session: h.Name(), VarsReply: v}, err
	})
}

type contextIn struct {
	inSession
	MaxChars int `json:"max_chars,omitempty" jsonschema:"the most characters of the summary's text (default 4000)"`
}

func addSessionContext(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "session_context",
		Description: `A compact summary of a session for your next step: its recent executions and their errors, its variables and modules, its newest files and its last output. Use it when you come back to a session (after a restart, or in a new conversation) instead of running code to find out what is there.`,
		InputSchema: schema[contextIn](),
		Annotations: hints("Summarise a session", true, false, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in contextIn) (*mcp.CallToolResult, *session.Summary, error) {
		if in.MaxChars < 0 {
			return nil, nil, fmt.Errorf("%w max_chars %d: give a positive number (or leave it out)", session.ErrInvalid, in.MaxChars)
		}
		if in.MaxChars == 0 {
			in.MaxChars = 4000
		}
		h, err := s.use(ctx, req, in.Session, "")
		if err != nil {
			return nil, nil, err
		}
		sum, err := h.Context(ctx, session.ContextOptions{})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: sum.Text(in.MaxChars)}}}, sum, nil
	})
}

type snapshotsOut struct {
	Session   string              `json:"session"`
	Snapshots []snapshot.Manifest `json:"snapshots"`
}

func addListSnapshots(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "list_snapshots",
		Description: `List a session's snapshots, oldest first: each is its interpreter state after an execution, with its id (for restore_snapshot and fork_session), the execution it follows, its time and size, the variables kept and those skipped with the reason.`,
		InputSchema: schema[inSession](),
		Annotations: hints("List snapshots", true, false, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in inSession) (*mcp.CallToolResult, snapshotsOut, error) {
		name, err := s.target(ctx, req, in.Session)
		if err != nil {
			return nil, snapshotsOut{}, err
		}
		list, err := s.cfg.Client.Snapshots(ctx, name)
		if list == nil {
			list = []snapshot.Manifest{}
		}
		return nil, snapshotsOut{Session: name, Snapshots: list}, err
	})
}

type restoreIn struct {
	Snapshot string `json:"snapshot" jsonschema:"the snapshot's id, from list_snapshots"`
	inSession
}

type restoreOut struct {
	Session string `json:"session"`
	session.RestoreInfo
}

func addRestoreSnapshot(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "restore_snapshot",
		Description: `Put a session's interpreter back in the state of one of its snapshots (see list_snapshots), to undo what later executions did to its variables: names made after the snapshot are gone. Files in /workspace are not touched.`,
		InputSchema: schema[restoreIn](),
		Annotations: hints("Restore a snapshot", false, true, true, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in restoreIn) (*mcp.CallToolResult, restoreOut, error) {
		if in.Snapshot == "" {
			return nil, restoreOut{}, fmt.Errorf("%w: name the snapshot; list_snapshots gives the ids", session.ErrInvalid)
		}
		h, err := s.use(ctx, req, in.Session, "")
		if err != nil {
			return nil, restoreOut{}, err
		}
		info, err := h.RestoreSnapshot(ctx, in.Snapshot)
		return nil, restoreOut{Session: h.Name(), RestoreInfo: info}, err
	})
}

type forkIn struct {
	Name string `json:"name" jsonschema:"the new session's name: 1 to 63 characters of a-z, 0-9, '-', '_' and '.'"`
	At   string `json:"at,omitempty" jsonschema:"the snapshot to start from (see list_snapshots); leave it out for the latest"`
	inSession
}

func addForkSession(s *Server) {
	addTool(s, &mcp.Tool{
		Name:        "fork_session",
		Description: `Make a new session from a copy of a session's files and interpreter state (its latest snapshot, or "at"), to try something without touching the original. The two go on independently; the original is not stopped.`,
		InputSchema: schema[forkIn](),
		Annotations: hints("Fork a session", false, false, false, false),
	}, func(ctx context.Context, req *mcp.CallToolRequest, in forkIn) (*mcp.CallToolResult, SessionInfo, error) {
		if err := session.ValidateName(in.Name); err != nil {
			return nil, SessionInfo{}, err
		}
		src, err := s.target(ctx, req, in.Session)
		if err != nil {
			return nil, SessionInfo{}, err
		}
		if err := s.reach(ctx, src, true); err != nil {
			return nil, SessionInfo{}, err
		}
		release, err := s.admit(ctx, &session.Spec{Name: in.Name, Owner: s.owner()})
		if err != nil {
			return nil, SessionInfo{}, err
		}
		defer release()
		h, err := s.cfg.Client.Fork(ctx, src, in.Name, in.At)
		if err != nil {
			return nil, SessionInfo{}, err
		}
		h = s.keep(h)
		s.res.sync(ctx)
		return nil, running(ctx, h, true), nil
	})
}

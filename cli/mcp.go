package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/mcpserver"
	"github.com/runtimectl/runtimectl/session"
)

// MCPOptions are the flags of `runtimectl mcp`.
type MCPOptions struct {
	F          *Factory
	Spec       session.Spec
	AllowTools []string
}

func newCmdMCP(f *Factory) *cobra.Command {
	o := &MCPOptions{F: f}
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve sessions as tools to an MCP client (Claude Desktop, Claude Code, Cursor, agent SDKs) over stdio",
		Long: `Serve runtimectl's sessions over the Model Context Protocol on standard input and output, the way
desktop clients start a server: add "runtimectl mcp" to the client's mcpServers. The tools:
run_code, start_session, list_sessions, stop_session, remove_session, write_file, read_file,
list_files, install_packages, list_variables, session_context, list_snapshots, restore_snapshot,
fork_session; the resources: each session's history as a notebook
(runtimectl://sessions/NAME/history.ipynb) and its rich outputs.

A tool call that names no session uses this server's session: --session NAME, else one named
mcp-XXXXXX (said on stderr), created on first use with the session flags below (a TTL of 24h
unless --ttl) and kept when the server ends. "runtimectl mcp --session NAME" reconnects to it
with its variables and files. A default session in another language than its own is NAME-LANG.
The session flags hold for the sessions the server makes; a model chooses only a name and a
language. --allow-tools serves only the tools named (an operator may leave out
remove_session or install_packages).

Logs go to standard error; standard output carries the protocol only. "runtimectl serve" serves
the same tools over streamable HTTP at /mcp.`,
		Example: `  runtimectl mcp
  runtimectl mcp --session analysis --memory 4g
  runtimectl mcp --lang bash --allow-tools run_code,read_file,write_file,list_files
  claude mcp add runtimectl -- runtimectl mcp --session analysis     # Claude Code`,
		Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Spec.Name != "" {
				if err := validName(o.Spec.Name); err != nil {
					return err
				}
			}
			for _, t := range o.AllowTools {
				if !slices.Contains(mcpserver.ToolNames(), strings.TrimSpace(t)) {
					return usagef("--allow-tools %s: no such tool; the tools are %s", t, strings.Join(mcpserver.ToolNames(), ","))
				}
			}
			if c.Flags().Changed("allow-tools") && len(o.AllowTools) == 0 {
				return usagef("--allow-tools names no tool; give some of %s", strings.Join(mcpserver.ToolNames(), ","))
			}
			sessionFlagsGiven(c.Flags(), &o.Spec)
			return mcpRun(c.Context(), o)
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.Spec.Name, "session", "", "the default session's name: reconnects to it, or creates it on first use (default: mcp-XXXXXX, made up)")
	fl.StringSliceVar(&o.AllowTools, "allow-tools", nil, "serve only these tools, comma-separated (default: all)")
	addSessionFlags(fl, &o.Spec)
	return c
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// endReader calls end once when its reader ends (the client closed the server's stdin).
type endReader struct {
	r   io.Reader
	end func()
}

func (e endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.end()
	}
	return n, err
}

func mcpRun(ctx context.Context, o *MCPOptions) error {
	errw := o.F.IO.Err
	o.F.Serving = true // long-lived: the client refills the warm pools it takes from itself
	cl, err := o.F.Client()
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if o.F.Verbose > 0 {
		level = slog.LevelDebug
	}
	srv, err := mcpserver.New(mcpserver.Config{
		Client: cl, Spec: o.Spec, Tools: o.AllowTools, Version: Version,
		Logger: slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: level})),
		OnDefault: func(name string, created bool) {
			verb := "reconnected to"
			if created {
				verb = "created"
			}
			fmt.Fprintf(errw, "runtimectl: mcp: %s this server's session %s; `runtimectl mcp --session %s` reconnects to it\n", verb, name, name)
		},
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	// A client that goes away (its end of stdin closed, or SIGTERM) does not wait for the code
	// that runs: the executions go on in their sessions and land in their histories.
	go func() {
		<-ctx.Done()
		srv.Detach()
	}()
	in := endReader{o.F.IO.In, srv.Detach}
	return srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{o.F.IO.Out}})
}

// Package mcpserver serves runtimectl's sessions to any Model Context Protocol client (Claude
// Desktop and Claude Code, Cursor, the OpenAI Agents SDK, LangChain's MCP adapters...): a
// Server holds tools (run_code, start_session, list_sessions, stop_session, remove_session,
// write_file, read_file, list_files, install_packages, list_variables, session_context,
// list_snapshots, restore_snapshot, fork_session) and resources (each session's history as an
// ipynb, and its rich outputs), over the official Go SDK, github.com/modelcontextprotocol/go-sdk,
// which speaks the protocol: this package writes none of it. `runtimectl mcp` runs a Server over
// stdio; `runtimectl serve` mounts one per token at /mcp over streamable HTTP.
//
// Choices, for a model and for its operator:
//   - A connection has a default session: a tool call that names none uses it, created on first
//     use with the Server's settings (Config.Spec) and kept after the connection ends, with a
//     TTL (Config.DefaultTTL; `session gc` and `runtimectl serve` remove it once idle that
//     long). Its name is Config.Spec.Name (`runtimectl mcp --session NAME`), else the
//     Runtimectl-Session header or ?session= of an HTTP connection, else mcp-XXXXXX; a default
//     in another language than its own is NAME-LANG. Every result names the session it used, so
//     a restarted client reconnects to the same state by that name.
//   - The settings of the sessions the Server makes (limits, network, disk, TTL) are the
//     operator's (the command's flags), never the model's: start_session takes a name and a
//     language only.
//   - A tool that fails is a tool error (isError) whose text is the one-line message the CLI
//     prints for the same failure; an execution whose code raised, timed out or was interrupted
//     is a result, not an error (its status says which).
//   - run_code sends progress notifications with the output so far while the code runs (for a
//     client that asked with a progress token), and a client's notifications/cancelled
//     interrupts the code, as Ctrl-C does: the session and its state are kept. A server that
//     stops (Detach: its client went away, or serve ends) stops waiting for the code instead,
//     which goes on in its session and lands in its history.
//   - A result's displays (display(), figures, the final value's rich forms) are its content in
//     order, each as the one content a model reads best (display.go); a figure that the driver
//     also saved as a file is sent once.
//   - Output in a result is cut to a budget (Config.OutputBudget characters per stream, 20000
//     by default), from the middle, the cut said in the text; the whole output stays in the
//     session's history.
//   - An Access decides which sessions a caller may reach (HTTP tokens); one that may not reach
//     a session gets "no session", exactly as for a missing one.
//
// It imports session, history, snapshot, execproto, lang, internal/advice and the SDK; never the
// Docker SDK, cobra, or server (server imports this package).
package mcpserver

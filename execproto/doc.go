// Package execproto is the wire protocol between the runtimectl controller and the agent that
// runs inside every session container.
//
// A connection is a byte stream (in production: the stdin/stdout of `runtime-agent connect`,
// reached through a Docker exec, which joins the agent on a unix socket; in tests: net.Pipe).
// It carries frames: a 9-byte header (payload length as big-endian uint32, one type byte, the
// request id as big-endian uint32) and the payload. User output only ever travels inside Stdout
// and Stderr payloads, so whatever bytes code prints can never be taken for a frame.
//
// The agent speaks first: a Hello frame that states the protocol version. Every request the
// client sends carries an id of its choosing; every event the agent sends for it carries the same
// id and ends with exactly one final frame (Result, Reply or Error). Requests from one connection
// may be in flight at once; the agent runs executions one at a time in arrival order.
//
// This package imports the standard library and the project's contract package (the statuses
// and state vocabulary it shares with the history and the CLI) only: no Docker, no cobra.
package execproto

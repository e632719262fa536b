// Package server is `runtimectl serve`: an HTTP API over the session library, for agents that
// are not written in Go (the Python client in clients/python) and for agents on another machine.
//
// The server keeps no state of its own: sessions, their settings (with the name of the token
// that made each one) and their histories live in the engine and on the sessions' volumes, so a
// restart of the server loses nothing, and an execution whose client goes away (or whose server
// stops) runs to its end in the session and lands in its history.
//
// Requests carry a bearer token from a token file (`TOKEN NAME [admin]` per line). A session
// belongs to the token name that created it; another token gets 404 for it, as for a session
// that does not exist; an admin token sees every session. Bodies and responses are JSON with the
// field names of `runtimectl ... --json`; an execution streams newline-delimited JSON events when
// the request accepts application/x-ndjson. The routes are documented in openapi.json (served at
// /openapi.json), and a test keeps the two the same. /mcp serves the Model Context Protocol
// (streamable HTTP, package mcpserver) behind the same tokens: each token has its own MCP
// server, which reaches the sessions the token reaches here.
//
// This package imports the session library and engine's neutral types and errors (and through
// them nothing of an engine's SDK: the program that runs the server hands the library its
// engine), mcpserver and the MCP SDK, net/http and Prometheus' client library for /metrics.
package server

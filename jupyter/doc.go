// Package jupyter is a Jupyter kernel's side of the Jupyter messaging protocol, version 5.3,
// over ZeroMQ (github.com/go-zeromq/zmq4, pure Go): the connection file, the wire framing of a
// message (identities, the "<IDS|MSG>" delimiter, the HMAC signature, header, parent header,
// metadata, content, buffers), and a Kernel that binds the five sockets a connection file names
// and answers on them:
//
//   - shell (ROUTER): kernel_info, execute, complete, inspect, is_complete, history,
//     comm_info, comm_open/comm_msg/comm_close (no comm targets: a comm_open is closed again);
//     requests are served one at a time, in order, as ipykernel does;
//   - control (ROUTER): shutdown, interrupt, kernel_info; served while an execution runs;
//   - iopub (PUB): status busy/idle around every request (parented to it), execute_input,
//     stream, display_data, update_display_data, execute_result, error, clear_output;
//   - stdin (ROUTER): bound, never asked (input() is not supported: sessions have no stdin);
//   - heartbeat (REP): echoes every message.
//
// What the language does is a Backend's: the kernel knows the protocol and nothing about
// runtimectl's sessions (cli/kernel.go is the Backend over package session). Choices a client
// can see:
//   - An execution's count is the Backend's (runtimectl's: the session's seq).
//   - A shutdown_request gets its reply and no status messages: a client that reads iopub until
//     an idle status after a restart must not stop at the old kernel's idle.
//   - Messages whose signature does not verify are dropped and logged (the spec says so);
//     unknown message types are logged and get no reply, as ipykernel does.
//
// It imports no runtimectl package: plain Go, the ZeroMQ library, and the standard library.
package jupyter

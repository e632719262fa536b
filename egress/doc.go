// Package egress is what runtimectl's egress control shares between its three parties: the
// controller (session, cli, server), the agent inside a session's container, and the session's
// egress proxy (package egress/proxy, the runtime-egress binary). A session started with
// `--allow-host` reaches the hosts an operator allows by name and nothing else, and with
// `--secret-header` its requests to some of them carry headers whose values the session never
// holds.
//
// What lives here:
//
//   - rules.go: the allowlist (exact names, `*.suffix` wildcards, literal addresses, optional
//     ports) and the secret-header specs, parsed, checked and matched.
//   - config.go: the proxy's configuration document (the controller writes it, the proxy reads
//     it) and the ports of the session's side.
//   - relay.go: the session's side, run by its agent: listeners on the session's loopback (its
//     only network) for the proxy port, DNS and the allowed names' ports, each connection
//     relayed to the proxy with a one-line preamble over a stream (a unix socket on a volume that
//     only the agent and the proxy's container mount on Docker; TCP on Kubernetes).
//   - log.go: the proxy's refusal log lines (JSON), which the controller reads back for
//     `session logs` and /metrics, and the reasons it counts them by.
//
// Nothing here speaks HTTP or TLS: the agent imports this package and stays small (the proxy's
// code is in egress/proxy, which only runtime-egress links). Standard library only, with
// package contract.
package egress

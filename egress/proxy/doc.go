// Package proxy is a session's egress proxy: the runtime-egress binary, run by runtimectl in a
// container (a pod) of its own beside each session started with `--allow-host`, and reached
// only through the session's relay (package egress).
//
// What lives here:
//
//   - proxy.go: the Proxy, the preamble of relayed connections, and the HTTP server that every
//     HTTP connection is handed to.
//   - http.go: plain HTTP, forwarded by the request's host (absolute-form through the proxy
//     port, or the Host of a request that came to an allowed name's port) with net/http's server
//     and httputil.ReverseProxy, which adds the secret headers; refusals as status 403 with the
//     message as the reason phrase and the body.
//   - tunnel.go: TLS, by the CONNECT target checked against the server name (SNI) of the
//     ClientHello that follows, read with crypto/tls's own parser, or, on an allowed name's port,
//     by the server name alone; then spliced byte for byte, or, for a secret host only,
//     terminated with a certificate of the session's CA and forwarded as HTTP.
//   - dial.go: names resolved by the proxy (Config.Hosts first, for tests and split horizons,
//     then the system's resolver) and every address checked before it is dialled: loopback,
//     link-local, unspecified and multicast addresses, the proxy's own addresses and gateways
//     (the engine's host) and the controller's Config.Deny are refused unless the allowlist
//     names the address itself.
//   - dns.go: the session's only resolver. An allowed name is answered with the relay's loopback
//     address, so that code which ignores HTTP(S)_PROXY comes to the proxy anyway; every other
//     name is NXDOMAIN and is never asked of another resolver (no DNS tunnel).
//   - ca.go: the per-session CA, name-constrained to the secret hosts, and its leaf certificates.
//   - redact.go: secret values taken out of the responses of the hosts that get them.
//   - events.go: refusals, counted by reason and logged as rate-limited JSON lines carrying the
//     counts; the words of every refusal, which name the host and the flag.
//
// Why net/http and httputil rather than a proxy program: the proxy decides by name at three
// points (DNS, CONNECT with its SNI, the Host of plain HTTP), adds headers for some hosts only,
// logs and counts in runtimectl's terms, and runs from a static binary where no registry can be
// reached. Squid and tinyproxy (Debian's) check CONNECT targets but not that the SNI agrees with
// them, and answer no DNS; the standard library parses HTTP and TLS for us, so the code here is
// policy, not protocol.
//
// It imports the standard library, golang.org/x/net/dns/dnsmessage, golang.org/x/time/rate and
// package egress.
package proxy

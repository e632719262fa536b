// Package fakenet is a fake internet for runtimectl's egress tests: a Docker network of its
// own whose hosts are containers of the Python session image serving HTTP (80, 8080) and HTTPS
// (443, certificates of a CA of its own) and a PEP 503 package index, each known by names that
// only the egress proxy's resolver knows (Config.Hosts), with one host known by two names. It
// creates nothing outside this machine: the network's traffic stays on the engine's host.
//
// It imports testcontainers-go and the Docker SDK (through it) for tests only, and
// egress/proxy for its CA.
package fakenet

// Package session is the Go library of runtimectl: start a session (a long-lived container
// running one interpreter with a workspace volume), execute code in it with its output
// streamed, and stop, remove, list, snapshot and restore sessions. The commands of
// cmd/runtimectl are thin layers over it.
//
//	e, _ := docker.New("") // DOCKER_HOST, or the local socket
//	c := session.NewWithEngine(e)
//	s, _, _ := c.Start(ctx, session.Spec{Name: "demo", Lang: "python"})
//	res, _ := s.Exec(ctx, "x = 40 + 2\nx", session.ExecOptions{})
//	fmt.Println(*res.Result) // 42
//
// Other engines plug in below the same API through package engine (NewWithEngine; kube.Backend
// is the Kubernetes engine).
//
// A Session keeps one private stream to the session's agent open (on Docker, an exec of the relay),
// so only its first request pays for opening it. It is safe for concurrent use: requests are
// multiplexed over the stream and run one at a time in arrival order. If the container dies,
// the next call starts it again and the agent restores the latest snapshot.
//
// This package imports engine (the seam: its types, errors and interfaces), contract, lang,
// execproto, history, snapshot and egress (allowlists, secret headers, the proxies' CA); never an engine (docker, kube, containers, volumes, images)
// nor an engine's SDK (Docker's, client-go): the engines import engine, and a program hands
// one to NewWithEngine.
package session

// Package session is the Go library of runtimectl: start a session (a long-lived container
// running one interpreter with a workspace volume), execute code in it with its output
// streamed, and stop, remove, list, snapshot and restore sessions. The commands of
// cmd/runtimectl are thin layers over it.
//
//	c, _ := session.New()
//	s, _, _ := c.Start(ctx, session.Spec{Name: "demo", Lang: "python"})
//	res, _ := s.Exec(ctx, "x = 40 + 2\nx", session.ExecOptions{})
//	fmt.Println(*res.Result) // 42
//
// Other engines plug in below the same API through package engine (NewWithEngine; kube.Backend
// is the Kubernetes engine).
//
// A Session keeps one private stream to the session's agent open (a docker exec of the relay),
// so only its first request pays for opening it. It is safe for concurrent use: requests are
// multiplexed over the stream and run one at a time in arrival order. If the container dies,
// the next call starts it again and the agent restores the latest snapshot.
//
// This package imports containers, images and volumes (which hide the Docker SDK), execproto,
// history and snapshot; never the Docker SDK itself (nor client-go: kube imports session).
package session

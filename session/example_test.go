package session_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/session"
)

// The package's example: a session whose variables live between executions. (Examples here
// are compiled by go test, not run: they need a Docker engine.)
func Example() {
	ctx := context.Background()
	de, err := docker.New("")
	if err != nil {
		panic(err)
	}
	c := session.NewWithEngine(de)
	defer c.Close()
	s, _, err := c.Start(ctx, session.Spec{Name: "demo", Lang: "python"})
	if err != nil {
		panic(err)
	}
	defer s.Close() // the connection only: the session goes on
	if _, err := s.Exec(ctx, "x = 40 + 2", session.ExecOptions{}); err != nil {
		panic(err)
	}
	res, err := s.Exec(ctx, "x", session.ExecOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(*res.Result)
}

// Output streamed as it is produced, a timeout, and the result's status.
func ExampleSession_Exec() {
	ctx := context.Background()
	de, _ := docker.New("")
	c := session.NewWithEngine(de)
	defer c.Close()
	s, _, err := c.Open(ctx, "demo")
	if err != nil {
		panic(err)
	}
	defer s.Close()
	res, err := s.Exec(ctx, "for i in range(3): print(i)", session.ExecOptions{
		Timeout: 30 * time.Second,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
	})
	if err != nil {
		panic(err) // the engine or the session could not be reached
	}
	if res.Status != "ok" {
		fmt.Println(res.Status, res.Message)
	}
}

// A test's session: Terminate removes it with its volumes, whatever happened.
func ExampleSession_Terminate() {
	ctx := context.Background()
	de, _ := docker.New("")
	c := session.NewWithEngine(de)
	defer c.Close()
	s, _, err := c.Start(ctx, session.Spec{Name: "test-scratch", Lang: "bash", TTL: time.Hour})
	if err != nil {
		panic(err)
	}
	defer s.Terminate(context.Background())
	_, _ = s.Exec(ctx, "echo ready", session.ExecOptions{Stdout: os.Stdout})
}

// Packages at runtime, without giving the session a network.
func ExampleClient_Install() {
	ctx := context.Background()
	de, _ := docker.New("")
	c := session.NewWithEngine(de)
	defer c.Close()
	if err := c.Install(ctx, "demo", session.InstallOptions{Packages: []string{"tabulate"}, Output: os.Stderr}); err != nil {
		panic(err)
	}
}

// A copy of a session at its latest snapshot, to try something without touching the original.
func ExampleClient_Fork() {
	ctx := context.Background()
	de, _ := docker.New("")
	c := session.NewWithEngine(de)
	defer c.Close()
	f, err := c.Fork(ctx, "demo", "demo-try", "")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	_, _ = f.Exec(ctx, "x = -1", session.ExecOptions{})
}

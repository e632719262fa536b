// Command runtime-agent is the supervisor inside every runtimectl session container.
//
//	runtime-agent serve --lang python   the container's main process (under tini)
//	runtime-agent connect               a client's private stream, started by docker exec
//	runtime-agent version
//
// The session's settings come from the RUNTIMECTL_SETTINGS environment variable (JSON), set by
// the controller when it creates the container.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/runtimectl/runtimectl/agent"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/lang"
)

// version is set at build time by the Makefile (-ldflags -X main.version=...).
var version = "dev"

const socket = "/run/runtimectl/agent.sock"

// settings are the fields of RUNTIMECTL_SETTINGS that the agent reads.
type settings struct {
	Session        string `json:"session"`
	Snapshot       string `json:"snapshot"`
	KeepSnapshots  int    `json:"keep_snapshots"`
	MaxOutput      int64  `json:"max_output"`
	GraceMs        int64  `json:"grace_ms"`
	SnapshotBudget int64  `json:"snapshot_budget_s"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: runtime-agent serve --lang LANG | connect | version")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serve(os.Args[2:]))
	case "connect":
		if err := agent.Connect(socket, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "runtime-agent connect:", err)
			os.Exit(1)
		}
	case "version":
		fmt.Printf("runtime-agent %s (protocol %d)\n", version, execproto.Version)
	default:
		fmt.Fprintf(os.Stderr, "runtime-agent: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func serve(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	langName := fs.String("lang", "python", "the session's language")
	stateDir := fs.String("state", "/workspace/.runtimectl", "state directory")
	workdir := fs.String("workdir", "/workspace", "workspace directory")
	uid := fs.Int("uid", 1000, "uid of the session user (-1: do not switch)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l, err := lang.Get(*langName)
	if err != nil {
		logger.Error("serve", "err", err)
		return 2
	}
	raw := []byte(os.Getenv("RUNTIMECTL_SETTINGS"))
	var st settings
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &st); err != nil {
			logger.Error("RUNTIMECTL_SETTINGS is not valid JSON", "err", err)
			return 2
		}
	}
	gid := *uid
	cfg := agent.Config{
		Session:        st.Session,
		Lang:           l,
		StateDir:       *stateDir,
		Workdir:        *workdir,
		Socket:         socket,
		UID:            *uid,
		GID:            gid,
		MaxOutput:      st.MaxOutput,
		Grace:          time.Duration(st.GraceMs) * time.Millisecond,
		SnapshotPolicy: st.Snapshot,
		KeepSnapshots:  st.KeepSnapshots,
		SnapshotBudget: time.Duration(st.SnapshotBudget) * time.Second,
		Settings:       raw,
		Version:        version,
		Logger:         logger,
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	a, err := agent.New(cfg)
	if err != nil {
		logger.Error("start", "err", err)
		return 1
	}
	ranDone := make(chan struct{})
	go func() {
		a.Run(ctx)
		close(ranDone)
	}()
	if err := a.Serve(ctx); err != nil {
		logger.Error("serve", "err", err)
		cancel()
	}
	<-ranDone
	return 0
}

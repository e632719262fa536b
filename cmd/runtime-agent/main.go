// Command runtime-agent is the supervisor inside every runtimectl session container.
//
//	runtime-agent serve --lang python   the container's main process (under tini)
//	runtime-agent connect               a client's private stream, started by docker exec
//	runtime-agent version
//
// The session's settings come from the RUNTIMECTL_SETTINGS environment variable (JSON), set by
// the controller when it creates the container. Paths, flags and the settings document are
// package contract's, which the controller imports too.
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
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/lang"
)

// version is set at build time by the Makefile (-ldflags -X main.version=...).
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: runtime-agent serve --lang LANG | connect | du PATH... | version")
		os.Exit(2)
	}
	switch os.Args[1] {
	case contract.AgentServe:
		os.Exit(serve(os.Args[2:]))
	case contract.AgentConnect:
		if err := agent.Connect(contract.Socket, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "runtime-agent connect:", err)
			os.Exit(1)
		}
	case contract.AgentDu:
		os.Exit(du(os.Args[2:]))
	case EgressRun:
		os.Exit(egressRun(os.Args[2:]))
	case "version":
		fmt.Printf("runtime-agent %s (protocol %d)\n", version, execproto.Version)
	default:
		fmt.Fprintf(os.Stderr, "runtime-agent: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func serve(args []string) int {
	fs := flag.NewFlagSet(contract.AgentServe, flag.ContinueOnError)
	langName := fs.String(contract.FlagLang, "python", "the session's language")
	stateDir := fs.String(contract.FlagState, contract.StateDir, "state directory")
	workdir := fs.String(contract.FlagWorkdir, contract.Workspace, "workspace directory")
	uid := fs.Int(contract.FlagUID, 1000, "uid of the session user (-1: do not switch)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l, err := lang.Get(*langName)
	if err != nil {
		logger.Error("serve", "err", err)
		return 2
	}
	raw := []byte(os.Getenv(contract.SettingsEnv))
	var st contract.Settings
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &st); err != nil {
			logger.Error(contract.SettingsEnv+" is not valid JSON", "err", err)
			return 2
		}
	}
	gid := *uid
	cfg := agent.Config{
		Session:        st.Session,
		Lang:           l,
		StateDir:       *stateDir,
		Workdir:        *workdir,
		Socket:         contract.Socket,
		UID:            *uid,
		GID:            gid,
		MaxOutput:      st.MaxOutput,
		DiskLimit:      diskLimit(st.Disk),
		Grace:          time.Duration(st.GraceMs) * time.Millisecond,
		SnapshotPolicy: st.Snapshot,
		KeepSnapshots:  st.KeepSnapshots,
		SnapshotBudget: time.Duration(st.SnapshotBudgetS) * time.Second,
		Settings:       raw,
		Preload:        st.Preload,
		Version:        version,
		Logger:         logger,
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if len(st.AllowHosts) > 0 {
		env, err := agent.StartEgress(ctx, st.AllowHosts, os.Getenv(contract.EgressProxyEnv), logger)
		if err != nil {
			logger.Error("egress", "err", err)
			return 1
		}
		cfg.KernelEnv = env
	}
	a, err := agent.New(cfg)
	if err != nil {
		logger.Error("start", "err", err)
		return 1
	}
	go a.ShedWhenIdle(ctx)
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

// diskLimit is the workspace's cap from the settings: sessions made before the cap get the
// default one.
func diskLimit(b int64) int64 {
	if b <= 0 {
		return contract.DefaultDisk
	}
	return b
}

// du prints, for each path, one JSON line: what the tree there takes on disk (agent.MeasureTree),
// or why it could not be measured. The controller runs it in a helper container to size volumes
// that the engine cannot (folders thousands of levels deep).
func du(paths []string) int {
	enc := json.NewEncoder(os.Stdout)
	rc := 0
	for _, p := range paths {
		u, err := agent.MeasureTree(p)
		line := map[string]any{"path": p, "bytes": u.Bytes, "entries": u.Entries, "skipped": u.Skipped, "depth": u.Depth}
		if err != nil {
			line["error"] = err.Error()
			rc = 1
		}
		_ = enc.Encode(line)
	}
	return rc
}

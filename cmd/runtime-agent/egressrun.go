package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/runtimectl/runtimectl/agent"
	"github.com/runtimectl/runtimectl/contract"
)

// EgressRun is the subcommand that runs one command behind an egress relay, for short-lived
// containers that have no agent of their own (an installer reaching only its index):
//
//	runtime-agent egress-run --allow pypi.org,files.pythonhosted.org [--uid 1000] -- CMD ARGS...
//
// As root (with SETUID and SETGID), in a container whose only network is loopback and which
// mounts an egress proxy's socket volume at contract.EgressDir: it starts the relay (the proxy
// port, DNS and the allowed names' ports on loopback) and runs CMD as uid with
// HTTP(S)_PROXY set, and exits with its status.
const EgressRun = contract.AgentEgressRun

func egressRun(args []string) int {
	fs := flag.NewFlagSet(EgressRun, flag.ContinueOnError)
	allow := fs.String("allow", "", "the allowed hosts, comma-separated (the proxy's own list decides)")
	uid := fs.Int("uid", 1000, "uid (and gid) to run the command as (-1: do not switch)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if len(argv) == 0 || *allow == "" {
		logger.Error(EgressRun + ": give --allow HOSTS and a command after --")
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	env, err := agent.StartEgress(ctx, strings.Split(*allow, ","), os.Getenv(contract.EgressProxyEnv), logger)
	if err != nil {
		logger.Error(EgressRun, "err", err)
		return 1
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	if *uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(*uid), Gid: uint32(*uid)}}
	}
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	logger.Error(EgressRun, "err", err)
	return 127
}

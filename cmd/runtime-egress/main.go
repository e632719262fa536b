// Command runtime-egress is a session's egress proxy (package egress/proxy), the main process
// of the container (a pod on Kubernetes) that runtimectl runs beside a session started with
// `--allow-host`. It is a binary of its own, not a subcommand of runtime-agent, so that the
// agent, which every session runs and every client's stream execs, carries no HTTP or TLS code.
//
//	runtime-egress            serve, the config (JSON, egress.Config) in RUNTIMECTL_EGRESS
//	runtime-egress pin ADDR   leave this network namespace one route, to ADDR (package egress/pin:
//	                          the init container of a session's pod on Kubernetes, ADDR its proxy's)
//	runtime-egress version
//
// Its log, one JSON line per refusal (egress.LogLine), goes to stderr, which the controller
// reads back for `session logs` and /metrics.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/runtimectl/runtimectl/egress"
	"github.com/runtimectl/runtimectl/egress/pin"
	"github.com/runtimectl/runtimectl/egress/proxy"
)

// version is set at build time (-ldflags -X main.version=...).
var version = "dev"

func main() {
	if len(os.Args) > 1 {
		if os.Args[1] == "version" {
			fmt.Println("runtime-egress", version)
			return
		}
		if os.Args[1] == "pin" && len(os.Args) == 3 {
			kept, err := pin.Pin(os.Args[2])
			if err != nil {
				fmt.Fprintln(os.Stderr, "runtime-egress:", err)
				os.Exit(1)
			}
			fmt.Println("runtime-egress: pinned, the one route:", kept)
			return
		}
		fmt.Fprintln(os.Stderr, "usage: runtime-egress (config in "+egress.ConfigEnv+") | pin ADDR | version")
		os.Exit(2)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := egress.DecodeConfig(os.Getenv(egress.ConfigEnv))
	if err != nil {
		logger.Error("egress", "err", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if err := proxy.Run(ctx, cfg, logger); err != nil {
		logger.Error("egress", "err", err)
		os.Exit(1)
	}
}

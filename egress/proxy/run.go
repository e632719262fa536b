package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/runtimectl/runtimectl/egress"
)

// Run serves a session's proxy as cfg says until ctx ends: what `runtime-agent egress` does in
// the proxy's container. Its log (refusals as JSON lines) goes to log.
func Run(ctx context.Context, cfg egress.Config, log *slog.Logger) error {
	p, err := New(cfg, WithLogger(log))
	if err != nil {
		return err
	}
	defer p.Close()
	l, err := egress.Listen(cfg.Listen)
	if err != nil {
		return fmt.Errorf("egress proxy: listen: %w", err)
	}
	if path, ok := strings.CutPrefix(cfg.Listen, "unix:"); ok {
		// the session's agent (root without DAC_OVERRIDE) connects; the folder is reachable
		// from the session's agent and the proxy only
		if err := os.Chmod(path, 0o666); err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
	}
	log.Info(egress.LogReady, "session", cfg.Session, "listen", cfg.Listen, "allow", cfg.Allow, "secret_headers", len(cfg.Secrets))
	return p.Serve(ctx, l)
}

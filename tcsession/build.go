package tcsession

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

const modulePath = "github.com/runtimectl/runtimectl"

// buildIfMissing builds runtimectl's image for the spec's language when the spec names it and
// it is not in the engine.
func buildIfMissing(ctx context.Context, client *session.Client, spec session.Spec) error {
	_, err := docker.From(client).Images().Inspect(ctx, spec.Image)
	if !errors.Is(err, images.ErrNotFound) {
		return nil // present (or not runtimectl's: Prepare says so)
	}
	name := spec.Lang
	if name == "" {
		name = "python"
	}
	l, err := lang.Get(name)
	if err != nil {
		return err
	}
	if spec.Image != images.Ref(l) {
		return fmt.Errorf("WithBuild builds runtimectl's own images (%s for %s), not %s", images.Ref(l), name, spec.Image)
	}
	b := docker.From(client).Images()
	find := b.Agent
	b.Agent = func(ctx context.Context) (string, error) {
		if p, err := find(ctx); err == nil {
			return p, nil
		}
		return agentFromModule(ctx)
	}
	if _, _, err := b.Build(ctx, images.BuildOptions{Lang: l}); err != nil {
		return err
	}
	return nil
}

// agentFromModule builds runtime-agent from this module's source as the go command finds it
// from the working directory (a checkout through a replace, or the module cache).
func agentFromModule(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", modulePath).Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return "", fmt.Errorf("no runtime-agent binary: set RUNTIMECTL_AGENT_BINARY (`make build` leaves one in bin/), or run the test where `go list -m %s` finds the module's source", modulePath)
	}
	return images.BuildAgent(ctx, dir, filepath.Join(os.TempDir(), "runtimectl-agent-build", "runtime-agent"))
}

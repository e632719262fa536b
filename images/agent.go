package images

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const modulePath = "github.com/runtimectl/runtimectl"

// FindAgent returns a static linux runtime-agent binary: $RUNTIMECTL_AGENT_BINARY, else
// runtime-agent next to the running executable, else one built with `go build` from the
// runtimectl source tree that contains the working directory.
func FindAgent(ctx context.Context) (string, error) {
	if p := os.Getenv("RUNTIMECTL_AGENT_BINARY"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "runtime-agent")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("no runtime-agent binary: put it next to runtimectl, set RUNTIMECTL_AGENT_BINARY, or run from the source tree with Go installed (%v)", err)
	}
	return BuildAgent(ctx, root, filepath.Join(os.TempDir(), "runtimectl-agent-build", "runtime-agent"))
}

// BuildAgent builds cmd/runtime-agent from the source tree at root into out: static
// (CGO_ENABLED=0), reproducible (-trimpath, no VCS stamp), for linux on this machine's
// architecture.
func BuildAgent(ctx context.Context, root, out string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, "./cmd/runtime-agent")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build runtime-agent: %v: %s", err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("the working directory is not inside the %s source tree", modulePath)
		}
		dir = parent
	}
}

func isModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "module "+modulePath {
			return true
		}
	}
	return false
}

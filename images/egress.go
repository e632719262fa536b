package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// FindEgress returns a static linux runtime-egress binary (the egress proxy, which the session
// images carry beside the agent): $RUNTIMECTL_EGRESS_BINARY, else runtime-egress next to the
// running executable, else one built with `go build` from the runtimectl source tree that
// contains the working directory.
func FindEgress(ctx context.Context) (string, error) {
	if p := os.Getenv("RUNTIMECTL_EGRESS_BINARY"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "runtime-egress")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", fmt.Errorf("no runtime-egress binary: put it next to runtimectl (`make build` makes bin/runtime-egress), set RUNTIMECTL_EGRESS_BINARY, or run from the source tree with Go installed (%v)", err)
	}
	out := filepath.Join(os.TempDir(), "runtimectl-agent-build", "runtime-egress")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, "./cmd/runtime-egress")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build runtime-egress: %v: %s", err, strings.TrimSpace(string(b)))
	}
	return out, nil
}

// withEgress adds the runtime-egress binary to a build context.
func (b *Builder) withEgress(ctx context.Context, files []file) ([]file, error) {
	find := b.Egress
	if find == nil {
		find = FindEgress
	}
	p, err := find(ctx)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read runtime-egress binary: %w", err)
	}
	files = append(files, file{name: "runtime-egress", data: data, mode: 0o755})
	sortFiles(files)
	return files, nil
}

func sortFiles(files []file) {
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
}

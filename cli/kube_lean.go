//go:build lean

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/session"
)

// The lean build: whatever needs the cluster runs FullBinary (lean.go) in place of this process.

func (f *Factory) kubeClient(*slog.Logger, []session.Option) (*session.Client, error) {
	return nil, runFull()
}

func newCmdKube(*Factory) *cobra.Command {
	return &cobra.Command{
		Use:                "kube",
		Short:              "Kubernetes: the RBAC Role runtimectl needs, and the local cluster's storage",
		DisableFlagParsing: true,
		RunE:               func(*cobra.Command, []string) error { return runFull() },
	}
}

func runKubeDoctor(context.Context, *Factory) []doctorCheck {
	err := runFull()
	return []doctorCheck{{Check: "cluster", Detail: errLine(err), Fix: "put " + FullBinary + " next to runtimectl (make build), or build runtimectl without -tags lean"}}
}

// runFull replaces this process with FullBinary; it returns only when that cannot be done.
func runFull() error {
	var paths []string
	if exe, err := os.Executable(); err == nil {
		paths = append(paths, filepath.Join(filepath.Dir(exe), FullBinary))
	}
	if p, err := exec.LookPath(FullBinary); err == nil {
		paths = append(paths, p)
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			err := syscall.Exec(p, append([]string{p}, os.Args[1:]...), os.Environ())
			return fmt.Errorf("run %s for the Kubernetes backend: %w", p, err)
		}
	}
	return errors.New("this runtimectl is built without the Kubernetes backend, and " + FullBinary + " is neither next to it nor on PATH: run `make build`, or build runtimectl without -tags lean")
}

// Package cli is the runtimectl command line: one file per noun or verb (session_exec.go,
// session_start.go, session_state.go, image.go, volume.go, ...). Each command is an Options struct (flag values, IO
// streams, a lazy function returning the engine client), a NewCmdX function and a run function.
// Errors are printed once, by Main, and mapped to exit codes in one place (ExitCode), as
// ../shared/cli.md says: 0 success, 1 the code failed, 2 usage, 124 timeout, 125 runtime
// failure, 130 interrupted.
//
// It imports the session library, never the Docker SDK.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/session"
)

// Version is set at build time (-ldflags -X github.com/runtimectl/runtimectl/cli.Version=...).
var Version = "dev"

// IO is the command's streams.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

// Factory gives commands what they need, lazily: nothing talks to Docker before a command
// needs it, so usage errors are reported without asking the engine anything.
type Factory struct {
	IO      IO
	Host    string
	Verbose int
	// Backend is the engine: docker (default) or kubernetes (--backend, RUNTIMECTL_BACKEND);
	// Kubeconfig and Namespace say which cluster and namespace for kubernetes.
	Backend    string
	Kubeconfig string
	Namespace  string
	// Serving is set by `serve`: its client refills the warm pools it takes from itself; every
	// other command's process ends too soon for that, and starts `pool fill` detached instead.
	Serving bool
	// InstallBuilds is set by `serve --allow-builds` (session.WithInstallBuilds).
	InstallBuilds bool
	// InstallIndex and InstallTrusted are --install-index and --install-trusted-host
	// (session.WithInstallIndex): the index of installs that name none, and the only index
	// besides the session's allowed hosts that a cell's %pip may name.
	InstallIndex   string
	InstallTrusted []string

	once   sync.Once
	client *session.Client
	err    error
	// Signals delivers SIGINT/SIGTERM to a command that claimed them (exec: the first Ctrl-C
	// interrupts the code); for every other command a signal cancels the context.
	Signals chan os.Signal
	claimed atomic.Bool
}

// ClaimSignals routes SIGINT/SIGTERM to f.Signals instead of cancelling the command.
func (f *Factory) ClaimSignals() { f.claimed.Store(true) }

// Client returns the session client, connecting on first use.
func (f *Factory) Client() (*session.Client, error) {
	f.once.Do(func() {
		level := slog.LevelWarn
		if f.Verbose > 0 {
			level = slog.LevelDebug
		}
		logger := slog.New(slog.NewTextHandler(f.IO.Err, &slog.HandlerOptions{Level: level}))
		opts := []session.Option{session.WithLogger(logger)}
		if !f.Serving {
			opts = append(opts, session.WithoutPoolRefill()) // the command starts a detached refill
		}
		if f.InstallBuilds {
			opts = append(opts, session.WithInstallBuilds())
		}
		if f.InstallIndex != "" {
			if u, err := url.Parse(f.InstallIndex); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
				f.err = usagef("--install-index %q: give the http:// or https:// URL of a package index (https://pypi.internal/simple)", f.InstallIndex)
				return
			}
			opts = append(opts, session.WithInstallIndex(f.InstallIndex, f.InstallTrusted...))
		} else if len(f.InstallTrusted) > 0 {
			f.err = usagef("--install-trusted-host goes with --install-index URL")
			return
		}
		switch f.backend() {
		case engine.Docker:
			var e *docker.Engine
			e, f.err = docker.New(f.Host)
			if f.err == nil {
				f.client = session.NewWithEngine(e, opts...)
			}
		case engine.Kubernetes:
			f.client, f.err = f.kubeClient(logger, opts) // (kube.go; a lean build runs runtimectl-kube)
		default:
			f.err = usagef("backend %q: use docker or kubernetes (--backend, or RUNTIMECTL_BACKEND)", f.backend())
		}
	})
	return f.client, f.err
}

// backend is the engine chosen: --backend, else RUNTIMECTL_BACKEND, else docker.
func (f *Factory) backend() string {
	if f.Backend != "" {
		return f.Backend
	}
	if b := os.Getenv("RUNTIMECTL_BACKEND"); b != "" {
		return b
	}
	return engine.Docker
}

// exitError carries an exit code that is not an error of runtimectl itself (the code's status).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// usageError is a command line that is wrong.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return &usageError{fmt.Errorf(format, a...)} }

// ExitCode maps an error to runtimectl's exit codes.
func ExitCode(err error) int {
	var ee *exitError
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue), errors.Is(err, session.ErrInvalid), errors.Is(err, session.ErrConflict):
		return 2
	}
	return 125
}

// Main runs runtimectl with args and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := &Factory{IO: IO{In: stdin, Out: stdout, Err: stderr}, Signals: make(chan os.Signal, 2)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for sig := range sigs {
			if f.claimed.Load() {
				f.Signals <- sig
			} else {
				cancel()
			}
		}
	}()
	root := NewCmdRoot(f)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command") && !errors.As(err, new(*usageError)) {
		err = &usageError{fmt.Errorf("%v; see `runtimectl --help`", err)}
	}
	if f.client != nil {
		f.client.Close()
	}
	if err != nil {
		var ee *exitError
		if !errors.As(err, &ee) {
			fmt.Fprintln(stderr, "runtimectl: "+errLine(err))
		}
	}
	return ExitCode(err)
}

// errLine is err's message in the CLI's words (see internal/advice), its first line.
func errLine(err error) string { return oneLine(advice.CLI(err)) }

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// NewCmdRoot returns the root command.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "runtimectl",
		Short: "Run LLM-written code in long-lived, stateful Docker sessions",
		Long: `runtimectl runs code in sessions: long-lived Docker containers, each with one Python, bash or Node
interpreter whose variables, imports and functions persist between executions, a workspace
volume at /workspace, and snapshots and a history on that volume that survive the container
being stopped, killed or replaced.`,
		Example: `  runtimectl image build all
  runtimectl session start demo
  runtimectl session exec demo 'import pandas as pd; df = pd.DataFrame({"a": [1, 2, 3]})'
  runtimectl session exec demo 'df.a.sum()'
  runtimectl session stop demo`,
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
	}
	root.PersistentFlags().StringVarP(&f.Host, "host", "H", "", "Docker engine to use (default: $DOCKER_HOST or the local socket)")
	root.PersistentFlags().CountVarP(&f.Verbose, "verbose", "v", "log more on stderr")
	root.PersistentFlags().StringVar(&f.Backend, "backend", "", "engine: docker or kubernetes (default: $RUNTIMECTL_BACKEND, else docker)")
	root.PersistentFlags().StringVar(&f.Kubeconfig, "kubeconfig", "", "kubernetes: the cluster's kubeconfig (default: $KUBECONFIG, else ~/.kube/config)")
	root.PersistentFlags().StringVar(&f.Namespace, "namespace", "", "kubernetes: the namespace of the sessions (default: the kubeconfig context's, else default)")
	root.PersistentFlags().StringVar(&f.InstallIndex, "install-index", "", "package index (`URL`) of the installs that name none (%pip in cells, install_packages) in place of PyPI; the only index a cell's %pip may name besides the session's allowed hosts")
	root.PersistentFlags().StringArrayVar(&f.InstallTrusted, "install-trusted-host", nil, "pip's --trusted-host (`HOST`) for --install-index (plain HTTP, a self-signed certificate)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v; see `%s --help`", err, c.CommandPath())
	})
	root.AddCommand(newCmdSession(f), newCmdImage(f), newCmdVolume(f), newCmdPool(f), newCmdVersion(f))
	root.AddCommand(newCmdDoctor(f), newCmdCompletion(f), newCmdServe(f), newCmdMCP(f), newCmdKube(f), newCmdKernel(f))
	return root
}

// group makes a noun command (session, image, volume) refuse an unknown verb as a usage
// error, and print its help when given none.
func group(c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, a []string) error {
		if len(a) > 0 {
			return usagef("unknown command %q for %q; see `%s --help`", a[0], c.CommandPath(), c.CommandPath())
		}
		return c.Help()
	}
	return c
}

// args checks the count of positional arguments and reports a usage error.
func args(min, max int) cobra.PositionalArgs {
	return func(c *cobra.Command, a []string) error {
		if len(a) < min || (max >= 0 && len(a) > max) {
			want := fmt.Sprintf("%d", min)
			switch {
			case max < 0:
				want = fmt.Sprintf("at least %d", min)
			case max != min:
				want = fmt.Sprintf("%d to %d", min, max)
			}
			return usagef("%s takes %s argument(s), got %d; usage: %s", c.CommandPath(), want, len(a), c.UseLine())
		}
		return nil
	}
}

// validName checks a session name before anything asks Docker.
func validName(name string) error {
	if err := session.ValidateName(name); err != nil {
		return &usageError{err}
	}
	return nil
}

// openSession checks the name, then opens the session (starting it when it is stopped), for the
// commands that talk to its agent.
func (f *Factory) openSession(ctx context.Context, name string) (*session.Session, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	cl, err := f.Client()
	if err != nil {
		return nil, err
	}
	s, _, err := cl.Open(ctx, name)
	return s, err
}

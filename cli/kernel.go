package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runtimectl/runtimectl/jupyter"
	"github.com/runtimectl/runtimectl/session"
)

func newCmdKernel(f *Factory) *cobra.Command {
	c := group(&cobra.Command{
		Use:   "kernel",
		Short: "Jupyter kernels whose state is a runtimectl session (install, run)",
		Long: `A Jupyter kernel that runs its cells in a runtimectl session: "runtimectl kernel install" writes a
kernelspec that Jupyter's tools find (jupyter kernelspec list, JupyterLab's launcher, nbconvert,
jupyter_client's KernelManager), and Jupyter starts "runtimectl kernel run" with a connection file.

Each kernel is a session: the one --session or $RUNTIMECTL_SESSION names, else one named after the
notebook ($JPY_SESSION_NAME, which Jupyter's server sets: the same notebook reopened tomorrow gets
its session and its state back), else one named after the connection file (kernel-XXXXXXXX, with
a TTL of 24h unless --ttl). A kernel restart keeps the state: the session is stopped (snapshot)
and started again, and the first cell after it says what came back; --clean-restart (in the
kernelspec: kernel install --clean-restart) makes a restart begin with an empty state instead.
Shutting the kernel down stops its session and keeps it: "runtimectl session rm NAME" removes it.`,
		Example: `  runtimectl kernel install                       # runtimectl-python, for this user
  runtimectl kernel install --lang bash            # runtimectl-bash
  runtimectl kernel install --memory 4g --network bridge --name analysis
  jupyter console --kernel runtimectl-python`,
	})
	c.AddCommand(newCmdKernelInstall(f), newCmdKernelRun(f))
	return c
}

// KernelInstallOptions are the flags of `runtimectl kernel install`.
type KernelInstallOptions struct {
	F            *Factory
	Name         string
	DisplayName  string
	User         bool
	Prefix       string
	Session      string
	CleanRestart bool
	Spec         session.Spec
	// Forward are the flags written into the kernelspec's argv for `kernel run`.
	Forward []string
	// Executable is the runtimectl the kernelspec runs (default: this one).
	Executable string
}

var kernelNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

func newCmdKernelInstall(f *Factory) *cobra.Command {
	o := &KernelInstallOptions{F: f}
	c := &cobra.Command{
		Use:   "install",
		Short: "Write a Jupyter kernelspec whose kernel is a runtimectl session",
		Long: `Write a kernelspec (kernel.json) for a runtimectl kernel where Jupyter looks for kernels: the user's
Jupyter data directory (--user, the default: $JUPYTER_DATA_DIR, else ~/.local/share/jupyter), or
PREFIX/share/jupyter (--prefix, as for a virtualenv or conda environment). The session flags given
here hold for the sessions the kernel makes (they are written into the kernelspec's argv).
Prints the kernelspec's directory.`,
		Example: `  runtimectl kernel install
  runtimectl kernel install --lang node --display-name "Node.js (sandboxed)"
  runtimectl kernel install --prefix "$VIRTUAL_ENV" --memory 4g
  jupyter kernelspec list`,
		Args: args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if o.User && o.Prefix != "" {
				return usagef("--user and --prefix: give one")
			}
			if o.Session != "" {
				if err := validName(o.Session); err != nil {
					return err
				}
			}
			if _, err := kernelLang(o.Spec.Lang); err != nil {
				return err
			}
			if o.Name == "" {
				o.Name = "runtimectl-" + o.Spec.Lang
			}
			if !kernelNameRE.MatchString(o.Name) {
				return usagef("kernel name %q: use letters, digits, '.', '_' and '-'", o.Name)
			}
			o.Forward = forwardedFlags(c)
			return kernelInstallRun(o)
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.Name, "name", "", "the kernel's name, as in `jupyter console --kernel NAME` (default: runtimectl-LANG)")
	fl.StringVar(&o.DisplayName, "display-name", "", "the name Jupyter's menus show (default: e.g. \"Python 3 (runtimectl)\")")
	fl.BoolVar(&o.User, "user", false, "install for this user (the default)")
	fl.StringVar(&o.Prefix, "prefix", "", "install under PREFIX/share/jupyter/kernels")
	fl.StringVar(&o.Session, "session", "", "every kernel of this kernelspec uses this one session (default: one per notebook)")
	fl.BoolVar(&o.CleanRestart, "clean-restart", false, "a kernel restart begins with an empty state (default: the state is kept)")
	addSessionFlags(fl, &o.Spec)
	return c
}

// installOnly are kernel install's own flags; every other flag given is forwarded to `kernel run`.
var installOnly = map[string]bool{"name": true, "display-name": true, "user": true, "prefix": true, "help": true}

// forwardedFlags are the flags given to c (and the root's, such as --backend) that `kernel run`
// needs, as --flag=value arguments.
func forwardedFlags(c *cobra.Command) []string {
	var out []string
	add := func(fl *pflag.Flag) {
		if installOnly[fl.Name] || fl.Name == "verbose" {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+fl.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+fl.Name+"="+fl.Value.String())
	}
	c.Flags().Visit(add) // with the root's flags given (--backend, --host)
	return out
}

// kernelSpec is kernel.json.
type kernelSpec struct {
	Argv          []string       `json:"argv"`
	DisplayName   string         `json:"display_name"`
	Language      string         `json:"language"`
	InterruptMode string         `json:"interrupt_mode"`
	Env           map[string]any `json:"env,omitempty"`
	Metadata      map[string]any `json:"metadata"`
}

// jupyterDataDir is where Jupyter looks for a user's kernels (jupyter_core's jupyter_data_dir).
func jupyterDataDir() (string, error) {
	if d := os.Getenv("JUPYTER_DATA_DIR"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory to install the kernel for this user (%v); use --prefix", err)
	}
	if runtime.GOOS == "darwin" {
		return filepath.Join(home, "Library", "Jupyter"), nil
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "jupyter"), nil
	}
	return filepath.Join(home, ".local", "share", "jupyter"), nil
}

func kernelInstallRun(o *KernelInstallOptions) error {
	li, _ := kernelLang(o.Spec.Lang)
	exe := o.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return fmt.Errorf("kernel install: where is runtimectl? %w", err)
		}
		if p, err := filepath.EvalSymlinks(exe); err == nil {
			exe = p
		}
	}
	base := filepath.Join(o.Prefix, "share", "jupyter")
	if o.Prefix == "" {
		d, err := jupyterDataDir()
		if err != nil {
			return err
		}
		base = d
	}
	dir := filepath.Join(base, "kernels", o.Name)
	argv := append([]string{exe, "kernel", "run", "--connection-file", "{connection_file}"}, o.Forward...)
	if !containsFlag(o.Forward, "lang") {
		argv = append(argv, "--lang="+o.Spec.Lang)
	}
	display := o.DisplayName
	if display == "" {
		display = li.display + " (runtimectl)"
	}
	meta := map[string]any{"lang": o.Spec.Lang, "version": Version}
	if o.Session != "" {
		meta["session"] = o.Session
	}
	spec := kernelSpec{
		Argv: argv, DisplayName: display, Language: li.info.Name, InterruptMode: "signal",
		Metadata: map[string]any{"runtimectl": meta, "debugger": false},
	}
	b, err := json.MarshalIndent(spec, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kernel install: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("kernel install: %w", err)
	}
	fmt.Fprintln(o.F.IO.Out, dir)
	fmt.Fprintf(o.F.IO.Err, "runtimectl: installed kernel %s (%s); try `jupyter console --kernel %s`\n", o.Name, display, o.Name)
	return nil
}

func containsFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
			return true
		}
	}
	return false
}

// KernelRunOptions are the flags of `runtimectl kernel run`.
type KernelRunOptions struct {
	F              *Factory
	ConnectionFile string
	Session        string
	CleanRestart   bool
	Spec           session.Spec
	ttlGiven       bool
}

func newCmdKernelRun(f *Factory) *cobra.Command {
	o := &KernelRunOptions{F: f}
	c := &cobra.Command{
		Use:   "run --connection-file FILE",
		Short: "Run a Jupyter kernel (what Jupyter starts; see `kernel install`)",
		Long: `Serve the Jupyter messaging protocol 5.3 on the sockets of a connection file, running each cell in
a runtimectl session (see "runtimectl kernel --help" for which one). Jupyter starts it from the
kernelspec that "runtimectl kernel install" writes; logs go to standard error.`,
		Example: `  runtimectl kernel run --connection-file /run/user/1000/jupyter/kernel-1.json --session analysis`,
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if o.ConnectionFile == "" {
				return usagef("kernel run needs --connection-file FILE (Jupyter passes it: see `runtimectl kernel install`)")
			}
			if o.Session != "" {
				if err := validName(o.Session); err != nil {
					return err
				}
			}
			if _, err := kernelLang(o.Spec.Lang); err != nil {
				return err
			}
			o.ttlGiven = c.Flags().Changed("ttl")
			lang := o.Spec.Lang
			sessionFlagsGiven(c.Flags(), &o.Spec)
			if o.Spec.Lang == "" {
				o.Spec.Lang = lang
			}
			return kernelRun(c.Context(), o)
		},
	}
	fl := c.Flags()
	fl.StringVar(&o.ConnectionFile, "connection-file", "", "the connection file Jupyter wrote (required)")
	fl.StringVar(&o.Session, "session", "", "the session to run in (default: $RUNTIMECTL_SESSION, else one per notebook)")
	fl.BoolVar(&o.CleanRestart, "clean-restart", false, "a kernel restart begins with an empty state (default: the state is kept)")
	addSessionFlags(fl, &o.Spec)
	return c
}

func kernelRun(ctx context.Context, o *KernelRunOptions) error {
	conn, err := jupyter.ReadConnectionFile(o.ConnectionFile)
	if err != nil {
		return &usageError{err}
	}
	level := slog.LevelInfo
	if o.F.Verbose > 0 {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(o.F.IO.Err, &slog.HandlerOptions{Level: level}))
	name, key, derived := kernelSessionName(o.Session, o.Spec.Lang, o.ConnectionFile, os.Getenv)
	if derived && !o.ttlGiven {
		o.Spec.TTL = defaultKernelTTL // nothing can reopen it by name: not kept forever
	}
	o.Spec.Name = name
	o.F.Serving = true
	cl, err := o.F.Client()
	if err != nil {
		return err
	}
	b := newKernelBackend(cl, o.Spec, o.CleanRestart, logger)
	b.marker = o.ConnectionFile + ".restarting"
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// SIGINT interrupts the code (interrupt_mode "signal", as ipykernel's, and Ctrl-C in a
	// terminal); SIGTERM ends the kernel, leaving the session running.
	o.F.ClaimSignals()
	go func() {
		for {
			select {
			case sig := <-o.F.Signals:
				if sig == syscall.SIGTERM {
					cancel()
					return
				}
				if err := b.Interrupt(ctx); err != nil {
					logger.Debug("interrupt", "err", err) // jupyter_client interrupts before every shutdown
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := b.start(ctx); err != nil {
		return err
	}
	recordKernel(logger, key, name, o.Spec.Lang)
	logger.Info("runtimectl kernel", "session", name, "lang", o.Spec.Lang, "connection_file", o.ConnectionFile)
	k, err := jupyter.New(jupyter.Config{Conn: conn, Backend: b, Logger: logger})
	if err != nil {
		return &usageError{err}
	}
	req, err := k.Run(ctx)
	b.close()
	if err != nil {
		return err
	}
	logger.Info("runtimectl kernel ends", "session", name, "restart", req.Restart)
	return nil
}

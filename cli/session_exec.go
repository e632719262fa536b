package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/term"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/session"
)

// ExecOptions are the flags of `session exec`.
type ExecOptions struct {
	F         *Factory
	Name      string
	Code      string
	File      string
	Timeout   time.Duration
	JSON      bool
	MaxOutput int64
	// IgnoreDiskCap runs the code past the session's disk cap.
	IgnoreDiskCap bool
	// Env and Workdir hold for this execution only.
	Env     []string
	Workdir string
}

func newCmdExec(f *Factory, runF func(context.Context, *ExecOptions) error) *cobra.Command {
	o := &ExecOptions{F: f}
	c := &cobra.Command{
		Use:   "exec NAME [--] [CODE]",
		Short: "Run code in a session, as a notebook cell",
		Long: `Run CODE (or the file given with -f, or standard input when neither is given) in the session's
one persistent interpreter. Output is streamed as it is produced; for Python the repr of a final
expression is printed after it. A stopped session is started first (its state restored).
Flags may come before or after NAME and CODE; CODE that begins with "-" (such as -x or
-(x ** 2)) goes after --, which ends the flags.

Exit codes: 0 ok, 1 the code raised / failed / crashed the interpreter, 2 usage, 124 timeout
(also when the session did not answer within 10 s of --timeout: a paused container, a stuck
engine; a session that answers is waited for), 125 runtime failure, 130 interrupted, 143 terminated. Ctrl-C interrupts the code; a
second Ctrl-C detaches. SIGTERM asks for an interrupt, waits half a second for the result, then
ends (the code may go on in the session).`,
		Example: `  runtimectl session exec demo 'x = 40 + 2'
  runtimectl session exec demo 'x'                    # prints 42
  runtimectl session exec demo -f analysis.py --timeout 2m
  echo 'print(x)' | runtimectl session exec demo
  runtimectl session exec demo 'x * 2' --json
  runtimectl session exec demo --json -- '-(x ** 2)'   # code that begins with "-"`,
		Args: func(c *cobra.Command, a []string) error {
			if c.ArgsLenAtDash() >= 0 && len(a) > 2 {
				return usagef("everything after -- is the code, as one argument: quote it, and put flags before --")
			}
			return args(1, 2)(c, a)
		},
		RunE: func(c *cobra.Command, a []string) error {
			o.Name = a[0]
			if err := validName(o.Name); err != nil {
				return err
			}
			switch {
			case len(a) == 2 && o.File != "":
				return usagef("give the code as an argument or with -f, not both")
			case len(a) == 2:
				o.Code = a[1]
			case o.File != "":
				b, err := os.ReadFile(o.File)
				if err != nil {
					return usagef("read -f %s: %v", o.File, err)
				}
				o.Code = string(b)
			default:
				code, err := readCode(c.Context(), f)
				if err != nil {
					return err
				}
				o.Code = code
			}
			if len(o.Code) > session.MaxCode {
				return usagef("the code is %d bytes; the limit is %d MiB: copy it into the session as a file (`runtimectl session cp`) and run that", len(o.Code), session.MaxCode>>20)
			}
			if c.Flags().Changed("timeout") && o.Timeout < time.Millisecond {
				return usagef("--timeout %s: give at least 1ms (leave it out for no timeout)", o.Timeout)
			}
			if runF != nil {
				return runF(c.Context(), o)
			}
			return execRun(c.Context(), o)
		},
	}
	c.SetFlagErrorFunc(codeOrFlag)
	c.Flags().StringVarP(&o.File, "file", "f", "", "read the code from FILE")
	c.Flags().Var(durationValue{&o.Timeout}, "timeout", "interrupt the code after this long (30s, 2m; a bare number is seconds)")
	c.Flags().BoolVar(&o.JSON, "json", false, "print one JSON object with the result when the execution ends (nothing streamed)")
	c.Flags().Var(sizeValue{&o.MaxOutput}, "max-output", "output delivered per stream (default: the session's, 4m)")
	c.Flags().StringArrayVarP(&o.Env, "env", "e", nil, "an environment variable KEY=VALUE for this execution only (repeatable)")
	c.Flags().StringVarP(&o.Workdir, "workdir", "w", "", "the working directory for this execution only (relative to /workspace, or absolute)")
	c.Flags().BoolVar(&o.IgnoreDiskCap, "ignore-disk-cap", false, "run even when the workspace is past the session's --disk cap (to free space)")
	return c
}

// codeOrFlag words an unknown flag of `session exec`: it may be code that begins with "-"
// (Python's -x, -(x ** 2)), which belongs after --.
func codeOrFlag(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return usagef("%v; see `%s --help`", err, c.CommandPath())
	}
	arg := "--" + ne.GetSpecifiedName()
	if sh := ne.GetSpecifiedShortnames(); sh != "" {
		arg = "-" + sh
	}
	name := "NAME"
	if a := c.Flags().Args(); len(a) > 0 && validName(a[0]) == nil {
		name = a[0]
	}
	return usagef("%v; if %s is code, put -- before it: runtimectl session exec %s -- %s", err, arg, name, shellQuote(arg))
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func execRun(ctx context.Context, o *ExecOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	errw := o.F.IO.Err
	// A stopped session is started here; the first result reports what was restored.
	s, _, err := c.Open(ctx, o.Name)
	if err != nil {
		return err
	}
	defer s.Close()

	o.F.ClaimSignals()
	execCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	detach := make(chan struct{})
	var terminated atomic.Bool
	stopSignals := make(chan struct{})
	defer close(stopSignals)
	go func() {
		n := 0
		for {
			select {
			case sig := <-o.F.Signals:
				n++
				if sig == syscall.SIGTERM {
					// Terminated (a supervisor, a timeout of the caller's own): ask for an
					// interrupt, give the answer a moment, then end.
					fmt.Fprintln(errw, "runtimectl: terminated: interrupting the code")
					interrupt()
					select {
					case <-time.After(termGrace):
						terminated.Store(true)
						close(detach)
					case <-stopSignals:
					}
					return
				}
				if n == 1 {
					fmt.Fprintln(errw, "runtimectl: interrupting the code (Ctrl-C again to detach)")
					interrupt()
				} else {
					close(detach)
					return
				}
			case <-stopSignals:
				return
			}
		}
	}()

	eo := session.ExecOptions{Timeout: o.Timeout, MaxOutput: o.MaxOutput, IgnoreDiskCap: o.IgnoreDiskCap, Env: o.Env, Workdir: o.Workdir, Detach: detach,
		OnNotice: func(m string) { fmt.Fprintln(errw, "runtimectl: "+m) }}
	if !o.JSON {
		eo.Stdout, eo.Stderr = o.F.IO.Out, errw
		eo.OnDisplay = func(d history.Display) { printDisplay(o.F.IO.Out, d) }
	}
	res, err := s.Exec(execCtx, o.Code, eo)
	if err != nil {
		if terminated.Load() {
			fmt.Fprintln(errw, "runtimectl: terminated before the code ended: it was asked to stop (an interrupt) and may still be running; its result will be in `runtimectl session history "+o.Name+"`")
			return &exitError{143}
		}
		if errors.Is(err, session.ErrNoAnswer) {
			fmt.Fprintln(errw, "runtimectl: "+advice.CLI(err))
			return &exitError{124}
		}
		select {
		case <-detach:
			fmt.Fprintln(errw, "runtimectl: detached; the execution goes on in the session (see `runtimectl session history`)")
			return &exitError{130}
		default:
		}
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(o.F.IO.Out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		if res.Result != nil {
			fmt.Fprintln(o.F.IO.Out, *res.Result)
		}
		reportOutcome(errw, res)
	}
	return statusExit(res.Status)
}

// printDisplay shows a display at a terminal as IPython's terminal does: its text/plain, in
// its place in the output (the final value is the result, printed at the end; a figure's file
// is said on stderr with the outputs).
func printDisplay(w io.Writer, d history.Display) {
	switch d.Kind {
	case contract.DisplayData, contract.DisplayUpdate, contract.DisplayPage:
		if t := d.Text(); t != "" {
			fmt.Fprintln(w, strings.TrimRight(t, "\n"))
		}
	}
}

// termGrace is how long SIGTERM leaves the code to answer its interrupt.
const termGrace = 500 * time.Millisecond

// reportOutcome says on w (stderr) what the result carries beyond the code's output: rich
// outputs saved, a snapshot that failed, and why the execution ended as it did when the runtime
// ended it (a timeout, a crash, a restart). The reason comes from the result, never from the
// output: user output can contain anything, and a flood can be cut before it.
func reportOutcome(w io.Writer, res *session.Result) {
	for _, out := range res.Outputs {
		fmt.Fprintf(w, "runtimectl: %s saved: %s\n", out.Mime, out.Path)
	}
	if res.State != nil && res.State.Status == "failed" {
		fmt.Fprintf(w, "runtimectl: warning: %s\n", res.State.Message)
	}
	if res.Message == "" {
		return
	}
	switch {
	case res.Status == execproto.StatusTimeout, res.Status == execproto.StatusCrashed,
		res.Status == execproto.StatusInterrupted,
		res.Error != nil && res.Error.Name == "DriverError":
		fmt.Fprintln(w, "runtimectl: "+res.Message)
	}
}

func statusExit(status contract.Status) error {
	switch status {
	case execproto.StatusOK:
		return nil
	case execproto.StatusTimeout:
		return &exitError{124}
	case execproto.StatusInterrupted:
		return &exitError{130}
	}
	return &exitError{1}
}

// readCode reads the code from standard input. The read gives way to Ctrl-C and SIGTERM (the
// command's context): a stdin that never ends (a pipe left open) does not hang the command.
// On a terminal it says how to end the code.
func readCode(ctx context.Context, f *Factory) (string, error) {
	if in, ok := f.IO.In.(*os.File); ok && term.IsTerminal(int(in.Fd())) {
		fmt.Fprintln(f.IO.Err, "runtimectl: reading the code from the terminal: end it with Ctrl-D on a line of its own (Ctrl-C cancels)")
	}
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(f.IO.In, session.MaxCode+1))
		done <- read{b, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return "", usagef("read code from standard input: %v", r.err)
		}
		return string(r.b), nil
	case <-ctx.Done():
		fmt.Fprintln(f.IO.Err, "runtimectl: interrupted while reading the code from standard input; nothing ran")
		return "", &exitError{code: 130}
	}
}

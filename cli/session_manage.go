package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/session"
)

func newCmdStop(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "stop NAME",
		Short:   "Snapshot a session, then stop its container; the volume stays",
		Example: "  runtimectl session stop demo\n  runtimectl session start demo   # comes back with its state",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			return cl.Stop(c.Context(), a[0])
		},
	}
}

func newCmdRm(f *Factory) *cobra.Command {
	var (
		force bool
		exp   session.ExportOptions
	)
	c := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Remove a session's container and volume (its state and history)",
		Long: `Remove the session's container and volume. A running session is refused unless --force.
With --export DIR, first copy the workspace files matching --keep globs (matched against the path
under /workspace and against the file name) and, with --keep-history, the history as JSON and
ipynb, to DIR; nothing is removed if the export fails.`,
		Example: `  runtimectl session rm demo
  runtimectl session rm -f demo other   # even while they run
  runtimectl session rm s --force --export ./final --keep 'final_*.csv' --keep report.pdf --keep-history`,
		Args: args(1, -1),
		RunE: func(c *cobra.Command, a []string) error {
			for _, n := range a {
				if err := validName(n); err != nil {
					return err
				}
			}
			if exp.Dir == "" && (len(exp.Keep) > 0 || exp.History || exp.MaxSize != 0 || exp.SkipDeep) {
				return usagef("--keep, --keep-history, --max-size and --skip-unreadable go with --export DIR")
			}
			if exp.Dir != "" && len(a) > 1 {
				return usagef("--export takes one session: remove the others apart")
			}
			exp.OnSkipped = func(dir string) {
				fmt.Fprintf(f.IO.Err, "runtimectl: not exported: what the engine left out below %s (too deep for its archive)\n", dir)
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			if exp.Dir != "" {
				n, err := cl.RemoveExport(c.Context(), a[0], force, exp)
				if err != nil {
					return err
				}
				fmt.Fprintf(f.IO.Err, "runtimectl: exported %d file(s) to %s\n", n, exp.Dir)
				return nil
			}
			// Each name in turn, as docker rm does: one that fails is said and the rest go on;
			// the command fails with the first error.
			var first error
			for _, n := range a {
				if err := cl.Remove(c.Context(), n, force); err != nil {
					if first == nil {
						first = err
					}
					if len(a) > 1 {
						fmt.Fprintf(f.IO.Err, "runtimectl: %s: %s\n", n, advice.CLI(err))
					}
				}
			}
			if first != nil && len(a) > 1 {
				return &exitError{ExitCode(first)}
			}
			return first
		},
	}
	c.Flags().BoolVarP(&force, "force", "f", false, "remove a running session too")
	c.Flags().StringVar(&exp.Dir, "export", "", "copy the kept files to DIR before removing")
	c.Flags().StringArrayVar(&exp.Keep, "keep", nil, "glob of workspace files to export (repeatable)")
	c.Flags().BoolVar(&exp.History, "keep-history", false, "export the history as history.json and history.ipynb too")
	c.Flags().Var(sizeValue{&exp.MaxSize}, "max-size", "the most the exported files may total (default 4g); past it nothing is removed")
	c.Flags().BoolVar(&exp.SkipDeep, "skip-unreadable", false, "export the rest when folders are too deep for the engine's archive (listed on stderr), then remove")
	return c
}

func newCmdLs(f *Factory) *cobra.Command {
	var asJSON, quiet bool
	var format string
	c := &cobra.Command{
		Use:   "ls",
		Short: "List sessions",
		Long: `List sessions. -q prints only the names; --format prints each session through a Go template,
as docker ps --format does, with the fields of --json: {{.Name}} {{.Lang}} {{.State}} {{.Image}}
{{.Created}} {{.Executions}} {{.LastExec}} {{.Owner}}; --format json prints one JSON object a line.`,
		Example: "  runtimectl session ls\n  runtimectl session ls -q | xargs runtimectl session rm -f\n  runtimectl session ls --format '{{.Name}} {{.State}}'\n  runtimectl session ls --json",
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			if n := btoi(asJSON) + btoi(quiet) + btoi(format != ""); n > 1 {
				return usagef("give one of --json, -q and --format")
			}
			var tmpl *template.Template
			if format != "" && format != "json" {
				t, err := template.New("format").Parse(format)
				if err != nil {
					return usagef("--format %q: %v", format, err)
				}
				tmpl = t
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			list, err := cl.List(c.Context())
			if err != nil {
				return err
			}
			switch {
			case asJSON:
				return writeJSON(f.IO.Out, list)
			case quiet:
				for _, s := range list {
					fmt.Fprintln(f.IO.Out, s.Name)
				}
				return nil
			case format == "json":
				enc := json.NewEncoder(f.IO.Out)
				enc.SetEscapeHTML(false)
				for _, s := range list {
					if err := enc.Encode(s); err != nil {
						return err
					}
				}
				return nil
			case tmpl != nil:
				for _, s := range list {
					var b strings.Builder
					if err := tmpl.Execute(&b, s); err != nil {
						return usagef("--format: %v", err)
					}
					fmt.Fprintln(f.IO.Out, b.String())
				}
				return nil
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tLANG\tSTATE\tIMAGE\tCREATED\tEXECUTIONS\tLAST EXEC")
			for _, s := range list {
				n := "-"
				if s.Executions >= 0 {
					n = fmt.Sprint(s.Executions)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Lang, s.State, s.Image, ago(s.Created), n, agoString(s.LastExec))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	c.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the names")
	c.Flags().StringVar(&format, "format", "", "print each session through a Go template (or json: one object a line)")
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// writeJSON writes v as indented JSON, with <, > and & as they are (not \u003c...): the output
// is for programs and people, not for HTML.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func ago(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Format("2006-01-02")
}

func agoString(s string) string {
	if s == "" {
		return "-"
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return ago(t)
}

func newCmdInterrupt(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "interrupt NAME",
		Short:   "Interrupt the code running in a session (from another terminal)",
		Example: "  runtimectl session interrupt demo",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			// A stopped session is left stopped: nothing runs in it.
			ci, err := cl.Runtimes().Inspect(c.Context(), a[0])
			if err != nil && !errors.Is(err, engine.ErrNotFound) {
				return err
			}
			if err != nil || !ci.Running {
				if _, verr := cl.Storage().Inspect(c.Context(), a[0]); err != nil && verr != nil {
					return fmt.Errorf("%w %q: start it with `runtimectl session start %s`", session.ErrNotFound, a[0], a[0])
				}
				fmt.Fprintf(f.IO.Err, "runtimectl: session %s is not running: nothing was running\n", a[0])
				return nil
			}
			s, err := cl.Attach(c.Context(), a[0])
			if err != nil {
				return err
			}
			defer s.Close()
			ok, err := s.Interrupt(c.Context())
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintln(f.IO.Err, "runtimectl: nothing was running")
			}
			return nil
		},
	}
}

func newCmdVars(f *Factory) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "vars NAME",
		Short:   "List a session's variables: type, shape or length, size, preview",
		Example: "  runtimectl session vars demo\n  runtimectl session vars demo --json",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			s, err := f.openSession(c.Context(), a[0])
			if err != nil {
				return err
			}
			defer s.Close()
			v, err := s.Vars(c.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.IO.Out, v)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tTYPE\tSHAPE/LEN\tSIZE\tPREVIEW")
			for _, x := range v.Vars {
				shape := x.Shape
				if shape == "" && x.Len != nil {
					shape = fmt.Sprint(*x.Len)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", x.Name, x.Type, shape, x.Size, strings.ReplaceAll(x.Preview, "\n", " "))
			}
			if len(v.Modules) > 0 {
				fmt.Fprintf(tw, "\nmodules: %s\n", strings.Join(v.Modules, ", "))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

func newCmdHistory(f *Factory) *cobra.Command {
	var (
		format string
		last   int
	)
	c := &cobra.Command{
		Use:   "history NAME",
		Short: "Print a session's executions, oldest first, from its volume",
		Example: `  runtimectl session history demo
  runtimectl session history demo --format json --last 5
  runtimectl session history demo --format ipynb > demo.ipynb`,
		Args: args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			switch format {
			case "text", "json", "ipynb", "executor-json":
			default:
				return usagef("unknown --format %q: use text, json, ipynb or executor-json", format)
			}
			if last < 0 {
				return usagef("--last must be 0 or more")
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			execs, problems, err := cl.History(c.Context(), a[0])
			if err != nil {
				return err
			}
			for _, p := range problems {
				fmt.Fprintln(f.IO.Err, "runtimectl: history: "+p)
			}
			if last > 0 && len(execs) > last {
				execs = execs[len(execs)-last:]
			}
			switch format {
			case "json":
				return history.WriteJSON(f.IO.Out, execs)
			case "ipynb":
				lang := "python"
				if list, err := cl.List(c.Context()); err == nil {
					for _, s := range list {
						if s.Name == a[0] {
							lang = s.Lang
						}
					}
				}
				return history.WriteIPYNB(f.IO.Out, lang, execs)
			case "executor-json":
				return history.WriteExecutorJSON(f.IO.Out, execs)
			}
			return history.WriteText(f.IO.Out, execs)
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text, json, ipynb (nbformat 4) or executor-json (MetaGPT's executor.json)")
	c.Flags().IntVar(&last, "last", 0, "only the last N executions")
	return c
}

func newCmdSnapshot(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "snapshot NAME",
		Short:   "Take a snapshot of a session's state now; prints its id",
		Example: "  runtimectl session snapshot demo",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			s, err := f.openSession(c.Context(), a[0])
			if err != nil {
				return err
			}
			defer s.Close()
			rep, err := s.Snapshot(c.Context())
			if err != nil {
				return err
			}
			for _, sk := range rep.Skipped {
				fmt.Fprintf(f.IO.Err, "runtimectl: not saved: %s (%s): %s\n", sk.Name, sk.Type, sk.Reason)
			}
			fmt.Fprintln(f.IO.Out, rep.ID)
			return nil
		},
	}
}

func newCmdSnapshots(f *Factory) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "snapshots NAME",
		Short:   "List a session's snapshots: id, the execution it follows, time, size, variables",
		Example: "  runtimectl session snapshots demo\n  runtimectl session snapshots demo --json",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			list, err := cl.Snapshots(c.Context(), a[0])
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.IO.Out, list)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAFTER EXEC\tCREATED\tSIZE\tKEPT\tSKIPPED")
			for _, m := range list {
				if m.Broken != "" {
					fmt.Fprintf(tw, "%s\t-\t-\t-\tbroken: %s\t\n", m.ID, m.Broken)
					continue
				}
				var skipped []string
				for _, s := range m.Skipped {
					skipped = append(skipped, s.Name)
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", m.ID, m.Seq, m.Created.Local().Format("2006-01-02 15:04:05"),
					humanSize(m.SizeBytes), trimList(m.Kept), trimList(skipped))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return c
}

func trimList(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	s := strings.Join(names, ",")
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return fmt.Sprintf("%d (%s)", len(names), s)
}

func humanSize(n int64) string { return session.FormatSize(n) }

func newCmdRestore(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "restore NAME SNAPSHOT",
		Short:   "Put a session's interpreter back in the state of a snapshot",
		Long:    "Restart the session's interpreter from SNAPSHOT: the namespace becomes exactly the snapshot's, so names created after it are gone. Files in /workspace are not touched.",
		Example: "  runtimectl session snapshots demo\n  runtimectl session restore demo 3-a1b2c3",
		Args:    args(2, 2),
		RunE: func(c *cobra.Command, a []string) error {
			s, err := f.openSession(c.Context(), a[0])
			if err != nil {
				return err
			}
			defer s.Close()
			info, err := s.RestoreSnapshot(c.Context(), a[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Err, "runtimectl: restored snapshot %s (after execution %d): %d names\n", info.Snapshot, info.Seq, len(info.Restored))
			for _, fl := range info.Failed {
				fmt.Fprintf(f.IO.Err, "  not restored: %s (%s): %s\n", fl.Name, fl.Type, fl.Reason)
			}
			for _, cp := range info.Copies {
				fmt.Fprintf(f.IO.Err, "  back as a copy: %s (%s): %s\n", cp.Name, cp.Type, cp.Reason)
			}
			return nil
		},
	}
}

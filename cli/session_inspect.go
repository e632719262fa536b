package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/session"
)

func newCmdInspect(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "inspect NAME",
		Short:   "Print everything known of a session as JSON: settings, limits, container, volumes, agent status",
		Example: "  runtimectl session inspect demo\n  runtimectl session inspect demo | jq .limits",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			in, err := cl.Inspect(c.Context(), a[0])
			if err != nil {
				return err
			}
			return writeJSON(f.IO.Out, in)
		},
	}
}

func newCmdLogs(f *Factory) *cobra.Command {
	var tail int
	c := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print the agent's own log of a session: starts, restarts, recoveries, refusals (never the code's output)",
		Long: `Print the log of the session's agent: kernel starts and restarts, recoveries from crashes,
snapshots that failed, refused requests. The code's own output is never in it: see
` + "`session history`" + ` for that.`,
		Example: "  runtimectl session logs demo\n  runtimectl session logs demo --tail 20",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			b, err := cl.Logs(c.Context(), a[0], 4<<20)
			if err != nil {
				return err
			}
			text := string(b)
			if tail > 0 {
				lines := strings.SplitAfter(strings.TrimSuffix(text, "\n"), "\n")
				if len(lines) > tail {
					lines = lines[len(lines)-tail:]
				}
				text = strings.Join(lines, "")
				if text != "" && !strings.HasSuffix(text, "\n") {
					text += "\n"
				}
			}
			_, err = fmt.Fprint(f.IO.Out, text)
			return err
		},
	}
	c.Flags().IntVar(&tail, "tail", 0, "only the last N lines")
	return c
}

func newCmdStats(f *Factory) *cobra.Command {
	var asJSON, watch bool
	c := &cobra.Command{
		Use:     "stats NAME",
		Short:   "Show a running session's CPU, memory, processes and disk, once or --watch",
		Example: "  runtimectl session stats demo\n  runtimectl session stats demo --watch\n  runtimectl session stats demo --json",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			for first := true; ; first = false {
				st, err := cl.Stats(c.Context(), a[0])
				if err != nil {
					if !first && c.Context().Err() != nil {
						return nil // Ctrl-C ends --watch
					}
					return err
				}
				if asJSON {
					if err := writeJSON(f.IO.Out, st); err != nil {
						return err
					}
				} else {
					printStats(f, a[0], st, first)
				}
				if !watch {
					return nil
				}
				select {
				case <-c.Context().Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	c.Flags().BoolVar(&watch, "watch", false, "sample again every few seconds until Ctrl-C")
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per sample")
	return c
}

func printStats(f *Factory, name string, st session.Stats, header bool) {
	tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
	if header {
		fmt.Fprintln(tw, "NAME\tCPU %\tMEM USAGE / LIMIT\tPIDS\tDISK / CAP\tSTATE")
	}
	disk := "-"
	if st.DiskUsed >= 0 {
		disk = humanSize(st.DiskUsed)
	}
	if st.DiskLimit > 0 {
		disk += " / " + humanSize(st.DiskLimit)
	}
	state := "-"
	if st.StateUsed >= 0 {
		state = humanSize(st.StateUsed)
	}
	fmt.Fprintf(tw, "%s\t%.1f%%\t%s / %s\t%d / %d\t%s\t%s\n", name, st.CPUPercent, humanSize(st.MemoryBytes), humanSize(st.MemoryLimit), st.Pids, st.PidsLimit, disk, state)
	_ = tw.Flush()
}

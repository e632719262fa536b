package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func newCmdVolume(f *Factory) *cobra.Command {
	c := &cobra.Command{Use: "volume", Short: "List and remove session volumes (a session's workspace and state volumes, as one)"}
	c.AddCommand(newCmdVolumeLs(f), newCmdVolumeRm(f), newCmdVolumePrune(f))
	return group(c)
}

func newCmdVolumeLs(f *Factory) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "ls",
		Short:   "List session volumes with their sizes (workspace and state volume together)",
		Example: "  runtimectl volume ls",
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			list, err := cl.VolumeList(c.Context(), true)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.IO.Out, list)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VOLUME\tSTATE VOLUME\tSESSION\tLANG\tSIZE\tCREATED")
			for _, v := range list {
				size := "-"
				if v.Size >= 0 {
					size = humanSize(v.Size)
				}
				state := v.State
				if state == "" {
					state = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, state, v.Session, v.Lang, size, ago(v.Created))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return c
}

func newCmdVolumeRm(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Short:   "Remove a session's volumes, workspace and state (refused while its container exists)",
		Example: "  runtimectl volume rm runtimectl-demo",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			return cl.Storage().Remove(c.Context(), a[0])
		},
	}
}

func newCmdVolumePrune(f *Factory) *cobra.Command {
	var dryRun bool
	c := &cobra.Command{
		Use:     "prune",
		Short:   "Remove the volumes (workspace and state) of sessions whose container is gone",
		Example: "  runtimectl volume prune --dry-run\n  runtimectl volume prune",
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			vols, err := cl.Storage().List(c.Context(), false)
			if err != nil {
				return err
			}
			ctrs, err := cl.Runtimes().List(c.Context())
			if err != nil {
				return err
			}
			has := map[string]bool{}
			for _, ci := range ctrs {
				has[ci.Session] = true
			}
			backing := map[string]bool{} // a warm pool member's volumes, now a claimed session's data
			for _, v := range vols {
				for _, b := range v.Backing {
					backing[b] = true
				}
			}
			for _, v := range vols {
				if has[v.Session] || backing[v.Name] {
					continue
				}
				if !dryRun {
					if err := cl.Storage().Remove(c.Context(), v.Name); err != nil {
						return err
					}
				}
				fmt.Fprintln(f.IO.Out, v.Name)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&dryRun, "dry-run", false, "only list what would be removed")
	return c
}

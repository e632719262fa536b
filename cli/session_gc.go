package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/session"
)

func newCmdGC(f *Factory) *cobra.Command {
	var (
		o      session.GCOptions
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "gc [--idle DURATION] [--ttl DURATION [--export DIR]] [--orphans] [--dry-run]",
		Short: "Stop idle sessions, remove expired ones, and clean up orphaned containers",
		Long: `Stop running sessions with no execution for --idle (after a snapshot; their next exec starts
them again with their state), or, without --idle, those whose own --idle-stop has passed.
Remove sessions, running or stopped, with no execution for --ttl, or, without --ttl, those
whose own --ttl has passed (with --export DIR, each is first copied to DIR/NAME: its workspace
and history; one whose copy fails is kept). Sessions made by a test process that has ended are
removed too. With --orphans, remove containers whose volume (state) is gone or that are dead,
and report volumes that cannot be started. --dry-run only says what would be done.`,
		Example: "  runtimectl session gc --idle 30m\n  runtimectl session gc --ttl 24h --export ./expired\n  runtimectl session gc --orphans --dry-run",
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			acts, err := cl.GC(c.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				if acts == nil {
					acts = []session.GCAction{}
				}
				return writeJSON(f.IO.Out, acts)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tACTION\tDONE\tREASON")
			for _, a := range acts {
				reason := a.Reason
				if a.Fix != "" {
					reason += ": `" + a.Fix + "`"
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", a.Session, a.Action, a.Done, reason)
			}
			return tw.Flush()
		},
	}
	c.Flags().Var(durationValue{&o.Idle}, "idle", "stop sessions idle for this long")
	c.Flags().Var(durationValue{&o.TTL}, "ttl", "remove sessions idle for this long")
	c.Flags().StringVar(&o.Export, "export", "", "with --ttl (or sessions' own): copy each removed session's workspace and history to DIR/NAME first")
	c.Flags().BoolVar(&o.Orphans, "orphans", false, "remove containers without state and report state without a usable container")
	c.Flags().BoolVar(&o.DryRun, "dry-run", false, "only say what would be done")
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return c
}

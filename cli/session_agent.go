package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/session"
)

func newCmdContext(f *Factory) *cobra.Command {
	var (
		maxChars int
		asJSON   bool
	)
	c := &cobra.Command{
		Use:   "context NAME",
		Short: "Print a compact summary of a session for a model's next prompt",
		Long: `Print what a model needs to write the next step: the language, the number of executions, the
last few executions with their status (and the error of a failing one), the variables with type,
shape and size, the newest workspace files, and the last output (truncated), in at most
--max-chars characters. An agent that pastes it never has to keep its own copy of the state.`,
		Example: "  runtimectl session context demo\n  runtimectl session context demo --max-chars 2000 --json",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			if maxChars < 0 {
				return usagef("--max-chars must be 0 (no cap) or more")
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			sum, err := cl.Context(c.Context(), a[0], session.ContextOptions{})
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.IO.Out, sum)
			}
			fmt.Fprint(f.IO.Out, sum.Text(maxChars))
			return nil
		},
	}
	c.Flags().IntVar(&maxChars, "max-chars", 4000, "cap on the text's length (0: none)")
	c.Flags().BoolVar(&asJSON, "json", false, "print the same as JSON fields")
	return c
}

func newCmdFork(f *Factory) *cobra.Command {
	var at string
	c := &cobra.Command{
		Use:   "fork SRC NEW",
		Short: "Make a new session from a session's workspace and snapshot",
		Long: `Make NEW from SRC: a copy of SRC's workspace and of one of its snapshots (--at, default the
latest), with its own history that starts with a record of where it came from. Both sessions then
evolve independently. Prints the new session's name.`,
		Example: "  runtimectl session fork demo demo-b\n  runtimectl session fork demo try2 --at 3-a1b2c3",
		Args:    args(2, 2),
		RunE: func(c *cobra.Command, a []string) error {
			for _, n := range a {
				if err := validName(n); err != nil {
					return err
				}
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			s, err := cl.Fork(c.Context(), a[0], a[1], at)
			if err != nil {
				return err
			}
			defer s.Close()
			if r := s.Restored(); r != nil && r.Snapshot != "" {
				fmt.Fprintf(f.IO.Err, "runtimectl: %s starts from %s's snapshot %s (state after its execution %d: %d names)\n", s.Name(), a[0], r.Snapshot, r.Seq, len(r.Restored))
			}
			fmt.Fprintln(f.IO.Out, s.Name())
			return nil
		},
	}
	c.Flags().StringVar(&at, "at", "", "snapshot id to fork from (default: the latest)")
	return c
}

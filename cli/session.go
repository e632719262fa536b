package cli

import (
	"strings"

	"github.com/spf13/cobra"
)

func newCmdSession(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "session",
		Short: "Start, run code in, stop and inspect sessions",
		Long: `A session is a named, long-lived container running one interpreter (python, bash or node) with a
workspace volume at /workspace. Its variables live in the interpreter between exec calls; its
snapshots and history live on its volume.`,
	}
	c.AddCommand(
		newCmdStart(f, nil), newCmdExec(f, nil), newCmdStop(f), newCmdRm(f), newCmdLs(f),
		newCmdHistory(f), newCmdSnapshot(f), newCmdSnapshots(f), newCmdRestore(f), newCmdInterrupt(f),
		newCmdVars(f), newCmdCp(f), newCmdContext(f), newCmdFork(f), newCmdGC(f),
		newCmdInspect(f), newCmdLogs(f), newCmdStats(f), newCmdInstall(f),
	)
	// NAME first: complete it with the sessions' names (start too: an existing one).
	for _, sub := range c.Commands() {
		if u := sub.Use; sub.ValidArgsFunction == nil && (strings.Contains(u, " NAME") || strings.Contains(u, "[NAME]") || strings.Contains(u, " SRC")) {
			sub.ValidArgsFunction = completeSessions(f)
		}
	}
	return group(c)
}

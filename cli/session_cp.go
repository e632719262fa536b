package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/session"
)

// splitSessionPath splits NAME:PATH; ok is false for a host path.
func splitSessionPath(arg string) (name, p string, ok bool) {
	before, after, found := strings.Cut(arg, ":")
	if !found || strings.ContainsAny(before, "/\\") || session.ValidateName(before) != nil {
		return "", arg, false
	}
	return before, after, true
}

func newCmdCp(f *Factory) *cobra.Command {
	var maxSize int64
	var skip bool
	c := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files or folders between the host and a session",
		Long: `Copy a file or folder between the host and a session. NAME:PATH names the session side; a
relative PATH is under /workspace. As with docker cp, a folder is copied into DST when DST is an
existing folder, else as DST. Files copied in belong to the session's user. Entries that would
leave the destination (absolute names, .., links pointing out, also through other links) are
refused. Out of a session, runs of zeros arrive as holes (a sparse file stays sparse), and the
files may total --max-size (4g by default); a tree with folders too deep for the engine's
archive (paths of thousands of characters, below which it leaves files out) fails, unless
--skip-unreadable. A copy that fails leaves nothing behind.`,
		Example: `  runtimectl session cp ./sales.csv s:data/sales.csv     # host -> /workspace/data/sales.csv
  runtimectl session cp s:outputs/ ./outputs/             # session -> host`,
		Args: args(2, 2),
		RunE: func(c *cobra.Command, a []string) error {
			srcName, srcPath, srcIn := splitSessionPath(a[0])
			dstName, dstPath, dstIn := splitSessionPath(a[1])
			switch {
			case srcIn && dstIn:
				return usagef("copy between two sessions is not supported: copy to the host first")
			case !srcIn && !dstIn:
				return usagef("name the session side as NAME:PATH (e.g. demo:data/file.csv)")
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			if dstIn {
				return cl.CopyTo(c.Context(), dstName, srcPath, dstPath)
			}
			return cl.CopyFromWith(c.Context(), srcName, srcPath, dstPath, session.CopyOptions{MaxSize: maxSize, SkipDeep: skip,
				OnSkipped: func(dir string) {
					fmt.Fprintf(f.IO.Err, "runtimectl: skipped what the engine left out below %s (too deep for its archive)\n", dir)
				}})
		},
	}
	c.Flags().Var(sizeValue{&maxSize}, "max-size", "out of a session: the most the copied files may total (default 4g)")
	c.Flags().BoolVar(&skip, "skip-unreadable", false, "out of a session: copy the rest when folders are too deep for the engine's archive (listed on stderr)")
	return c
}

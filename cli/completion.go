package cli

import (
	"github.com/spf13/cobra"
)

func newCmdCompletion(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script for bash, zsh or fish",
		Long: `Print the script that makes your shell complete runtimectl's commands and flags. Load it
in the current shell, or install it where your shell looks for completions.`,
		Example: `  source <(runtimectl completion bash)
  runtimectl completion bash > /etc/bash_completion.d/runtimectl
  runtimectl completion zsh > "${fpath[1]}/_runtimectl"
  runtimectl completion fish > ~/.config/fish/completions/runtimectl.fish`,
		ValidArgs:             []string{"bash", "zsh", "fish"},
		DisableFlagsInUseLine: true,
		Args:                  args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			root := c.Root()
			switch a[0] {
			case "bash":
				return root.GenBashCompletionV2(f.IO.Out, true)
			case "zsh":
				return root.GenZshCompletion(f.IO.Out)
			case "fish":
				return root.GenFishCompletion(f.IO.Out, true)
			}
			return usagef("unknown shell %q: use bash, zsh or fish", a[0])
		},
	}
}

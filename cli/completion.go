package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/docker"
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

// completeSessions completes the first argument with the names of the sessions (from their
// volumes: one engine call, no agent asked), for the commands that take NAME first.
func completeSessions(f *Factory) cobra.CompletionFunc {
	return func(c *cobra.Command, a []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(a) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cl, err := f.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		vols, err := cl.Storage().List(c.Context(), false)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, v := range vols {
			if strings.HasPrefix(v.Session, toComplete) {
				out = append(out, v.Session)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeImages completes an image reference among the images that carry the agent.
func completeImages(f *Factory) cobra.CompletionFunc {
	return func(c *cobra.Command, a []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cl, err := f.Client()
		if err != nil || docker.From(cl).Images() == nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := docker.From(cl).Images().List(c.Context())
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, im := range list {
			for _, ref := range im.Refs {
				if strings.HasPrefix(ref, toComplete) {
					out = append(out, ref)
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

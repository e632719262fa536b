package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/session"
)

// versionInfo is `runtimectl version --json`.
type versionInfo struct {
	CLI      string          `json:"cli"`
	Protocol int             `json:"agent_protocol"`
	Engine   *session.Engine `json:"engine"`                 // null when the engine cannot be reached
	Problem  string          `json:"engine_error,omitempty"` // why not
}

func newCmdVersion(f *Factory) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "version",
		Short: "Print the versions of runtimectl, its agent protocol and the Docker engine",
		Long: `Print the version of runtimectl and of the protocol it speaks with the agent in session
containers, then, when the Docker engine answers within a few seconds, the engine's version, its
API version and the API version negotiated with it. An engine that cannot be reached is noted on
stderr; the command still succeeds.`,
		Example: "  runtimectl version\n  runtimectl version --json\n  DOCKER_HOST=tcp://build-box:2376 runtimectl version",
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			v := versionInfo{CLI: Version, Protocol: protocolVersion}
			eng, err := engineInfo(c.Context(), f, 5*time.Second)
			if err != nil {
				v.Problem = errLine(err)
			} else {
				v.Engine = &eng
			}
			if asJSON {
				return writeJSON(f.IO.Out, v)
			}
			fmt.Fprintf(f.IO.Out, "runtimectl %s (agent protocol %d)\n", Version, protocolVersion)
			if v.Engine != nil {
				fmt.Fprintf(f.IO.Out, "engine: %s %s (API %s, negotiated %s, %s/%s) at %s\n",
					eng.Name, eng.Version, eng.APIVersion, eng.ClientAPI, eng.OS, eng.Arch, eng.Host)
			} else {
				fmt.Fprintf(f.IO.Err, "runtimectl: engine: %s\n", v.Problem)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return c
}

// engineInfo connects (lazily, through the factory) and asks the engine for its version within
// limit.
func engineInfo(ctx context.Context, f *Factory, limit time.Duration) (session.Engine, error) {
	cl, err := f.Client()
	if err != nil {
		return session.Engine{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return cl.Engine(ctx)
}

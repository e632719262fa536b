package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/session"
)

func newCmdInstall(f *Factory) *cobra.Command {
	var (
		o    session.InstallOptions
		reqs string
	)
	c := &cobra.Command{
		Use:   "install NAME PKG...",
		Short: "Install Python packages into a session, kept on its volume and importable at once",
		Long: `Install Python packages with pip into the session's virtual environment (/workspace/.venv, on
its volume: they survive stop and start, kills, --upgrade and fork), and the session imports them
at once, without a restart. pip runs in a short-lived installer container of the session's image
and runtime with the session's workspace mounted, which reaches the index's hosts and nothing
else (those of --index-url and --extra-index-url, or PyPI's without them), through an egress proxy
of its own removed with it; the session itself keeps its own network setting (none by default).
The installer runs nothing of the workspace (the image's own python and pip), takes wheels only
unless --allow-builds (a source build runs the package's code), and stops at --timeout whether
or not this command is still there. In code, %pip install and !pip install lines do the same,
without builds.`,
		Example: `  runtimectl session install demo requests 'httpx>=0.27'
  runtimectl session install demo -r requirements.txt
  runtimectl session install demo mypkg --index-url https://pypi.internal/simple --trusted-host pypi.internal`,
		Args: func(c *cobra.Command, a []string) error {
			if len(a) == 0 {
				return usagef("name the session, then the packages; see `runtimectl session install --help`")
			}
			if len(a) == 1 && reqs == "" {
				return usagef("name at least one package after the session (or -r FILE)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, a []string) error {
			if err := validName(a[0]); err != nil {
				return err
			}
			if reqs != "" {
				b, err := os.ReadFile(reqs)
				if err != nil {
					return usagef("read -r %s: %v", reqs, err)
				}
				o.Requirements = string(b)
			}
			o.Packages = a[1:]
			o.Output = f.IO.Err
			cl, err := f.Client()
			if err != nil {
				return err
			}
			return cl.Install(c.Context(), a[0], o)
		},
	}
	fl := c.Flags()
	fl.StringVarP(&reqs, "requirement", "r", "", "install from this requirements file (read on the host)")
	fl.StringVarP(&o.IndexURL, "index-url", "i", "", "the package index (default: pip's, PyPI); the installer reaches its host only")
	fl.StringArrayVar(&o.ExtraIndexURLs, "extra-index-url", nil, "another index to look in (repeatable)")
	fl.StringArrayVar(&o.TrustedHosts, "trusted-host", nil, "a host to reach without valid TLS, or over plain HTTP (repeatable)")
	fl.BoolVar(&o.NoDeps, "no-deps", false, "do not install the packages' dependencies")
	fl.BoolVar(&o.AllowBuilds, "allow-builds", false, "let pip build source distributions (their setup code runs in the installer)")
	fl.DurationVar(&o.Timeout, "timeout", 0, "stop the install after this long (default 15m)")
	return c
}

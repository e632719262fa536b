package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

// StartOptions are the flags of `session start`.
type StartOptions struct {
	F       *Factory
	Spec    session.Spec
	Upgrade bool
}

func newCmdStart(f *Factory, runF func(context.Context, *StartOptions) error) *cobra.Command {
	o := &StartOptions{F: f}
	c := &cobra.Command{
		Use:   "start [NAME]",
		Short: "Create a session, or start a stopped one again with its state",
		Long: `Create a session (container + volume), or start a stopped or removed-container session again,
restoring its latest snapshot. On a running session it does nothing and succeeds. Without NAME a
name is made up. Prints the session name.

The settings (language, image, limits, environment) are recorded on the session's volume and
hold again after stop and start. Flags given for an existing session must match its settings:
one that differs is refused (exit 2), naming it.`,
		Example: `  runtimectl session start demo
  runtimectl session start sh --lang bash
  runtimectl session start big --memory 8g --cpus 2 --network bridge --env API_KEY=...
  runtimectl session start agent --allow-host pypi.org,files.pythonhosted.org --allow-host api.github.com \
      --secret-header api.github.com=Authorization:GITHUB_AUTH`,
		Args: args(0, 1),
		RunE: func(c *cobra.Command, a []string) error {
			if len(a) == 1 {
				o.Spec.Name = a[0]
			} else {
				b := make([]byte, 3)
				_, _ = rand.Read(b)
				o.Spec.Name = "s-" + hex.EncodeToString(b)
			}
			if err := validName(o.Spec.Name); err != nil {
				return err
			}
			sessionFlagsGiven(c.Flags(), &o.Spec)
			if runF != nil {
				return runF(c.Context(), o)
			}
			return startRun(c.Context(), o)
		},
	}
	fl := c.Flags()
	addSessionFlags(fl, &o.Spec)
	fl.BoolVar(&o.Upgrade, "upgrade", false, "move an existing session to the current image of its reference, restoring its state there")
	return c
}

// addSessionFlags adds the settings flags of `session start` (--lang, limits, network, env,
// snapshots, ttl...) to fl, into spec: every command that makes sessions (start, mcp) takes
// them. Call sessionFlagsGiven once the flags are parsed.
func addSessionFlags(fl *pflag.FlagSet, spec *session.Spec) {
	fl.StringVar(&spec.Lang, "lang", "python", "language: "+strings.Join(lang.Names(), ", "))
	fl.StringVar(&spec.Image, "image", "", "image to run (default: runtimectl's image for --lang)")
	fl.Var(sizeValue{&spec.Memory}, "memory", "memory limit, no swap (default 2g)")
	fl.Float64Var(&spec.CPUs, "cpus", 0, "CPU limit, in CPUs (default 1)")
	fl.Int64Var(&spec.Pids, "pids", 0, "process limit (default 512)")
	fl.StringVar(&spec.Network, "network", "none", "network: none or bridge")
	fl.StringArrayVar(&spec.Env, "env", nil, "environment variable KEY=VALUE (repeatable)")
	fl.StringVar(&spec.Snapshot, "snapshot", "every", "snapshot policy: every (after each state-changing execution) or manual")
	fl.IntVar(&spec.KeepSnapshots, "keep-snapshots", 10, "snapshots to keep")
	fl.Var(sizeValue{&spec.Disk}, "disk", "cap on the workspace's size: past it executions are refused (default 10g)")
	fl.Var(sizeValue{&spec.MaxOutput}, "max-output", "output delivered per stream and execution (default 4m)")
	fl.Var(durationValue{&spec.TTL}, "ttl", "record a lifetime: `session gc` (and `runtimectl serve`) removes the session once it has been idle this long")
	fl.Var(durationValue{&spec.IdleStop}, "idle-stop", "record an idle policy: `session gc` stops the session after this long without an execution")
	fl.StringVar(&spec.Runtime, "runtime", "", "OCI runtime for the container, e.g. runsc (gVisor) for stronger isolation")
	fl.StringArrayVar(&spec.AllowHosts, "allow-host", nil, "egress only to these hosts, through runtimectl's proxy: HOST[,HOST...], exact names, *.suffix wildcards, an optional :PORT (default 80 and 443); repeatable")
	fl.StringArrayVar(&spec.SecretHeaders, "secret-header", nil, "HOST=HEADER:ENV: the proxy adds HEADER, valued from runtimectl's $ENV (or a file, when ENV holds a /), to requests to HOST; the session never sees it; repeatable")
}

// sessionFlagsGiven clears the settings whose flags were not given, so that they ask for
// nothing: an existing session keeps its settings, and only flags given that differ from them
// are refused (ErrConflict).
func sessionFlagsGiven(fl *pflag.FlagSet, spec *session.Spec) {
	for name, zero := range map[string]func(){
		"lang": func() { spec.Lang = "" }, "network": func() { spec.Network = "" },
		"snapshot": func() { spec.Snapshot = "" }, "keep-snapshots": func() { spec.KeepSnapshots = 0 },
	} {
		if !fl.Changed(name) {
			zero()
		}
	}
}

func startRun(ctx context.Context, o *StartOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	if o.Upgrade {
		s, err := c.Upgrade(ctx, o.Spec.Name)
		if err != nil {
			return err
		}
		defer s.Close()
		r := s.Restored()
		fmt.Fprintf(o.F.IO.Err, "runtimectl: %s moved to the current image; %s\n", s.Name(), session.DescribeRestore(s.Name(), r))
		if r != nil {
			for _, fl := range r.Failed {
				fmt.Fprintf(o.F.IO.Err, "  did not survive: %s (%s): %s\n", fl.Name, fl.Type, fl.Reason)
			}
			for _, cp := range r.Copies {
				fmt.Fprintf(o.F.IO.Err, "  back as a copy: %s (%s): %s\n", cp.Name, cp.Type, cp.Reason)
			}
		}
		fmt.Fprintln(o.F.IO.Out, s.Name())
		return nil
	}
	s, info, err := c.Start(ctx, o.Spec)
	if err != nil {
		return err
	}
	defer s.Close()
	if info.Started || info.Recreate {
		fmt.Fprintln(o.F.IO.Err, "runtimectl: "+session.DescribeRestore(s.Name(), s.Restored()))
	}
	if info.Pool != "" {
		o.F.refillDetached(info.Pool)
	}
	fmt.Fprintln(o.F.IO.Out, s.Name())
	return nil
}

package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

func newCmdPool(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "pool",
		Short: "Warm pools: sessions made ahead of the starts that take them",
		Long: `A warm pool keeps N sessions of one kind ready (container and volumes made, interpreter
started and its --preload run, hardened as every session is), so that a ` + "`session start`" + ` of a new
session with the settings the pool serves takes one in a fraction of a cold start. The start
makes the member the new session (two starts never take the same one: Docker renames the
container, Kubernetes relabels the pod and its claims) and starts a refill in the background
(` + "`pool fill`" + `, detached). A claimed session is a session in every way: its history starts at 1,
it snapshots, stops, starts and is removed as any other. Members do not show in
` + "`session ls`" + `; one that waited past the pool's --ttl is made again. On Kubernetes a pool's
settings are the ConfigMap runtimectl-pool-NAME of the namespace.`,
	}
	c.AddCommand(newCmdPoolSet(f), newCmdPoolLs(f), newCmdPoolRm(f), newCmdPoolFill(f))
	return group(c)
}

func newCmdPoolSet(f *Factory) *cobra.Command {
	var p session.Pool
	var noFill bool
	c := &cobra.Command{
		Use:   "set NAME",
		Short: "Create or change a warm pool, then fill it",
		Long: `Create the pool NAME (or change it: members made with other settings are made again), then
make its members. NAME is also the pool's language when it names one and --lang is not given.
A start is served from the pool when it asks for a new session with exactly these settings:
the language, --image, --memory, --cpus and --pids given here, every other setting at its
default (no --env, --ttl, --idle-stop, --network bridge, ...).`,
		Example: "  runtimectl pool set python --size 4 --preload 'import numpy, pandas'\n  runtimectl pool set big --lang python --memory 8g --cpus 2 --size 2\n  runtimectl pool set python --size 0   # keep the pool, no members",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			p.Name = a[0]
			if p.Lang == "" {
				if _, err := lang.Get(p.Name); err != nil {
					return usagef("pool %s: give its language with --lang (%s)", p.Name, err)
				}
				p.Lang = p.Name
			}
			if !c.Flags().Changed("size") {
				return usagef("pool %s: give its --size (how many sessions it keeps ready)", p.Name)
			}
			cl, err := f.Client()
			if err != nil {
				return err
			}
			if err := cl.SetPool(c.Context(), p); err != nil {
				return err
			}
			if noFill {
				return nil
			}
			made, removed, err := cl.FillPool(c.Context(), p.Name)
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Err, "runtimectl: pool %s: %d ready (%d made, %d removed)\n", p.Name, p.Size, made, removed)
			return nil
		},
	}
	fl := c.Flags()
	fl.IntVar(&p.Size, "size", 0, "how many sessions the pool keeps ready")
	fl.StringVar(&p.Lang, "lang", "", "language of the pool's sessions: python, bash or node (default NAME)")
	fl.StringVar(&p.Image, "image", "", "image (default: runtimectl's image for the language)")
	fl.Var(sizeValue{&p.Memory}, "memory", "memory limit of each session (default 2g)")
	fl.Float64Var(&p.CPUs, "cpus", 0, "CPU limit of each session (default 1)")
	fl.Int64Var(&p.Pids, "pids", 0, "process limit of each session (default 512)")
	fl.StringVar(&p.Preload, "preload", "", "Python code each member's interpreter runs at start (imports: modules loaded, no names set)")
	fl.StringArrayVar(&p.AllowHosts, "allow-host", nil, "the members' --allow-host (each with its egress proxy ready): serves starts with the same allowed hosts; repeatable")
	fl.DurationVar(&p.TTL, "ttl", session.DefaultPoolTTL, "a member that waited this long for a start is made again")
	fl.BoolVar(&noFill, "no-fill", false, "only record the pool; `pool fill` (or the next start it serves) makes its members")
	return c
}

func newCmdPoolLs(f *Factory) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "ls",
		Short:   "List the warm pools and their ready members",
		Example: "  runtimectl pool ls\n  runtimectl pool ls --json",
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			ps, err := cl.Pools(c.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(f.IO.Out, ps)
			}
			tw := tabwriter.NewWriter(f.IO.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "POOL\tLANG\tSIZE\tREADY\tWAITING\tMEMORY\tCPUS\tTTL\tPRELOAD")
			for _, p := range ps {
				mem, cpus := "default", "default"
				if p.Memory > 0 {
					mem = humanSize(p.Memory)
				}
				if p.CPUs > 0 {
					cpus = fmt.Sprint(p.CPUs)
				}
				ttl := p.TTL
				if ttl <= 0 {
					ttl = session.DefaultPoolTTL
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%q\n", p.Name, p.Lang, p.Size, p.Ready, p.Waiting, mem, cpus, ttl, p.Preload)
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return c
}

func newCmdPoolRm(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME...",
		Short:   "Remove warm pools and their members (sessions already taken from them stay)",
		Example: "  runtimectl pool rm python",
		Args:    args(1, -1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			for _, name := range a {
				if err := cl.RemovePool(c.Context(), name); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func newCmdPoolFill(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "fill NAME",
		Short: "Bring a warm pool to its size (what a start that took a member runs, detached)",
		Long: `Remove the members that waited past the pool's TTL, were made with other settings or did not
finish being made, then make the missing ones, each ready before it counts.`,
		Example: "  runtimectl pool fill python",
		Args:    args(1, 1),
		RunE: func(c *cobra.Command, a []string) error {
			cl, err := f.Client()
			if err != nil {
				return err
			}
			made, removed, err := cl.FillPool(c.Context(), a[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(f.IO.Err, "runtimectl: pool %s: %d made, %d removed\n", a[0], made, removed)
			return nil
		},
	}
}

// refillDetached starts `runtimectl pool fill POOL` in a process of its own, which outlives
// this one: the command that took a member returns at once, and the pool is full again a moment
// later. Nothing is said when it cannot start; the next start or fill makes up for it.
func (f *Factory) refillDetached(pool string) {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if strings.HasSuffix(exe, ".test") {
		// A Go test binary running the CLI in-process would run its tests again: fill here.
		if cl, err := f.Client(); err == nil {
			_, _, _ = cl.FillPool(context.Background(), pool)
		}
		return
	}
	var args []string
	for _, fl := range [][2]string{{"--host", f.Host}, {"--backend", f.Backend}, {"--kubeconfig", f.Kubeconfig}, {"--namespace", f.Namespace}} {
		if fl[1] != "" {
			args = append(args, fl[0], fl[1])
		}
	}
	args = append(args, "pool", "fill", pool)
	cmd := exec.Command(exe, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err == nil {
		go func() { _ = cmd.Wait() }() // reaped if this process is still there
	}
}
